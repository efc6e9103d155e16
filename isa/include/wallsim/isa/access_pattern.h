// Access patterns: which elements of a buffer (on chip) or tensor (off chip) an operand touches.
//
// Every pattern iterates a [partitions x free...] space. Element (p, i0..i3), in elements of
// `dtype`, is at
//   on chip  (SBUF, PSUM): partition `partition_start + p`,
//                          offset `offset + sum(ik * stride_k)` within the buffer's bytes;
//   off chip (HBM, host):  element `offset + p * partition_stride + sum(ik * stride_k)
//                          + scalar * scalar_stride` of the named tensor.
// A stride of 0 broadcasts (valid for reads only). A `scalar` term (DMA only) adds a run-time
// scalar, bound at plan launch, times `scalar_stride` to the offset.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "wallsim/isa/types.h"

namespace wallsim::isa {

inline constexpr int kMaxFreeDims = 4;

struct Dim {
  int64_t size = 1;
  int64_t stride = 1;  // elements
  bool operator==(const Dim& o) const { return size == o.size && stride == o.stride; }
};

// Members are ordered by size so that the struct has no padding holes (112 bytes): plans hold
// five per instruction.
struct AccessPattern {
  int64_t partition_stride = 0;  // off chip only: elements between rows
  int64_t offset = 0;            // elements
  int64_t scalar_stride = 0;
  std::array<Dim, kMaxFreeDims> free{};
  int32_t buffer = -1;          // index into Plan::buffers (on chip) or Plan::tensors (off chip)
  int32_t partition_start = 0;  // on chip only
  int32_t partitions = 1;       // iteration rows: partitions on chip, rows off chip
  int32_t scalar = -1;          // run-time scalar index, or -1
  MemSpace space = MemSpace::sbuf;
  DType dtype = DType::fp32;
  uint8_t num_free = 0;

  bool valid() const { return buffer >= 0; }
  int64_t free_elements() const;  // product of free sizes (1 when num_free == 0)
  int64_t elements() const { return int64_t{partitions} * free_elements(); }
  int64_t bytes() const { return elements() * dtype_bytes(dtype); }
  // Smallest and largest element offset touched along the free (and, off chip, row) dims,
  // excluding the scalar term. Empty when a size is zero. Overflow-checked.
  struct Span {
    int64_t lo;
    int64_t hi;
  };
  std::optional<Span> span() const;
  // True when two different iteration points may name the same element (writes forbid it).
  bool has_aliasing() const;
  // Innermost stride in bytes (the vector engines' access-cost input).
  int64_t inner_stride_bytes() const;

  bool operator==(const AccessPattern& o) const;
  bool operator!=(const AccessPattern& o) const { return !(*this == o); }
};

}  // namespace wallsim::isa
