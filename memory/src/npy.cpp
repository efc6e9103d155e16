// NumPy .npy reading and writing: a strict header parser, size checks, atomic writes, and
// conversion between numpy dtypes and the chip's.
#include "wallsim/memory/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "wallsim/base/file_write.h"
#include "wallsim/base/params.h"
#include "wallsim/isa/dtype_convert.h"

namespace wallsim::memory {
namespace {

using base::InputError;

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr int64_t kMaxHeaderBytes = int64_t{1} << 20;
constexpr size_t kMaxDims = 64;  // numpy 2's limit

enum class Kind { f, i, u, b };
struct DescrInfo {
  Kind kind;
  int bytes;
};

// Accepts '<' (and, for one-byte types, '|' or '<') and returns the canonical spelling.
bool parse_descr(const std::string& descr, DescrInfo& info, std::string& canonical) {
  if (descr.size() != 3) return false;
  char order = descr[0], code = descr[1], size = descr[2];
  if (size < '1' || size > '8') return false;
  int bytes = size - '0';
  Kind kind;
  switch (code) {
    case 'f':
      if (bytes != 2 && bytes != 4 && bytes != 8) return false;
      kind = Kind::f;
      break;
    case 'i':
    case 'u':
      if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) return false;
      kind = code == 'i' ? Kind::i : Kind::u;
      break;
    case 'b':
      if (bytes != 1) return false;
      kind = Kind::b;
      break;
    default:
      return false;
  }
  if (order != '<' && !(order == '|' && bytes == 1)) return false;
  info = {kind, bytes};
  canonical = std::string(1, bytes == 1 ? '|' : '<') + code + size;
  return true;
}

std::string tuple_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string list_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// product(shape) * item_bytes, or -1 when negative or overflowing.
int64_t data_bytes(const std::vector<int64_t>& shape, int item_bytes) {
  int64_t n = item_bytes;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

// The header is a Python dict literal with exactly the keys 'descr' (a string),
// 'fortran_order' (True/False) and 'shape' (a tuple of non-negative ints).
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : m_path(path), m_text(text) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<int64_t>& shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr" && !have_descr) {
        if (peek() != '\'' && peek() != '"') fail("'descr' is not a simple dtype string");
        descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order" && !have_order) {
        fortran_order = boolean();
        have_order = true;
      } else if (key == "shape" && !have_shape) {
        shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected or repeated key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++m_pos;
    skip_space();
    if (m_pos != m_text.size()) fail("unexpected text after the header dict");
    if (!have_descr || !have_order || !have_shape)
      fail("needs the keys 'descr', 'fortran_order' and 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(m_path, "bad .npy header: " + problem);
  }
  char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }
  void skip_space() {
    while (m_pos < m_text.size() &&
           (m_text[m_pos] == ' ' || m_text[m_pos] == '\n' || m_text[m_pos] == '\t'))
      ++m_pos;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++m_pos;
  }
  std::string string_literal() {
    char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    size_t end = m_text.find(quote, m_pos + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = m_text.substr(m_pos + 1, end - m_pos - 1);
    if (s.find('\\') != std::string::npos) fail("escaped strings are not supported");
    m_pos = end + 1;
    return s;
  }
  bool boolean() {
    if (m_text.compare(m_pos, 4, "True") == 0) {
      m_pos += 4;
      return true;
    }
    if (m_text.compare(m_pos, 5, "False") == 0) {
      m_pos += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  int64_t integer() {
    if (peek() < '0' || peek() > '9') fail("shape entries must be non-negative integers");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, peek() - '0', &v))
        fail("shape entry too large");
      ++m_pos;
    }
    if (peek() == 'L') ++m_pos;  // Python 2 long
    return v;
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    skip_space();
    bool trailing_comma = false;
    while (peek() != ')') {
      if (out.size() == kMaxDims) fail("more than " + std::to_string(kMaxDims) + " dimensions");
      out.push_back(integer());
      skip_space();
      trailing_comma = false;
      if (peek() == ',') {
        ++m_pos;
        skip_space();
        trailing_comma = true;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape");
      }
    }
    ++m_pos;
    if (out.size() == 1 && !trailing_comma) fail("a one-element shape needs a trailing comma");
    return out;
  }

  const std::string& m_path;
  const std::string& m_text;
  size_t m_pos = 0;
};

uint32_t read_le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

