// The indirect-access family: embedding (a gather by row ids), index_copy (a scatter by row
// ids into a cache, in place) and dynamic_update_slice (a write at a run-time position, in
// place). Ids and caches live in HBM; DMA descriptors do the addressing.
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

int32_t cache_root(const Graph& g, int32_t id) {
  for (const Node* n = g.find(id); info(n->op).result == OpResult::in_place; n = g.find(id)) {
    id = n->inputs[0];
  }
  return id;
}

namespace {

// out[i, :] = table[ids[i], :]: the ids are loaded one per partition, then one gather
// descriptor per row tile fetches the rows they name.
LowerResult lower_embedding(LoweringContext& ctx, const Node& n) {
  const int32_t table = n.inputs[0], ids = n.inputs[1];
  if (ctx.in_group(ids) || ctx.is_view(ids)) {
    return ctx.error("embedding ids computed on the chip are not supported yet");
  }
  // A view (a reshaped table) is copied into its own tensor first.
  if (!ctx.ensure_hbm(table)) return ctx.error("the table must be a tensor in HBM");
  auto out = ctx.output_tiles(n);
  if (!out) return ctx.no_room();
  auto idx = ctx.new_tiles_like(*out, 1, DType::int32, "ids");
  if (!idx) return ctx.no_room();
  const Node& tn = ctx.node(table);
  const View tv = view_of(tn.type);
  Slot ids_hbm = ctx.hbm_tensor(ids, isa::TensorRole::input);
  Slot table_hbm = ctx.hbm_tensor(table, isa::TensorRole::input);
  for (int64_t t = 0; t < out->count(); ++t) {
    const int queue = ctx.next_load_queue();
    ctx.dma(queue, ctx.tile_ap(*idx, t, 0, 1), ctx.ids_ap(ids_hbm, *out, t));
    Instruction g;
    g.op = Opcode::dma_gather;
    g.dst = ctx.tile_ap(*out, t, 0, out->cols);
    g.src[0] =
        ctx.hbm_ap(table_hbm, tn.type.dtype, tv, 0, static_cast<int32_t>(tv.rows), 0, tv.cols);
    g.src[1] = ctx.tile_ap(*idx, t, 0, 1);
    ctx.emit(queue, g);
  }
  ctx.count_bytes_in(out->stored_rows() * (4 + out->cols * isa::dtype_bytes(out->dtype)));
  ctx.release(*idx);
  return std::nullopt;
}

// A paged KV write: dst[ids[i], :] = src[i, :]. The ids are loaded one per partition, then
// one scatter descriptor per row tile of src writes the rows they name into dst's own HBM
// tensor; the result aliases dst (value_name()).
LowerResult lower_index_copy(LoweringContext& ctx, const Node& n) {
  const int32_t dst = cache_root(ctx.graph(), n.inputs[0]), ids = n.inputs[1];
  const Node& dn = ctx.node(dst);
  if (dn.op != OpKind::input) return ctx.error("dst must be a graph input (a cache in HBM)");
  if (ctx.in_group(ids) || ctx.is_view(ids)) {
    return ctx.error("index_copy ids computed on the chip are not supported yet");
  }
  Slot ids_hbm = ctx.hbm_tensor(ids, isa::TensorRole::input);
  Slot cache = ctx.hbm_tensor(dst, isa::TensorRole::inout);
  ctx.builder().set_role(cache, isa::TensorRole::inout);
  const View cv = view_of(dn.type);
  auto scatter = [&](const Tiles& src) -> LowerResult {
    auto idx = ctx.new_tiles_like(src, 1, DType::int32, "ids");
    if (!idx) return ctx.no_room();
    for (int64_t t = 0; t < src.count(); ++t) {
      const int queue = ctx.next_store_queue();
      ctx.dma(queue, ctx.tile_ap(*idx, t, 0, 1), ctx.ids_ap(ids_hbm, src, t));
      Instruction s;
      s.op = Opcode::dma_scatter;
      s.dst = ctx.hbm_ap(cache, dn.type.dtype, cv, 0, static_cast<int32_t>(cv.rows), 0, cv.cols);
      s.src[0] = ctx.tile_ap(src, t, 0, src.cols);
      s.src[1] = ctx.tile_ap(*idx, t, 0, 1);
      ctx.emit(queue, s);
    }
    ctx.count_bytes_out(src.stored_rows() * (4 + src.cols * isa::dtype_bytes(dn.type.dtype)));
    ctx.release(*idx);
    return std::nullopt;
  };
  const int32_t sid = n.inputs[2];
  if (ctx.on_chip(sid)) {
    if (auto e = scatter(*ctx.tiles_of(sid))) return e;
  } else {
    // Not on chip: a window of row tiles at a time, each loaded, scattered and freed.
    const TensorType& st = ctx.type_of(sid);
    const View sv = view_of(st);
    const int64_t tiles = ctx.tiling(sv.rows, sv.cols, st.dtype, run_of(st)).count();
    const int64_t per_tile = sv.cols * isa::dtype_bytes(st.dtype) + 4;
    const int64_t w =
        std::max<int64_t>(1, ctx.sbuf_share(ctx.options().row_window_fill_percent) / per_tile);
    for (int64_t t0 = 0; t0 < tiles; t0 += w) {
      auto src = ctx.load_tiles(sid, t0, std::min(tiles, t0 + w));
      if (!src) return ctx.no_room();
      if (auto e = scatter(*src)) return e;
      ctx.release(*src);
    }
  }
  ctx.alias_hbm(n.id, cache);
  return std::nullopt;
}

// A KV append: the update's rows are written into the cache's own HBM tensor at the run-time
// position, by DMA with a scalar offset. The result aliases the cache (value_name()).
LowerResult lower_update_slice(LoweringContext& ctx, const Node& n) {
  const int32_t dst = cache_root(ctx.graph(), n.inputs[0]);
  const Node& dn = ctx.node(dst);
  const int64_t* axis = n.int_attr("axis");
  if ((axis && *axis != 0) || dn.op != OpKind::input || dn.type.dims.size() != 2) {
    return ctx.error(
        "only appends along axis 0 of a 2-D graph input (a cache in HBM) are supported");
  }
  const std::string* scalar_name = n.text_attr("scalar");
  auto scalar = scalar_name ? ctx.plan_scalar(*scalar_name) : std::nullopt;
  if (!scalar) return ctx.error("needs a declared run-time scalar position");
  auto upd = ctx.tiles_of(n.inputs[1]);
  if (!upd) return ctx.no_room();
  Slot cache = ctx.hbm_tensor(dst, isa::TensorRole::inout);
  ctx.builder().set_role(cache, isa::TensorRole::inout);
  // An attention that splices the new row on chip reads the cache's old rows: loaded now,
  // before the write (which then waits for the load, not the attention for the write), as a
  // plan-written tensor's load is: in short pieces on the dependent queues, spread over the
  // engines, not behind the weights prefetched for later ops.
  if (spliced_by_attention(ctx, n) && !ctx.tiles_of(n.inputs[0])) return ctx.no_room();
  const int64_t row_elems = dn.type.dims[1].size;
  const View cv{dn.type.dims[0].size, row_elems};
  for (int64_t t = 0; t < upd->count(); ++t) {
    AccessPattern d =
        ctx.hbm_ap(cache, dn.type.dtype, cv, upd->row0(t), upd->rows_in(t), 0, cv.cols);
    d.scalar = *scalar;
    d.scalar_stride = row_elems;
    ctx.dma(ctx.next_store_queue(), d, ctx.tile_ap(*upd, t, 0, upd->cols));
  }
  ctx.count_bytes_out(upd->stored_rows() * upd->cols * isa::dtype_bytes(dn.type.dtype));
  ctx.alias_hbm(n.id, cache);
  return std::nullopt;
}

}  // namespace

void populate_indirect_lowerings(LoweringTable& table) {
  table.add(OpKind::embedding, lower_embedding);
  table.add(OpKind::index_copy, lower_index_copy);
  table.add(OpKind::dynamic_update_slice, lower_update_slice);
}

}  // namespace wallsim::compiler_stub::lowering
