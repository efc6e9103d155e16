// The implicit-GEMM convolution (issue 35): a matmul whose A is an im2col window view of x
// [N, C, H, W] in HBM loads x's channel planes into SBUF once per image and feeds the array each
// of the KH·KW shifted windows as an SBUF access pattern, accumulating KH·KW·ceil(C/128)
// multiplies per output tile in PSUM, instead of loading A's rows (one kw-run per DMA chunk).
// Where C·KH fits the array's rows, the kernel rows may fold into the contraction instead
// (`fold` = KH): partition c·KH + kh holds the input rows oh·sh + kh·dh of channel c, one per
// output row, so KW multiplies of C·KH rows make an output tile. The cost model picks the fold
// (more bytes read: each input row once per kernel row that reads it; KH times fewer multiplies).
#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / std::max<int64_t>(1, b); }

// Output tiles: per image, `rows` whole output rows (OW <= tile rows), or pieces of one row.
struct TileSpan {
  int64_t image, oh0, rows, ow0, cols;
};
std::vector<TileSpan> tile_spans(const WindowFacts& w, int64_t tile_rows) {
  std::vector<TileSpan> out;
  for (int64_t n = 0; n < w.N; ++n) {
    if (w.OW <= tile_rows) {
      const int64_t r = tile_rows / w.OW;
      for (int64_t oh = 0; oh < w.OH; oh += r)
        out.push_back({n, oh, std::min(r, w.OH - oh), 0, w.OW});
    } else {
      for (int64_t oh = 0; oh < w.OH; ++oh)
        for (int64_t ow = 0; ow < w.OW; ow += tile_rows)
          out.push_back({n, oh, 1, ow, std::min(tile_rows, w.OW - ow)});
    }
  }
  return out;
}

// Partitions of contraction per multiply: C (a channel chunk) unfolded, C·KH folded.
int64_t folded_rows(const WindowFacts& w, int64_t fold) { return w.C * fold; }

// Bytes per partition the route keeps in SBUF: `images` images' planes (or, folded, their
// shifted rows), W, the output tiles.
int64_t window_bytes(const LoweringContext& ctx, const WindowFacts& w, const Node& n, int64_t fold,
                     int64_t images) {
  const int64_t dt = isa::dtype_bytes(ctx.type_of(n.inputs[0]).dtype);
  const int64_t cc = ceil_div(folded_rows(w, fold), ctx.tile_rows());
  const int64_t oc = view_of(n.type).cols;
  const int64_t tiles = static_cast<int64_t>(tile_spans(w, ctx.tile_rows()).size());
  const int64_t part = fold > 1 ? w.OH * w.W : w.H * w.W;
  return images * cc * SbufAllocator::aligned(part * dt) +
         cc * SbufAllocator::aligned(w.KH / fold * w.KW * oc * dt) +
         tiles * SbufAllocator::aligned(oc * isa::dtype_bytes(n.type.dtype));
}

// Images whose planes the route holds at once: two (the next loads while this one is
// multiplied) where they fit three quarters of SBUF, else one; 0: not even one.
int64_t window_images(const LoweringContext& ctx, const WindowFacts& w, const Node& n,
                      int64_t fold) {
  for (int64_t images = std::min<int64_t>(2, w.N); images >= 1; --images)
    if (window_bytes(ctx, w, n, fold, images) <= ctx.sbuf_capacity() * 3 / 4) return images;
  return 0;
}

