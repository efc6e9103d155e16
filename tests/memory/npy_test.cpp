// .npy files: round trips for every dtype, numpy's exact layout, and corrupt input.
#include "wallsim/memory/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "wallsim/base/params.h"
#include "wallsim/isa/dtype_convert.h"

namespace wallsim::memory {
namespace {

namespace fs = std::filesystem;
using base::InputError;
using isa::DType;
using isa::MemSpace;

class NpyTest : public ::testing::Test {
 protected:
  NpyTest() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_dir = fs::temp_directory_path() /
            ("wallsim_npy_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  ~NpyTest() override { fs::remove_all(m_dir); }

  std::string path(const std::string& name) const { return (m_dir / name).string(); }

  static void write_bytes(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // A file with the given header text (padded as numpy does) and data bytes.
  static std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
    int len_bytes = major == 1 ? 2 : 4;
    std::string header = dict;
    size_t total = 8 + len_bytes + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += '\0';
    for (int i = 0; i < len_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return out + header + data;
  }
  template <class T>
  static std::string raw(std::initializer_list<T> values) {
    std::string s;
    for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
    return s;
  }
  std::string error_of(const std::string& p) {
    try {
      read_npy(p);
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), p);
      return e.what();
    }
    return "(no error)";
  }

  fs::path m_dir;
};

TEST_F(NpyTest, WritesNumpysExactLayout) {
  NpyArray a{"<f4", {2, 3}, {}};
  a.data.assign(24, 0);
  write_npy(path("a.npy"), a);
  std::string bytes = read_bytes(path("a.npy"));
  // np.save(np.zeros((2, 3), np.float32)) writes exactly this.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string want = std::string("\x93NUMPY\x01\x00", 8) + "\x76" + std::string(1, '\0') + header +
                     std::string(24, '\0');
  EXPECT_EQ(bytes, want);
  EXPECT_EQ(bytes.size() - 24, 128u);
}

TEST_F(NpyTest, RoundTripsEveryDescr) {
  std::mt19937_64 rng(3);
  const char* descrs[] = {"<f2", "<f4", "<f8", "<i2", "<i4", "<i8",
                          "<u2", "<u4", "<u8", "|i1", "|u1", "|b1"};
  std::vector<std::vector<int64_t>> shapes = {{}, {0}, {7}, {3, 5}, {2, 0, 4}, {2, 3, 4, 5}};
  for (const char* d : descrs) {
    int item = d[2] - '0';
    for (const auto& shape : shapes) {
      NpyArray a{d, shape, {}};
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      for (int64_t i = 0; i < n * item; ++i) a.data.push_back(static_cast<uint8_t>(rng()));
      if (a.descr == "|b1") {
        for (auto& b : a.data) b &= 1;
      }
      write_npy(path("r.npy"), a);
      NpyArray b = read_npy(path("r.npy"));
      EXPECT_EQ(b.descr, a.descr);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.data, a.data);
    }
  }
  // Only the target remains: the temporary file was renamed over it.
  EXPECT_EQ(std::distance(fs::directory_iterator(m_dir), fs::directory_iterator()), 1);
}

TEST_F(NpyTest, ReadsHeaderVariants) {
  std::string data = raw<float>({1, 2, 3, 4});
  // Version 2.0, double quotes, keys reordered, no trailing comma.
  write_bytes(
      path("v2.npy"),
      npy_file("{\"shape\": (2,2), \"fortran_order\": False, \"descr\": \"<f4\"}", data, 2));
  NpyArray a = read_npy(path("v2.npy"));
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a.data.size(), 16u);
  // Version 3.0 (utf-8 header), one-dim shape, a one-byte type spelled with '<'.
  write_bytes(path("v3.npy"),
              npy_file("{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }", "abc", 3));
  a = read_npy(path("v3.npy"));
  EXPECT_EQ(a.descr, "|u1");  // canonical spelling
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));
  // 0-d array.
  write_bytes(path("0d.npy"), npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                                       raw<int64_t>({-5})));
  a = read_npy(path("0d.npy"));
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.data.size(), 8u);
}

