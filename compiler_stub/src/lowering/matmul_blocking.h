// The matmul family's blocking decisions (matmul_blocking.cpp), apart from their emission
// (lower_matmul.cpp): what a schedule search ranks, and what the row-window footprint asks of
// the family. Each is a query of the context at the op's start; none emits or allocates.
#pragma once

#include <algorithm>

#include <cstdint>

#include "lowering/value_store.h"
#include "wallsim/compiler_stub/graph.h"

namespace wallsim::compiler_stub::lowering {

class LoweringContext;

// One matmul's blocking, as lower_matmul takes it at the op's start (before A's row tiles are
// loaded: in a row window, loading them would make A look resident and the panels wider than
// the window's footprint allowed).
struct MatmulBlocking {
  bool narrow = false;       // narrow_matmul: the output by column blocks, stored as made
  bool streams_b = false;    // streams_b: B by panels (or slabs) from HBM
  int64_t block_cols = 0;    // panel_cols when B streams, else 0
  int64_t slab_cols = 0;     // slab_cols: K-blocked B, else 0
  int64_t slab_block = 0;    // slab_block_cols: K-blocked, an output block's columns
  int64_t slab_ring = 0;     // slab_ring: K-blocked, the slabs in the ring
  int64_t k_interleave = 0;  // k_interleave: KT when B loads K-interleaved, else 0
};
MatmulBlocking matmul_blocking(const LoweringContext& ctx, const Node& n);

// Columns per moving operand: the array's limit and one PSUM bank of fp32.
int64_t moving_cols(const LoweringContext& ctx);
// Whether a matmul streams B by panels, the panel width, and one panel's bytes per partition.
bool streams_b(const LoweringContext& ctx, const Node& n);
int64_t panel_cols(const LoweringContext& ctx, const Node& n);
int64_t panel_bytes(const LoweringContext& ctx, const Node& n);
// Panels of a streamed B loaded at a time (the current one and those ahead of it): the schedule
// point's buffers, else two (double buffering).
int64_t panel_buffers(const LoweringContext& ctx, const Node& n);
// Whether a matmul's output row tile is too wide for SBUF: it then runs by column blocks.
bool narrow_matmul(const LoweringContext& ctx, const Node& n);
// KT (K / tile rows) when a matmul's B is loaded K-interleaved (Tiles::k_group), else 0.
int64_t k_interleave(const LoweringContext& ctx, const Node& n);
// Bytes per partition one output row tile of a matmul needs besides B.
int64_t row_tile_bytes(const LoweringContext& ctx, const Node& n, bool narrow);
// Bytes per partition of one row tile's A^T stationaries (a buffer per K chunk).
int64_t stationary_bytes(const LoweringContext& ctx, const Node& n);
// A narrow matmul whose full-K panels would be narrower than the moving width streams B by
// slabs of one K chunk through a ring of kSlabs buffers: their columns (0 otherwise), and the
// bytes of their ring.
inline constexpr int64_t kSlabs = 4;
int64_t slab_cols(const LoweringContext& ctx, const Node& n);
int64_t slab_ring_bytes(const LoweringContext& ctx, const Node& n);
// K-blocked: the columns of one output block (the moving width; a schedule point's narrower
// block shares a PSUM bank with bank columns / block - 1 others, so a turn holds more row
// tiles), and the slabs in the ring (kSlabs; a point's `buffers`).
int64_t slab_block_cols(const LoweringContext& ctx, const Node& n);
int64_t slab_ring(const LoweringContext& ctx, const Node& n);
// Whether a batch_matmul reads B transposed (its transpose_b attribute), and B as it loads:
// [batch, K, N] (a transposed B is read as a strided view).
bool transposes_b(const Node& n);
ViewDesc bmm_b_view(const LoweringContext& ctx, const Node& n);
// Batch entries of B a batch_matmul loads at a time; 0 when it is loaded whole.
int64_t bmm_chunk_entries(const LoweringContext& ctx, const Node& n);

}  // namespace wallsim::compiler_stub::lowering