// The route's time: the array's multiplies, one evacuation per output block, x and W read once
// (a plane per descriptor row, a W row of KH·KW·OC per partition; folded, an input row per
// descriptor row and KW·OC per partition), then the first image's planes and W before the
// first multiply, and, where one image's planes fit at a time (window_images), every later
// image's planes too (they load after the image before, not beside it).
MatmulCost predict_window(const LoweringContext& ctx, const WindowFacts& w, const Node& n,
                          int64_t fold) {
  const isa::CostHints& h = ctx.arch().costs;
  const DType dt = ctx.type_of(n.inputs[0]).dtype;
  const int64_t db = isa::dtype_bytes(dt), oc = view_of(n.type).cols;
  const int64_t width = std::min(moving_cols(ctx), oc), ocb = ceil_div(oc, width);
  const int64_t cc = ceil_div(folded_rows(w, fold), ctx.tile_rows());
  const int64_t kh = w.KH / fold;  // kernel rows left to the multiplies
  const int64_t tiles = static_cast<int64_t>(tile_spans(w, ctx.tile_rows()).size());
  const int64_t passes = dt == DType::fp32 ? h.fp32_passes() : 1;
  const double cycle_ns = 1000.0 / h.tensor_freq_mhz;
  MatmulCost c;
  c.matmuls = tiles * ocb * kh * w.KW * cc;
  c.tensor_ns = double(tiles * kh * w.KW * cc * passes) *
                double((ocb - 1) * std::max(width, h.moving_min_cycles) +
                       std::max(oc - (ocb - 1) * width, h.moving_min_cycles)) *
                cycle_ns;
  c.lanes_ns = double(tiles * ocb) *
               (double(h.vector_fixed_ns) + double(width) / h.vector_elements_per_ns) / 2;
  // Folded: per image, channel and kernel row, OH rows of W (a chunk each).
  const double x_rows = fold > 1 ? double(w.N * w.C * w.KH * w.OH) : double(w.N * w.C);
  const double x_pay = fold > 1 ? x_rows * double(w.W * db) : double(w.N * w.C * w.H * w.W * db),
               w_pay = double(w.C * w.KH * w.KW * oc * db);
  const double engine =
      h.dma_engine_bytes(x_pay, x_rows) + h.dma_engine_bytes(w_pay, double(folded_rows(w, fold)));
  const double rate_all = h.dma_gb_per_s * double(ctx.arch().dma.engines);
  c.dma_ns = engine / rate_all;
  c.hbm_ns = h.hbm_gb_per_s > 0 ? (x_pay + w_pay) / h.hbm_gb_per_s : 0;
  c.hbm_bytes = static_cast<int64_t>(x_pay + w_pay);
  const double rate = h.hbm_gb_per_s > 0 ? std::min(rate_all, h.hbm_gb_per_s) : rate_all;
  const double latency = double(h.dma_issue_ns + h.hbm_latency_ns);
  c.prologue_ns = double(h.launch_ns) + latency + (x_pay / double(w.N) + w_pay) / rate;
  if (window_images(ctx, w, n, fold) == 1)
    c.prologue_ns += double(w.N - 1) * x_pay / double(w.N) / rate;
  c.epilogue_ns = double(h.vector_fixed_ns) + double(h.tensor_latency_cycles) * cycle_ns +
                  double(h.lane_access_ns);
  return c;
}