TEST_F(NpyTest, RejectsUnsupportedLayouts) {
  std::string data = raw<float>({1, 2, 3, 4});
  auto check = [&](const std::string& name, const std::string& dict, const std::string& d,
                   const std::string& needle) {
    write_bytes(path(name), npy_file(dict, d));
    std::string e = error_of(path(name));
    EXPECT_NE(e.find(needle), std::string::npos) << name << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  check("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", data,
        "Fortran");
  check("big.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", data,
        "big-endian");
  check("object.npy", "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", data,
        "unsupported dtype");
  check("struct.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", data,
        "descr");
  check("c16.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", data,
        "unsupported dtype");
  check("str.npy", "{'descr': '<U1', 'fortran_order': False, 'shape': (4,), }", data,
        "unsupported dtype");
}

TEST_F(NpyTest, RejectsGarbageHeaders) {
  std::string data = raw<float>({1, 2});
  const char* bad[] = {
      "",
      "garbage",
      "{",
      "{}",
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing",
      "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
      "{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
  };
  int i = 0;
  for (const char* dict : bad) {
    std::string p = path("bad" + std::to_string(i++) + ".npy");
    write_bytes(p, npy_file(dict, data));
    EXPECT_THROW(read_npy(p), InputError) << dict;
  }
}

TEST_F(NpyTest, RejectsBadPreambles) {
  std::string good =
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", raw<float>({1, 2}));
  write_bytes(path("good.npy"), good);
  EXPECT_NO_THROW(read_npy(path("good.npy")));
  std::string v = good;
  v[6] = 4;  // version 4.0
  write_bytes(path("v4.npy"), v);
  EXPECT_NE(error_of(path("v4.npy")).find("version"), std::string::npos);
  v = good;
  v[1] = 'X';
  write_bytes(path("magic.npy"), v);
  EXPECT_NE(error_of(path("magic.npy")).find("magic"), std::string::npos);
  v = good;
  v[8] = '\xff';  // header length beyond the file
  v[9] = '\xff';
  write_bytes(path("hlen.npy"), v);
  EXPECT_THROW(read_npy(path("hlen.npy")), InputError);
  std::string v2 =
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", raw<float>({1, 2}), 2);
  v2[8] = v2[9] = v2[10] = v2[11] = '\xff';  // a 4 GiB header in a tiny file
  write_bytes(path("hlen2.npy"), v2);
  EXPECT_THROW(read_npy(path("hlen2.npy")), InputError);
  EXPECT_NE(error_of(path("missing.npy")).find("cannot open"), std::string::npos);
  EXPECT_NE(error_of(m_dir.string()).find("not a regular file"), std::string::npos);
}

TEST_F(NpyTest, EveryTruncationIsAnInputError) {
  std::string good = npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }",
                              raw<double>({1, 2, 3, 4, 5, 6}));
  for (size_t n = 0; n < good.size(); ++n) {
    write_bytes(path("t.npy"), good.substr(0, n));
    EXPECT_THROW(read_npy(path("t.npy")), InputError) << n << " bytes";
  }
  write_bytes(path("t.npy"), good + "x");
  EXPECT_NE(error_of(path("t.npy")).find("after the array"), std::string::npos);
  write_bytes(path("t.npy"), good);
  EXPECT_EQ(read_npy(path("t.npy")).data.size(), 48u);
}

TEST_F(NpyTest, AbsurdShapesAreInputErrors) {
  std::string data = raw<float>({1, 2});
  write_bytes(path("huge.npy"),
              npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
                       "4611686018427387904), }",
                       data));
  EXPECT_NE(error_of(path("huge.npy")).find("too large"), std::string::npos);
  write_bytes(
      path("big.npy"),
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", data));
  EXPECT_NE(error_of(path("big.npy")).find("truncated"), std::string::npos);
  std::string dims = "(";
  for (int i = 0; i < 65; ++i) dims += "1, ";
  write_bytes(path("dims.npy"),
              npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + dims + "), }", data));
  EXPECT_THROW(read_npy(path("dims.npy")), InputError);
}

