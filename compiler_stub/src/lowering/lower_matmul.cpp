// The matmul family: matmul through the systolic array, with A's row tiles transposed into
// stationaries, PSUM accumulation over K chunks, and a large B streamed by panels or K-blocked
// slabs; matmul_block, shared with batch_matmul (lower_batch_matmul.cpp).
#include <algorithm>
#include <deque>

#include "lowering/lowering_context.h"
#include "lowering/matmul_blocking.h"
#include "lowering/matmul_parts.h"

namespace wallsim::compiler_stub::lowering {

// A matmul fused with the bias_add that consumed it (lower.cpp). A bias row (replicated on
// every partition) is added by the array: one more K = 1 matmul per output block, a ones row
// (stationary) times the bias row on partition 0 (moving), accumulated into the block's bank,
// so the evacuation is a plain copy either lane engine can make. Any other bias (one per row)
// is added by the vector engine as it evacuates the block.
struct Bias {
  std::optional<Tiles> tiles;
  Bcast how = Bcast::row;
  std::optional<Slot> ones;  // [1 x tile rows] of the bias's dtype: the bias goes by the array
  // Or, for an addend of the output's shape (a one-row matmul's bias, or its residual in the
  // bias's slot) and one row tile of A: the identity (a plan constant) the addend's tile is
  // multiplied by into the bank, so the evacuation is a copy either lane engine can take, not
  // a two-input add on the vector engine (a decode step's adds, on the token's chain, took
  // twice a copy's time).
  std::optional<Slot> ident;
  AccessPattern ap(const LoweringContext& ctx, int64_t t, int64_t n0, int64_t ns,
                   int32_t rows) const {
    return ctx.operand_ap(*tiles, how, t, n0, ns, rows);
  }
};

// What the evacuation of each output block applies besides the bias (lower.cpp's epilogue
// fusion): an activation (the scalar engine reads PSUM) or a residual of the output's shape
// (the vector engine adds it).
struct Epilogue {
  std::optional<ActFn> act;
  std::optional<Tiles> residual;
  Bcast how = Bcast::none;
};

// A in HBM whose stationaries are loaded transposed by DMA (stationary_route).
struct HbmStationaries {
  Slot a;
  View view;
  DType dtype = DType::fp32;
  std::optional<ViewDesc> base;  // A is this transposed view of `a` (TransposeRoute::base)
};

namespace {

// K chunk k of a panel: its rows on partitions, `ns` columns at offset k * ns.
AccessPattern panel_ap(Slot s, DType dt, size_t k, int32_t rows, int64_t ns) {
  return LoweringContext::sbuf_ap(s, dt, rows, static_cast<int64_t>(k) * ns, ns);
}

// Panel n0 of a streamed B (its columns [n0, n0 + nmax) of every K chunk kc, one DMA per K
// chunk; a transposed B's base rows through the array), into SBUF: its slot, or nullopt when
// SBUF has no room.
std::optional<Slot> load_b_panel(LoweringContext& ctx, const Moving& b,
                                 const std::vector<int64_t>& kc, int64_t nmax, int64_t n0) {
  const int64_t N = b.tiles.cols;
  const DType dt = b.tiles.dtype;
  const View bv{b.tiles.rows, N};
  const int64_t ns = std::min(nmax, N - n0);
  const int64_t bytes = static_cast<int64_t>(kc.size()) * ns * isa::dtype_bytes(dt);
  auto p = ctx.take_kept(bytes);
  if (!p) p = ctx.sbuf_alloc(bytes, "panel");
  if (!p) return std::nullopt;
  for (size_t k = 0; k < kc.size(); ++k) {
    const int32_t ks = b.tiles.rows_in(kc[k]);
    const AccessPattern dst = panel_ap(*p, dt, k, ks, ns);
    if (b.transposed) continue;  // below, a block of the base's rows at a time
    if (b.view) {                // rows of the view one run at a time, columns [n0, n0 + ns)
      const ViewRows vr = LoweringContext::view_rows(*b.view, false);
      const int64_t run = vr.run().size, r0 = b.tiles.row0(kc[k]);
      for (int64_t r = r0; r < r0 + ks;) {
        const int32_t m = static_cast<int32_t>(std::min(r0 + ks, (r / run + 1) * run) - r);
        AccessPattern s = LoweringContext::view_rows_ap(*b.view, vr, b.hbm, dt, r, m);
        s.offset += n0 * s.free[0].stride;
        s.free[0].size = ns;
        AccessPattern d = dst;
        d.partition_start = static_cast<int32_t>(r - r0);
        d.partitions = m;
        ctx.dma(ctx.next_load_queue(), d, s);
        r += m;
      }
    } else {
      ctx.copy_rows(true, dst, ctx.hbm_ap(b.hbm, dt, bv, b.tiles.row0(kc[k]), ks, n0, ns));
    }
    ctx.count_bytes_in(ks * ns * isa::dtype_bytes(dt));
  }
  if (b.transposed) {
    const SubDim row = b.view->groups[1][0];  // base rows: the view's columns
    const int64_t K = b.tiles.rows;
    // Two staging buffers in turn (one where SBUF has no room for two): a block's rows load
    // while the previous block goes through the array, not after its last transpose.
    std::vector<Slot> stages;
    for (int64_t j0 = n0; j0 < n0 + ns; j0 += ctx.tile_rows()) {
      const int32_t rows = static_cast<int32_t>(std::min<int64_t>(ctx.tile_rows(), n0 + ns - j0));
      if (auto s = stages.size() < 2 ? ctx.sbuf_alloc(K * isa::dtype_bytes(dt), "panel rows")
                                     : std::nullopt)
        stages.push_back(*s);
      if (stages.empty()) return std::nullopt;
      const Slot* stage = &stages[static_cast<size_t>((j0 - n0) / ctx.tile_rows()) % stages.size()];
      AccessPattern src;
      src.space = MemSpace::hbm;
      src.buffer = b.hbm.index;
      src.dtype = dt;
      src.partitions = rows;
      src.partition_stride = row.stride;
      src.offset = b.view->offset + j0 * row.stride;
      src.num_free = 1;
      src.free[0] = {K, 1};
      ctx.copy_rows(true, LoweringContext::sbuf_ap(*stage, dt, rows, 0, K), src);
      ctx.count_bytes_in(rows * K * isa::dtype_bytes(dt));
      for (size_t k = 0; k < kc.size(); ++k) {
        const int32_t ks = b.tiles.rows_in(kc[k]);
        const AccessPattern tp = ctx.psum_ap(ctx.next_bank(), ks, rows);
        ctx.emit_transpose(tp, LoweringContext::sbuf_ap(*stage, dt, rows, b.tiles.row0(kc[k]), ks));
        ctx.evacuate(
            LoweringContext::sbuf_ap(*p, dt, ks, static_cast<int64_t>(k) * ns + (j0 - n0), rows),
            tp);
      }
    }
    for (const Slot& st : stages) ctx.release(st);
  }
  return p;
}

// Whether a row tile's stationaries, made one after each multiply of the row tile before
// (matmul_block's one-ahead order), are evacuated before their multiplies need them: the
// `chunks` multiplies of `cols` columns cover the evacuations at two lanes' rate and one
// evacuation's latency. Where they do not (few K chunks, narrow blocks: the lanes bound),
// every stationary made first keeps the lanes busy instead.
bool stationaries_keep_up(const LoweringContext& ctx, int64_t chunks, int64_t cols, int64_t rows,
                          bool fp32) {
  const isa::CostHints& h = ctx.arch().costs;
  if (h.tensor_freq_mhz <= 0 || h.vector_elements_per_ns <= 0) return false;
  const double multiply = double(std::max(cols, h.moving_min_cycles)) *
                          double(fp32 ? h.fp32_passes() : 1) * 1000.0 / h.tensor_freq_mhz;
  // An evacuation reads PSUM and writes SBUF: the lane's access latency besides its fixed
  // overhead (without it, tiny's 32x32 array at 3 K chunks of 96 columns counted as keeping
  // up, and its multiplies then waited for the stationaries: sweep smoke point 3 +2.0 %).
  const double evacuation = double(h.vector_fixed_ns) + double(h.lane_access_ns) +
                            double(rows) / h.vector_elements_per_ns;
  return double(chunks) * multiply >= (double(chunks) / 2 + 1) * evacuation;
}

}  // namespace

// Output row tiles `ts` = A's row tiles `ts` times B, accumulating over B's row tiles `kc`
// (the K chunks; A's columns start at row0 - k_base). A's tiles are transposed through the
// array into stationary tiles, all of them first (one row tile: kStationaryLead K chunks ahead
// of the first column block's matmuls; or, `a_t`, loaded transposed from HBM by DMA, the first
// panel of a streamed B right after the first tile's); then, per column block of B (one PSUM
// bank wide), each output tile accumulates its K chunks in a bank and is evacuated to SBUF. A
// streamed B is loaded a panel at a time, the next panel while the current one is used. A
// K-interleaved B (Tiles::k_group) is read by k_rows / b_tile. With `a_id` (A is that value's
// tiles), A^T made through the array is kept as a derived form of the value when a later
// matmul reads the same A, and taken from there when an earlier one left it.

LowerResult matmul_block(LoweringContext& ctx, const Tiles& a, const std::vector<int64_t>& ts,
                         const Moving& b, const std::vector<int64_t>& kc, int64_t k_base,
                         const Tiles& out, const Narrow* narrow, const Bias* bias,
                         const Epilogue* epilogue, const HbmStationaries* a_t, int32_t a_id) {
  // K chunk k of a K-interleaved B (Tiles::k_group G > 1): column block k % G of row tile k / G,
  // B's rows (k / G) * G * tile rows + k % G + G * p; A's columns with stride G from there.
  const int64_t G = b.streamed ? 1 : b.tiles.k_group;
  const int64_t N = b.tiles.cols / G;
  const int64_t nmax = b.streamed ? b.block_cols : moving_cols(ctx);
  auto k_rows = [&](int64_t k) { return b.tiles.rows_in(k / G); };
  auto b_tile = [&](int64_t k, int64_t n0, int64_t ns) {
    return ctx.tile_ap(b.tiles, k / G, k % G * N + n0, ns);
  };
  const DType dt = b.tiles.dtype;
  auto load_panel = [&](int64_t n0) { return load_b_panel(ctx, b, kc, nmax, n0); };
  std::optional<Slot> panel = b.first_panel;
  std::deque<Slot> ahead;    // panels loaded after the current one, in the order they are read
  int64_t loaded_to = nmax;  // the first column whose panel is not loaded (panel 0 goes first)
  std::vector<std::vector<AtChunk>> at(ts.size());
  // A's first column in K chunk k (its columns col, col + G, ... when B is K-interleaved).
  auto a_col = [&](int64_t k) {
    return G > 1 ? b.tiles.row0(k / G) * G + k % G - k_base : b.tiles.row0(k) - k_base;
  };
  // A^T shared with other matmuls of A (derived forms): kept for a later one, or taken.
  const bool by_array = a_id >= 0 && !a_t && b.slab_cols == 0 && !(narrow && narrow->a_in_hbm);
  // Not in row windows: each window's A^T would stay beside the next window's.
  const bool keep = by_array && !ctx.in_window() && ctx.matmul_reads_a_later(a_id);
  std::vector<bool> taken(ts.size(), false);  // rows of `at` an earlier matmul made
  auto form_key = [&](size_t i, size_t j) {
    const int64_t k = kc[j];
    return LoweringContext::FormKey{
        a.row0(ts[i]), a.rows_in(ts[i]), a_col(k), k_rows(k), G, static_cast<int64_t>(dt)};
  };
  for (size_t i = 0; by_array && i < ts.size(); ++i) {
    std::vector<Slot> found;
    for (size_t j = 0; j < kc.size(); ++j) {
      auto s = ctx.derived_form(a_id, form_key(i, j));
      if (!s) break;
      found.push_back(*s);
    }
    if (found.size() == kc.size()) {
      for (Slot s : found) at[i].push_back({s, 0});
      taken[i] = true;
    }
  }
  // One row tile of A (a decode step's row, a prompt's tile): its stationaries are made a group
  // (of at most `lead` K chunks) ahead of the first column block's matmuls, not all before them,
  // so each later group overlaps the matmuls before it (fc2 of a decode step: 24 chunks).
  const size_t lead = !a_t && ts.size() == 1 && b.slab_cols == 0 && !(narrow && narrow->a_in_hbm)
                          ? std::min(static_cast<size_t>(kStationaryLead), kc.size())
                          : kc.size();
  // A^T of row tile ts[i], K chunk kc[j] and the chunks after it in its group (at_group):
  // transposed side by side into a bank (not `busy`, one accumulating now, nor, where another is
  // free, `draining`, one whose evacuation may still run) and evacuated into one buffer by one lane
  // instruction (its fixed cost once a group). A derived form or an A loaded from HBM chunk by
  // chunk goes a chunk at a time.
  auto stationary = [&](size_t i, size_t j, std::optional<Slot> busy,
                        std::optional<Slot> draining = std::nullopt) -> LowerResult {
    const int64_t t = ts[i];
    const int32_t rows = a.rows_in(t);
    const int64_t ks = k_rows(kc[j]);
    const bool grouped = !keep && !(narrow && narrow->a_in_hbm);
    const int64_t fit =
        at_group(ctx.arch().psum.bank_bytes, ctx.free_chunk(), rows, ts.size() == 1);
    size_t group = 1;
    while (grouped && j > 0 && j + group < kc.size() && int64_t(group) < fit &&
           k_rows(kc[j + group]) == ks)
      ++group;
    Slot tb = ctx.next_bank();
    if (busy && tb.index == busy->index) tb = ctx.next_bank();
    if (draining && tb.index == draining->index && ctx.psum_bank_count() > 2) {
      tb = ctx.next_bank();
      if (busy && tb.index == busy->index) tb = ctx.next_bank();
    }
    for (size_t g = 0; g < group; ++g) {
      const int64_t col = a_col(kc[j + g]);
      const AccessPattern tp =
          ctx.psum_ap(tb, static_cast<int32_t>(ks), rows, static_cast<int64_t>(g) * rows);
      if (narrow && narrow->a_in_hbm) {  // one K chunk of A's row tile
        const DType adt = narrow->a_dtype;
        auto piece = ctx.sbuf_alloc(ks * isa::dtype_bytes(adt), "a");
        if (!piece) return ctx.no_room();
        const AccessPattern p = LoweringContext::sbuf_ap(*piece, adt, rows, 0, ks);
        ctx.copy_rows(true, p,
                      ctx.hbm_ap(narrow->a, adt, narrow->a_view, a.row0(t), rows, col, ks));
        ctx.count_bytes_in(rows * ks * isa::dtype_bytes(adt));
        ctx.emit_transpose(tp, p);
        ctx.release(*piece);
      } else if (G > 1) {  // A's columns col, col + G, ...
        AccessPattern ap = ctx.tile_ap(a, t, col, 1);
        ap.free[0] = {ks, G};
        ctx.emit_transpose(tp, ap);
      } else {
        ctx.emit_transpose(tp, ctx.tile_ap(a, t, col, ks));
      }
    }
    const int64_t cols = static_cast<int64_t>(group) * rows;
    auto s = ctx.sbuf_alloc(cols * isa::dtype_bytes(dt), "at");
    if (!s) return ctx.no_room();
    for (size_t g = 0; g < group; ++g) at[i].push_back({*s, static_cast<int64_t>(g) * rows});
    ctx.evacuate(LoweringContext::sbuf_ap(*s, dt, static_cast<int32_t>(ks), 0, cols),
                 ctx.psum_ap(tb, static_cast<int32_t>(ks), cols));
    if (keep) ctx.keep_derived_form(a_id, form_key(i, j), *s);
    return std::nullopt;
  };
  // A's row tiles loaded in the order first read (Moving::first_panel): row tile i + 1's
  // stationaries are made during row tile i's multiplies of the first panel, one after each
  // multiply, not all before the first multiply (which then waited for every row tile of A).
  const bool one_ahead = b.first_panel && by_array && G == 1 && lead == kc.size() &&
                         ts.size() > 1 &&
                         std::none_of(taken.begin(), taken.end(), [](bool x) { return x; });
  for (size_t i = 0; i < ts.size(); ++i) {
    if (one_ahead && i > 0) break;
    const int64_t t = ts[i];
    const int32_t rows = a.rows_in(t);
    for (size_t j = 0; j < kc.size(); ++j) {
      const int64_t k = kc[j];
      if (a_t) {  // A^T straight from HBM, no PSUM or evacuation, into long-free bytes
        const int64_t ks = k_rows(k);
        const int64_t col =
            G > 1 ? b.tiles.row0(k / G) * G + k % G - k_base : b.tiles.row0(k) - k_base;
        auto s = ctx.sbuf_alloc(rows * isa::dtype_bytes(dt), "at", true);
        if (!s) return ctx.no_room();
        load_transposed(ctx, *s, a_t->a, dt, a_t->view, a.row0(t), rows, col,
                        static_cast<int32_t>(ks), a_t->base ? &*a_t->base : nullptr);
        at[i].push_back({*s, 0});
        // The first panel right after the first row tile's A^T: the multiplies start then.
        if (b.streamed && !panel && k == kc.back() && !(panel = load_panel(0)))
          return ctx.no_room();
        continue;
      }
      if (j >= lead || taken[i]) break;
      if (at[i].size() > j) continue;  // made with an earlier chunk of its group
      if (auto e = stationary(i, j, std::nullopt)) return e;
    }
  }
  if (a_t) ctx.release_held();  // the previous window's A^T, now that this one's is placed
  if (b.slab_cols > 0) {
    if (auto e = k_blocked(ctx, a, ts, at, b, kc, out, *narrow)) return e;
    for (const auto& row : at) release_chunks(row, [&](Slot s) { ctx.release(s); });
    return std::nullopt;
  }
  if (b.streamed && !panel && !(panel = load_panel(0))) return ctx.no_room();
  std::optional<OutRing> outs;
  if (narrow) outs.emplace(ctx, ts.size());
  std::optional<Slot> prev_bank;
  for (int64_t n0 = 0; n0 < N; n0 += nmax) {
    const int64_t ns = std::min(nmax, N - n0);
    if (ctx.too_large()) return ctx.too_large_error();
    // The panels after this one, up to b.buffers in all (two: the next one while this one is
    // read). A transposed panel is loaded after this one's matmuls: its transposes queue on
    // the array behind them, while its DMAs (on their own queues) run ahead.
    for (; b.streamed && !b.transposed && loaded_to < N && loaded_to < n0 + b.buffers * nmax;
         loaded_to += nmax) {
      auto p = load_panel(loaded_to);
      if (!p) return ctx.no_room();
      ahead.push_back(*p);
    }
    for (size_t i = 0; i < ts.size(); ++i) {
      const int64_t t = ts[i];
      const int32_t rows = a.rows_in(t);
      Slot bank = ctx.next_bank();
      // The stationaries made between two blocks moved the banks on: the previous block's
      // bank may come round again, and its evacuation would hold this block's first matmul.
      if (prev_bank && bank.index == prev_bank->index) bank = ctx.next_bank();
      const std::optional<Slot> draining = prev_bank;  // the previous block's, being evacuated
      if (lead < kc.size() || one_ahead) prev_bank = bank;
      const bool bias_by_array = bias && (bias->ones || bias->ident);
      for (size_t k = 0; k < kc.size(); ++k) {
        if (k + lead < kc.size() && at[i].size() == k + lead) {
          if (auto e = stationary(i, k + lead, bank)) return e;
        }
        const int32_t ks = k_rows(kc[k]);
        ctx.emit_matmul(ctx.psum_ap(bank, rows, ns), stationary_ap(at[i][k], dt, ks, rows),
                        b.streamed ? panel_ap(*panel, dt, k, ks, ns) : b_tile(kc[k], n0, ns),
                        k == 0, k + 1 == kc.size() && !bias_by_array);
        if (one_ahead && i + 1 < ts.size() && at[i + 1].size() == k) {
          if (auto e = stationary(i + 1, k, bank, draining)) return e;
        }
      }
      std::optional<AccessPattern> add;
      if (bias_by_array && bias->ones) {
        ctx.emit_matmul(ctx.psum_ap(bank, rows, ns),
                        LoweringContext::sbuf_ap(*bias->ones, bias->tiles->dtype, 1, 0, rows),
                        bias->ap(ctx, t, n0, ns, 1), false, true);
      } else if (bias_by_array) {
        ctx.emit_matmul(ctx.psum_ap(bank, rows, ns),
                        LoweringContext::sbuf_ap(*bias->ident, bias->tiles->dtype, rows, 0, rows),
                        bias->ap(ctx, t, n0, ns, rows), false, true);
      } else if (bias) {
        add = bias->ap(ctx, t, n0, ns, rows);
      }
      // PSUM (+ a bias the array did not add), then the epilogue, into `o`.
      auto evacuate = [&](const AccessPattern& o) {
        const AccessPattern ps = ctx.psum_ap(bank, rows, ns);
        const bool act = epilogue && epilogue->act, res = epilogue && epilogue->residual;
        if (add || (!act && !res)) ctx.evacuate(o, ps, add ? &*add : nullptr);
        const AccessPattern& from = add ? o : ps;
        if (act) ctx.activation(*epilogue->act, o, from);
        if (res) {
          ctx.tensor_tensor(AluOp::add, o, from,
                            ctx.operand_ap(*epilogue->residual, epilogue->how, t, n0, ns, rows));
        }
      };
      if (!narrow) {
        evacuate(ctx.tile_ap(out, t, n0, ns));
        continue;
      }
      const DType odt = out.dtype;
      auto block = ctx.sbuf_alloc(ns * isa::dtype_bytes(odt), "out");
      if (!block) return ctx.no_room();
      const AccessPattern o = LoweringContext::sbuf_ap(*block, odt, rows, 0, ns);
      evacuate(o);
      ctx.copy_rows(false,
                    ctx.hbm_ap(narrow->out, odt, narrow->out_view, out.row0(t), rows, n0, ns), o);
      ctx.count_bytes_out(rows * ns * isa::dtype_bytes(odt));
      outs->stored(*block);
    }
    if (b.streamed && b.transposed && n0 + nmax < N) {
      auto p = load_panel(n0 + nmax);
      if (!p) return ctx.no_room();
      ahead.push_back(*p);
    }
    if (b.streamed) {
      // The last but one panel's bytes take the next window's first panel: its readers are
      // done a panel earlier than the last one's, so that load overlaps the last panel.
      const bool keep = a_t && ctx.in_window() && n0 + nmax < N && n0 + 2 * nmax >= N;
      keep ? ctx.keep_for_next(*panel, static_cast<int64_t>(kc.size()) * ns * isa::dtype_bytes(dt))
           : ctx.release(*panel);
      panel.reset();
      if (!ahead.empty()) {
        panel = ahead.front();
        ahead.pop_front();
      }
    }
  }
  for (size_t i = 0; i < at.size(); ++i) {
    if (taken[i] || keep) continue;  // the value's derived forms
    release_chunks(at[i],
                   [&](Slot s) { a_t&& ctx.in_window() ? ctx.release_later(s) : ctx.release(s); });
  }
  return std::nullopt;
}

LowerResult lower_matmul(LoweringContext& ctx, const Node& n) {
  if (const MatmulSchedule* s = ctx.matmul_schedule(n.id); s && s->conv_window)
    return lower_window_matmul(ctx, n);
  const int32_t aid = n.inputs[0];
  // Sized as the footprint sized them, before A's row tiles are loaded (matmul_blocking.h).
  const MatmulBlocking blocking = matmul_blocking(ctx, n);
  // A schedule that loads A and B in the order the multiplies read them cuts them fine.
  const MatmulSchedule* point = ctx.matmul_schedule(n.id);
  const FineLoadsScope fine_loads(ctx, point && point->fine_loads);
  const bool narrow = blocking.narrow;
  Narrow nw;
  std::optional<Tiles> a;
  std::optional<HbmStationaries> a_t;
  // A K-interleaved B (loaded now, or prefetched so) takes A^T from the array, whose
  // transposes read A's columns strided.
  const int32_t bid = n.inputs[1];
  const int64_t kt = blocking.k_interleave;
  const bool interleaved = kt > 0 || (ctx.on_chip(bid) && ctx.tiles_of(bid)->k_group > 1);
  const TensorType& bt = ctx.type_of(bid);
  const View bv = view_of(bt);
  Moving b;
  bool b_ready = false;
  // A streamed plain B (the schedule's panels) as the operand it is: its HBM tensor and tiling.
  auto streamed_b = [&]() -> bool {
    b.streamed = true;
    b.block_cols = blocking.block_cols;
    b.slab_cols = blocking.slab_cols;
    b.slab_block = blocking.slab_block;
    b.slab_ring = blocking.slab_ring;
    b.buffers = panel_buffers(ctx, n);
    if (!ctx.ensure_hbm(bid)) return false;
    b.hbm = ctx.hbm_tensor(bid, isa::TensorRole::input);
    b.tiles = ctx.tiling(bv.rows, bv.cols, bt.dtype);
    return true;
  };
  if (!narrow && !interleaved && stationary_route(ctx, n) != TransposeRoute::array) {
    const TensorType& at = ctx.type_of(aid);
    std::optional<ViewDesc> base;
    if (ctx.is_view(aid)) base = ctx.view_of_value(aid);
    const int32_t src = base ? base->base : aid;
    if (!ctx.ensure_hbm(src)) return ctx.no_room();
    a_t = HbmStationaries{ctx.hbm_tensor(src, isa::TensorRole::input), view_of(at), at.dtype, base};
    a = ctx.tiling(a_t->view.rows, a_t->view.cols, at.dtype, run_of(at), aid);
  } else if (narrow && !ctx.on_chip(aid)) {
    // Too wide for a row tile: A stays in HBM (a view is materialised), read by K chunks.
    if (const auto by_array = transposed_into_hbm_by_array(ctx, aid); by_array && !*by_array)
      return ctx.no_room();
    if (!ctx.ensure_hbm(aid)) return ctx.no_room();
    const TensorType& at = ctx.type_of(aid);
    nw.a_in_hbm = true;
    nw.a = ctx.hbm_tensor(aid, isa::TensorRole::input);
    nw.a_view = view_of(at);
    nw.a_dtype = at.dtype;
    a = ctx.tiling(nw.a_view.rows, nw.a_view.cols, at.dtype, run_of(at), aid);
  } else if (point && point->fine_loads && !narrow && !ctx.on_chip(aid) && !ctx.is_view(aid) &&
             !ctx.is_view(bid) && bid != aid && streams_b(ctx, n) && blocking.slab_cols == 0) {
    // Loads in the order the multiplies first read them (what predict_matmul's prologue
    // prices): A's first row tile and the next (whose stationaries are made during the first
    // one's multiplies, matmul_block), B's first panel (the first row tile's multiplies read
    // all of it), then A's other row tiles. A's row tiles all before the panel held the first
    // multiply until every one had landed (trn2 1024^3: the first multiply at 10.6 us).
    const DType at_dtype = ctx.type_of(aid).dtype;
    a = ctx.tiles_of(aid, [&](int64_t t, int64_t tiles) {
      if (t != std::min<int64_t>(2, tiles) - 1 || tiles < 2) return;
      const int64_t chunks = ctx.tiling(bv.rows, bv.cols, bt.dtype).count();
      if (!stationaries_keep_up(ctx, chunks, std::min(blocking.block_cols, bv.cols),
                                ctx.tile_rows(),
                                bt.dtype == DType::fp32 || at_dtype == DType::fp32) ||
          !streamed_b())
        return;
      b_ready = true;
      // A fused bias row before the panel: its broadcast to every partition is one DMA on one
      // queue, longer than the panel's, and the first evacuation reads it. Issued after the
      // panel (or after A's other row tiles), it started behind them on its queue and held the
      // first evacuations (trn2 GPT-2 MLP fc1, 512x768x3072: +3.2 us).
      if (n.inputs.size() > 2) {
        const View bias_v = view_of(ctx.type_of(n.inputs[2]));
        if (bias_v.rows == 1 && (bias_v.cols == bv.cols || bias_v.cols == 1) &&
            !ctx.on_chip(n.inputs[2]))
          ctx.replicated(n.inputs[2]);  // kept by the context: the operand below finds it
      }
      std::vector<int64_t> kc(b.tiles.starts.size());
      for (size_t k = 0; k < kc.size(); ++k) kc[k] = static_cast<int64_t>(k);
      b.first_panel = load_b_panel(ctx, b, kc, b.block_cols, 0);
    });
  } else {
    a = ctx.tiles_of(aid);
  }
  if (!a) return ctx.no_room();
  if (narrow) {
    const int64_t need = row_tile_bytes(ctx, n, true);
    if (need > ctx.sbuf_capacity()) {
      return ctx.error(
          "one row tile of the matmul needs " + std::to_string(need) +
          " bytes per partition (A^T of K = " + std::to_string(view_of(ctx.type_of(aid)).cols) +
          " and one output column block) but SBUF has " + std::to_string(ctx.sbuf_capacity()));
    }
  }
  // Asked again now A's row tiles are loaded: they may be B's (x @ x), which then is on chip.
  if (b_ready) {
    // set up (and its first panel loaded) beside A's first row tile
  } else if (streams_b(ctx, n)) {
    b.streamed = true;
    b.block_cols = blocking.block_cols;
    b.slab_cols = blocking.slab_cols;
    b.slab_block = blocking.slab_block;
    b.slab_ring = blocking.slab_ring;
    b.buffers = panel_buffers(ctx, n);
    if (ctx.is_view(bid)) {
      b.view = ctx.view_of_value(bid);
      const auto& g = b.view->groups;
      b.transposed = g[0].size() == 1 && g[0][0].stride == 1 && g[1].size() == 1 &&
                     g[1][0].stride >= g[0][0].size;
      if (!ctx.ensure_hbm(b.view->base)) return ctx.no_room();
      b.hbm = ctx.hbm_tensor(b.view->base, isa::TensorRole::input);
    } else {
      if (!ctx.ensure_hbm(bid)) return ctx.no_room();
      b.hbm = ctx.hbm_tensor(bid, isa::TensorRole::input);
    }
    b.tiles = ctx.tiling(bv.rows, bv.cols, bt.dtype);
  } else {
    auto tiles = kt ? ctx.interleaved_tiles_of(bid, kt) : matmul_b_by_array(ctx, n);
    if (!tiles) tiles = ctx.tiles_of(bid);
    if (!tiles) return ctx.no_room();
    b.tiles = *tiles;
  }
  std::vector<int64_t> ts(static_cast<size_t>(a->count())),
      kc(b.tiles.starts.size() * static_cast<size_t>(b.streamed ? 1 : b.tiles.k_group));
  for (size_t t = 0; t < ts.size(); ++t) ts[t] = static_cast<int64_t>(t);
  for (size_t k = 0; k < kc.size(); ++k) kc[k] = static_cast<int64_t>(k);
  Bias bias;
  Tiles shape = *a;  // the output's rows and columns, for the bias's broadcast
  shape.cols = view_of(n.type).cols;
  if (n.inputs.size() > 2) {
    if (auto e = ctx.operand(n.inputs[2], shape, bias.how, bias.tiles)) return e;
    if (bias.how == Bcast::row && isa::is_float(bias.tiles->dtype) &&
        bias.tiles->dtype == b.tiles.dtype) {
      const DType bdt = bias.tiles->dtype;
      bias.ones = ctx.sbuf_alloc(ctx.tile_rows() * isa::dtype_bytes(bdt), "ones");
      if (!bias.ones) return ctx.no_room();
      Instruction fill =
          LoweringContext::vec(Opcode::memset, ctx.sbuf_ap(*bias.ones, bdt, 1, 0, ctx.tile_rows()));
      fill.value = 1.0;
      ctx.emit(ctx.stream(Engine::vector), fill);
    } else if (bias.how == Bcast::none && a->count() == 1 && isa::is_float(bias.tiles->dtype) &&
               bias.tiles->dtype == b.tiles.dtype) {
      bias.ident = ctx.identity(a->rows_in(0), bias.tiles->dtype);
      if (!bias.ident) return ctx.no_room();
    }
  }
  const Bias* fused = n.inputs.size() > 2 ? &bias : nullptr;
  Epilogue epi;
  if (const int64_t* act = n.int_attr(kEpilogueAct)) epi.act = static_cast<ActFn>(*act);
  if (n.inputs.size() > 3) {
    if (ctx.row_windowed(n)) return ctx.error("a matmul with a residual runs in no row windows");
    if (auto e = ctx.operand(n.inputs[3], shape, epi.how, epi.residual)) return e;
  }
  const Epilogue* epilogue = epi.act || epi.residual ? &epi : nullptr;
  struct ReleaseOnes {
    LoweringContext& ctx;
    const Bias& bias;
    ~ReleaseOnes() {
      if (bias.ones) ctx.release(*bias.ones);
    }
  } release_ones{ctx, bias};
  if (narrow) {
    const isa::TensorRole role =
        ctx.needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch;
    nw.out = ctx.hbm_tensor(n.id, role);
    nw.out_view = view_of(n.type);
    Tiles out = *a;
    out.cols = nw.out_view.cols;
    out.dtype = n.type.dtype;
    out.tiles.clear();
    if (auto e = matmul_block(ctx, *a, ts, b, kc, 0, out, &nw, fused, epilogue, nullptr,
                              nw.a_in_hbm ? -1 : aid)) {
      return e;
    }
    ctx.alias_hbm(n.id, nw.out);
    return std::nullopt;
  }
  auto out = ctx.output_tiles(n, &*a);
  if (!out) return ctx.no_room();
  return matmul_block(ctx, *a, ts, b, kc, 0, *out, nullptr, fused, epilogue, a_t ? &*a_t : nullptr,
                      aid);
}

void populate_matmul_lowerings(LoweringTable& table) {
  table.add(OpKind::matmul, lower_matmul);
  table.add(OpKind::batch_matmul, lower_batch_matmul);
}

}  // namespace wallsim::compiler_stub::lowering