// Today's route for the same matmul: the rules' point priced by predict_matmul, with A's true
// DMA chunks (a kw-run of the window, or the hardware transpose's chunks for 2-byte single
// elements where the chip has one): predict_matmul takes a loaded A to be whole rows.
MatmulCost predict_today(const LoweringContext& ctx, const WindowFacts& w, const Node& n) {
  const isa::ArchSpec& arch = ctx.arch();
  const isa::CostHints& h = arch.costs;
  const TensorType &at = ctx.type_of(n.inputs[0]), &bt = ctx.type_of(n.inputs[1]);
  MatmulFacts f;
  f.M = view_of(at).rows;
  f.K = view_of(at).cols;
  f.N = view_of(bt).cols;
  f.a_bytes = isa::dtype_bytes(at.dtype);
  f.b_bytes = isa::dtype_bytes(bt.dtype);
  f.out_bytes = isa::dtype_bytes(n.type.dtype);
  f.fp32 = at.dtype == DType::fp32 || bt.dtype == DType::fp32;
  f.tile_rows = ctx.tile_rows();
  f.k_rows = arch.tensor.rows;
  f.moving_cols = moving_cols(ctx);
  f.psum_banks = ctx.psum_bank_count();
  f.dma_engines = arch.dma.engines;
  f.dma_split_bytes = std::max<int64_t>(1, ctx.options().dma_split_bytes);
  f.dma_min_chunk_bytes = std::max<int64_t>(1, ctx.options().dma_min_chunk_bytes);
  f.load_queues = std::max<int64_t>(1, ctx.queues().load_queue_count());
  MatmulSchedule s;
  s.narrow = narrow_matmul(ctx, n);
  s.panel_cols = panel_cols(ctx, n);
  s.window_tiles = ceil_div(f.M, f.tile_rows);
  MatmulCost c = predict_matmul(f, s, arch);
  const double a_pay = double(f.M) * double(f.K) * double(f.a_bytes);
  const int64_t run = w.dw == 1 ? w.KW : 1;
  double chunks = a_pay / double(run * f.a_bytes);
  if (run == 1 && f.a_bytes == 2 && arch.dma.hardware_transpose && h.dma_transpose_chunk_bytes > 0)
    chunks = a_pay / double(h.dma_transpose_chunk_bytes);
  c.dma_ns = std::max(
      c.dma_ns, h.dma_engine_bytes(a_pay, chunks) / (h.dma_gb_per_s * double(arch.dma.engines)));
  return c;
}

}  // namespace

bool im2col_fed(const LoweringContext& ctx, int32_t a) {
  for (int32_t id = a;;) {
    const Node& n = ctx.node(id);
    if (n.op == OpKind::im2col) return true;
    if ((n.op != OpKind::reshape && n.op != OpKind::transpose) || n.inputs.empty()) return false;
    id = n.inputs[0];
  }
}

std::optional<WindowFacts> window_of(const LoweringContext& ctx, int32_t a) {
  if (!ctx.is_view(a) || ctx.on_chip(a) || !im2col_fed(ctx, a)) return std::nullopt;
  const ViewDesc v = ctx.view_of_value(a);
  if (v.groups.size() != 2 || ctx.on_chip(v.base)) return std::nullopt;
  const TensorType& base = ctx.type_of(v.base);
  if (base.dims.empty()) return std::nullopt;
  int64_t elements = 1;
  for (const Dim& d : base.dims) elements *= d.size;
  auto dims = [](const std::vector<SubDim>& g) {
    std::vector<SubDim> out;
    for (const SubDim& d : g)
      if (d.size > 1) out.push_back(d);
    return out;
  };
  const std::vector<SubDim> rows = dims(v.groups[0]), cols = dims(v.groups[1]);
  // The base is x [N, C, H, W] or a reshape of it keeping W last ([N·C·H, W]); the channel
  // sub-dim (C > 1) gives the plane, H·W.
  WindowFacts w;
  w.base = v.base;
  w.offset = v.offset;
  w.W = base.dims.back().size;
  if (cols.empty() || cols[0].stride < w.W || cols[0].stride % w.W) return std::nullopt;
  const int64_t plane = cols[0].stride;
  w.C = cols[0].size;
  w.H = plane / w.W;
  size_t i = 1;
  if (i < cols.size() && cols[i].stride >= w.W && cols[i].stride % w.W == 0 &&
      cols[i].stride < plane) {
    w.KH = cols[i].size;
    w.dh = cols[i++].stride / w.W;
  }
  if (i < cols.size() && cols[i].stride < w.W) {
    w.KW = cols[i].size;
    w.dw = cols[i++].stride;
  }
  if (i != cols.size()) return std::nullopt;
  i = 0;
  int64_t image = w.C * plane;
  if (i < rows.size() && rows[i].stride >= plane) {
    w.N = rows[i].size;
    image = rows[i++].stride;
  }
  if (i < rows.size() && rows[i].stride >= w.W && rows[i].stride % w.W == 0 &&
      rows[i].stride < plane) {
    w.OH = rows[i].size;
    w.sh = rows[i++].stride / w.W;
  }
  if (i < rows.size() && rows[i].stride < w.W) {
    w.OW = rows[i].size;
    w.sw = rows[i++].stride;
  }
  if (i != rows.size() || w.sw < 1 || w.dw < 1) return std::nullopt;
  w.image = image;
  // Every window element inside its plane and the base.
  const int64_t last = w.offset + (w.N - 1) * image + (w.C - 1) * plane + plane - 1;
  if ((w.OW - 1) * w.sw + (w.KW - 1) * w.dw >= w.W ||
      (w.OH - 1) * w.sh + (w.KH - 1) * w.dh >= w.H || last >= elements)
    return std::nullopt;
  return w;
}

