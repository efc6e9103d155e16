// Tile I/O: addressing on and off chip, strides, broadcasts, gather/scatter, bounds checks.
#include "wallsim/memory/tile_io.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "wallsim/isa/dtype_convert.h"

namespace wallsim::memory {
namespace {

using isa::AccessPattern;
using isa::DType;
using isa::MemSpace;

constexpr int32_t kParts = 16;
constexpr int64_t kSbufBytes = 1024;
constexpr int64_t kPsumBytes = 512;

// Buffers: 0 = sbuf "a" partitions [0, 8) bytes [64, 320); 1 = sbuf "b" partitions [8, 16)
// bytes [0, 1024); 2 = psum "acc" partitions [0, 16) bytes [0, 512); 3 = sbuf "wild" declared
// past the store. Tensors: 0 = "x" fp32 [6, 10], 1 = "tab" bf16 [5, 4], 2 = "gone" (not stored).
class TileIoTest : public ::testing::Test {
 protected:
  TileIoTest() : m_sbuf(kParts, kSbufBytes), m_psum(kParts, kPsumBytes) {
    m_plan.buffers = {{"a", MemSpace::sbuf, 0, 8, 64, 256},
                      {"b", MemSpace::sbuf, 8, 8, 0, 1024},
                      {"acc", MemSpace::psum, 0, 16, 0, 512},
                      {"wild", MemSpace::sbuf, 0, 20, 1000, 100}};
    m_plan.tensors = {{"x", MemSpace::hbm, DType::fp32, {6, 10}, isa::TensorRole::input},
                      {"tab", MemSpace::host, DType::bf16, {5, 4}, isa::TensorRole::input},
                      {"gone", MemSpace::hbm, DType::fp32, {2}, isa::TensorRole::input}};
    auto& x = m_tensors.put("x", MemSpace::hbm, DType::fp32, {6, 10});
    for (int i = 0; i < 60; ++i) store_element(x.bytes.data() + 4 * i, DType::fp32, float(i));
    auto& tab = m_tensors.put("tab", MemSpace::host, DType::bf16, {5, 4});
    for (int i = 0; i < 20; ++i) store_element(tab.bytes.data() + 2 * i, DType::bf16, float(i));
    m_map = {&m_sbuf, &m_psum, &m_tensors, &m_plan, &m_scalars};
  }

  static AccessPattern on_chip(int32_t buffer, int32_t start, int32_t parts,
                               std::initializer_list<isa::Dim> dims, int64_t offset = 0,
                               DType dtype = DType::fp32, MemSpace space = MemSpace::sbuf) {
    AccessPattern ap;
    ap.space = space;
    ap.buffer = buffer;
    ap.dtype = dtype;
    ap.partition_start = start;
    ap.partitions = parts;
    ap.offset = offset;
    for (isa::Dim d : dims) ap.free[ap.num_free++] = d;
    return ap;
  }

  // The space is the tensor's declared one (hbm for an undeclared index).
  AccessPattern off_chip(int32_t tensor, int32_t rows, int64_t row_stride,
                         std::initializer_list<isa::Dim> dims, int64_t offset = 0,
                         DType dtype = DType::fp32) const {
    AccessPattern ap;
    ap.space = tensor < static_cast<int32_t>(m_plan.tensors.size()) ? m_plan.tensors[tensor].space
                                                                    : MemSpace::hbm;
    ap.buffer = tensor;
    ap.dtype = dtype;
    ap.partitions = rows;
    ap.partition_stride = row_stride;
    ap.offset = offset;
    for (isa::Dim d : dims) ap.free[ap.num_free++] = d;
    return ap;
  }

  // Element address by the access_pattern.h formula, one element at a time.
  uint8_t* sbuf_element(const AccessPattern& ap, int64_t p, int64_t elem) {
    const isa::BufferDecl& b = m_plan.buffers[ap.buffer];
    OnChipStore& s = ap.space == MemSpace::sbuf ? m_sbuf : m_psum;
    return s.at(ap.partition_start + static_cast<int32_t>(p),
                b.offset_bytes + elem * isa::dtype_bytes(ap.dtype));
  }

  static Tile iota(int64_t rows, int64_t cols, float base = 0) {
    Tile t(rows, cols);
    for (int64_t i = 0; i < rows * cols; ++i) t.data()[i] = base + float(i);
    return t;
  }

