// The matmul family's blocking decisions: how a matmul's output, A and B are cut to fit SBUF
// and PSUM (narrow column blocks, streamed panels of B, K-blocked slabs, K-interleaved B) and
// how large a batch_matmul's B chunks are. Pure queries of the context: nothing is emitted or
// allocated here (lower_matmul.cpp emits what they decide).
#include "lowering/matmul_blocking.h"

#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

MatmulBlocking matmul_blocking(const LoweringContext& ctx, const Node& n) {
  MatmulBlocking b;
  b.narrow = narrow_matmul(ctx, n);
  b.streams_b = streams_b(ctx, n);
  b.block_cols = b.streams_b ? panel_cols(ctx, n) : 0;
  b.slab_cols = slab_cols(ctx, n);
  b.slab_block = slab_block_cols(ctx, n);
  b.slab_ring = slab_ring(ctx, n);
  b.k_interleave = k_interleave(ctx, n);
  return b;
}

int64_t moving_cols(const LoweringContext& ctx) {
  return std::min<int64_t>(ctx.arch().tensor.moving_free_max, ctx.arch().psum.bank_bytes / 4);
}

// Bytes per partition one output row tile of a matmul needs besides B: A's row (unless A is
// on chip), its A^T stationaries, and the output row (a narrow matmul: one column block).
int64_t row_tile_bytes(const LoweringContext& ctx, const Node& n, bool narrow) {
  const TensorType& a = ctx.type_of(n.inputs[0]);
  const int64_t k_bytes = SbufAllocator::aligned(view_of(a).cols * isa::dtype_bytes(a.dtype));
  const int64_t out_cols =
      narrow ? std::min(slab_block_cols(ctx, n), view_of(n.type).cols) : view_of(n.type).cols;
  const int64_t a_bytes =
      ctx.on_chip(n.inputs[0]) || (!narrow && stationary_route(ctx, n) != TransposeRoute::array)
          ? 0
          : (narrow ? SbufAllocator::aligned(ctx.tile_rows() * isa::dtype_bytes(a.dtype))
                    : k_bytes);
  return a_bytes + stationary_bytes(ctx, n) +
         SbufAllocator::aligned(out_cols * isa::dtype_bytes(n.type.dtype));
}

// A^T of one row tile: one stationary buffer (a row tile's worth of columns) per K chunk.
int64_t stationary_bytes(const LoweringContext& ctx, const Node& n) {
  const TensorType& a = ctx.type_of(n.inputs[0]);
  const int64_t chunks = ctx.tiling(view_of(a).cols, 1, DType::fp32).count();
  return chunks * SbufAllocator::aligned(ctx.tile_rows() * isa::dtype_bytes(a.dtype));
}

namespace {
// Bytes per partition of B's K chunks per column.
int64_t b_bytes_per_col(const LoweringContext& ctx, const Node& n) {
  const TensorType& b = ctx.type_of(n.inputs[1]);
  return ctx.tiling(view_of(b).rows, 1, DType::fp32).count() * isa::dtype_bytes(b.dtype);
}
}  // namespace

// A matmul is narrow when one output row tile at full width (A's row, A^T, the output row and
// two one-column panels, or B whole) does not fit a row window: its output is then computed
// and stored a column block at a time, and A's row is loaded a K chunk at a time.
bool narrow_matmul(const LoweringContext& ctx, const Node& n) {
  if (n.op != OpKind::matmul) return false;
  if (const MatmulSchedule* s = ctx.matmul_schedule(n.id)) return s->narrow;
  const int64_t b = streams_b(ctx, n) ? 2 * b_bytes_per_col(ctx, n)
                    : ctx.on_chip(n.inputs[1])
                        ? 0
                        : b_bytes_per_col(ctx, n) * view_of(ctx.type_of(n.inputs[1])).cols;
  return row_tile_bytes(ctx, n, false) + b >
         ctx.sbuf_capacity() * ctx.options().row_window_fill_percent / 100;
}