int64_t window_fold(const LoweringContext& ctx, const WindowFacts& w, const Node& n) {
  std::vector<int64_t> folds = {1};
  if (w.KH > 1 && folded_rows(w, w.KH) <= ctx.tile_rows()) folds.push_back(w.KH);
  int64_t best = 0;
  double best_ns = 0;
  for (int64_t fold : folds) {
    if (window_images(ctx, w, n, fold) == 0) continue;
    const double ns = predict_window(ctx, w, n, fold).total_ns();
    if (best == 0 || ns < best_ns) best = fold, best_ns = ns;
  }
  return best;
}

std::optional<MatmulSchedule> window_schedule(const LoweringContext& ctx, const Node& n,
                                              int64_t mode, double* predicted_ns) {
  if (mode == -2 || n.op != OpKind::matmul || n.inputs.size() > 3) return std::nullopt;
  const int32_t aid = n.inputs[0], bid = n.inputs[1];
  if (ctx.on_chip(bid) || ctx.is_view(bid)) return std::nullopt;
  if (ctx.type_of(aid).dtype != ctx.type_of(bid).dtype || !isa::is_float(ctx.type_of(aid).dtype))
    return std::nullopt;
  const auto w = window_of(ctx, aid);
  if (!w || ctx.in_window()) return std::nullopt;
  const int64_t fold = window_fold(ctx, *w, n);
  if (fold == 0) return std::nullopt;
  const MatmulCost mine = predict_window(ctx, *w, n, fold);
  if (mine.matmuls > ctx.options().max_plan_instructions / 2) return std::nullopt;
  if (mode == 0) return std::nullopt;  // the rules' point
  // As matmul_search.cpp: the rules' point stays unless beaten by more than the model's error.
  constexpr double kLeaveRules = 1.10;
  if (mode < 0 && predict_today(ctx, *w, n).total_ns() <= mine.total_ns() * kLeaveRules)
    return std::nullopt;
  MatmulSchedule s;
  s.conv_window = true;
  s.panel_cols = std::min(moving_cols(ctx), view_of(n.type).cols);
  s.window_tiles = static_cast<int64_t>(tile_spans(*w, ctx.tile_rows()).size());
  if (predicted_ns) *predicted_ns = mine.total_ns();
  return s;
}