  template <class F>
  std::string error_of(F&& f) {
    try {
      f();
    } catch (const MemoryError& e) {
      return e.what();
    }
    return "(no error)";
  }

  OnChipStore m_sbuf, m_psum;
  TensorStore m_tensors;
  isa::Plan m_plan;
  std::vector<int64_t> m_scalars{3, -1};
  MemoryMap m_map;
};

TEST_F(TileIoTest, ContiguousRoundTripLandsAtDocumentedAddresses) {
  AccessPattern ap = on_chip(0, 2, 3, {{5, 1}}, 4);
  Tile in = iota(3, 5, 100);
  write_tile(m_map, ap, in);
  for (int p = 0; p < 3; ++p) {
    for (int i = 0; i < 5; ++i) {
      // partition 2 + p, byte 64 + (4 + i) * 4
      EXPECT_EQ(load_element(m_sbuf.at(2 + p, 64 + (4 + i) * 4), DType::fp32), 100 + p * 5 + i);
    }
  }
  EXPECT_EQ(load_element(m_sbuf.at(1, 64 + 16), DType::fp32), 0.0f);  // untouched neighbour
  Tile out;
  read_tile(m_map, ap, out);
  EXPECT_EQ(out, in);
}

TEST_F(TileIoTest, FreeDimsIterateOutermostFirst) {
  // Write a 4x6 block row-major, then read it transposed: free[0] (stride 1) is outermost.
  write_tile(m_map, on_chip(0, 0, 1, {{4, 6}, {6, 1}}), iota(1, 24));
  Tile t;
  read_tile(m_map, on_chip(0, 0, 1, {{6, 1}, {4, 6}}), t);
  ASSERT_EQ(t.rows(), 1);
  ASSERT_EQ(t.cols(), 24);
  for (int c = 0; c < 6; ++c) {
    for (int r = 0; r < 4; ++r) EXPECT_EQ(t(0, c * 4 + r), r * 6 + c);
  }
  // Three and four free dims, with a gap between rows.
  write_tile(m_map, on_chip(1, 8, 2, {{2, 40}, {3, 10}, {4, 2}}, 1), iota(2, 24));
  read_tile(m_map, on_chip(1, 8, 2, {{2, 40}, {3, 10}, {2, 4}, {2, 2}}, 1), t);
  EXPECT_EQ(t, iota(2, 24));
  EXPECT_EQ(load_element(sbuf_element(on_chip(1, 8, 1, {}), 1, 1 + 40 + 20 + 6), DType::fp32),
            24 + 12 + 8 + 3);
}

TEST_F(TileIoTest, StridedWritesLeaveGapsUntouched) {
  write_tile(m_map, on_chip(0, 0, 2, {{4, 3}}, 2), iota(2, 4, 1));
  Tile t;
  read_tile(m_map, on_chip(0, 0, 2, {{12, 1}}, 2), t);
  Tile want = Tile::Zero(2, 12);
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 4; ++i) want(p, 3 * i) = 1 + p * 4 + i;
  }
  EXPECT_EQ(t, want);
}

TEST_F(TileIoTest, BroadcastReads) {
  write_tile(m_map, on_chip(0, 0, 2, {{3, 1}}), iota(2, 3, 10));
  Tile t;
  read_tile(m_map, on_chip(0, 0, 2, {{3, 1}, {4, 0}}), t);  // each element 4 times
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 12; ++i) EXPECT_EQ(t(p, i), 10 + p * 3 + i / 4);
  }
  read_tile(m_map, on_chip(0, 0, 2, {{2, 0}, {3, 1}}), t);  // the row twice
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t(p, i), 10 + p * 3 + i % 3);
  }
  read_tile(m_map, on_chip(0, 1, 1, {{5, 0}}, 2), t);
  EXPECT_EQ(t, Tile::Constant(1, 5, 15));
  // Off chip: every row reads the same tensor row (row stride 0).
  read_tile(m_map, off_chip(0, 3, 0, {{4, 1}}, 20), t);
  for (int p = 0; p < 3; ++p) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(t(p, i), 20 + i);
  }
}

