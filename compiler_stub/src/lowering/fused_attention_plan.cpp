// FusedAttentionPlan: the fused attention kernel's plan (fused_attention.h), apart from its
// emission.
#include <algorithm>

#include "lowering/fused_attention.h"

namespace wallsim::compiler_stub::lowering {

LowerResult FusedAttentionPlan::make(const LoweringContext& ctx, const Node& n) {
  const int32_t qid = n.inputs[0], kid = n.inputs[1];
  const TensorType& qt = ctx.type_of(qid);
  const TensorType& kt = ctx.type_of(kid);
  m_T = ctx.tile_rows();
  m_Lq = view_of(qt).rows;
  m_Lk = view_of(kt).rows;
  m_D = qt.dims.back().size;
  m_H = *n.int_attr("heads");
  m_hd = m_D / m_H;
  const int64_t* causal = n.int_attr("causal");
  m_causal = causal && *causal != 0;
  // [B, L, D] operands are B sequences of L rows, tiled as such (as `seq` = L on [B L, D]).
  m_batched = qt.dims.size() == 3 && qt.dims[0].size > 1;
  const int64_t* seq_attr = n.int_attr("seq");
  const int64_t seq_rows = m_batched ? qt.dims[1].size : seq_attr ? *seq_attr : 0;
  const int64_t* seq = seq_rows ? &seq_rows : nullptr;
  m_seq = seq ? *seq : std::max(m_Lq, m_Lk);
  m_sequences = seq ? m_Lq / m_seq : 1;
  m_kvdt = kt.dtype;
  m_odt = n.type.dtype;
  if (n.inputs.size() > 3) {
    const DType mdt = ctx.type_of(n.inputs[3]).dtype;
    (mdt == DType::int32 ? m_segments : m_bias) = true;
    m_bdt = mdt;
  }
  const int64_t bank_cols = ctx.arch().psum.bank_bytes / 4;
  const int64_t C = moving_cols(ctx);
  if (m_hd > m_T) {
    return ctx.error("head width " + std::to_string(m_hd) + " exceeds the " + std::to_string(m_T) +
                     " rows of the array");
  }
  if (m_hd > C || C < m_T) return ctx.error("a PSUM bank is narrower than a key tile");
  if (ctx.psum_bank_count() < 6) return ctx.error("needs at least 6 PSUM banks");
  // Two passes over the keys when PSUM holds O of two query tiles beside the rotation: the
  // first takes the row maxima, the second exp(S - m) and P.V accumulated in PSUM, so no
  // rescale of O or l is ever made (the vector engine's per-step work is the max alone).
  // A dense bias would be read from HBM twice: it keeps the online softmax (one pass).
  m_two_pass = ctx.psum_bank_count() >= 8 && !m_bias;
  // G heads side by side: G key tiles in S, G P^T tiles, G output blocks in one bank each.
  const int64_t G0 = std::max<int64_t>(1, std::min({m_H, C / m_T, bank_cols / m_hd}));
  m_G = G0;
  const int32_t align = ctx.arch().partition_alignment;
  auto stack_of = [&](int64_t G) {
    return m_hd % align == 0 ? std::max<int64_t>(1, std::min(G, m_T / m_hd)) : 1;
  };
  // A sequence's K^T and V stay on chip for a head group when they fit the budget: the larger
  // of compiler.attention_pipeline_percent of the SBUF the op's on-chip operands leave and
  // what those leave beyond twice the pipeline's own working set (fewer heads per group until
  // they do); else K^T is made again per step from K's tile.
  const int64_t keys = std::min(m_seq, m_Lk), kvb = isa::dtype_bytes(m_kvdt);
  const int64_t key_tiles = (keys + m_T - 1) / m_T;
  int64_t pinned = 0;
  for (int32_t id : n.inputs) {
    if (ctx.on_chip(id)) {
      const TensorType& t = ctx.type_of(id);
      const View v = view_of(t);
      pinned += (v.rows + m_T - 1) / m_T * v.cols * isa::dtype_bytes(t.dtype);
    }
  }
  const int64_t share = ctx.options().attention_pipeline_percent;
  const int64_t left = std::max<int64_t>(0, ctx.sbuf_capacity() - pinned);
  const int64_t budget = std::max(left * share / 100, left - 2 * working_set(G0, stack_of(G0)));
  const bool v_on_chip = ctx.on_chip(n.inputs[2]);
  auto stacks_of = [&](int64_t G) { return (G + stack_of(G) - 1) / stack_of(G); };
  // Two (group, sequence) pairs' keys overlap while the pipeline passes from one to the next;
  // a single pair's keys are alone.
  auto resident = [&](int64_t G, bool kt) {
    const int64_t pairs = (m_H + G - 1) / G * m_sequences;
    return (pairs > 1 ? 2 : 1) * ((kt ? stacks_of(G) * key_tiles * m_T * kvb : 0) +
                                  (v_on_chip ? 0 : key_tiles * G * m_hd * kvb));
  };
  // Today's rules, point 0 of the space: the most heads per group whose K^T (else V alone)
  // stays within the budget.
  AttentionSchedule rules;
  rules.two_pass = m_two_pass;
  int64_t G = G0;
  while (G > 1 && resident(G, true) > budget) --G;
  rules.keys_resident = resident(G, true) <= budget;
  if (!rules.keys_resident) {
    G = G0;
    while (G > 1 && resident(G, false) > budget) --G;
  }
  rules.heads_per_group = G;
  // Two passes over segment ids: the first pass's mask tiles are kept for the second (two
  // query tiles' worth: one in each pass) when they fit beside the keys and the pipeline.
  const int64_t masks = 2 * key_tiles * SbufAllocator::aligned(m_T * 2);
  auto keeps_masks = [&](const AttentionSchedule& p) {
    return p.two_pass && m_segments &&
           resident(p.heads_per_group, p.keys_resident) + working_set(G0, stack_of(G0)) + masks <=
               left;
  };
  // Two passes: each head's row sums accumulate beside O in its bank when it has the room.
  auto sums_fit = [&](int64_t g) { return g * m_hd + g <= bank_cols; };
  rules.keep_masks = keeps_masks(rules);
  rules.sums_by_array = rules.two_pass && sums_fit(G);
  const int64_t run = seq ? m_seq : 0;
  m_qtiles = ctx.tiling(m_Lq, m_D, qt.dtype, run);
  m_ktiles = ctx.tiling(m_Lk, m_D, m_kvdt, run);
  m_qt_of_seq.assign(static_cast<size_t>(m_sequences), {});
  m_kt_of_seq.assign(static_cast<size_t>(m_sequences), {});
  for (int64_t t = 0; t < m_qtiles.count(); ++t) {
    m_qt_of_seq[static_cast<size_t>(m_qtiles.row0(t) / m_seq)].push_back(t);
  }
  for (int64_t t = 0; t < m_ktiles.count(); ++t) {
    m_kt_of_seq[static_cast<size_t>(m_ktiles.row0(t) / m_seq)].push_back(t);
  }
  // The space: one pass or two, heads per group, K^T kept or per step, masks kept, sums by the
  // array; a point fits when its keys and the pipeline fit the SBUF the operands leave.
  AttentionFacts f;
  f.heads = m_H;
  f.head_dim = m_hd;
  f.tile = m_T;
  f.stack_max = m_hd % align == 0 ? std::max<int64_t>(1, m_T / m_hd) : 1;
  f.keys = m_ktiles.count() * m_T;
  f.queries = m_Lq;
  f.kv_bytes = kvb;
  f.out_bytes = isa::dtype_bytes(m_odt);
  f.segments = m_segments;
  f.causal = m_causal;
  f.bias = m_bias;
  f.q_on_chip = ctx.on_chip(qid);
  f.k_on_chip = ctx.on_chip(kid);
  f.v_on_chip = v_on_chip;
  f.dma_engines = ctx.arch().dma.engines;
  for (int64_t s = 0; s < m_sequences; ++s) {
    for (int64_t i : m_qt_of_seq[static_cast<size_t>(s)]) {
      const auto keys = keys_for(s, i);
      if (!keys.empty()) ++f.query_tiles;
      f.steps += static_cast<int64_t>(keys.size());
      for (int64_t j : keys) f.masked_steps += masked(i, j) ? 1 : 0;
    }
  }
  f.steps = std::max(f.steps, f.query_tiles);
  m_points.assign(1, rules);
  for (bool two : {false, true}) {
    if (two && !m_two_pass) continue;  // needs 8 PSUM banks and no dense bias
    for (int64_t g = G0; g >= 1; --g) {
      for (bool kt : {true, false}) {
        for (int keep = 0; keep < 2; ++keep) {
          for (int sums = 0; sums < 3; ++sums) {  // 2: sums by the array and S^T
            AttentionSchedule p;
            p.two_pass = two;
            p.heads_per_group = g;
            p.keys_resident = kt;
            p.keep_masks = keep != 0;
            p.sums_by_array = sums != 0;
            p.scores_transposed = sums == 2;
            // S^T with K^T made per step: each step's K load then waits on the bytes the step
            // before freed, which the model does not price (trn1, fp32 L = 10496, 4 heads of
            // 128, segment ids: 109 ms against 56.7 for the same point without S^T).
            if (p.scores_transposed && !kt) continue;
            if ((p.keep_masks && !keeps_masks(p)) || (p.sums_by_array && !(two && sums_fit(g))))
              continue;
            if (resident(g, kt) + working_set(G0, stack_of(G0)) > left) continue;
            if (p.describe() == rules.describe()) continue;
            m_points.push_back(p);
          }
        }
      }
    }
  }
  const int64_t mode = ctx.options().attention_schedule;
  size_t pick = 0;
  m_predicted_ns = predict_attention(f, rules, ctx.arch()).total_ns();
  if (mode >= 0) {
    pick = std::min(m_points.size() - 1, static_cast<size_t>(mode));
  } else if (mode == -1) {
    for (size_t k = 1; k < m_points.size(); ++k) {
      const double t = predict_attention(f, m_points[k], ctx.arch()).total_ns();
      if (t < m_predicted_ns * 0.98) {  // a point must beat the rules' clearly to replace them
        m_predicted_ns = t;
        pick = k;
      }
    }
  }
  const AttentionSchedule& chosen = m_points[pick];
  m_predicted_ns = predict_attention(f, chosen, ctx.arch()).total_ns();
  m_G = chosen.heads_per_group;
  m_kt_resident = chosen.keys_resident;
  m_two_pass = chosen.two_pass;
  m_keep_masks = chosen.keep_masks;
  m_sums_by_array = chosen.sums_by_array;
  m_scores_t = chosen.makes_pt();
  // The output stays on chip unless, with the operands and the keys, it would take more than
  // that share: then each query tile's result is stored to HBM as soon as it is done.
  const int64_t out_bytes = (m_Lq + m_T - 1) / m_T * m_D * isa::dtype_bytes(m_odt);
  m_stream_out = pinned + out_bytes + resident(m_G, m_kt_resident) > ctx.sbuf_share(share);
  m_groups = (m_H + m_G - 1) / m_G;
  m_stack = stack_of(m_G);
  return std::nullopt;
}

int64_t FusedAttentionPlan::working_set(int64_t G, int64_t stack) const {
  auto a = [](int64_t b) { return SbufAllocator::aligned(b); };
  const int64_t kvb = isa::dtype_bytes(m_kvdt), T = m_T;
  const int64_t step = 2 * a(G * T * kvb) + a(3 * G * 4) + a(G * 2) + a(T * 2) + a(T * 4);
  const int64_t item = a((G + stack - 1) / stack * T * kvb) + 2 * a(G * 2) + a(G * 4) +
                       a(std::max(T * 2, G * m_hd * 4)) + a(T * 4) +
                       a(G * m_hd * isa::dtype_bytes(m_odt));
  const int64_t consts = 4 * a(T * 4) + a(((m_Lk + T - 1) / T) * 4) + a(kvb);
  // The next query tile's rows, loaded an item ahead.
  return 8 * step + 3 * item + 2 * a(G * m_hd * 4) + a(G * m_hd * kvb) + consts;
}

std::vector<int64_t> FusedAttentionPlan::keys_for(int64_t s, int64_t i) const {
  std::vector<int64_t> out;
  const int64_t last_q = m_qtiles.row0(i) + m_qtiles.rows_in(i) - 1;
  for (int64_t j : m_kt_of_seq[static_cast<size_t>(s)]) {
    if (m_causal && m_ktiles.row0(j) > last_q) continue;
    out.push_back(j);
  }
  return out;
}

bool FusedAttentionPlan::masked(int64_t i, int64_t j) const {
  if (m_segments || m_bias) return true;
  return m_causal && m_ktiles.row0(j) + m_ktiles.rows_in(j) - 1 > m_qtiles.row0(i);
}

}  // namespace wallsim::compiler_stub::lowering
