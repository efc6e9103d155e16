// The layout family: transpose, reshape, slice and concat. On chip where the data allows (a
// 2-D transpose through the array, a slice or concat along the last axis by vector copies);
// otherwise as strided views of a tensor in HBM, read by whoever consumes them.
#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {
namespace {

int64_t axis_of(const Node& n) {
  const int64_t rank = static_cast<int64_t>(n.type.dims.size());
  const int64_t* axis = n.int_attr("axis");
  return axis ? (*axis < 0 ? *axis + rank : *axis) : 0;
}

// A reshape of a view: regroups its sub-dims by the new dims' sizes.
LowerResult reshape_view(LoweringContext& ctx, const Node& n, ViewDesc& v) {
  std::vector<SubDim> flat;
  for (const auto& g : v.groups) {
    for (const SubDim& d : g) {
      if (d.size != 1) flat.push_back(d);
    }
  }
  ViewDesc r;
  r.base = v.base;
  r.offset = v.offset;
  size_t next = 0;
  const char* unsupported = "this reshape of a strided view is not supported";
  for (const Dim& d : n.type.dims) {
    int64_t need = d.size;
    std::vector<SubDim> group;
    while (need > 1) {
      if (next >= flat.size()) return ctx.error(unsupported);
      SubDim& f = flat[next];
      if (f.size <= need) {
        if (need % f.size) return ctx.error(unsupported);
        group.push_back(f);
        need /= f.size;
        ++next;
      } else {
        if (f.size % need) return ctx.error(unsupported);
        group.push_back({need, f.stride * (f.size / need)});
        f.size /= need;
        need = 1;
      }
    }
    if (group.empty()) group.push_back({1, 0});
    r.groups.push_back(group);
  }
  v = r;
  return std::nullopt;
}

// Reshape, transpose or slice as a view of the operand's HBM tensor: no instruction until a
// consumer loads it (or the group stores it).
LowerResult lower_view(LoweringContext& ctx, const Node& n) {
  ViewDesc v = ctx.view_of_value(n.inputs[0]);
  if (n.op == OpKind::slice) {
    // [start, limit) of one dim: its outermost sub-dim, when the range covers whole inner
    // sub-dims (always so for a dim that no reshape merged).
    const size_t a = static_cast<size_t>(axis_of(n));
    const int64_t start = n.int_attr("start") ? *n.int_attr("start") : 0;
    const int64_t len = n.type.dims.at(a).size;
    auto& group = v.groups.at(a);
    const int64_t inner = inner_size(group);
    if (start % inner || len % inner)
      return ctx.error("this slice of a merged dimension is not supported");
    v.offset += start / inner * group[0].stride;
    group[0].size = len / inner;
  } else if (n.op == OpKind::transpose) {
    const auto* perm = n.ints_attr("perm");
    if (!perm || perm->size() != v.groups.size()) return ctx.error("bad permutation");
    ViewDesc t;
    t.base = v.base;
    t.offset = v.offset;
    for (int64_t p : *perm) t.groups.push_back(v.groups.at(static_cast<size_t>(p)));
    v = t;
  } else if (auto e = reshape_view(ctx, n, v)) {
    // A reshape whose dims do not nest in the operand's: a strided view is copied into its own
    // tensor first; a row-major tensor is any shape of the same size.
    const int32_t in = n.inputs[0];
    if (ctx.is_view(in) && !ctx.ensure_hbm(in)) return e;
    v = ViewDesc{};
    v.base = in;
    int64_t stride = 1;
    v.groups.resize(n.type.dims.size());
    for (size_t i = n.type.dims.size(); i-- > 0;) {
      v.groups[i] = {{n.type.dims[i].size, stride}};
      stride *= n.type.dims[i].size;
    }
  }
  if (!ctx.ensure_hbm(v.base)) return ctx.no_room();
  ctx.set_view(n.id, v);
  return std::nullopt;
}

// [R x C] -> [C x R]: each (row tile, column chunk) block goes through the array.
LowerResult transpose_on_chip(LoweringContext& ctx, const Node& n) {
  const auto* perm = n.ints_attr("perm");
  const size_t rank = n.type.dims.size();
  if (!perm || rank != 2 || (*perm)[0] != 1 || (*perm)[1] != 0) {
    return ctx.error("only 2-D transposes are supported by the lowering yet");
  }
  if (!isa::is_float(n.type.dtype)) return ctx.error("the array transposes float values only");
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  for (int64_t t = 0; t < in->count(); ++t) {
    const int32_t rows = in->rows_in(t);
    for (int64_t c = 0; c < out->count(); ++c) {  // output tile c = input columns of chunk c
      const int32_t cols = out->rows_in(c);
      const AccessPattern tp = ctx.psum_ap(ctx.next_bank(), cols, rows);
      ctx.emit_transpose(tp, ctx.tile_ap(*in, t, out->row0(c), cols));
      ctx.evacuate(ctx.tile_ap(*out, c, in->row0(t), rows), tp);
    }
  }
  return std::nullopt;
}

// On chip and 2-D: through the array. Otherwise a strided read of HBM.
LowerResult lower_transpose(LoweringContext& ctx, const Node& n) {
  if (n.type.dims.size() == 2 && ctx.on_chip(n.inputs[0]) && !ctx.is_view(n.inputs[0])) {
    return transpose_on_chip(ctx, n);
  }
  return lower_view(ctx, n);
}

// Columns [start, limit) of the last axis of an on-chip value: a copy on the vector engine.
// Otherwise a view that reads only the slice from HBM.
LowerResult lower_slice(LoweringContext& ctx, const Node& n) {
  if (axis_of(n) + 1 != static_cast<int64_t>(n.type.dims.size()) || !ctx.on_chip(n.inputs[0]) ||
      ctx.in_window()) {
    return lower_view(ctx, n);
  }
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  const int64_t start = n.int_attr("start") ? *n.int_attr("start") : 0;
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    Instruction copy = LoweringContext::vec(Opcode::tensor_copy, ctx.tile_ap(*out, t, c0, nc));
    copy.src[0] = ctx.tile_ap(*in, t, start + c0, nc);
    ctx.emit(ctx.stream(Engine::vector), copy);
  });
  return std::nullopt;
}