// Random corruption must either read cleanly or throw InputError, never crash.
TEST_F(NpyTest, MutatedFilesNeverCrash) {
  std::string good = npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
                              raw<int32_t>({1, 2, 3, 4, 5, 6}));
  std::mt19937_64 rng(11);
  int errors = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string v = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % v.size();
      switch (rng() % 3) {
        case 0:
          v[at] = static_cast<char>(rng());
          break;
        case 1:
          v.erase(at, 1 + rng() % 8);
          break;
        default:
          v.insert(at, std::string(1 + rng() % 8, static_cast<char>(rng())));
      }
    }
    write_bytes(path("m.npy"), v);
    try {
      NpyArray a = read_npy(path("m.npy"));
      int64_t n = 1;
      for (int64_t d : a.shape) n *= d;
      EXPECT_EQ(static_cast<int64_t>(a.data.size()), n * (a.descr[2] - '0'));
    } catch (const InputError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1000);
}

TEST_F(NpyTest, WriteRejectsInconsistentArraysAndBadPaths) {
  EXPECT_THROW(write_npy(path("x.npy"), NpyArray{"<f4", {2}, std::vector<uint8_t>(7)}), InputError);
  EXPECT_THROW(write_npy(path("x.npy"), NpyArray{">f4", {2}, std::vector<uint8_t>(8)}), InputError);
  EXPECT_THROW(write_npy(path("x.npy"), NpyArray{"<f4", {-2}, {}}), InputError);
  EXPECT_THROW(write_npy(path("no/such/dir/x.npy"), NpyArray{"<f4", {2}, std::vector<uint8_t>(8)}),
               InputError);
  EXPECT_FALSE(fs::exists(path("x.npy")));
  // Overwriting replaces the old contents.
  write_npy(path("x.npy"), NpyArray{"<i4", {3}, std::vector<uint8_t>(12, 1)});
  write_npy(path("x.npy"), NpyArray{"|u1", {2}, {7, 8}});
  NpyArray back = read_npy(path("x.npy"));
  EXPECT_EQ(back.descr, "|u1");
  EXPECT_EQ(back.data, (std::vector<uint8_t>{7, 8}));
}

