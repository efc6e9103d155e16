// The layout family: transpose, reshape, slice and concat. On chip where the data allows (a
// 2-D transpose through the array, a slice or concat along the last axis by vector copies);
// otherwise as strided views of a tensor in HBM, read by whoever consumes them.
#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

bool transpose_rows_into(LoweringContext& ctx, const ViewDesc& v, DType dt, const Tiles& bt);

namespace {

// B of a batch_matmul as loaded, [batch, K, N], when it reads HBM transposed (K contiguous, N
// at a stride: K^T of attention, a transpose_b): the same bytes as [batch, N, K] rows.
std::optional<ViewDesc> untransposed(const ViewDesc& v) {
  if (v.groups.size() != 3) return std::nullopt;
  for (const auto& g : v.groups)
    if (g.size() != 1) return std::nullopt;
  const SubDim k = v.groups[1][0], cols = v.groups[2][0];
  if (k.stride != 1 || k.size < 2 || cols.size < 2 || cols.stride < k.size) return std::nullopt;
  ViewDesc u = v;
  std::swap(u.groups[1], u.groups[2]);
  return u;
}

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

// Tensor `base` in HBM, row-major, as `type`'s dims.
ViewDesc row_major(int32_t base, const TensorType& type) {
  ViewDesc v;
  v.base = base;
  int64_t stride = 1;
  v.groups.resize(type.dims.size());
  for (size_t i = type.dims.size(); i-- > 0;) {
    v.groups[i] = {{type.dims[i].size, stride}};
    stride *= type.dims[i].size;
  }
  return v;
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
    if (start % inner_size(v.groups.at(a)) || len % inner_size(v.groups.at(a))) {
      // Cutting through a merged dim's inner sub-dims (swin's window partition, issue 40): the
      // strided view is copied into its own tensor first, whose dims are all plain.
      const int32_t in = n.inputs[0];
      if (!ctx.is_view(in) || !ctx.ensure_hbm(in))
        return ctx.error("this slice of a merged dimension is not supported");
      v = row_major(in, ctx.type_of(in));
    }
    auto& group = v.groups.at(a);
    const int64_t inner = inner_size(group);
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
    v = row_major(in, n.type);
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

// `u` ([batch, N, K] rows, the untransposed view `n` reads) transposed into `n`'s HBM tensor
// [batch, K, N] by the array, `kb` output rows at a time: per block, each input row tile's
// [rows x kb] columns are loaded (two tiles held, so loads overlap transposes), transposed into
// the block's tiles through PSUM and released; the block is then stored and released.
bool transpose_blocks_to_hbm(LoweringContext& ctx, const Node& n, const ViewDesc& u, int64_t kb) {
  const DType dt = n.type.dtype;
  const int64_t batches = u.groups[0][0].size, N = u.groups[1][0].size, K = u.groups[2][0].size;
  const int64_t T = ctx.tile_rows();
  const Slot dst = ctx.hbm_tensor(
      n.id, ctx.needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch);
  const View out_view{batches * K, N};
  for (int64_t e = 0; e < batches; ++e) {
    for (int64_t k0 = 0; k0 < K; k0 += kb) {
      const int64_t kw = std::min(kb, K - k0);
      auto block = ctx.new_tiles(kw, N, dt, "tT");
      if (!block) return false;
      // The previous row tile is released only once the next is allocated: the next load lands
      // in other bytes and overlaps the previous tile's transposes.
      std::optional<Tiles> prev;
      for (int64_t r0 = 0; r0 < N; r0 += T) {
        const int64_t rows = std::min(T, N - r0);
        ViewDesc piece = u;  // rows [r0, r0 + rows) of entry e, columns [k0, k0 + kw)
        piece.offset += e * u.groups[0][0].stride + r0 * u.groups[1][0].stride + k0;
        piece.groups[0][0].size = 1;
        piece.groups[1][0].size = rows;
        piece.groups[2][0].size = kw;
        auto in = ctx.load_view(piece, dt);
        if (prev) ctx.release(*prev);
        if (!in) {
          ctx.release(*block);
          return false;
        }
        for (int64_t j = 0; j < block->count(); ++j) {
          const int32_t kc = block->rows_in(j);
          const AccessPattern tp = ctx.psum_ap(ctx.next_bank(), kc, in->rows_in(0));
          ctx.emit_transpose(tp, ctx.tile_ap(*in, 0, block->row0(j), kc));
          ctx.evacuate(LoweringContext::tile_ap(*block, j, r0, in->rows_in(0)), tp);
        }
        prev = std::move(in);
      }
      if (prev) ctx.release(*prev);
      for (int64_t j = 0; j < block->count(); ++j) {
        ctx.copy_rows(false,
                      LoweringContext::hbm_ap(dst, dt, out_view, e * K + k0 + block->row0(j),
                                              block->rows_in(j), 0, N),
                      LoweringContext::tile_ap(*block, j, 0, N));
      }
      ctx.count_bytes_out(kw * N * isa::dtype_bytes(dt));
      ctx.release(*block);
    }
  }
  ctx.alias_hbm(n.id, dst);
  return true;
}

// Whether a transpose of [rows x kb] blocks stored to HBM is cheapest through the array (its
// store costs the same either way), as cheapest_transpose prices the routes.
bool array_transposes_blocks(const LoweringContext& ctx, int64_t rows, int64_t kb, isa::DType dt) {
  ResourceNs base;
  base.dma = double(rows) * double(kb) * isa::dtype_bytes(dt) /
             (ctx.arch().costs.dma_gb_per_s * ctx.arch().dma.engines);
  return cheapest_transpose(ctx, rows, kb, dt, ctx.arch().tensor.rows, base) ==
         TransposeRoute::array;
}

// A transpose in HBM whose result only leaves the plan (no consumer in the group: one op per
// plan) is copied HBM to HBM through its strided view, a chunk per element where the chip has
// no DMA transpose (K^T of attention, 7 ms of DMA on trn1). Swapping the last two dims per
// entry, it goes by the array instead where the modelled cost is lower: rows loaded contiguous,
// transposed, stored (the group stores its output tiles); where the output and an entry's rows
// do not fit half of SBUF together, by blocks of output rows (transpose_blocks_to_hbm).
LowerResult transpose_leaving_by_array(LoweringContext& ctx, const Node& n, bool& done) {
  done = false;
  if (ctx.on_chip(n.inputs[0]) || ctx.in_window() || !ctx.needed_outside(n.id) ||
      ctx.live_after(n.id, -1))
    return std::nullopt;
  if (auto e = lower_view(ctx, n)) return e;  // the view it reads as
  ViewDesc v = ctx.view_of_value(n.id);
  if (v.groups.size() == 2) v.groups.insert(v.groups.begin(), std::vector<SubDim>{{1, 0}});
  const auto u = untransposed(v);
  if (!u || !isa::is_float(n.type.dtype)) return std::nullopt;
  const int64_t K = v.groups[1][0].size, N = v.groups[2][0].size, T = ctx.tile_rows();
  const Tiles shape = ctx.tiling(view_of(n.type).rows, N, n.type.dtype, run_of(n.type), n.id);
  const int64_t row = SbufAllocator::aligned(N * isa::dtype_bytes(n.type.dtype));
  const int64_t entry =
      (N + T - 1) / T * SbufAllocator::aligned(K * isa::dtype_bytes(n.type.dtype));
  // Too large for half of SBUF at once: by blocks of `kb` output rows (a multiple of the tile
  // rows), each with one input row tile of its columns at a time (two, so a load overlaps the
  // transposes of the last).
  const bool whole = shape.count() * row + entry <= ctx.sbuf_share(50);
  const int64_t per_tile = row + 2 * SbufAllocator::aligned(T * isa::dtype_bytes(n.type.dtype));
  const int64_t kb = whole ? K : std::min(K, ctx.sbuf_share(50) / per_tile * T);
  if (kb < std::min(K, T)) return std::nullopt;
  if (!array_transposes_blocks(ctx, std::min(T, N), kb, n.type.dtype)) return std::nullopt;
  ctx.forget_view(n.id);
  if (!whole) {
    if (!transpose_blocks_to_hbm(ctx, n, *u, kb)) return ctx.no_room();
    done = true;
    return std::nullopt;
  }
  auto out = ctx.output_tiles(n);
  if (!out) return ctx.no_room();
  if (!transpose_rows_into(ctx, v, n.type.dtype, *out)) return ctx.no_room();
  done = true;
  return std::nullopt;
}

// On chip and 2-D: through the array. Otherwise a strided read of HBM.
LowerResult lower_transpose(LoweringContext& ctx, const Node& n) {
  if (n.type.dims.size() == 2 && ctx.on_chip(n.inputs[0]) && !ctx.is_view(n.inputs[0])) {
    return transpose_on_chip(ctx, n);
  }
  bool done = false;
  if (auto e = transpose_leaving_by_array(ctx, n, done)) return e;
  if (done) return std::nullopt;
  return ctx.is_view(n.id) ? std::nullopt : lower_view(ctx, n);
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

// Whether the last-axis concat's output and operands, every row tile on chip at once, would
// take more than the row-window trigger's share of SBUF: then it is joined in HBM by row-tile
// DMAs, which need no SBUF (issue 40: deeplabv3's and efficientnet_b0's padding concats did not
// fit "even with every other value spilled").
bool concat_too_large_for_chip(const LoweringContext& ctx, const Node& n) {
  const auto row_bytes = [&](const TensorType& t) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < t.dims.size(); ++d) rows *= t.dims[d].size;
    const int64_t tiles = (rows + ctx.tile_rows() - 1) / ctx.tile_rows();
    return tiles * SbufAllocator::aligned(t.dims.back().size * isa::dtype_bytes(t.dtype));
  };
  int64_t bytes = row_bytes(n.type);
  for (int32_t id : n.inputs) bytes += row_bytes(ctx.type_of(id));
  return bytes > ctx.sbuf_share(ctx.options().row_window_trigger_percent);
}

// Along the last axis: copies into the output's tiles on the vector engine. Along another
// axis: each input is copied, HBM to HBM, into its place in the output's tensor; consumers
// load the result from there (also along the last axis when it is too large for SBUF).
LowerResult lower_concat(LoweringContext& ctx, const Node& n) {
  const int64_t rank = static_cast<int64_t>(n.type.dims.size());
  const int64_t a = axis_of(n);
  if (a != rank - 1 || concat_too_large_for_chip(ctx, n)) return concat_in_hbm(ctx, n, a);
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

std::optional<bool> transposed_into_hbm_by_array(LoweringContext& ctx, int32_t id) {
  if (!transposed_view(ctx, id)) return std::nullopt;
  const Node& n = ctx.node(id);
  ViewDesc v = ctx.view_of_value(id);
  v.groups.insert(v.groups.begin(), std::vector<SubDim>{{1, 0}});
  const auto u = untransposed(v);
  if (!u || !isa::is_float(n.type.dtype)) return std::nullopt;
  // Where the chip's DMA transposes this dtype the copy reads by its chunks, not element by
  // element: the strided copy this replaces is not what such a chip does.
  const isa::ArchSpec& arch = ctx.arch();
  if (arch.dma.hardware_transpose && isa::dtype_bytes(n.type.dtype) == 2 &&
      arch.costs.dma_transpose_chunk_bytes > 0)
    return std::nullopt;
  const int64_t K = v.groups[1][0].size, N = v.groups[2][0].size, T = ctx.tile_rows();
  const int64_t per_tile = SbufAllocator::aligned(N * isa::dtype_bytes(n.type.dtype)) +
                           2 * SbufAllocator::aligned(T * isa::dtype_bytes(n.type.dtype));
  const int64_t kb = std::min(K, ctx.sbuf_share(50) / per_tile * T);
  if (kb < std::min(K, T)) return std::nullopt;
  if (!array_transposes_blocks(ctx, std::min(T, N), kb, n.type.dtype)) return std::nullopt;
  ctx.forget_view(id);
  return transpose_blocks_to_hbm(ctx, n, *u, kb);
}

const char* name_of(TransposeRoute r) {
  switch (r) {
    case TransposeRoute::array:
      return "array";
    case TransposeRoute::dma_transpose:
      return "dma transpose";
    case TransposeRoute::strided_dma:
      return "strided dma";
    case TransposeRoute::base:
      return "view's base";
  }
  return "?";
}

double ResourceNs::bound() const { return std::max({tensor, lanes, dma}); }

// The row tiles of an [n x K] block that transpose_rows_into transposes side by side into one
// PSUM bank (fp32 columns) and copies out at once: cheapest_transpose's `per_copy`.
namespace {
int64_t tiles_per_copy(const LoweringContext& ctx, int64_t n) {
  const int64_t T = ctx.tile_rows(), rows = std::min(T, n);
  return std::max<int64_t>(
      1, std::min<int64_t>((n + T - 1) / T, ctx.arch().psum.bank_bytes / 4 / rows));
}
}  // namespace

// Per row tile of [rows x cols]: the array does one transpose (rows moving columns) and one
// evacuation (rows elements a partition, on the vector or scalar engine: half of it each) per
// chunk, after the row tile's contiguous load; a DMA route only loads, paying its chunks
// (timing.dma.chunk_overhead_bytes each: transpose_chunk_bytes long for the hardware
// transpose, one element for a strided read) spread over every DMA engine.
TransposeRoute cheapest_transpose(const LoweringContext& ctx, int64_t rows, int64_t cols, DType dt,
                                  int64_t chunk, const ResourceNs& base, int64_t per_copy) {
  const isa::ArchSpec& arch = ctx.arch();
  const isa::CostHints& h = arch.costs;
  const double bytes = double(rows) * double(cols) * isa::dtype_bytes(dt);
  const double dma_ns_per_byte = 1.0 / (h.dma_gb_per_s * arch.dma.engines);
  const double chunks = double((cols + chunk - 1) / chunk);
  auto load_ns = [&](double chunk_bytes) {
    return h.dma_engine_bytes(bytes, bytes / chunk_bytes) * dma_ns_per_byte;
  };
  ResourceNs array = base;
  array.tensor +=
      chunks * double(std::max<int64_t>(rows, h.moving_min_cycles)) * 1000.0 / h.tensor_freq_mhz;
  array.lanes += chunks *
                 (double(h.vector_fixed_ns) / double(std::max<int64_t>(1, per_copy)) +
                  double(rows) / h.vector_elements_per_ns) /
                 2;
  array.dma += load_ns(double(cols) * isa::dtype_bytes(dt));
  TransposeRoute best = TransposeRoute::array;
  double best_ns = array.bound();
  auto consider = [&](TransposeRoute r, double chunk_bytes) {
    ResourceNs c = base;
    c.dma += load_ns(chunk_bytes);
    if (c.bound() < best_ns) {
      best = r;
      best_ns = c.bound();
    }
  };
  if (arch.dma.hardware_transpose && isa::dtype_bytes(dt) == 2 && h.dma_transpose_chunk_bytes > 0)
    consider(TransposeRoute::dma_transpose, double(h.dma_transpose_chunk_bytes));
  consider(TransposeRoute::strided_dma, double(isa::dtype_bytes(dt)));
  return best;
}

// A matmul's own work per output row tile: its multiplies (K chunks x column blocks of the
// moving width), their evacuations and B's bytes (a streamed B once per row window of about
// as many tiles as the fill share holds A^T and output rows for, else once for all tiles).
bool transposed_view(const LoweringContext& ctx, int32_t id) {
  if (!ctx.is_view(id)) return false;
  const auto& g = ctx.view_of_value(id).groups;
  return g.size() == 2 && g[0].size() == 1 && g[0][0].stride == 1 && g[1].size() == 1 &&
         g[1][0].stride >= g[0][0].size;
}

TransposeRoute stationary_route(const LoweringContext& ctx, const Node& n) {
  const int32_t aid = n.inputs[0];
  if (n.op != OpKind::matmul || ctx.on_chip(aid)) return TransposeRoute::array;
  if (const MatmulSchedule* s = ctx.matmul_schedule(n.id)) return s->a_route;
  const isa::CostHints& h = ctx.arch().costs;
  const TensorType& a = ctx.type_of(aid);
  const TensorType& b = ctx.type_of(n.inputs[1]);
  if (a.dtype != b.dtype) return TransposeRoute::array;  // the array casts A^T to B's dtype
  // A transposed view (of an input, or a value spilled to HBM): A^T is its base, whose rows
  // load as they are, where the array would transpose row tiles of A read element by element.
  // A streamed B's matmul prices that route in its schedule search (matmul_search.cpp).
  if (ctx.is_view(aid))
    return transposed_view(ctx, aid) && !streams_b(ctx, n) ? TransposeRoute::base
                                                           : TransposeRoute::array;
  const View av = view_of(a), bv = view_of(b);
  const int64_t rows = std::min<int64_t>(ctx.tile_rows(), av.rows);
  const int64_t chunk = ctx.arch().tensor.rows;
  const int64_t chunks = (av.cols + chunk - 1) / chunk;
  const int64_t width = std::min(moving_cols(ctx), bv.cols);
  const int64_t blocks = (bv.cols + width - 1) / width;
  const int64_t tiles = (av.rows + ctx.tile_rows() - 1) / ctx.tile_rows();
  ResourceNs base;
  base.tensor = double(chunks * blocks * std::max<int64_t>(width, h.moving_min_cycles)) * 1000.0 /
                h.tensor_freq_mhz;
  base.lanes =
      double(blocks) * (double(h.vector_fixed_ns) + double(width) / h.vector_elements_per_ns) / 2;
  const int64_t out_row = SbufAllocator::aligned(bv.cols * isa::dtype_bytes(n.type.dtype));
  const int64_t per_window = std::max<int64_t>(
      1, std::min(tiles, ctx.sbuf_share(ctx.options().row_window_fill_percent) /
                             std::max<int64_t>(1, stationary_bytes(ctx, n) + out_row)));
  const double b_bytes = double(bv.rows) * double(bv.cols) * isa::dtype_bytes(b.dtype);
  base.dma = b_bytes / double(streams_b(ctx, n) ? per_window : tiles) /
             (h.dma_gb_per_s * ctx.arch().dma.engines);
  return cheapest_transpose(ctx, rows, av.cols, a.dtype, chunk, base);
}

// Per [N row tile of one entry]: the batch_matmul's multiplies (A's row tiles x K chunks x
// column blocks), their evacuations and A's and the output's bytes, against which the route
// of B^T's [rows x K] block is priced.
TransposeRoute batch_b_route(const LoweringContext& ctx, const Node& n, const ViewDesc& v) {
  const auto u = untransposed(v);
  const TensorType& b = ctx.type_of(n.inputs[1]);
  if (!u || !isa::is_float(b.dtype)) return TransposeRoute::strided_dma;
  const isa::CostHints& h = ctx.arch().costs;
  const TensorType& at = ctx.type_of(n.inputs[0]);
  const int64_t M = n.op == OpKind::matmul ? view_of(at).rows : at.dims[1].size;
  const int64_t K = v.groups[1][0].size, N = v.groups[2][0].size;
  const int64_t T = ctx.tile_rows(), chunk = ctx.arch().tensor.rows;
  const int64_t width = std::min(moving_cols(ctx), N);
  const double m_tiles = double((M + T - 1) / T), k_chunks = double((K + chunk - 1) / chunk);
  const double blocks = double((N + width - 1) / width), n_tiles = double((N + T - 1) / T);
  ResourceNs base;
  base.tensor = m_tiles * k_chunks * blocks *
                double(std::max<int64_t>(width, h.moving_min_cycles)) * 1000.0 / h.tensor_freq_mhz /
                n_tiles;
  base.lanes = m_tiles * blocks *
               (double(h.vector_fixed_ns) + double(width) / h.vector_elements_per_ns) / 2 / n_tiles;
  const double ab = double(isa::dtype_bytes(ctx.type_of(n.inputs[0]).dtype));
  const double ob = double(isa::dtype_bytes(n.type.dtype));
  base.dma = double(M) * (double(K) * ab + double(N) * ob) / n_tiles /
             (h.dma_gb_per_s * ctx.arch().dma.engines);
  return cheapest_transpose(ctx, std::min(T, N), K, b.dtype, chunk, base, tiles_per_copy(ctx, N));
}

// [batch, K, N] `v` (reading HBM transposed) into tiles `bt` of its shape by the array: per
// entry, its [N, K] rows (contiguous runs of K) load as row tiles, and each [rows x K chunk]
// block is transposed into `bt`'s [K chunk x rows] through PSUM; an entry's row tiles go side by
// side into a PSUM bank and leave it by one copy. With several entries the rows' buffer makes a
// chain (load, transposes, release, the next load into the freed bytes), so each entry's load is
// cut finely over the queues for its latency. One entry loads all its rows at once, in pieces
// of dma_split_bytes, an engine each (as matmul_b_by_array prices it), unless the caller set
// fine loads. (Loading entry e + 1 before entry e's transposes halves the time of the most
// transposed batch_matmuls again, but its extra entry pushed a Llama-width prefill over SBUF:
// not in until the footprint counts it.)
bool transpose_rows_into(LoweringContext& ctx, const ViewDesc& v, DType dt, const Tiles& bt) {
  const ViewDesc u = *untransposed(v);
  const int64_t batches = v.groups[0][0].size, K = v.groups[1][0].size;
  const int64_t bank_cols = ctx.arch().psum.bank_bytes / 4;
  const FineLoadsScope fine(ctx, ctx.fine_loads() || batches > 1);
  auto load = [&](int64_t e) {
    ViewDesc ue = u;
    ue.offset += e * u.groups[0][0].stride;
    ue.groups[0][0].size = 1;
    return ctx.load_view(ue, dt);  // [N, K], N on partitions
  };
  for (int64_t e = 0, j = 0; e < batches; ++e) {
    auto loaded = load(e);
    if (!loaded) return false;
    const Tiles rows = *loaded;
    for (; j < bt.count() && bt.row0(j) / K == e; ++j) {
      const int64_t k0 = bt.row0(j) % K;
      const int32_t kc = bt.rows_in(j);
      for (int64_t t0 = 0, t1 = 0; t0 < rows.count(); t0 = t1) {
        const Slot bank = ctx.next_bank();
        int64_t cols = 0;
        for (t1 = t0; t1 < rows.count() && (t1 == t0 || cols + rows.rows_in(t1) <= bank_cols);
             cols += rows.rows_in(t1++)) {
          ctx.emit_transpose(ctx.psum_ap(bank, kc, rows.rows_in(t1), cols),
                             ctx.tile_ap(rows, t1, k0, kc));
        }
        ctx.evacuate(LoweringContext::tile_ap(bt, j, rows.row0(t0), cols),
                     ctx.psum_ap(bank, kc, cols));
      }
    }
    ctx.release(rows);
  }
  return true;
}

std::optional<Tiles> load_batch_b_by_array(LoweringContext& ctx, const ViewDesc& v, DType dt) {
  const int64_t batches = v.groups[0][0].size, K = v.groups[1][0].size, N = v.groups[2][0].size;
  auto bt = ctx.new_tiles(batches * K, N, dt, "bT", K);
  if (!bt) return std::nullopt;
  if (transpose_rows_into(ctx, v, dt, *bt)) return bt;
  ctx.release(*bt);
  return std::nullopt;
}

std::optional<Tiles> matmul_b_by_array(LoweringContext& ctx, const Node& n) {
  const int32_t bid = n.inputs[1];
  if (n.op != OpKind::matmul || !transposed_view(ctx, bid) || ctx.on_chip(bid) || streams_b(ctx, n))
    return std::nullopt;
  ViewDesc v = ctx.view_of_value(bid);
  const int64_t N = view_of(ctx.type_of(bid)).cols;
  if (ctx.on_chip(v.base) || ctx.window_col0(bid) != 0 || ctx.window_cols(bid, N) != N)
    return std::nullopt;
  v.groups.insert(v.groups.begin(), std::vector<SubDim>{{1, 0}});
  const DType dt = ctx.type_of(bid).dtype;
  if (!untransposed(v) || !isa::is_float(dt)) return std::nullopt;
  // Priced as B whole, which the first column block waits for. The view's DMA: one descriptor
  // per K tile (one engine each), in a DMA transpose's chunks or, without one, an element per
  // chunk. The array: the base's N row tiles loaded contiguous (in pieces of dma_split_bytes,
  // an engine each), then each [N tile x K chunk] block transposed into PSUM and evacuated by
  // the two lane engines. (Per N tile beside the op's work, as batch_b_route prices it, the
  // DMA transpose's few engines and the rows' pieces are lost: trn2 1024 x 768 x 3072 B^T took
  // the DMA transpose, 169.0 us against 121.0 by the array; 4835 x 1408 x 107 B^T would take
  // the array, 16 us slower.)
  const isa::ArchSpec& arch = ctx.arch();
  const isa::CostHints& h = arch.costs;
  const int64_t K = v.groups[1][0].size, el = isa::dtype_bytes(dt), T = ctx.tile_rows();
  const bool hw = arch.dma.hardware_transpose && el == 2 && h.dma_transpose_chunk_bytes > 0;
  const double bytes = double(K) * double(N) * double(el);
  const double chunk = hw ? double(h.dma_transpose_chunk_bytes) : double(el);
  auto over = [&](int64_t tiles) {  // ns per byte over one engine per tile
    return 1.0 / (h.dma_gb_per_s * double(std::min<int64_t>(arch.dma.engines, tiles)));
  };
  const int64_t rows = std::min(T, N);
  const double blocks = double((N + T - 1) / T * ((K + arch.tensor.rows - 1) / arch.tensor.rows));
  const int64_t per_copy = tiles_per_copy(ctx, N);
  const double view_ns = h.dma_engine_bytes(bytes, bytes / chunk) * over((K + T - 1) / T);
  const double array_ns =
      h.dma_engine_bytes(bytes, double(N)) *
          over(std::max((N + T - 1) / T,
                        int64_t(bytes) / std::max<int64_t>(1, ctx.options().dma_split_bytes) + 1)) +
      std::max(blocks * double(std::max<int64_t>(rows, h.moving_min_cycles)) * 1000.0 /
                   h.tensor_freq_mhz,
               blocks *
                   (double(h.vector_fixed_ns) / double(per_copy) +
                    double(rows) / h.vector_elements_per_ns) /
                   2);
  if (array_ns >= view_ns) return std::nullopt;
  if (!ctx.ensure_hbm(v.base)) return std::nullopt;
  // With one row tile of A every multiply waits for all of B^T: B's rows are then cut finely
  // too, for the latency of the load rather than its throughput alone.
  std::optional<Tiles> t;
  {
    const FineLoadsScope fine(ctx, ctx.fine_loads() || view_of(ctx.type_of(n.inputs[0])).rows <= T);
    t = load_batch_b_by_array(ctx, v, dt);
  }
  if (t) ctx.adopt_tiles(bid, *t);  // later row windows and other readers take it as it is
  return t;
}

void load_transposed(LoweringContext& ctx, Slot dst, Slot src, DType dt, const View& view,
                     int64_t row0, int32_t rows, int64_t col0, int32_t ks, const ViewDesc* base) {
  AccessPattern from = LoweringContext::hbm_ap(src, dt, view, row0, ks, col0, rows);
  from.partition_stride = 1;        // the source's columns become partitions ...
  from.free[0].stride = view.cols;  // ... and its rows the free axis
  if (base) {  // `src` is the base of a transposed view: A^T's rows are its rows
    const SubDim &m = base->groups[0][0], &k = base->groups[1][0];
    from.offset = base->offset + row0 * m.stride + col0 * k.stride;
    from.partition_stride = k.stride;
    from.free[0] = {rows, m.stride};
  }
  ctx.dma(ctx.next_side_load_queue(), LoweringContext::sbuf_ap(dst, dt, ks, 0, rows), from);
  ctx.count_bytes_in(int64_t{rows} * ks * isa::dtype_bytes(dt));
}

void populate_layout_lowerings(LoweringTable& table) {
  table.add(OpKind::transpose, lower_transpose);
  table.add(OpKind::reshape, lower_view);
  table.add(OpKind::slice, lower_slice);
  table.add(OpKind::concat, lower_concat);
}

}  // namespace wallsim::compiler_stub::lowering