// Columns of one panel of a streamed B: the moving width, narrowed until two panels (double
// buffering) fit the panel share of SBUF and, with one output row tile (and a fused bias row),
// SBUF itself. The fill share applies to the SBUF left beside A^T and the output row; A's row
// tile (when it is loaded for the op) must fit beside the panels too.
int64_t panel_cols(const LoweringContext& ctx, const Node& n) {
  const View v = view_of(ctx.type_of(n.inputs[1]));
  if (const MatmulSchedule* s = ctx.matmul_schedule(n.id))
    return std::max<int64_t>(1, std::min(s->panel_cols, v.cols));
  const int64_t per_col = b_bytes_per_col(ctx, n);
  const bool narrow = narrow_matmul(ctx, n);
  const int64_t row_tile = row_tile_bytes(ctx, n, narrow);
  const int64_t a_row =
      ctx.on_chip(n.inputs[0]) || (!narrow && stationary_route(ctx, n) != TransposeRoute::array)
          ? 0
          : SbufAllocator::aligned(
                (narrow ? ctx.tile_rows() : view_of(ctx.type_of(n.inputs[0])).cols) *
                isa::dtype_bytes(ctx.type_of(n.inputs[0]).dtype));
  int64_t bias = 0;
  if (n.inputs.size() > 2) {
    const TensorType& bt = ctx.type_of(n.inputs[2]);
    bias = SbufAllocator::aligned(view_of(bt).cols * isa::dtype_bytes(bt.dtype));
  }
  const int64_t room = std::min(
      (ctx.sbuf_capacity() - (row_tile - a_row)) * ctx.options().row_window_fill_percent / 100,
      ctx.sbuf_capacity() - row_tile - bias);
  const int64_t fit =
      std::min(ctx.sbuf_share(ctx.options().panel_pair_percent), room) / (2 * per_col);
  return std::max<int64_t>(1, std::min({moving_cols(ctx), v.cols, fit}));
}

// Bytes per partition of one panel of a matmul's B: every K chunk of one column block.
int64_t panel_bytes(const LoweringContext& ctx, const Node& n) {
  const TensorType& b = ctx.type_of(n.inputs[1]);
  const View v = view_of(b);
  return ctx.tiling(v.rows, 1, DType::fp32).count() * panel_cols(ctx, n) *
         isa::dtype_bytes(b.dtype);
}

// K-blocked B (a narrow matmul whose full-K panels would be narrower than the moving width:
// K = 4096 bf16 on tiny's 16 KiB partitions leaves panels of 11 columns, and 4096^3 needs 12 M
// instructions). B then streams by slabs of one K chunk x a group of column blocks through a
// ring of kSlabs buffers, and every block of the group accumulates over K in its own PSUM
// bank: the array's work in full-width matmuls. Plain B in HBM, no fused bias or epilogue. A
// schedule point may take narrower blocks (several to a bank, slab_slots), a deeper ring, and
// groups as wide as one turn of its window's row tiles leaves slots for.
int64_t slab_cols(const LoweringContext& ctx, const Node& n) {
  if (n.inputs.size() > 2 || n.int_attr(kEpilogueAct) || ctx.is_view(n.inputs[1]) ||
      !narrow_matmul(ctx, n) || !streams_b(ctx, n))
    return 0;
  const int64_t N = view_of(n.type).cols, width = std::min(moving_cols(ctx), N);
  const MatmulSchedule* s = ctx.matmul_schedule(n.id);
  if (s ? !s->k_blocked : panel_cols(ctx, n) >= width) return 0;
  const int64_t dt = isa::dtype_bytes(ctx.type_of(n.inputs[1]).dtype);
  const int64_t room = (ctx.sbuf_capacity() - row_tile_bytes(ctx, n, true)) *
                       ctx.options().row_window_fill_percent / 100;
  const int64_t block = std::min(slab_block_cols(ctx, n), width), ring = slab_ring(ctx, n);
  const int64_t slots = slab_slots(ctx.psum_bank_count(), moving_cols(ctx), block, N);
  // A schedule point's turns of row tiles share the slots: a slab covers one turn's blocks.
  int64_t blocks = s && s->window_tiles > 0
                       ? std::max<int64_t>(1, slots / std::min(slots, s->window_tiles))
                       : slots;
  while (blocks > 1 && ring * blocks * block * dt > room) --blocks;
  if (ring * blocks * block * dt > room) return 0;
  return std::min(N, blocks * block);
}

int64_t slab_ring_bytes(const LoweringContext& ctx, const Node& n) {
  return slab_ring(ctx, n) *
         SbufAllocator::aligned(slab_cols(ctx, n) *
                                isa::dtype_bytes(ctx.type_of(n.inputs[1]).dtype));
}

int64_t slab_block_cols(const LoweringContext& ctx, const Node& n) {
  const MatmulSchedule* s = ctx.matmul_schedule(n.id);
  return s && s->k_blocked ? std::max<int64_t>(1, std::min(s->panel_cols, moving_cols(ctx)))
                           : moving_cols(ctx);
}

int64_t slab_ring(const LoweringContext& ctx, const Node& n) {
  const MatmulSchedule* s = ctx.matmul_schedule(n.id);
  return s && s->k_blocked ? std::max<int64_t>(2, s->buffers) : kSlabs;
}

// A 2-D view of B whose panels load as DMA rows with one free dim (a transposed weight, as
// PyTorch's nn.Linear and a tied output head write it): streamed by strided panels.
static bool streamable_view(const LoweringContext& ctx, int32_t b) {
  if (!ctx.is_view(b)) return true;
  const ViewDesc v = ctx.view_of_value(b);
  return v.groups.size() == 2 && LoweringContext::view_rows(v, false).free.size() == 1;
}

