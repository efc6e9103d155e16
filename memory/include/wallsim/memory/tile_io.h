// Tile I/O: reads and writes an access pattern's elements as a dense float matrix.
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "wallsim/isa/access_pattern.h"
#include "wallsim/isa/plan.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/memory/on_chip_store.h"
#include "wallsim/memory/tensor_store.h"

namespace wallsim::memory {

// Row p of a tile is iteration row p of the pattern (a partition on chip, a row off chip); its
// columns run over the free dims outermost-first (free[0] outermost), row-major.
using Tile = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Where an access pattern's `buffer` leads: SBUF/PSUM buffers are `plan->buffers[i]` within
// `sbuf`/`psum`; off-chip tensors are looked up in `tensors` by `plan->tensors[i].name`;
// `scalars` are the plan's run-time scalar values (may be null when no pattern uses one).
// The map does not own anything; a missing store a pattern needs is a MemoryError.
struct MemoryMap {
  OnChipStore* sbuf = nullptr;
  OnChipStore* psum = nullptr;
  TensorStore* tensors = nullptr;
  const isa::Plan* plan = nullptr;
  const std::vector<int64_t>* scalars = nullptr;
  // When set: the store name bound to each of the plan's tensors (a cached plan launched on
  // other tensors); else the plan's own names.
  const std::vector<std::string>* tensor_names = nullptr;
};

// Addressing follows isa/access_pattern.h. Each call checks the whole access once before
// touching memory and throws MemoryError (nothing read or written) when any element would fall
// outside the store, the buffer declaration (partitions and bytes) or the tensor, when a tensor
// is missing or its dtype differs from the pattern's, or when a scalar is unbound. Values are
// converted from/to the pattern's dtype (see dtype_convert.h). Writes through aliasing patterns
// (stride 0, overlapping dims) are not rejected: the iteration point visited last wins.

// Resizes `out` to [ap.partitions x ap.free_elements()] (no allocation when already that size).
void read_tile(const MemoryMap& map, const isa::AccessPattern& ap, Tile& out);
// `in` must be [ap.partitions x ap.free_elements()], else MemoryError.
void write_tile(const MemoryMap& map, const isa::AccessPattern& ap, const Tile& in);

// Gather/scatter by row: tile row p is row `rows[p]` of `table` (the pattern with its row
// index p replaced by rows[p]); each index must lie in [0, table.partitions). read_rows resizes
// `out` to [rows.size() x table.free_elements()]; write_rows requires `in` to have that shape.
// Repeated indices in a scatter: the later tile row wins.
void read_rows(const MemoryMap& map, const isa::AccessPattern& table,
               const std::vector<int64_t>& rows, Tile& out);
void write_rows(const MemoryMap& map, const isa::AccessPattern& table,
                const std::vector<int64_t>& rows, const Tile& in);

}  // namespace wallsim::memory
