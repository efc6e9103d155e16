// Tile I/O: one bounds check per access, then per-row loops specialised by dtype and stride.
#include "wallsim/memory/tile_io.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "wallsim/isa/dtype_convert.h"

namespace wallsim::memory {
namespace {

using isa::AccessPattern;
using isa::DType;

std::string str(int64_t v) { return std::to_string(v); }

// The resolved target of one access: element (p, f) -- row p, free offset f in elements -- is at
// origin + p * row_stride_bytes + start_bytes + f * elem_bytes, and every such byte lies inside
// the checked region. `origin` is null when the access touches nothing.
struct Region {
  uint8_t* origin = nullptr;
  int64_t row_stride_bytes = 0;
  int64_t start_bytes = 0;
  int64_t rows = 0;  // valid row indices are [0, rows)
  int64_t cols = 0;  // free elements per row
};

// The free dims with size-1 dims dropped and contiguous neighbours merged: up to three outer
// dims (outermost first) around one inner run.
struct Walk {
  int64_t outer_size[3] = {1, 1, 1};
  int64_t outer_stride_bytes[3] = {0, 0, 0};
  int64_t inner_size = 1;
  int64_t inner_stride_bytes = 0;
};

class Checker {
 public:
  Checker(const MemoryMap& map, const AccessPattern& ap) : m_map(map), m_ap(ap) {}

  Region resolve() {
    if (static_cast<int>(m_ap.space) >= isa::kNumMemSpaces ||
        static_cast<int>(m_ap.dtype) >= isa::kNumDTypes) {
      throw MemoryError("access #" + str(m_ap.buffer) + ": invalid memory space or dtype");
    }
    if (!m_map.plan) fail("the memory map has no plan");
    if (m_ap.num_free > isa::kMaxFreeDims) fail("has " + str(m_ap.num_free) + " free dims");
    if (m_ap.partitions < 0) fail("has " + str(m_ap.partitions) + " rows");
    int64_t cols = 1;
    for (int d = 0; d < m_ap.num_free; ++d) {
      int64_t size = m_ap.free[d].size;
      if (size < 0) fail("free dim " + str(d) + " has size " + str(size));
      if (__builtin_mul_overflow(cols, size, &cols)) fail("has too many free elements");
    }
    int64_t total;
    if (__builtin_mul_overflow(cols, int64_t{m_ap.partitions}, &total))
      fail("has too many elements");
    Region r = isa::is_on_chip(m_ap.space) ? resolve_on_chip() : resolve_off_chip();
    r.rows = m_ap.partitions;
    r.cols = cols;
    return r;
  }

  [[noreturn]] void fail(const std::string& problem) const { throw MemoryError(who() + problem); }

  std::string who() const {
    std::string space(isa::name_of(m_ap.space));
    if (!m_map.plan || m_ap.buffer < 0) return space + " access #" + str(m_ap.buffer) + ": ";
    if (isa::is_on_chip(m_ap.space)) {
      if (m_ap.buffer >= static_cast<int64_t>(m_map.plan->buffers.size()))
        return space + " buffer #" + str(m_ap.buffer) + ": ";
      return space + " buffer '" + m_map.plan->buffers[m_ap.buffer].name + "': ";
    }
    if (m_ap.buffer >= static_cast<int64_t>(m_map.plan->tensors.size()))
      return space + " tensor #" + str(m_ap.buffer) + ": ";
    return space + " tensor '" + m_map.plan->tensors[m_ap.buffer].name + "': ";
  }

 private:
  bool empty() const {
    if (m_ap.partitions == 0) return true;
    for (int d = 0; d < m_ap.num_free; ++d) {
      if (m_ap.free[d].size == 0) return true;
    }
    return false;
  }

  AccessPattern::Span span() const {
    auto s = m_ap.span();
    if (!s) fail("element offsets overflow");
    return *s;
  }