TEST_F(TileIoTest, NegativeStridesReverse) {
  write_tile(m_map, on_chip(0, 0, 1, {{8, 1}}), iota(1, 8));
  Tile t;
  read_tile(m_map, on_chip(0, 0, 1, {{8, -1}}, 7), t);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t(0, i), 7 - i);
  write_tile(m_map, on_chip(0, 0, 1, {{2, -4}, {4, 1}}, 4), iota(1, 8, 50));
  read_tile(m_map, on_chip(0, 0, 1, {{8, 1}}), t);
  EXPECT_EQ(t, (Tile(1, 8) << 54, 55, 56, 57, 50, 51, 52, 53).finished());
  // Off chip, rows walked backwards.
  read_tile(m_map, off_chip(0, 3, -10, {{2, 1}}, 50), t);
  EXPECT_EQ(t, (Tile(3, 2) << 50, 51, 40, 41, 30, 31).finished());
}

TEST_F(TileIoTest, PartitionOffsetsAreAbsolute) {
  AccessPattern ap = on_chip(1, 12, 2, {{3, 1}});
  write_tile(m_map, ap, iota(2, 3, 1));
  EXPECT_EQ(load_element(m_sbuf.at(12, 0), DType::fp32), 1.0f);
  EXPECT_EQ(load_element(m_sbuf.at(13, 8), DType::fp32), 6.0f);
  EXPECT_EQ(load_element(m_sbuf.at(11, 0), DType::fp32), 0.0f);
}

TEST_F(TileIoTest, ConvertsThroughTheDType) {
  AccessPattern bf = on_chip(0, 0, 1, {{3, 1}}, 0, DType::bf16);
  Tile in(1, 3);
  in << 1.0f, 1.0f + 0x1p-8f, -3.14159f;
  write_tile(m_map, bf, in);
  EXPECT_EQ(*m_sbuf.at(0, 64 + 1), 0x3f);  // bf16 1.0 = 0x3f80, little-endian
  Tile out;
  read_tile(m_map, bf, out);
  EXPECT_EQ(out(0, 0), 1.0f);
  EXPECT_EQ(out(0, 1), 1.0f);  // tie to even
  EXPECT_EQ(out(0, 2), isa::bf16_to_float(isa::float_to_bf16(-3.14159f)));
  AccessPattern acc = on_chip(2, 4, 2, {{2, 1}}, 10, DType::int32, MemSpace::psum);
  write_tile(m_map, acc, (Tile(2, 2) << 1.5f, 2.5f, -7.2f, 1e12f).finished());
  read_tile(m_map, acc, out);
  EXPECT_EQ(out, (Tile(2, 2) << 2, 2, -7, 2147483647.0f).finished());
  EXPECT_EQ(*m_psum.at(4, 40), 2);
  AccessPattern half = on_chip(0, 0, 2, {{2, 1}}, 0, DType::fp16);
  write_tile(m_map, half, (Tile(2, 2) << 0.5f, 70000.0f, -1e-8f, 2.0f).finished());
  read_tile(m_map, half, out);
  EXPECT_EQ(out(0, 0), 0.5f);
  EXPECT_TRUE(std::isinf(out(0, 1)));
  EXPECT_EQ(out(1, 0), 0.0f);
  EXPECT_EQ(out(1, 1), 2.0f);
}

TEST_F(TileIoTest, OffChipRowStrideAndScalarOffsets) {
  Tile t;
  read_tile(m_map, off_chip(0, 3, 20, {{4, 1}}, 1), t);
  EXPECT_EQ(t, (Tile(3, 4) << 1, 2, 3, 4, 21, 22, 23, 24, 41, 42, 43, 44).finished());
  AccessPattern ap = off_chip(0, 2, 10, {{3, 2}}, 0);
  ap.scalar = 0;  // value 3
  ap.scalar_stride = 10;
  read_tile(m_map, ap, t);
  EXPECT_EQ(t, (Tile(2, 3) << 30, 32, 34, 40, 42, 44).finished());
  ap.scalar = 1;  // value -1
  ap.scalar_stride = -5;
  read_tile(m_map, ap, t);
  EXPECT_EQ(t, (Tile(2, 3) << 5, 7, 9, 15, 17, 19).finished());
  write_tile(m_map, ap, Tile::Constant(2, 3, -1));
  EXPECT_EQ(load_element(m_tensors.find("x")->bytes.data() + 4 * 17, DType::fp32), -1.0f);
  EXPECT_EQ(load_element(m_tensors.find("x")->bytes.data() + 4 * 18, DType::fp32), 18.0f);
}