// A matmul streams B by panels when B is large and not on chip already, or when its schedule
// point (matmul_search.cpp) streams a B that fits.
bool streams_b(const LoweringContext& ctx, const Node& n) {
  const int32_t b = n.inputs[1];
  if (ctx.on_chip(b) || !streamable_view(ctx, b)) return false;
  if (const MatmulSchedule* s = ctx.matmul_schedule(n.id); s && !s->conv_window) return !s->b_whole;
  const TensorType& bt = ctx.type_of(b);
  const View bv = view_of(bt);
  const int64_t bytes =
      ctx.tiling(bv.rows, 1, DType::fp32).count() * bv.cols * isa::dtype_bytes(bt.dtype);
  return bytes > ctx.sbuf_share(ctx.options().streamed_operand_percent);
}

int64_t panel_buffers(const LoweringContext& ctx, const Node& n) {
  const MatmulSchedule* s = ctx.matmul_schedule(n.id);
  return s && !s->k_blocked && !s->conv_window ? std::max<int64_t>(2, s->buffers) : 2;
}

// K interleave. A weight B [K x N] (row-major in HBM) loaded by row tiles moves one DMA chunk
// per row: a 768-wide bf16 row is 1536 B, which timing.dma.chunk_overhead_bytes (512 B) charges
// a third more, so sixteen engines move less than HBM gives. Loaded instead as its bytes
// [K / g x g * N] (LoweringContext::interleaved_tiles_of picks g), partition p of tile t holds
// B's rows t * 128g + p * g ... + g - 1, one contiguous run; K chunk k is column block k % g of
// tile k / g, contracted against A's columns (k / g) * 128g + k % g, + g, ... (a strided read of
// A's row tile by the transpose that makes the stationary). Returns K / tile rows, or 0: for a
// matmul with one row tile of A whose B is a graph input read by it alone, loaded whole.
int64_t k_interleave(const LoweringContext& ctx, const Node& n) {
  if (!ctx.options().matmul_k_interleave || n.op != OpKind::matmul || n.inputs.size() < 2) return 0;
  const int32_t b = n.inputs[1];
  const Node& bn = ctx.node(b);
  if (bn.op != OpKind::input || bn.type.dims.size() != 2 || ctx.is_view(b) || ctx.on_chip(b) ||
      ctx.use_count(b) != 1)
    return 0;
  const View bv = view_of(bn.type), av = view_of(ctx.type_of(n.inputs[0]));
  const int64_t rows = ctx.tile_rows();
  if (av.rows > rows || bv.rows % rows != 0 || bv.rows / rows < 2) return 0;
  if (bv.cols * isa::dtype_bytes(bn.type.dtype) >= ctx.options().dma_min_chunk_bytes) return 0;
  if (ctx.window_col0(b) != 0 || ctx.window_cols(b, bv.cols) != bv.cols) return 0;
  if (streams_b(ctx, n) || narrow_matmul(ctx, n)) return 0;
  // A transposed view takes its stationaries from its base's rows unless B is K-interleaved
  // (then A's row tiles load element by element: trn1 80 x 15616 x 22 A^T, 185x its twin).
  if (stationary_route(ctx, n) == TransposeRoute::base) return 0;
  return bv.rows / rows;
}

bool transposes_b(const Node& n) {
  const int64_t* tb = n.int_attr("transpose_b");
  return tb && *tb != 0;
}

ViewDesc bmm_b_view(const LoweringContext& ctx, const Node& n) {
  ViewDesc v = ctx.view_of_value(n.inputs[1]);
  if (transposes_b(n)) std::swap(v.groups[1], v.groups[2]);
  return v;
}

// Chunks cover whole inner sub-dims of the batch dim (a reshape may have merged two dims).
int64_t bmm_chunk_entries(const LoweringContext& ctx, const Node& n) {
  const Node& an = ctx.node(n.inputs[0]);
  const Node& bn = ctx.node(n.inputs[1]);
  if (n.op != OpKind::batch_matmul || an.type.dims.size() != 3 || bn.type.dims.size() != 3)
    return 0;
  if (ctx.on_chip(bn.id) && !transposes_b(n)) return 0;  // already on chip
  const ViewDesc v = bmm_b_view(ctx, n);
  const int64_t batches = bn.type.dims[0].size;
  const int64_t K = an.type.dims[2].size, N = n.type.dims[2].size;
  const int64_t rows = ctx.tile_rows();
  const int64_t entry = (K + rows - 1) / rows * N * isa::dtype_bytes(bn.type.dtype);
  const int64_t share = ctx.sbuf_share(ctx.options().streamed_operand_percent);
  if (batches < 2 || entry * batches <= share) return 0;
  const int64_t inner = inner_size(v.groups[0]);
  const int64_t fit = std::max<int64_t>(1, share / entry);
  return std::max<int64_t>(inner, fit / inner * inner);
}

}  // namespace wallsim::compiler_stub::lowering