  Region resolve_on_chip() {
    const auto& buffers = m_map.plan->buffers;
    if (m_ap.buffer < 0 || m_ap.buffer >= static_cast<int64_t>(buffers.size()))
      fail("the plan declares " + str(buffers.size()) + " buffers");
    const isa::BufferDecl& b = buffers[m_ap.buffer];
    if (b.space != m_ap.space)
      fail("the buffer is declared in " + std::string(isa::name_of(b.space)));
    OnChipStore* store = m_ap.space == isa::MemSpace::sbuf ? m_map.sbuf : m_map.psum;
    if (!store) fail("the memory map has no " + std::string(isa::name_of(m_ap.space)) + " store");
    if (m_ap.scalar >= 0) fail("on-chip accesses take no run-time scalar");
    int64_t buffer_end;
    if (b.offset_bytes < 0 || b.bytes < 0 ||
        __builtin_add_overflow(b.offset_bytes, b.bytes, &buffer_end) ||
        buffer_end > store->bytes_per_partition()) {
      fail("buffer bytes [" + str(b.offset_bytes) + ", " + str(b.offset_bytes) + " + " +
           str(b.bytes) + ") exceed the store's " + str(store->bytes_per_partition()) +
           " bytes per partition");
    }
    int64_t buffer_part_end = int64_t{b.partition_start} + b.partitions;
    if (b.partition_start < 0 || b.partitions < 0 || buffer_part_end > store->partitions()) {
      fail("buffer partitions [" + str(b.partition_start) + ", " + str(buffer_part_end) +
           ") exceed the store's " + str(store->partitions()) + " partitions");
    }
    int64_t part_end = int64_t{m_ap.partition_start} + m_ap.partitions;
    if (m_ap.partition_start < b.partition_start || part_end > buffer_part_end) {
      fail("partitions [" + str(m_ap.partition_start) + ", " + str(part_end) +
           ") outside the buffer's [" + str(b.partition_start) + ", " + str(buffer_part_end) + ")");
    }
    if (empty()) return {};
    AccessPattern::Span s = span();
    int64_t eb = isa::dtype_bytes(m_ap.dtype);
    int64_t end_bytes;
    if (s.lo < 0 || __builtin_mul_overflow(s.hi + 1, eb, &end_bytes) || end_bytes > b.bytes) {
      fail("elements [" + str(s.lo) + ", " + str(s.hi) + "] of " + str(eb) +
           " bytes fall outside the buffer's " + str(b.bytes) + " bytes");
    }
    Region r;
    r.origin = store->at(m_ap.partition_start, b.offset_bytes);
    r.row_stride_bytes = store->bytes_per_partition();
    r.start_bytes = m_ap.offset * eb;
    return r;
  }

  Region resolve_off_chip() {
    const auto& decls = m_map.plan->tensors;
    if (m_ap.buffer < 0 || m_ap.buffer >= static_cast<int64_t>(decls.size()))
      fail("the plan declares " + str(decls.size()) + " tensors");
    const std::string& name =
        m_map.tensor_names ? (*m_map.tensor_names)[m_ap.buffer] : decls[m_ap.buffer].name;
    TensorStore::Tensor* t = m_map.tensors ? m_map.tensors->find(name) : nullptr;
    if (!t) fail("not in the tensor store");
    if (t->dtype != m_ap.dtype) {
      fail("accessed as " + std::string(isa::name_of(m_ap.dtype)) + " but holds " +
           std::string(isa::name_of(t->dtype)));
    }
    int64_t scalar_term = 0;
    if (m_ap.scalar >= 0) {
      if (!m_map.scalars || m_ap.scalar >= static_cast<int64_t>(m_map.scalars->size()))
        fail("run-time scalar #" + str(m_ap.scalar) + " is not bound");
      int64_t value = (*m_map.scalars)[m_ap.scalar];
      if (__builtin_mul_overflow(value, m_ap.scalar_stride, &scalar_term))
        fail("scalar offset " + str(value) + " x " + str(m_ap.scalar_stride) + " overflows");
    }
    if (empty()) return {};
    AccessPattern::Span s = span();
    int64_t eb = isa::dtype_bytes(m_ap.dtype);
    int64_t n = static_cast<int64_t>(t->bytes.size()) / eb;
    int64_t lo, hi;
    if (__builtin_add_overflow(s.lo, scalar_term, &lo) ||
        __builtin_add_overflow(s.hi, scalar_term, &hi) || lo < 0 || hi >= n) {
      std::string scalar = m_ap.scalar >= 0 ? " + scalar offset " + str(scalar_term) : "";
      fail("elements [" + str(s.lo) + ", " + str(s.hi) + "]" + scalar +
           " fall outside the tensor's " + str(n) + " elements");
    }
    Region r;
    r.origin = t->bytes.data();
    r.row_stride_bytes = m_ap.partitions > 1 ? m_ap.partition_stride * eb : 0;
    r.start_bytes = (m_ap.offset + scalar_term) * eb;
    return r;
  }