TEST_F(TileIoTest, EmptyAccessesTouchNothing) {
  Tile t(3, 3);
  read_tile(m_map, on_chip(0, 0, 0, {{4, 1}}), t);
  EXPECT_EQ(t.rows(), 0);
  read_tile(m_map, off_chip(0, 2, 10, {{0, 1}}), t);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.cols(), 0);
  write_tile(m_map, off_chip(0, 2, 10, {{0, 1}}), t);
  // Zero free dims: one element per row.
  read_tile(m_map, off_chip(0, 2, 10, {}, 3), t);
  EXPECT_EQ(t, (Tile(2, 1) << 3, 13).finished());
}

TEST_F(TileIoTest, GatherAndScatterRows) {
  AccessPattern table = off_chip(1, 5, 4, {{4, 1}}, 0, DType::bf16);
  Tile t;
  read_rows(m_map, table, {4, 0, 4, 2}, t);
  EXPECT_EQ(t, (Tile(4, 4) << 16, 17, 18, 19, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11).finished());
  write_rows(m_map, table, {3, 1}, iota(2, 4, 100));
  read_tile(m_map, table, t);
  EXPECT_EQ(t.row(1), iota(1, 4, 104));
  EXPECT_EQ(t.row(3), iota(1, 4, 100));
  EXPECT_EQ(t.row(2), iota(1, 4, 8));
  read_rows(m_map, table, {}, t);
  EXPECT_EQ(t.rows(), 0);
  EXPECT_EQ(t.cols(), 4);
  // On chip, rows are partitions of the table pattern.
  AccessPattern on = on_chip(1, 10, 4, {{2, 1}}, 3);
  write_tile(m_map, on, iota(4, 2));
  read_rows(m_map, on, {3, 1}, t);
  EXPECT_EQ(t, (Tile(2, 2) << 6, 7, 2, 3).finished());
  write_rows(m_map, on, {0}, Tile::Constant(1, 2, 9));
  EXPECT_EQ(load_element(m_sbuf.at(10, 12), DType::fp32), 9.0f);
  EXPECT_EQ(load_element(m_sbuf.at(11, 12), DType::fp32), 2.0f);
}

