// The fused-attention family: `attention` (prefill and packed sequences) as one flash-style
// kernel. Scores and probabilities never leave PSUM and SBUF; K and V are read once per group
// of heads, so the op's HBM traffic grows as O(L x D), not O(L^2).
#include <algorithm>
#include <deque>
#include <functional>

#include "lowering/attention_aps.h"
#include "lowering/fused_attention.h"

namespace wallsim::compiler_stub::lowering {

LowerResult FusedAttention::run() {
  if (auto e = make(m_ctx, m_n)) return e;
  ++m_ctx.attention_search.searched;
  m_ctx.attention_search.candidates = static_cast<int64_t>(points().size());
  m_ctx.attention_search.predicted_ns += predicted_ns();
  if (auto e = prepare()) return e;
  // The steps in order: the softmax of step k - 1, the scores of step k, the P^T of step
  // k - 3 and the P.V of step k - 5, so that no engine waits for work another engine is
  // given in the same round or the one before: the exponential a P^T reads and the copy out
  // of PSUM a P.V reads have a step of other array work to hide behind (the two passes'
  // steps alternate, so that is one step of each).
  std::deque<Step> scored, exped, transposed;
  // Runs `stage` on the steps of `from` beyond the newest `keep`, moving them to `to`.
  auto drain = [](std::deque<Step>& from, std::deque<Step>* to, size_t keep,
                  const std::function<LowerResult(Step&)>& stage) -> LowerResult {
    while (from.size() > keep) {
      if (auto e = stage(from.front())) return e;
      if (to) to->push_back(from.front());
      from.pop_front();
    }
    return std::nullopt;
  };
  auto softmax = [&](Step& st) { return stage_softmax(st); };
  auto pt = [&](Step& st) { return stage_pt(st); };
  auto pv = [&](Step& st) { return stage_pv(st); };
  auto advance = [&](size_t keep) -> LowerResult {
    if (auto e = drain(scored, &exped, keep, softmax)) return e;
    if (auto e = drain(exped, &transposed, keep, pt)) return e;
    return drain(transposed, nullptr, keep, pv);
  };
  auto emit = [&](Step st) -> LowerResult {
    if (auto e = drain(scored, &exped, 0, softmax)) return e;
    if (auto e = stage_scores(st)) return e;
    scored.push_back(st);
    if (auto e = drain(exped, &transposed, 2, pt)) return e;
    return drain(transposed, nullptr, 2, pv);
  };
  // Two passes: the maxima pass of query tile n (vector-bound) interleaved step by step with
  // the exp and P.V pass of tile n - 1 (scalar- and tensor-bound), so the engines overlap;
  // tile n's maxima step first, so that tile n - 1's first exponential does not wait on the
  // vector engine for its final maxima. Each query tile's Q^T is made during the previous
  // tile's last maxima step.
  {
    std::optional<Step> prev;
    for (int64_t g = 0; g < m_groups; ++g) {
      for (int64_t s = 0; s < m_sequences; ++s) {
        for (int64_t i : m_qt_of_seq[s]) {
          if (keys_for(s, i).empty()) continue;
          Step st{g, s, i, 0, true, false, 0, {}, m_two_pass ? 1 : 0, std::nullopt, false};
          if (prev) m_next_item[{prev->g, prev->i}] = st;
          prev = st;
        }
      }
    }
  }
  std::vector<Step> second, order;
  for (int64_t g = 0; g < m_groups; ++g) {
    for (int64_t s = 0; s < m_sequences; ++s) {
      for (int64_t i : m_qt_of_seq[s]) {
        const auto keys = keys_for(s, i);
        std::vector<Step> first;
        for (size_t jj = 0; jj < keys.size(); ++jj) {
          Step st{g,
                  s,
                  i,
                  keys[jj],
                  jj == 0,
                  jj + 1 == keys.size(),
                  0,
                  {},
                  m_two_pass ? 1 : 0,
                  std::nullopt,
                  false};
          first.push_back(st);
        }
        for (size_t x = 0; x < std::max(first.size(), second.size()); ++x) {
          if (x < first.size()) order.push_back(first[x]);
          if (x < second.size()) order.push_back(second[x]);
        }
        second.clear();
        if (m_two_pass) {
          for (Step st : first) {
            st.pass = 2;
            second.push_back(st);
          }
        }
      }
    }
  }
  order.insert(order.end(), second.begin(), second.end());
  // A step's mask tile (compared from the ids, or loaded) is made `ahead` steps before its
  // scores, so that the vector engine does not wait for the array's scores of the step whose
  // mask it has just made (mask:seq=2048 chip on trn2: attention 0.645 ms
  // exposed at 0 steps ahead, 0.474 at 1, 0.416 at 2, 0.413 at 3).
  const size_t ahead = 3;
  for (size_t x = 0; x < order.size(); ++x) {
    for (size_t y = x; y < std::min(order.size(), x + ahead + 1); ++y) {
      if (auto e = prepare_mask(order[y])) return e;
    }
    if (auto e = emit(order[x])) return e;
  }
  if (auto e = advance(0)) return e;
  for (Slot s : m_op_buffers) m_ctx.release(s);
  if (m_stream_out) m_ctx.alias_hbm(m_n.id, m_out_hbm);
  return std::nullopt;
}

std::optional<Slot> FusedAttention::alloc(int64_t elems, DType dt, const char* hint) {
  return m_ctx.sbuf_alloc(elems * isa::dtype_bytes(dt), hint);
}

void FusedAttention::vector_op(Opcode op, const AccessPattern& dst, double value, double pstep,
                               double step) {
  Instruction in = LoweringContext::vec(op, dst);
  in.value = value;
  in.partition_step = pstep;
  in.step = step;
  m_ctx.emit(m_ctx.stream(Engine::vector), in);
}

bool FusedAttention::operand(Operand& o, int32_t id, const Tiles& tiling) {
  o.id = id;
  o.dt = m_ctx.type_of(id).dtype;
  if (m_ctx.on_chip(id)) {
    auto t = m_ctx.tiles_of(id);
    if (t && t->same_tiling(tiling)) {
      o.tiles = t;
      return true;
    }
  }
  if (!m_ctx.ensure_hbm(id)) return false;
  o.hbm = m_ctx.hbm_tensor(id, isa::TensorRole::input);
  return true;
}

AccessPattern FusedAttention::rows_of(const Operand& o, const Tiles& tiling, int64_t t, int64_t c0,
                                      int64_t nc, std::optional<Slot>& tmp, int64_t tmp_off) {
  if (o.tiles) return LoweringContext::tile_ap(*o.tiles, t, c0, nc);
  if (!tmp) tmp = alloc(nc, o.dt, "attn_in");
  if (!tmp) return {};
  const AccessPattern dst = ap(*tmp, o.dt, tiling.rows_in(t), tmp_off, nc);
  m_ctx.copy_rows(true, dst,
                  LoweringContext::hbm_ap(o.hbm, o.dt, View{tiling.rows, m_D}, tiling.row0(t),
                                          tiling.rows_in(t), c0, nc));
  m_ctx.count_bytes_in(int64_t{tiling.rows_in(t)} * nc * isa::dtype_bytes(o.dt));
  return dst;
}

LowerResult FusedAttention::prepare() {
  if (!operand(m_q, m_n.inputs[0], m_qtiles) || !operand(m_k, m_n.inputs[1], m_ktiles) ||
      !operand(m_v, m_n.inputs[2], m_ktiles)) {
    return m_ctx.no_room();
  }
  // The mask is read from HBM by rows: a value of the group (or a view) is stored first.
  if (m_n.inputs.size() > 3 && !m_ctx.ensure_hbm(m_n.inputs[3])) return m_ctx.no_room();
  if (m_stream_out) {
    m_out_hbm = m_ctx.hbm_tensor(
        m_n.id, m_ctx.needed_outside(m_n.id) ? isa::TensorRole::output : isa::TensorRole::scratch);
  } else {
    // The output is tiled plainly, as its consumers expect; when sequences do not start on
    // a tile, each query tile's result moves to its rows by SBUF-to-SBUF DMA.
    m_out_direct = m_ctx.tiling(m_Lq, m_D, m_odt, run_of(m_n.type)).same_tiling(m_qtiles);
    auto out = m_ctx.output_tiles(m_n, m_out_direct ? &m_qtiles : nullptr);
    if (!out) return m_ctx.no_room();
    m_out = *out;
  }
  const int32_t T = m_T;
  // The identity (times -2^30 for 0/1 masks, times 1 for a bias) from iota and a compare.
  auto diff = alloc(T, DType::fp32, "attn_iota");
  if (!diff) return m_ctx.no_room();
  const AccessPattern d = ap(*diff, DType::fp32, T, 0, T);
  vector_op(Opcode::iota, d, 0, 1, -1);
  m_ctx.tensor_scalar(AluOp::eq, d, d, 0.0);
  auto ident = [&](DType dt, double v) -> std::optional<Slot> {
    auto s = alloc(T, dt, "attn_ident");
    if (!s) return s;
    m_op_buffers.push_back(*s);
    m_ctx.tensor_scalar(AluOp::mul, ap(*s, dt, T, 0, T), d, v);
    return s;
  };
  if (m_causal || m_segments) {
    auto s = ident(DType::bf16, kMasked);
    if (!s) return m_ctx.no_room();
    m_neg_ident = *s;
  }
  {
    auto s = ident(DType::bf16, -1.0);
    if (!s) return m_ctx.no_room();
    m_minus_ident = *s;
  }
  if (m_sums_by_array) {  // a ones column: P^T . 1 sums each head's row of P
    auto s = alloc(1, m_kvdt, "attn_ones");
    if (!s) return m_ctx.no_room();
    m_op_buffers.push_back(*s);
    m_ones = *s;
    vector_op(Opcode::memset, ap(*s, m_kvdt, T, 0, 1), 1.0, 0, 0);
  }
  if (m_bias) {
    auto s = ident(m_bdt, 1.0);
    if (!s) return m_ctx.no_room();
    m_bias_ident = *s;
    m_bias_hbm = m_ctx.hbm_tensor(m_n.inputs[3], isa::TensorRole::input);
  }
  // The causal tile, transposed (keys on partitions): 1 where the key is after the query.
  // Query and key tiles start together, so one tile serves every diagonal. From iota
  // (key - query) and a compare.
  if (m_causal) {
    auto c = alloc(T, DType::bf16, "attn_causal");
    if (!c) return m_ctx.no_room();
    m_op_buffers.push_back(*c);
    vector_op(Opcode::iota, d, 0, 1, -1);
    m_ctx.tensor_scalar(AluOp::gt, ap(*c, DType::bf16, T, 0, T), d, 0.0);
    m_causal_tile = *c;
  }
  m_ctx.release(*diff);
  if (m_segments) {  // the keys' segment ids, one per partition, a column per key tile
    m_seg_hbm = m_ctx.hbm_tensor(m_n.inputs[3], isa::TensorRole::input);
    auto c = alloc(m_ktiles.count(), DType::int32, "attn_segk");
    if (!c) return m_ctx.no_room();
    m_op_buffers.push_back(*c);
    m_seg_cols = *c;
    for (int64_t j = 0; j < m_ktiles.count(); ++j) {
      m_ctx.dma(m_ctx.next_load_queue(), ap(*c, DType::int32, m_ktiles.rows_in(j), j, 1),
                LoweringContext::ids_ap(m_seg_hbm, m_ktiles, j));
    }
    m_ctx.count_bytes_in(m_Lk * 4);
  }
  return std::nullopt;
}

Slot FusedAttention::other_bank() {
  const int64_t first = m_two_pass ? 5 : 2;  // scores; two passes: and O of two query tiles
  return m_ctx.psum_bank(
      static_cast<size_t>(first + m_others++ % (m_ctx.psum_bank_count() - first)));
}

void FusedAttention::transpose_heads(const AccessPattern& src, int64_t g, Slot dst, int64_t col0,
                                     int64_t cols, int64_t stack_stride, double scale) {
  const int64_t ng = heads_in(g);
  for (int64_t h0 = 0; h0 < ng; h0 += m_stack) {
    const int64_t ns = std::min(m_stack, ng - h0);
    const Slot bank = other_bank();
    const int32_t parts = static_cast<int32_t>(ns * m_hd);
    AccessPattern s = src;
    s.offset += h0 * m_hd;
    s.free[0].size = ns * m_hd;
    m_ctx.emit_transpose(LoweringContext::psum_ap(bank, parts, src.partitions), s);
    const AccessPattern to = ap(dst, m_kvdt, parts, col0 + (h0 / m_stack) * stack_stride, cols);
    const AccessPattern from = LoweringContext::psum_ap(bank, parts, cols);
    if (scale == 1.0) {
      m_ctx.evacuate(to, from);  // K^T: a copy, by the less loaded engine
    } else {
      m_ctx.activation(ActFn::identity, to, from, scale);  // Q^T scaled on its way out
    }
  }
}

std::pair<int32_t, int64_t> FusedAttention::stacked(int64_t h, int64_t stack_stride) const {
  return {static_cast<int32_t>((h % m_stack) * m_hd), (h / m_stack) * stack_stride};
}

LowerResult FusedAttention::start_keys(int64_t g, int64_t s) {
  const auto& tiles = m_kt_of_seq[static_cast<size_t>(s)];
  const int64_t L = int64_t(tiles.size()) * m_T;
  const int64_t stacks = (heads_in(g) + m_stack - 1) / m_stack;
  Keys k;
  if (m_kt_resident) {
    auto kt = alloc(stacks * L, m_kvdt, "attn_kt");
    if (!kt) return m_ctx.no_room();
    k.kt = *kt;
  }
  const int64_t cols = heads_in(g) * m_hd;
  if (!m_v.tiles) {
    for (size_t x = 0; x < tiles.size(); ++x) {
      auto one = alloc(cols, m_kvdt, "attn_v");
      if (!one) return m_ctx.no_room();
      k.v.push_back(*one);
    }
  }
  // K^T: the key tiles that fill a PSUM bank side by side go through the array into one
  // bank per stack of heads and leave it in one copy.
  const int64_t per_bank = std::max<int64_t>(1, m_ctx.arch().psum.bank_bytes / 4 / m_T);
  for (size_t x0 = 0; m_kt_resident && x0 < tiles.size(); x0 += size_t(per_bank)) {
    const size_t x1 = std::min(tiles.size(), x0 + size_t(per_bank));
    std::vector<std::optional<Slot>> tmps(x1 - x0);
    std::vector<AccessPattern> srcs;
    for (size_t x = x0; x < x1; ++x) {
      srcs.push_back(rows_of(m_k, m_ktiles, tiles[x], g * m_G * m_hd, cols, tmps[x - x0]));
      if (!srcs.back().valid()) return m_ctx.no_room();
    }
    const int64_t width = int64_t(x1 - 1 - x0) * m_T + m_ktiles.rows_in(tiles[x1 - 1]);
    for (int64_t h0 = 0; h0 < heads_in(g); h0 += m_stack) {
      const int64_t ns = std::min(m_stack, heads_in(g) - h0);
      const auto parts = static_cast<int32_t>(ns * m_hd);
      const Slot bank = other_bank();
      for (size_t x = x0; x < x1; ++x) {
        AccessPattern a = srcs[x - x0];
        a.offset += h0 * m_hd;
        a.free[0].size = ns * m_hd;
        m_ctx.emit_transpose(
            LoweringContext::psum_ap(bank, parts, a.partitions, int64_t(x - x0) * m_T), a);
      }
      m_ctx.evacuate(ap(*k.kt, m_kvdt, parts, (h0 / m_stack) * L + int64_t(x0) * m_T, width),
                     LoweringContext::psum_ap(bank, parts, width));
    }
    for (auto& t : tmps) {
      if (t) m_ctx.release(*t);
    }
  }
  for (size_t x = 0; x < tiles.size(); ++x) {
    const int64_t j = tiles[x];
    if (!k.v.empty()) {
      std::optional<Slot> vs = k.v[x];
      rows_of(m_v, m_ktiles, j, g * m_G * m_hd, cols, vs);
    }
  }
  for (int64_t i : m_qt_of_seq[static_cast<size_t>(s)]) {
    k.steps_left += static_cast<int64_t>(keys_for(s, i).size()) * (m_two_pass ? 2 : 1);
  }
  m_keys[{g, s}] = k;
  return std::nullopt;
}

LowerResult FusedAttention::start_item(const Step& st) {
  if (m_items.count({st.g, st.i})) return std::nullopt;
  if (!m_keys.count({st.g, st.s})) {
    if (auto e = start_keys(st.g, st.s)) return e;
  }
  const int64_t ng = heads_in(st.g), rows = m_qtiles.rows_in(st.i);
  const int64_t stacks = (ng + m_stack - 1) / m_stack;
  Item it;
  auto qt = alloc(stacks * m_T, m_kvdt, "attn_qt");
  auto m0 = alloc(m_G, DType::bf16, "attn_m");
  auto m1 = alloc(m_G, DType::bf16, "attn_m");
  auto l = alloc(m_G, DType::fp32, "attn_l");
  auto o =
      m_two_pass ? alloc(m_T, DType::bf16, "attn_mt") : alloc(m_G * m_hd, DType::fp32, "attn_o");
  if (!qt || !m0 || !m1 || !l || !o) return m_ctx.no_room();
  it.qt = *qt;
  it.m[0] = *m0;
  it.m[1] = *m1;
  it.l = *l;
  (m_two_pass ? it.mt : it.o) = *o;
  if (m_two_pass) it.ob = m_ctx.psum_bank(static_cast<size_t>(3 + m_items_started++ % 2));
  std::optional<Slot> tmp;
  AccessPattern src;
  if (auto a = m_q_ahead.find({st.g, st.i}); a != m_q_ahead.end()) {
    src = a->second.first;
    tmp = a->second.second;
    m_q_ahead.erase(a);
  } else {
    src = rows_of(m_q, m_qtiles, st.i, st.g * m_G * m_hd, ng * m_hd, tmp);
  }
  if (!src.valid()) return m_ctx.no_room();
  // The next query tile's rows from HBM now, an item ahead of their transposes: its load then
  // has this item's steps to hide behind, whatever bytes it waits to reuse. Only when it
  // shares this item's keys: a next head group's or sequence's K and V are to load first
  // (trn1, fp32 L = 128, 16 heads of 128: 119.5 us without, 136.4 us with that load ahead).
  if (auto nx = m_next_item.find({st.g, st.i}); nx != m_next_item.end() && !m_q.tiles &&
                                                nx->second.g == st.g && nx->second.s == st.s &&
                                                !m_items.count({nx->second.g, nx->second.i})) {
    const Step& n = nx->second;
    std::optional<Slot> ntmp;
    const AccessPattern nsrc =
        rows_of(m_q, m_qtiles, n.i, n.g * m_G * m_hd, heads_in(n.g) * m_hd, ntmp);
    if (!nsrc.valid() || !ntmp) return m_ctx.no_room();
    m_q_ahead[{n.g, n.i}] = {nsrc, *ntmp};
  }
  transpose_heads(src, st.g, it.qt, 0, rows, m_T, attention_scale(m_n));
  if (tmp) m_ctx.release(*tmp);
  if (m_segments) {  // the queries' segment ids as a row on every partition
    auto c = alloc(rows, DType::int32, "attn_segq");
    if (!c) return m_ctx.no_room();
    AccessPattern src = LoweringContext::hbm_ap(m_seg_hbm, DType::int32, View{1, m_Lq}, 0, m_T,
                                                m_qtiles.row0(st.i), rows);
    src.partition_stride = 0;
    m_ctx.dma(m_ctx.next_load_queue(), ap(*c, DType::int32, m_T, 0, rows), src);
    m_ctx.count_bytes_in(rows * 4);
    m_seg_rows[{st.g, st.i}] = *c;
  }
  m_items[{st.g, st.i}] = it;
  return std::nullopt;
}

LowerResult FusedAttention::keys_done(const Step& st, Keys& ks) {
  if (--ks.steps_left == 0) {
    if (ks.kt) m_ctx.release(*ks.kt);
    for (Slot v : ks.v) m_ctx.release(v);
    m_keys.erase({st.g, st.s});
  }
  return std::nullopt;
}

namespace {

LowerResult lower_attention(LoweringContext& ctx, const Node& n) {
  if (decode_row_attention_applies(ctx, n)) return lower_decode_row_attention(ctx, n);
  return FusedAttention(ctx, n).run();
}

}  // namespace

void populate_fused_attention_lowerings(LoweringTable& table) {
  table.add(OpKind::attention, lower_attention);
}

}  // namespace wallsim::compiler_stub::lowering
