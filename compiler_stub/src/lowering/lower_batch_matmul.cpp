// batch_matmul through the systolic array: per batch entry, A's row tiles times B's K chunks
// (matmul_block), B resident, loaded transposed through the array where that is priced cheaper,
// or streamed by chunks of batch entries.
#include "lowering/matmul_blocking.h"
#include "lowering/matmul_parts.h"

namespace wallsim::compiler_stub::lowering {

namespace {

// batch_matmul with B streamed: for A's batches in order, B's entries are loaded a chunk at a
// time (a slice of its batch dim) and released when A moves past them.
LowerResult batch_matmul_streamed(LoweringContext& ctx, const Node& n, const Tiles& a,
                                  int64_t chunk) {
  const Node& bn = ctx.node(n.inputs[1]);
  const int64_t M = ctx.type_of(n.inputs[0]).dims[1].size;
  const int64_t K = ctx.type_of(n.inputs[0]).dims[2].size;
  const int64_t batches = bn.type.dims[0].size;
  ViewDesc v = bmm_b_view(ctx, n);
  if (!ctx.ensure_hbm(v.base)) return ctx.no_room();
  auto out = ctx.output_tiles(n, &a);
  if (!out) return ctx.no_room();
  std::optional<Tiles> b;
  int64_t loaded = -1;  // first entry of the loaded chunk
  Moving moving;
  for (int64_t t0 = 0; t0 < a.count();) {
    const int64_t batch = a.row0(t0) / M;
    std::vector<int64_t> ts;
    for (; t0 < a.count() && a.row0(t0) / M == batch; ++t0) {
      if ((a.row0(t0) + a.rows_in(t0) - 1) / M != batch)
        return ctx.error("A's row tiles cross batch boundaries");
      ts.push_back(t0);
    }
    const int64_t first = batch / chunk * chunk;
    if (first != loaded) {
      if (b) ctx.release(*b);
      ViewDesc c = v;
      auto& g0 = c.groups[0];
      const int64_t inner = inner_size(g0);
      const int64_t count = std::min(chunk, batches - first);
      c.offset += first / inner * g0[0].stride;
      g0[0].size = count / inner;
      b = c.groups[0].size() == 1 && batch_b_route(ctx, n, c) == TransposeRoute::array
              ? load_batch_b_by_array(ctx, c, bn.type.dtype)
              : ctx.load_view(c, bn.type.dtype);
      if (!b) return ctx.no_room();
      loaded = first;
      moving.tiles = *b;
    }
    std::vector<int64_t> kc;
    for (int64_t k = 0; k < b->count(); ++k) {
      if (b->row0(k) / K == batch - first) kc.push_back(k);
    }
    if (auto e = matmul_block(ctx, a, ts, moving, kc, (batch - first) * K, *out)) return e;
  }
  if (b) ctx.release(*b);
  return std::nullopt;
}

}  // namespace

// [B, M, K] x [B, K, N] (or [B, N, K] with transpose_b): per batch, the rows of A's tiles in
// that batch times B's tiles in that batch. Both tilings must respect the batch boundaries.
LowerResult lower_batch_matmul(LoweringContext& ctx, const Node& n) {
  const Node& an = ctx.node(n.inputs[0]);
  const Node& bn = ctx.node(n.inputs[1]);
  if (an.type.dims.size() != 3 || bn.type.dims.size() != 3) {
    return ctx.error("batch_matmul lowers 3-D operands only");
  }
  const int64_t M = an.type.dims[1].size;
  const bool transpose_b = transposes_b(n);
  const int64_t K = an.type.dims[2].size;
  auto a = ctx.tiles_of(an.id);
  if (!a) return ctx.no_room();
  if (const int64_t chunk = bmm_chunk_entries(ctx, n)) {
    return batch_matmul_streamed(ctx, n, *a, chunk);
  }
  std::optional<Tiles> b;
  bool own_b = transpose_b;  // loaded for this op alone (released after it)
  if (transpose_b) {
    ViewDesc v = ctx.view_of_value(bn.id);
    std::swap(v.groups[1], v.groups[2]);
    if (!ctx.ensure_hbm(v.base)) return ctx.no_room();
    b = batch_b_route(ctx, n, v) == TransposeRoute::array
            ? load_batch_b_by_array(ctx, v, bn.type.dtype)
            : ctx.load_view(v, bn.type.dtype);
  } else if (ctx.is_view(bn.id) && !ctx.on_chip(bn.id) &&
             batch_b_route(ctx, n, ctx.view_of_value(bn.id)) == TransposeRoute::array) {
    b = load_batch_b_by_array(ctx, ctx.view_of_value(bn.id), bn.type.dtype);
    own_b = true;
  } else {
    b = ctx.tiles_of(bn.id);
  }
  if (!b) return ctx.no_room();
  auto within = [](const Tiles& x, int64_t t, int64_t block) {
    return x.row0(t) / block == (x.row0(t) + x.rows_in(t) - 1) / block;
  };
  for (int64_t t = 0; t < a->count(); ++t) {
    if (!within(*a, t, M)) return ctx.error("A's row tiles cross batch boundaries");
  }
  for (int64_t t = 0; t < b->count(); ++t) {
    if (!within(*b, t, K)) return ctx.error("B's row tiles cross batch boundaries");
  }
  auto out = ctx.output_tiles(n, &*a);
  if (!out) return ctx.no_room();
  Moving moving;
  moving.tiles = *b;
  for (int64_t t0 = 0; t0 < a->count();) {  // one batch at a time
    const int64_t batch = a->row0(t0) / M;
    std::vector<int64_t> ts, kc;
    for (; t0 < a->count() && a->row0(t0) / M == batch; ++t0) ts.push_back(t0);
    for (int64_t k = 0; k < b->count(); ++k) {
      if (b->row0(k) / K == batch) kc.push_back(k);
    }
    if (auto e = matmul_block(ctx, *a, ts, moving, kc, batch * K, *out)) return e;
  }
  if (own_b) ctx.release(*b);
  return std::nullopt;
}

}  // namespace wallsim::compiler_stub::lowering