TEST_F(NpyTest, LoadsIntoTensorsWithConversion) {
  TensorStore ts;
  auto as_bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  auto& bf = ts.put("bf", MemSpace::hbm, DType::bf16, {2, 2});
  load_npy_into(NpyArray{"<f8", {2, 2}, as_bytes(raw<double>({1.0, -2.5, 1.0 + 1.0 / 256, 3e38}))},
                bf, "w.npy");
  EXPECT_EQ(to_floats(bf), (std::vector<float>{1.0f, -2.5f, 1.0f, isa::bf16_to_float(0x7f62)}));
  auto& h = ts.put("h", MemSpace::hbm, DType::fp16, {3});
  load_npy_into(NpyArray{"<f4", {3}, as_bytes(raw<float>({0.5f, 1e6f, -0.25f}))}, h, "h.npy");
  EXPECT_EQ(to_floats(h)[0], 0.5f);
  EXPECT_TRUE(std::isinf(to_floats(h)[1]));
  EXPECT_EQ(to_floats(h)[2], -0.25f);
  auto& f = ts.put("f", MemSpace::hbm, DType::fp32, {4});
  load_npy_into(NpyArray{"|u1", {4}, {0, 1, 200, 255}}, f, "u.npy");
  EXPECT_EQ(to_floats(f), (std::vector<float>{0, 1, 200, 255}));
  load_npy_into(NpyArray{"<f2", {4}, as_bytes(raw<uint16_t>({0x3c00, 0xc000, 0x0001, 0x7c00}))}, f,
                "f2.npy");
  EXPECT_EQ(to_floats(f)[2], 0x1p-24f);
  auto& n = ts.put("n", MemSpace::hbm, DType::int32, {4});
  load_npy_into(
      NpyArray{"<i8",
               {4},
               as_bytes(raw<int64_t>({-1, 16777217, int64_t{1} << 40, -(int64_t{1} << 40)}))},
      n, "i.npy");
  int32_t got[4];
  std::memcpy(got, n.bytes.data(), 16);
  EXPECT_EQ(got[0], -1);
  EXPECT_EQ(got[1], 16777217);  // exact: not routed through float
  EXPECT_EQ(got[2], INT32_MAX);
  EXPECT_EQ(got[3], INT32_MIN);
  load_npy_into(NpyArray{"<i4", {4}, as_bytes(raw<int32_t>({2147483647, -7, 0, 5}))}, n, "i4");
  std::memcpy(got, n.bytes.data(), 16);
  EXPECT_EQ(got[0], 2147483647);
  load_npy_into(NpyArray{"<f4", {4}, as_bytes(raw<float>({2.5f, -3.5f, 1e10f, NAN}))}, n, "f");
  std::memcpy(got, n.bytes.data(), 16);
  EXPECT_EQ(got[0], 2);
  EXPECT_EQ(got[1], -4);
  EXPECT_EQ(got[2], INT32_MAX);
  EXPECT_EQ(got[3], 0);
  load_npy_into(NpyArray{"|b1", {4}, {1, 0, 1, 1}}, n, "b");
  std::memcpy(got, n.bytes.data(), 16);
  EXPECT_EQ(got[3], 1);
}

TEST_F(NpyTest, LoadRejectsShapeMismatchNamingBoth) {
  TensorStore ts;
  auto& t = ts.put("t", MemSpace::hbm, DType::fp32, {4, 3});
  try {
    load_npy_into(NpyArray{"<f4", {3, 4}, std::vector<uint8_t>(48)}, t, "in/w.npy");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "in/w.npy");
    std::string m = e.what();
    EXPECT_NE(m.find("[3, 4]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 3]"), std::string::npos) << m;
  }
  EXPECT_THROW(load_npy_into(NpyArray{"<f4", {12}, std::vector<uint8_t>(48)}, t, "w"), InputError);
  EXPECT_THROW(load_npy_into(NpyArray{"<f4", {4, 3}, std::vector<uint8_t>(40)}, t, "w"),
               InputError);
  EXPECT_THROW(load_npy_into(NpyArray{"<c8", {4, 3}, std::vector<uint8_t>(96)}, t, "w"),
               InputError);
}

TEST_F(NpyTest, TensorsExportAsFloat32OrInt32) {
  TensorStore ts;
  auto& bf = ts.put("bf", MemSpace::hbm, DType::bf16, {2, 3});
  fill_random(bf, 1);
  NpyArray a = npy_from_tensor(bf);
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_EQ(a.shape, bf.shape);
  ASSERT_EQ(a.data.size(), 24u);
  std::vector<float> want = to_floats(bf);
  EXPECT_EQ(std::memcmp(a.data.data(), want.data(), 24), 0);
  // Written and loaded back into a bf16 tensor: bit-identical (widening is exact).
  write_npy(path("bf.npy"), a);
  auto& back = ts.put("back", MemSpace::hbm, DType::bf16, {2, 3});
  load_npy_into(read_npy(path("bf.npy")), back, path("bf.npy"));
  EXPECT_EQ(back.bytes, bf.bytes);
  auto& n = ts.put("n", MemSpace::host, DType::int32, {5});
  fill_random(n, 2);
  a = npy_from_tensor(n);
  EXPECT_EQ(a.descr, "<i4");
  EXPECT_EQ(a.data, n.bytes);
  auto& s = ts.put("s", MemSpace::hbm, DType::fp32, {});
  a = npy_from_tensor(s);
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.data.size(), 4u);
}

}  // namespace
}  // namespace wallsim::memory