template <class S>
S load_as(const uint8_t* p) {
  S v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Element i of a numpy array, as double (floats) or as int64 (integers, saturating u8).
double float_at(const uint8_t* data, const DescrInfo& d, int64_t i) {
  const uint8_t* p = data + i * d.bytes;
  if (d.bytes == 2) return isa::fp16_to_float(load_as<uint16_t>(p));
  if (d.bytes == 4) return load_as<float>(p);
  return load_as<double>(p);
}

int64_t int_at(const uint8_t* data, const DescrInfo& d, int64_t i) {
  const uint8_t* p = data + i * d.bytes;
  if (d.kind == Kind::i) {
    switch (d.bytes) {
      case 1:
        return load_as<int8_t>(p);
      case 2:
        return load_as<int16_t>(p);
      case 4:
        return load_as<int32_t>(p);
      default:
        return load_as<int64_t>(p);
    }
  }
  switch (d.bytes) {
    case 1:
      return d.kind == Kind::b ? (p[0] != 0) : p[0];
    case 2:
      return load_as<uint16_t>(p);
    case 4:
      return load_as<uint32_t>(p);
    default: {
      uint64_t v = load_as<uint64_t>(p);
      return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    }
  }
}

int32_t saturate_int32(int64_t v) {
  return static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(v, INT32_MIN), INT32_MAX));
}

int32_t double_to_int32(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return static_cast<int32_t>(std::nearbyint(v));
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw InputError(path, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open: " + errno_text());
  in.seekg(0, std::ios::end);
  std::streamoff file_bytes = in.tellg();
  in.seekg(0, std::ios::beg);
  if (!in || file_bytes < 0) throw InputError(path, "cannot read: " + errno_text());

  uint8_t pre[12];
  if (file_bytes < 10) throw InputError(path, "not a .npy file (too short)");
  in.read(reinterpret_cast<char*>(pre), 8);
  if (!in || std::memcmp(pre, kMagic, kMagicBytes) != 0)
    throw InputError(path, "not a .npy file (bad magic)");
  int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    throw InputError(path, "unsupported .npy format version " + std::to_string(major) + "." +
                               std::to_string(minor));
  }
  int len_bytes = major == 1 ? 2 : 4;
  if (file_bytes < 8 + len_bytes) throw InputError(path, "truncated .npy preamble");
  in.read(reinterpret_cast<char*>(pre + 8), len_bytes);
  if (!in) throw InputError(path, "truncated .npy preamble");
  int64_t header_bytes = read_le(pre + 8, len_bytes);
  int64_t data_offset = 8 + len_bytes + header_bytes;
  if (header_bytes > kMaxHeaderBytes)
    throw InputError(path, "header of " + std::to_string(header_bytes) + " bytes is too large");
  if (data_offset > file_bytes) {
    throw InputError(path, "truncated: header of " + std::to_string(header_bytes) +
                               " bytes but the file has " + std::to_string(file_bytes) + " bytes");
  }
  std::string header(static_cast<size_t>(header_bytes), '\0');
  in.read(header.data(), header_bytes);
  if (!in) throw InputError(path, "cannot read the header");
  if (header.find('\0') != std::string::npos) throw InputError(path, "header contains NUL bytes");

  std::string descr;
  bool fortran_order = false;
  NpyArray out;
  HeaderParser(path, header).parse(descr, fortran_order, out.shape);
  DescrInfo info;
  if (!parse_descr(descr, info, out.descr)) {
    if (descr.size() > 1 && descr[0] == '>')
      throw InputError(path, "big-endian dtype '" + descr + "' is not supported");
    throw InputError(path, "unsupported dtype '" + descr + "'");
  }
  if (fortran_order) throw InputError(path, "Fortran-order arrays are not supported");
  int64_t want = data_bytes(out.shape, info.bytes);
  if (want < 0) throw InputError(path, "shape " + tuple_text(out.shape) + " is too large");
  int64_t have = file_bytes - data_offset;
  if (have < want) {
    throw InputError(path, "truncated: shape " + tuple_text(out.shape) + " needs " +
                               std::to_string(want) + " data bytes, the file has " +
                               std::to_string(have));
  }
  if (have > want) {
    throw InputError(path,
                     std::to_string(have - want) + " bytes of unexpected data after the array");
  }
  out.data.resize(static_cast<size_t>(want));
  if (want > 0) in.read(reinterpret_cast<char*>(out.data.data()), want);
  if (!in) throw InputError(path, "cannot read the data: " + errno_text());
  return out;
}

