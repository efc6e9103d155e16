// Access-pattern arithmetic: sizes, spans and aliasing, overflow-checked.
#include "wallsim/isa/access_pattern.h"

#include <algorithm>
#include <array>
#include <vector>

namespace wallsim::isa {

int64_t AccessPattern::free_elements() const {
  int64_t n = 1;
  for (int d = 0; d < num_free; ++d) {
    if (__builtin_mul_overflow(n, free[d].size, &n)) return INT64_MAX;
  }
  return n;
}

std::optional<AccessPattern::Span> AccessPattern::span() const {
  int64_t lo = offset, hi = offset;
  auto extend = [&](int64_t size, int64_t stride) {
    if (size <= 0) return false;
    int64_t reach;
    if (__builtin_mul_overflow(size - 1, stride, &reach)) return false;
    if (reach >= 0) return !__builtin_add_overflow(hi, reach, &hi);
    return !__builtin_add_overflow(lo, reach, &lo);
  };
  if (!is_on_chip(space) && !extend(partitions, partition_stride)) return std::nullopt;
  if (is_on_chip(space) && partitions <= 0) return std::nullopt;
  for (int d = 0; d < num_free; ++d) {
    if (!extend(free[d].size, free[d].stride)) return std::nullopt;
  }
  return Span{lo, hi};
}

bool AccessPattern::has_aliasing() const {
  // Sorted by |stride|, the dims with size > 1 map iteration points to distinct elements when
  // each stride exceeds the reach of all smaller dims together (a sufficient condition).
  std::array<std::pair<int64_t, int64_t>, kMaxFreeDims + 1> dims;  // (|stride|, size)
  size_t n = 0;
  if (!is_on_chip(space) && partitions > 1) dims[n++] = {std::llabs(partition_stride), partitions};
  for (int d = 0; d < num_free; ++d) {
    if (free[d].size > 1) dims[n++] = {std::llabs(free[d].stride), free[d].size};
  }
  for (size_t i = 1; i < n; ++i) {  // insertion sort: at most kMaxFreeDims + 1 dims
    for (size_t j = i; j > 0 && dims[j] < dims[j - 1]; --j) std::swap(dims[j], dims[j - 1]);
  }
  int64_t extent = 1;
  for (size_t i = 0; i < n; ++i) {
    const auto [stride, size] = dims[i];
    if (stride < extent) return true;
    int64_t reach;
    if (__builtin_mul_overflow(stride, size - 1, &reach) ||
        __builtin_add_overflow(extent, reach, &extent)) {
      return false;
    }
  }
  return false;
}

int64_t AccessPattern::inner_stride_bytes() const {
  int64_t stride = num_free ? free[num_free - 1].stride : 1;
  return std::llabs(stride) * dtype_bytes(dtype);
}

bool AccessPattern::operator==(const AccessPattern& o) const {
  if (space != o.space || buffer != o.buffer || dtype != o.dtype ||
      partition_start != o.partition_start || partitions != o.partitions ||
      partition_stride != o.partition_stride || offset != o.offset || num_free != o.num_free ||
      scalar != o.scalar || scalar_stride != o.scalar_stride) {
    return false;
  }
  for (int d = 0; d < num_free; ++d) {
    if (!(free[d] == o.free[d])) return false;
  }
  return true;
}

}  // namespace wallsim::isa