TEST_F(TileIoTest, OnChipBoundsViolationsThrow) {
  Tile t;
  // Partitions outside the buffer's [0, 8).
  EXPECT_THROW(read_tile(m_map, on_chip(0, 6, 4, {{4, 1}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(0, -1, 2, {{4, 1}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, -2, {{4, 1}}), t), MemoryError);
  // Bytes outside the buffer's 256 (64 fp32 elements), either end.
  EXPECT_NO_THROW(read_tile(m_map, on_chip(0, 0, 1, {{64, 1}}), t));
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{65, 1}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{4, 1}}, -1), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{4, -1}}, 2), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{2, 100}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{129, 1}}, 0, DType::bf16), t), MemoryError);
  // Overflowing strides, bad dims, a declaration that exceeds the store, unknown buffers.
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{3, INT64_MAX / 2}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{-3, 1}}), t), MemoryError);
  AccessPattern many = on_chip(0, 0, 1, {{1, 1}});
  many.num_free = 9;
  EXPECT_THROW(read_tile(m_map, many, t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(3, 0, 1, {{1, 1}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(7, 0, 1, {{1, 1}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, on_chip(-1, 0, 1, {{1, 1}}), t), MemoryError);
  // The declared space must match, the store must exist, on-chip takes no scalar.
  EXPECT_THROW(read_tile(m_map, on_chip(0, 0, 1, {{1, 1}}, 0, DType::fp32, MemSpace::psum), t),
               MemoryError);
  MemoryMap no_psum = m_map;
  no_psum.psum = nullptr;
  EXPECT_THROW(read_tile(no_psum, on_chip(2, 0, 1, {{1, 1}}, 0, DType::fp32, MemSpace::psum), t),
               MemoryError);
  AccessPattern scalar = on_chip(0, 0, 1, {{1, 1}});
  scalar.scalar = 0;
  EXPECT_THROW(read_tile(m_map, scalar, t), MemoryError);
  AccessPattern garbled = on_chip(0, 0, 1, {{1, 1}});
  garbled.dtype = static_cast<DType>(9);
  EXPECT_THROW(read_tile(m_map, garbled, t), MemoryError);
  garbled = on_chip(0, 0, 1, {{1, 1}});
  garbled.space = static_cast<MemSpace>(200);
  EXPECT_THROW(read_tile(m_map, garbled, t), MemoryError);
  MemoryMap no_plan = m_map;
  no_plan.plan = nullptr;
  EXPECT_THROW(read_tile(no_plan, on_chip(0, 0, 1, {{1, 1}}), t), MemoryError);
}

TEST_F(TileIoTest, OffChipBoundsViolationsThrow) {
  Tile t;
  EXPECT_NO_THROW(read_tile(m_map, off_chip(0, 6, 10, {{10, 1}}), t));
  EXPECT_THROW(read_tile(m_map, off_chip(0, 7, 10, {{10, 1}}), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, off_chip(0, 6, 10, {{10, 1}}, 1), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, off_chip(0, 2, -10, {{10, 1}}, 5), t), MemoryError);
  AccessPattern ap = off_chip(0, 1, 0, {{10, 1}}, 40);
  ap.scalar = 0;  // 40 + 3 * 10 + 9 = 79 > 59
  ap.scalar_stride = 10;
  EXPECT_THROW(read_tile(m_map, ap, t), MemoryError);
  ap.scalar_stride = INT64_MAX;
  EXPECT_THROW(read_tile(m_map, ap, t), MemoryError);
  ap.scalar = 2;  // unbound
  ap.scalar_stride = 0;
  EXPECT_THROW(read_tile(m_map, ap, t), MemoryError);
  MemoryMap no_scalars = m_map;
  no_scalars.scalars = nullptr;
  ap.scalar = 0;
  EXPECT_THROW(read_tile(no_scalars, ap, t), MemoryError);
  EXPECT_THROW(read_tile(m_map, off_chip(0, 1, 0, {{1, 1}}, 0, DType::bf16), t), MemoryError);
  EXPECT_THROW(read_tile(m_map, off_chip(3, 1, 0, {{1, 1}}), t), MemoryError);
  MemoryMap no_tensors = m_map;
  no_tensors.tensors = nullptr;
  EXPECT_THROW(read_tile(no_tensors, off_chip(0, 1, 0, {{1, 1}}), t), MemoryError);
}

TEST_F(TileIoTest, ErrorMessagesNameTheTargetAndIndex) {
  Tile t;
  std::string e = error_of([&] { read_tile(m_map, off_chip(2, 1, 0, {{1, 1}}), t); });
  EXPECT_NE(e.find("'gone'"), std::string::npos) << e;
  EXPECT_NE(e.find("not in the tensor store"), std::string::npos) << e;
  e = error_of([&] { read_tile(m_map, on_chip(0, 0, 1, {{65, 1}}), t); });
  EXPECT_NE(e.find("sbuf buffer 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("64"), std::string::npos) << e;
  e = error_of([&] { read_tile(m_map, on_chip(0, 6, 4, {{1, 1}}), t); });
  EXPECT_NE(e.find("[6, 10)"), std::string::npos) << e;
  e = error_of([&] { read_tile(m_map, on_chip(3, 0, 1, {{1, 1}}), t); });
  EXPECT_NE(e.find("'wild'"), std::string::npos) << e;
  e = error_of([&] { read_rows(m_map, off_chip(1, 5, 4, {{4, 1}}, 0, DType::bf16), {1, 7}, t); });
  EXPECT_NE(e.find("host tensor 'tab'"), std::string::npos) << e;
  EXPECT_NE(e.find("gather row index 7 (tile row 1)"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST_F(TileIoTest, GatherScatterIndexChecks) {
  AccessPattern table = off_chip(1, 5, 4, {{4, 1}}, 0, DType::bf16);
  Tile t;
  EXPECT_THROW(read_rows(m_map, table, {0, 5}, t), MemoryError);
  EXPECT_THROW(read_rows(m_map, table, {-1}, t), MemoryError);
  std::vector<uint8_t> before = m_tensors.find("tab")->bytes;
  // The bad index is last: nothing at all may have been written.
  EXPECT_THROW(write_rows(m_map, table, {0, 1, 5}, Tile::Constant(3, 4, 7)), MemoryError);
  EXPECT_EQ(m_tensors.find("tab")->bytes, before);
  EXPECT_THROW(write_rows(m_map, table, {0, 1}, Tile::Constant(3, 4, 7)), MemoryError);
  EXPECT_THROW(write_rows(m_map, table, {0}, Tile::Constant(1, 3, 7)), MemoryError);
  EXPECT_THROW(read_rows(m_map, on_chip(1, 10, 4, {{2, 1}}), {4}, t), MemoryError);
}

TEST_F(TileIoTest, WriteTileRequiresTheShape) {
  EXPECT_THROW(write_tile(m_map, on_chip(0, 0, 2, {{4, 1}}), Tile::Zero(2, 5)), MemoryError);
  EXPECT_THROW(write_tile(m_map, on_chip(0, 0, 2, {{4, 1}}), Tile::Zero(1, 8)), MemoryError);
  EXPECT_THROW(write_tile(m_map, off_chip(0, 6, 10, {{10, 1}}, 1), Tile::Zero(6, 10)), MemoryError);
}

// Random patterns against a one-element-at-a-time reference of the documented formula.
TEST_F(TileIoTest, RandomPatternsMatchReference) {
  std::mt19937_64 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  for (int i = 0; i < int(kSbufBytes * 8); ++i) m_sbuf.at(8, 0)[i] = static_cast<uint8_t>(rng());
  int checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    DType dtype = static_cast<DType>(pick(0, 3));
    AccessPattern ap = on_chip(1, static_cast<int32_t>(pick(8, 12)), 0, {}, 0, dtype);
    ap.partitions = static_cast<int32_t>(pick(1, 16 - ap.partition_start));
    ap.num_free = static_cast<uint8_t>(pick(0, 4));
    for (int d = 0; d < ap.num_free; ++d) ap.free[d] = {pick(1, 5), pick(-12, 12)};
    ap.offset = pick(0, 300);
    auto span = ap.span();
    int64_t eb = isa::dtype_bytes(dtype);
    bool in_bounds = span && span->lo >= 0 && (span->hi + 1) * eb <= kSbufBytes;
    Tile t;
    if (!in_bounds) {
      EXPECT_THROW(read_tile(m_map, ap, t), MemoryError);
      continue;
    }
    read_tile(m_map, ap, t);
    ASSERT_EQ(t.rows(), ap.partitions);
    ASSERT_EQ(t.cols(), ap.free_elements());
    int64_t idx[4];
    for (int64_t p = 0; p < ap.partitions; ++p) {
      for (int64_t c = 0; c < ap.free_elements(); ++c) {
        int64_t rest = c, off = ap.offset;
        for (int d = ap.num_free - 1; d >= 0; --d) {
          idx[d] = rest % ap.free[d].size;
          rest /= ap.free[d].size;
          off += idx[d] * ap.free[d].stride;
        }
        float want = load_element(sbuf_element(ap, p, off), dtype);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(t(p, c)));
        } else {
          ASSERT_EQ(t(p, c), want) << "iter " << iter << " p " << p << " c " << c;
        }
      }
    }
    if (!ap.has_aliasing()) {
      // Write a fresh tile back and check each element landed where the formula says.
      Tile w = Tile::Random(t.rows(), t.cols());
      write_tile(m_map, ap, w);
      for (int64_t p = 0; p < ap.partitions; ++p) {
        for (int64_t c = 0; c < ap.free_elements(); ++c) {
          int64_t rest = c, off = ap.offset;
          for (int d = ap.num_free - 1; d >= 0; --d) {
            off += (rest % ap.free[d].size) * ap.free[d].stride;
            rest /= ap.free[d].size;
          }
          float got = load_element(sbuf_element(ap, p, off), dtype);
          uint8_t tmp[4];
          store_element(tmp, dtype, w(p, c));
          float want = load_element(tmp, dtype);
          ASSERT_EQ(got, want) << "iter " << iter;
        }
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace wallsim::memory