void write_npy(const std::string& path, const NpyArray& array) {
  base::check_output_file(path);
  DescrInfo info;
  std::string canonical;
  if (!parse_descr(array.descr, info, canonical))
    throw InputError(path, "cannot write unsupported dtype '" + array.descr + "'");
  if (array.shape.size() > kMaxDims) throw InputError(path, "too many dimensions");
  int64_t want = data_bytes(array.shape, info.bytes);
  if (want < 0 || want != static_cast<int64_t>(array.data.size())) {
    throw InputError(path, "array of shape " + tuple_text(array.shape) + " and dtype " + canonical +
                               " has " + std::to_string(array.data.size()) + " data bytes");
  }
  std::string header = "{'descr': '" + canonical +
                       "', 'fortran_order': False, 'shape': " + tuple_text(array.shape) + ", }";
  // Like recent numpy, leave room for the first axis to grow to 21 digits in place.
  if (!array.shape.empty()) header.append(21 - std::to_string(array.shape[0]).size(), ' ');
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string pre(kMagic, kMagicBytes);
  pre += '\x01';
  pre += '\x00';
  pre += static_cast<char>(header.size() & 0xff);
  pre += static_cast<char>(header.size() >> 8);

  std::string tmp = path + ".tmpXXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw InputError(path, "cannot create a temporary file: " + errno_text());
  auto write_all = [fd](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t k = ::write(fd, c, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      c += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  };
  bool ok = fchmod(fd, 0644) == 0 && write_all(pre.data(), pre.size()) &&
            write_all(header.data(), header.size()) &&
            write_all(array.data.data(), array.data.size());
  std::string problem = ok ? "" : errno_text();
  if (::close(fd) != 0 && ok) {
    ok = false;
    problem = errno_text();
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    problem = errno_text();
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw InputError(path, "cannot write: " + problem);
  }
}

void load_npy_into(const NpyArray& array, TensorStore::Tensor& tensor,
                   const std::string& path_for_errors) {
  DescrInfo info;
  std::string canonical;
  if (!parse_descr(array.descr, info, canonical))
    throw InputError(path_for_errors, "unsupported dtype '" + array.descr + "'");
  if (array.shape != tensor.shape) {
    throw InputError(path_for_errors, "array shape " + list_text(array.shape) +
                                          " does not match the tensor's shape " +
                                          list_text(tensor.shape));
  }
  int64_t n = tensor.elements();
  int eb = isa::dtype_bytes(tensor.dtype);
  if (data_bytes(array.shape, info.bytes) != static_cast<int64_t>(array.data.size()) ||
      static_cast<int64_t>(tensor.bytes.size()) != n * eb) {
    throw InputError(path_for_errors, "array data size does not match its shape");
  }
  const uint8_t* src = array.data.data();
  uint8_t* dst = tensor.bytes.data();
  bool src_float = info.kind == Kind::f;
  if (tensor.dtype == isa::DType::int32) {
    if (canonical == "<i4") {
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      int32_t v = src_float ? double_to_int32(float_at(src, info, i))
                            : saturate_int32(int_at(src, info, i));
      std::memcpy(dst + 4 * i, &v, 4);
    }
    return;
  }
  if (canonical == "<f4") {
    constexpr int64_t kChunk = 4096;
    float buf[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      int64_t k = std::min(kChunk, n - i);
      std::memcpy(buf, src + 4 * i, static_cast<size_t>(k) * 4);
      store_elements(dst + eb * i, tensor.dtype, buf, k);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v = src_float ? static_cast<float>(float_at(src, info, i))
                        : static_cast<float>(int_at(src, info, i));
    store_element(dst + eb * i, tensor.dtype, v);
  }
}

NpyArray npy_from_tensor(const TensorStore::Tensor& tensor) {
  NpyArray out;
  out.shape = tensor.shape;
  if (tensor.dtype == isa::DType::int32) {
    out.descr = "<i4";
    out.data = tensor.bytes;
    return out;
  }
  out.descr = "<f4";
  if (tensor.dtype == isa::DType::fp32) {
    out.data = tensor.bytes;
    return out;
  }
  int64_t n = static_cast<int64_t>(tensor.bytes.size()) / isa::dtype_bytes(tensor.dtype);
  std::vector<float> values(static_cast<size_t>(n));
  load_elements(tensor.bytes.data(), tensor.dtype, values.data(), n);
  out.data.resize(static_cast<size_t>(n) * 4);
  if (n > 0) std::memcpy(out.data.data(), values.data(), out.data.size());
  return out;
}

}  // namespace wallsim::memory