LowerResult lower_window_matmul(LoweringContext& ctx, const Node& n) {
  const int32_t aid = n.inputs[0], bid = n.inputs[1];
  const auto wf = window_of(ctx, aid);
  if (!wf) return ctx.error("the window route's A is no longer a window view");
  const WindowFacts& w = *wf;
  const DType dt = ctx.type_of(aid).dtype;
  const int64_t fold = window_fold(ctx, w, n);
  if (fold == 0) return ctx.error("the window route's planes no longer fit SBUF");
  const int64_t OC = view_of(n.type).cols, rows_max = ctx.tile_rows();
  const int64_t KHm = w.KH / fold, KK = KHm * w.KW;  // kernel rows and taps left to the multiplies
  const int64_t plane = w.H * w.W, image = w.image, rows = folded_rows(w, fold);
  const int64_t part = fold > 1 ? w.OH * w.W : plane;  // elements a partition holds per image
  const int64_t cc = ceil_div(rows, rows_max), width = std::min(moving_cols(ctx), OC);
  const bool two = window_images(ctx, w, n, fold) >= 2;
  auto chunk_rows = [&](int64_t k) {
    return static_cast<int32_t>(std::min(rows_max, rows - k * rows_max));
  };
  if (!ctx.ensure_hbm(w.base) || !ctx.ensure_hbm(bid)) return ctx.no_room();
  const Slot x = ctx.hbm_tensor(w.base, isa::TensorRole::input);
  const Slot b = ctx.hbm_tensor(bid, isa::TensorRole::input);
  // `parts` rows of `cols` contiguous elements, `stride` apart in HBM.
  auto hbm_rows = [&](Slot s, int32_t parts, int64_t stride, int64_t offset, int64_t cols) {
    AccessPattern p = Emitter::sbuf_ap(s, dt, parts, offset, cols);
    p.space = MemSpace::hbm;
    p.partition_stride = stride;
    return p;
  };
  // x's planes of image `i`, a channel chunk per buffer: one descriptor row per channel.
  // Folded (one chunk): per channel c, its KH kernel rows' shifted rows on partitions
  // c·KH .. c·KH + KH - 1, each OH rows of W read sh rows apart.
  auto load_planes = [&](int64_t i) -> std::optional<std::vector<Slot>> {
    std::vector<Slot> out;
    for (int64_t k = 0; k < cc; ++k) {
      auto s = ctx.sbuf_alloc(part * isa::dtype_bytes(dt), "planes");
      if (!s) return std::nullopt;
      const int32_t cs = chunk_rows(k);
      if (fold > 1) {
        for (int64_t c = 0; c < w.C; ++c) {
          AccessPattern src = hbm_rows(x, static_cast<int32_t>(w.KH), w.dh * w.W,
                                       w.offset + i * image + c * plane, w.W);
          src.num_free = 2;
          src.free[0] = {w.OH, w.sh * w.W};
          src.free[1] = {w.W, 1};
          AccessPattern dst = LoweringContext::sbuf_ap(*s, dt, static_cast<int32_t>(w.KH), 0, part);
          dst.partition_start += static_cast<int32_t>(c * w.KH);
          ctx.dma(ctx.next_load_queue(), dst, src);
        }
      } else {
        ctx.copy_rows(true, LoweringContext::sbuf_ap(*s, dt, cs, 0, plane),
                      hbm_rows(x, cs, plane, w.offset + i * image + k * rows_max * plane, plane));
      }
      ctx.count_bytes_in(cs * part * isa::dtype_bytes(dt));
      out.push_back(*s);
    }
    return out;
  };
  auto planes = load_planes(0);
  if (!planes) return ctx.no_room();
  // W [C·KH·KW x OC] with channel c's KK rows (contiguous) on partition c of its chunk;
  // folded, the KW rows of channel c's kernel row kh on partition c·KH + kh.
  std::vector<Slot> wt;
  for (int64_t k = 0; k < cc; ++k) {
    auto s = ctx.sbuf_alloc(KK * OC * isa::dtype_bytes(dt), "window weights");
    if (!s) return ctx.no_room();
    const int32_t cs = chunk_rows(k);
    ctx.copy_rows(true, LoweringContext::sbuf_ap(*s, dt, cs, 0, KK * OC),
                  hbm_rows(b, cs, KK * OC, k * rows_max * KK * OC, KK * OC));
    ctx.count_bytes_in(cs * KK * OC * isa::dtype_bytes(dt));
    wt.push_back(*s);
  }
  const std::vector<TileSpan> spans = tile_spans(w, rows_max);
  Tiles like = ctx.tiling(view_of(n.type).rows, OC, n.type.dtype);
  like.starts.clear();
  like.counts.clear();
  for (const TileSpan& t : spans) {
    like.starts.push_back((t.image * w.OH + t.oh0) * w.OW + t.ow0);
    like.counts.push_back(static_cast<int32_t>(t.rows * t.cols));
  }
  std::optional<Tiles> bias;
  Bcast how = Bcast::none;
  if (n.inputs.size() > 2) {
    if (auto e = ctx.operand(n.inputs[2], like, how, bias)) return e;
  }
  std::optional<ActFn> act;
  if (const int64_t* a = n.int_attr(kEpilogueAct)) act = static_cast<ActFn>(*a);
  auto out = ctx.output_tiles(n, &like);
  if (!out) return ctx.no_room();
  std::optional<std::vector<Slot>> next;
  std::optional<Slot> prev_bank;
  for (size_t t = 0; t < spans.size(); ++t) {
    if (ctx.too_large()) return ctx.too_large_error();
    const TileSpan& sp = spans[t];
    const bool first_of_image = t == 0 || spans[t - 1].image != sp.image;
    if (first_of_image && sp.image > 0) {
      for (Slot s : *planes) ctx.release(s);
      planes = std::move(next);
      next.reset();
    }
    // The next image's planes load while this one's are multiplied (where two images fit;
    // else after this one's, below).
    if (first_of_image && two && sp.image + 1 < w.N && !(next = load_planes(sp.image + 1)))
      return ctx.no_room();
    if (first_of_image && !two && sp.image > 0 && !(planes = load_planes(sp.image)))
      return ctx.no_room();
    const int32_t m = static_cast<int32_t>(sp.rows * sp.cols);
    for (int64_t n0 = 0; n0 < OC; n0 += width) {
      const int64_t ns = std::min(width, OC - n0);
      Slot bank = ctx.next_bank();
      if (prev_bank && bank.index == prev_bank->index) bank = ctx.next_bank();
      prev_bank = bank;
      const AccessPattern ps = ctx.psum_ap(bank, m, ns);
      int64_t step = 0;
      // A folded partition's row r is the input row r·sh + kh·dh: rows one apart.
      const int64_t row0 = fold > 1 ? sp.oh0 : sp.oh0 * w.sh, row_step = fold > 1 ? 1 : w.sh;
      for (int64_t kh = 0; kh < KHm; ++kh)
        for (int64_t kw = 0; kw < w.KW; ++kw)
          for (int64_t k = 0; k < cc; ++k, ++step) {
            const int32_t cs = chunk_rows(k);
            AccessPattern st =
                LoweringContext::sbuf_ap((*planes)[static_cast<size_t>(k)], dt, cs, 0, sp.cols);
            st.offset = (row0 + kh * w.dh) * w.W + sp.ow0 * w.sw + kw * w.dw;
            if (sp.rows > 1) {
              st.num_free = 2;
              st.free[0] = {sp.rows, row_step * w.W};
              st.free[1] = {sp.cols, w.sw};
            } else {
              st.free[0] = {sp.cols, w.sw};
            }
            const AccessPattern mv = LoweringContext::sbuf_ap(wt[static_cast<size_t>(k)], dt, cs,
                                                              (kh * w.KW + kw) * OC + n0, ns);
            ctx.emit_matmul(ps, st, mv, step == 0, step + 1 == KK * cc);
          }
      const AccessPattern o = ctx.tile_ap(*out, static_cast<int64_t>(t), n0, ns);
      std::optional<AccessPattern> add;
      if (bias) add = ctx.operand_ap(*bias, how, static_cast<int64_t>(t), n0, ns, m);
      if (add || !act) ctx.evacuate(o, ps, add ? &*add : nullptr);
      if (act) ctx.activation(*act, o, add ? o : ps);
    }
  }
  for (Slot s : *planes) ctx.release(s);
  if (next)
    for (Slot s : *next) ctx.release(s);
  for (Slot s : wt) ctx.release(s);
  return std::nullopt;
}

}  // namespace wallsim::compiler_stub::lowering