  const MemoryMap& m_map;
  const AccessPattern& m_ap;
};

// Only called for non-empty, checked accesses, so every size is >= 1 and every product of a
// stride with (size - 1) fits.
Walk make_walk(const AccessPattern& ap) {
  int64_t size[isa::kMaxFreeDims], stride[isa::kMaxFreeDims];
  int n = 0;
  for (int d = 0; d < ap.num_free; ++d) {
    if (ap.free[d].size == 1) continue;
    int64_t reach;
    // Merge into the previous (outer) dim when it continues this one contiguously.
    if (n > 0 && !__builtin_mul_overflow(ap.free[d].size, ap.free[d].stride, &reach) &&
        reach == stride[n - 1]) {
      size[n - 1] *= ap.free[d].size;  // cannot overflow: the element count was checked
      stride[n - 1] = ap.free[d].stride;
      continue;
    }
    size[n] = ap.free[d].size;
    stride[n] = ap.free[d].stride;
    ++n;
  }
  Walk w;
  int64_t eb = isa::dtype_bytes(ap.dtype);
  if (n == 0) return w;
  w.inner_size = size[n - 1];
  w.inner_stride_bytes = stride[n - 1] * eb;
  for (int k = 0; k < n - 1; ++k) {
    int slot = 3 - (n - 1) + k;
    w.outer_size[slot] = size[k];
    w.outer_stride_bytes[slot] = stride[k] * eb;
  }
  return w;
}

template <DType T>
constexpr int64_t kBytes = (T == DType::bf16 || T == DType::fp16) ? 2 : 4;

template <DType T>
inline void load_run(const uint8_t* m, int64_t stride_bytes, float* out, int64_t n) {
  if (stride_bytes == kBytes<T>) {
    if constexpr (T == DType::fp32) {
      std::memcpy(out, m, static_cast<size_t>(n) * 4);
    } else {
      for (int64_t j = 0; j < n; ++j) out[j] = load_element(m + j * kBytes<T>, T);
    }
  } else if (stride_bytes == 0) {
    std::fill(out, out + n, load_element(m, T));
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = load_element(m + j * stride_bytes, T);
  }
}

template <DType T>
inline void store_run(uint8_t* m, int64_t stride_bytes, const float* in, int64_t n) {
  if (stride_bytes == kBytes<T>) {
    if constexpr (T == DType::fp32) {
      std::memcpy(m, in, static_cast<size_t>(n) * 4);
    } else {
      for (int64_t j = 0; j < n; ++j) store_element(m + j * kBytes<T>, T, in[j]);
    }
  } else if (stride_bytes == 0) {
    store_element(m, T, in[n - 1]);  // every point names the same element: the last one wins
  } else {
    for (int64_t j = 0; j < n; ++j) store_element(m + j * stride_bytes, T, in[j]);
  }
}

// Moves `nrows` tile rows; tile row p is region row rows[p] (or p when rows is null).
template <bool kWrite>
using TilePtr = std::conditional_t<kWrite, const float*, float*>;

template <DType T, bool kWrite>
void transfer(const Region& r, const Walk& w, const int64_t* rows, int64_t nrows,
              TilePtr<kWrite> tile) {
  const int64_t n = w.inner_size;
  for (int64_t p = 0; p < nrows; ++p) {
    int64_t row = rows ? rows[p] : p;
    uint8_t* base = r.origin + (row * r.row_stride_bytes + r.start_bytes);
    for (int64_t a = 0; a < w.outer_size[0]; ++a) {
      uint8_t* ma = base + a * w.outer_stride_bytes[0];
      for (int64_t b = 0; b < w.outer_size[1]; ++b) {
        uint8_t* mb = ma + b * w.outer_stride_bytes[1];
        for (int64_t c = 0; c < w.outer_size[2]; ++c) {
          uint8_t* mc = mb + c * w.outer_stride_bytes[2];
          if constexpr (kWrite) {
            store_run<T>(mc, w.inner_stride_bytes, tile, n);
          } else {
            load_run<T>(mc, w.inner_stride_bytes, tile, n);
          }
          tile += n;
        }
      }
    }
  }
}

template <bool kWrite>
void dispatch(DType t, const Region& r, const Walk& w, const int64_t* rows, int64_t nrows,
              TilePtr<kWrite> tile) {
  switch (t) {
    case DType::fp32:
      return transfer<DType::fp32, kWrite>(r, w, rows, nrows, tile);
    case DType::bf16:
      return transfer<DType::bf16, kWrite>(r, w, rows, nrows, tile);
    case DType::fp16:
      return transfer<DType::fp16, kWrite>(r, w, rows, nrows, tile);
    case DType::int32:
      return transfer<DType::int32, kWrite>(r, w, rows, nrows, tile);
  }
}

void check_rows(const Checker& checker, const Region& r, const std::vector<int64_t>& rows,
                const char* what) {
  for (size_t p = 0; p < rows.size(); ++p) {
    if (rows[p] < 0 || rows[p] >= r.rows) {
      checker.fail(std::string(what) + " row index " + str(rows[p]) + " (tile row " +
                   str(static_cast<int64_t>(p)) + ") outside [0, " + str(r.rows) + ")");
    }
  }
}

void check_shape(const Checker& checker, const Tile& in, int64_t rows, int64_t cols) {
  if (in.rows() != rows || in.cols() != cols) {
    checker.fail("tile is [" + str(in.rows()) + " x " + str(in.cols()) + "] but the access is [" +
                 str(rows) + " x " + str(cols) + "]");
  }
}

}  // namespace

void read_tile(const MemoryMap& map, const AccessPattern& ap, Tile& out) {
  Checker checker(map, ap);
  Region r = checker.resolve();
  out.resize(r.rows, r.cols);
  if (!r.origin) return;
  dispatch<false>(ap.dtype, r, make_walk(ap), nullptr, r.rows, out.data());
}

void write_tile(const MemoryMap& map, const AccessPattern& ap, const Tile& in) {
  Checker checker(map, ap);
  Region r = checker.resolve();
  check_shape(checker, in, r.rows, r.cols);
  if (!r.origin) return;
  dispatch<true>(ap.dtype, r, make_walk(ap), nullptr, r.rows, in.data());
}

void read_rows(const MemoryMap& map, const AccessPattern& table, const std::vector<int64_t>& rows,
               Tile& out) {
  Checker checker(map, table);
  Region r = checker.resolve();
  check_rows(checker, r, rows, "gather");
  int64_t nrows = static_cast<int64_t>(rows.size());
  out.resize(nrows, r.cols);
  if (!r.origin || nrows == 0) return;
  dispatch<false>(table.dtype, r, make_walk(table), rows.data(), nrows, out.data());
}

void write_rows(const MemoryMap& map, const AccessPattern& table, const std::vector<int64_t>& rows,
                const Tile& in) {
  Checker checker(map, table);
  Region r = checker.resolve();
  check_rows(checker, r, rows, "scatter");
  int64_t nrows = static_cast<int64_t>(rows.size());
  check_shape(checker, in, nrows, r.cols);
  if (!r.origin || nrows == 0) return;
  dispatch<true>(table.dtype, r, make_walk(table), rows.data(), nrows, in.data());
}

}  // namespace wallsim::memory