LowerResult concat_in_hbm(LoweringContext& ctx, const Node& n, int64_t axis) {
  // Output viewed as [outer, total x inner]: input i fills columns [at_i, at_i + len_i) of
  // every row, with len_i = its axis size x inner.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= n.type.dims[d].size;
  for (size_t d = static_cast<size_t>(axis) + 1; d < n.type.dims.size(); ++d)
    inner *= n.type.dims[d].size;
  const int64_t total = n.type.dims[axis].size * inner;
  const isa::TensorRole role =
      ctx.needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch;
  Slot dst = ctx.hbm_tensor(n.id, role);
  const int64_t T = ctx.tile_rows();
  int64_t at = 0;
  for (int32_t id : n.inputs) {
    if (!ctx.ensure_hbm(id)) return ctx.no_room();  // a view is materialised first
    const Node& in = ctx.node(id);
    const int64_t len = in.type.dims[axis].size * inner;
    Slot src = ctx.hbm_tensor(id, isa::TensorRole::input);
    for (int64_t r0 = 0; r0 < outer; r0 += T) {
      const int32_t rows = static_cast<int32_t>(std::min<int64_t>(T, outer - r0));
      ctx.dma(ctx.next_store_queue(),
              ctx.hbm_ap(dst, n.type.dtype, View{outer, total}, r0, rows, at, len),
              ctx.hbm_ap(src, in.type.dtype, View{outer, len}, r0, rows, 0, len));
    }
    ctx.count_bytes_in(outer * len * isa::dtype_bytes(in.type.dtype));
    ctx.count_bytes_out(outer * len * isa::dtype_bytes(n.type.dtype));
    at += len;
  }
  ctx.alias_hbm(n.id, dst);
  return std::nullopt;
}

// Along the last axis: copies into the output's tiles on the vector engine. Along another
// axis: each input is copied, HBM to HBM, into its place in the output's tensor; consumers
// load the result from there.
LowerResult lower_concat(LoweringContext& ctx, const Node& n) {
  const int64_t rank = static_cast<int64_t>(n.type.dims.size());
  const int64_t a = axis_of(n);
  if (a != rank - 1) return concat_in_hbm(ctx, n, a);
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  int64_t col = 0;
  for (int32_t id : n.inputs) {
    auto in = ctx.tiles_of(id);
    if (!in) return ctx.no_room();
    if (!in->same_tiling(*out)) return ctx.error("operands are tiled differently");
    for (int64_t t = 0; t < out->count(); ++t) {
      for (int64_t c0 = 0; c0 < in->cols; c0 += ctx.free_chunk()) {
        const int64_t nc = std::min(ctx.free_chunk(), in->cols - c0);
        Instruction cp =
            LoweringContext::vec(Opcode::tensor_copy, ctx.tile_ap(*out, t, col + c0, nc));
        cp.src[0] = ctx.tile_ap(*in, t, c0, nc);
        ctx.emit(ctx.stream(Engine::vector), cp);
      }
    }
    col += in->cols;
  }
  return std::nullopt;
}

}  // namespace

void populate_layout_lowerings(LoweringTable& table) {
  table.add(OpKind::transpose, lower_transpose);
  table.add(OpKind::reshape, lower_view);
  table.add(OpKind::slice, lower_slice);
  table.add(OpKind::concat, lower_concat);
}

}  // namespace wallsim::compiler_stub::lowering
