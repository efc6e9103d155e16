// The stages of one step of the fused attention kernel (fused_attention.h): its mask tile,
// the scores, the softmax, P^T and P.V.
#include <algorithm>

#include "lowering/attention_aps.h"
#include "lowering/fused_attention.h"

namespace wallsim::compiler_stub::lowering {

LowerResult FusedAttention::prepare_mask(Step& st) {
  if (st.mask_made || !masked(st.i, st.j)) return std::nullopt;
  st.mask_made = true;
  if (m_keep_masks && st.pass == 2) return std::nullopt;  // the first pass's, at its scores
  const int32_t rows = m_qtiles.rows_in(st.i), kc = m_ktiles.rows_in(st.j);
  if (m_bias) {
    st.mask = alloc(kc, m_bdt, "attn_bias");
    if (!st.mask) return m_ctx.no_room();
    const AccessPattern mt = ap(*st.mask, m_bdt, rows, 0, kc);
    // Batched operands share one [L, L] bias: rows and keys within the sequence.
    const int64_t r0 = m_batched ? st.s * m_seq : 0;
    m_ctx.copy_rows(true, mt,
                    LoweringContext::hbm_ap(
                        m_bias_hbm, m_bdt, m_batched ? View{m_seq, m_seq} : View{m_Lq, m_Lk},
                        m_qtiles.row0(st.i) - r0, rows, m_ktiles.row0(st.j) - r0, kc));
    m_ctx.count_bytes_in(int64_t{rows} * kc * isa::dtype_bytes(m_bdt));
    return std::nullopt;
  }
  if (!m_segments) {
    if (m_ktiles.row0(st.j) != m_qtiles.row0(st.i)) {
      return m_ctx.error("causal key and query tiles do not start together");
    }
    return std::nullopt;
  }
  if (auto e = start_item(st)) return e;  // the queries' ids
  st.mask = alloc(rows, DType::bf16, "attn_segmask");
  if (!st.mask) return m_ctx.no_room();
  const AccessPattern mt = ap(*st.mask, DType::bf16, kc, 0, rows);
  m_ctx.tensor_tensor(
      AluOp::ne, mt,
      LoweringContext::broadcast_column(ap(m_seg_cols, DType::int32, kc, st.j, 1), rows),
      ap(m_seg_rows.at({st.g, st.i}), DType::int32, kc, 0, rows));
  if (m_causal && m_ktiles.row0(st.j) + kc - 1 > m_qtiles.row0(st.i)) {
    m_ctx.tensor_tensor(AluOp::max, mt, mt, ap(m_causal_tile, DType::bf16, kc, 0, rows));
  }
  return std::nullopt;
}

LowerResult FusedAttention::stage_scores(Step& st) {
  if (st.first && st.pass != 2) {
    if (auto e = start_item(st)) return e;
  }
  Item& it = m_items.at({st.g, st.i});
  const Keys& ks = m_keys.at({st.g, st.s});
  const int64_t ng = heads_in(st.g);
  const int32_t rows = m_qtiles.rows_in(st.i), kc = m_ktiles.rows_in(st.j);
  const int64_t x = st.j - m_kt_of_seq[static_cast<size_t>(st.s)].front();
  const int64_t L = int64_t(m_kt_of_seq[static_cast<size_t>(st.s)].size()) * m_T;
  // S lives from its scores to its softmax, one step later: two banks of its own.
  const Slot sb = m_ctx.psum_bank(static_cast<size_t>(m_scores++ % (m_two_pass ? 3 : 2)));
  // The second pass's S^T: keys on partitions, each head's queries side by side.
  const bool trans = m_scores_t && st.pass == 2;
  const AccessPattern S = trans ? LoweringContext::psum_ap(sb, kc, ng * rows)
                                : LoweringContext::psum_ap(sb, rows, ng * kc);
  // The mask, added by the array: S += M^T^T . (-2^30 I) for a 0/1 mask M^T [keys, queries]
  // (stationary), or S += I . bias for a dense bias tile (moving); one matmul for all heads.
  const bool mk = masked(st.i, st.j);
  if (mk) {
    if (m_keep_masks && st.pass == 2) {
      const auto kept = m_kept_masks.find({st.g, st.i, st.j});
      st.mask = kept->second;
      m_kept_masks.erase(kept);
    } else if (auto e = prepare_mask(st)) {
      return e;
    }
    if (m_bias) {
      const AccessPattern mt = ap(*st.mask, m_bdt, rows, 0, kc);
      m_ctx.emit_matmul(S, ap(m_bias_ident, m_bdt, rows, 0, rows), blocks(mt, ng, 0, kc), true,
                        false);
    } else if (trans) {  // S^T += (-2^30 I) . M^T, the same mask tile for every head
      const AccessPattern mt = ap(st.mask ? *st.mask : m_causal_tile, DType::bf16, kc, 0, rows);
      m_ctx.emit_matmul(S, ap(m_neg_ident, DType::bf16, kc, 0, kc), blocks(mt, ng, 0, rows), true,
                        false);
    } else {
      const AccessPattern mt = ap(st.mask ? *st.mask : m_causal_tile, DType::bf16, kc, 0, rows);
      m_ctx.emit_matmul(S, mt, blocks(ap(m_neg_ident, DType::bf16, kc, 0, kc), ng, 0, kc), true,
                        false);
    }
    if (st.mask && m_keep_masks && st.pass == 1) {
      m_kept_masks[{st.g, st.i, st.j}] = *st.mask;
    } else if (st.mask) {
      m_ctx.release(*st.mask);
    }
    st.mask.reset();
  }
  // K^T of this key tile, when it is not kept for the sequence.
  std::optional<Slot> kt_step;
  if (!m_kt_resident) {
    const int64_t stacks = (ng + m_stack - 1) / m_stack;
    kt_step = alloc(stacks * m_T, m_kvdt, "attn_kt");
    if (!kt_step) return m_ctx.no_room();
    std::optional<Slot> tmp;
    const AccessPattern src = rows_of(m_k, m_ktiles, st.j, st.g * m_G * m_hd, ng * m_hd, tmp);
    if (!src.valid()) return m_ctx.no_room();
    transpose_heads(src, st.g, *kt_step, 0, kc, m_T, 1.0);
    if (tmp) m_ctx.release(*tmp);
  }
  const Slot kt = m_kt_resident ? *ks.kt : *kt_step;
  const int64_t kx = m_kt_resident ? x * m_T : 0, kstride = m_kt_resident ? L : m_T;
  for (int64_t h = 0; h < ng; ++h) {
    const auto [p0, off] = stacked(h, kstride);
    const auto [q0, qoff] = stacked(h, m_T);
    const AccessPattern qh = ap(it.qt, m_kvdt, static_cast<int32_t>(m_hd), qoff, rows, q0);
    const AccessPattern kh = ap(kt, m_kvdt, static_cast<int32_t>(m_hd), off + kx, kc, p0);
    if (trans) {  // S_h^T = K_h Q_h^T
      m_ctx.emit_matmul(LoweringContext::psum_ap(sb, kc, rows, h * rows), kh, qh, !mk, false);
    } else {
      m_ctx.emit_matmul(LoweringContext::psum_ap(sb, rows, kc, h * kc), qh, kh, !mk, false);
    }
  }
  if (kt_step) m_ctx.release(*kt_step);
  st.t.s = sb;
  if (st.pass == 2) {  // the maxima are known: m^T for the softmax of every step
    if (st.first) final_maxima_transposed(st, it);
    return std::nullopt;
  }
  // Row maxima and the running max m' (bf16, so that the array subtracts exactly the m'
  // that rescales), and alpha's exponent m - m' (vector).
  auto stats = alloc(3 * m_G, DType::fp32, "attn_stats");
  auto rmax = alloc(m_G, DType::bf16, "attn_rmax");
  if (!stats || !rmax) return m_ctx.no_room();
  st.t.alpha = *stats;
  st.t.rmax = *rmax;
  const AccessPattern mold = ap(it.m[it.cur], DType::bf16, rows, 0, ng);
  const AccessPattern mnew = ap(it.m[1 - it.cur], DType::bf16, rows, 0, ng);
  const AccessPattern Sg = blocks(S, ng, kc, kc);
  if (st.first) {
    m_ctx.reduce(AluOp::max, mnew, Sg);
  } else {
    const AccessPattern rm = ap(*rmax, DType::bf16, rows, 0, ng);
    m_ctx.reduce(AluOp::max, rm, Sg);
    m_ctx.tensor_tensor(AluOp::max, mnew, mold, rm);
    if (st.pass == 0) {
      m_ctx.tensor_tensor(AluOp::sub, ap(*stats, DType::fp32, rows, 2 * m_G, ng), mold, mnew);
    }
  }
  st.mnew = 1 - it.cur;
  it.cur = 1 - it.cur;
  if (st.pass == 1) {
    m_ctx.release(*stats);
    m_ctx.release(*rmax);
  }
  // The next query tile's Q^T (and its keys' K^T when they are new) while this one's steps
  // still run, so that its first scores do not wait for the copies out of PSUM.
  if (st.last && m_next_item.count({st.g, st.i})) {
    if (auto e = start_item(m_next_item.at({st.g, st.i}))) return e;
  }
  return std::nullopt;
}

void FusedAttention::final_maxima_transposed(const Step& st, const Item& it) {
  const int32_t rows = m_qtiles.rows_in(st.i), G = static_cast<int32_t>(heads_in(st.g));
  const Slot mb = other_bank();
  m_ctx.emit_transpose(LoweringContext::psum_ap(mb, G, rows),
                       ap(it.m[it.cur], DType::bf16, rows, 0, G));
  m_ctx.activation(ActFn::identity, ap(it.mt, DType::bf16, G, 0, rows),
                   LoweringContext::psum_ap(mb, G, rows));
}

LowerResult FusedAttention::stage_softmax(Step& st) {
  if (st.pass == 1) return std::nullopt;
  Item& it = m_items.at({st.g, st.i});
  const int64_t ng = heads_in(st.g);
  const int32_t rows = m_qtiles.rows_in(st.i), kc = m_ktiles.rows_in(st.j);
  const int32_t G = static_cast<int32_t>(ng);
  // m'^T: per step (online), or once per query tile from the final maxima (two passes).
  std::optional<Slot> mt;
  if (st.pass == 0) {
    const Slot mb = other_bank();
    mt = alloc(rows, DType::bf16, "attn_mt");
    if (!mt) return m_ctx.no_room();
    m_ctx.emit_transpose(LoweringContext::psum_ap(mb, G, rows),
                         ap(it.m[st.mnew], DType::bf16, rows, 0, ng));
    m_ctx.activation(ActFn::identity, ap(*mt, DType::bf16, G, 0, rows),
                     LoweringContext::psum_ap(mb, G, rows));
  }
  if (st.pass == 2 && m_scores_t) {
    // S^T - m per head: (-e_h 1^T)^T . m^T, the stationary head h's column of -I along the
    // keys; then one exponential makes P^T (the row sums come from the array).
    auto PT = alloc(ng * rows, m_kvdt, "attn_pt");
    if (!PT) return m_ctx.no_room();
    for (int64_t h = 0; h < ng; ++h) {
      AccessPattern e = ap(m_minus_ident, DType::bf16, G, h, 1);
      e.free[0] = {kc, 0};
      m_ctx.emit_matmul(LoweringContext::psum_ap(st.t.s, kc, rows, h * rows), e,
                        ap(it.mt, DType::bf16, G, 0, rows), false, true);
    }
    m_ctx.activation(ActFn::exp, ap(*PT, m_kvdt, kc, 0, ng * rows),
                     LoweringContext::psum_ap(st.t.s, kc, ng * rows));
    st.t.p = *PT;
    return std::nullopt;
  }
  auto P = alloc(ng * kc, m_kvdt, "attn_p");
  if (!P) return m_ctx.no_room();
  const AccessPattern mtap = ap(st.pass == 0 ? *mt : it.mt, DType::bf16, G, 0, rows);
  const AccessPattern S = LoweringContext::psum_ap(st.t.s, rows, ng * kc);
  m_ctx.emit_matmul(S, mtap, blocks(ap(m_minus_ident, DType::bf16, G, 0, ng), ng, 1, kc, 0), false,
                    true);
  if (mt) m_ctx.release(*mt);
  if (st.pass == 0) m_ctx.release(st.t.rmax);
  if (st.pass == 2 && m_sums_by_array) {
    // One exponential over every head's keys; the row sums come from the array (P.1).
    m_ctx.activation(ActFn::exp, ap(*P, m_kvdt, rows, 0, ng * kc),
                     LoweringContext::psum_ap(st.t.s, rows, ng * kc));
    st.t.p = *P;
    return std::nullopt;
  }
  if (st.pass == 2 && !st.first) {  // this step's row sums
    auto stats = alloc(3 * m_G, DType::fp32, "attn_stats");
    if (!stats) return m_ctx.no_room();
    st.t.alpha = *stats;
  }
  const Slot stats = st.t.alpha;
  for (int64_t h = 0; h < ng; ++h) {
    const AccessPattern acc =
        st.first ? ap(it.l, DType::fp32, rows, h, 1) : ap(stats, DType::fp32, rows, m_G + h, 1);
    m_ctx.activation(ActFn::exp, ap(*P, m_kvdt, rows, h * kc, kc),
                     LoweringContext::psum_ap(st.t.s, rows, kc, h * kc), 1, 0, &acc);
  }
  if (!st.first) {
    const AccessPattern l = ap(it.l, DType::fp32, rows, 0, ng);
    if (st.pass == 0) {
      const AccessPattern alpha = ap(stats, DType::fp32, rows, 2 * m_G, ng);
      m_ctx.activation(ActFn::exp, alpha, alpha);
      m_ctx.tensor_tensor(AluOp::mul, l, l, alpha);
    }
    m_ctx.tensor_tensor(AluOp::add, l, l, ap(stats, DType::fp32, rows, m_G, ng));
    if (st.pass == 2) m_ctx.release(stats);
  }
  st.t.p = *P;
  return std::nullopt;
}

LowerResult FusedAttention::stage_pt(Step& st) {
  if (st.pass == 1 || (st.pass == 2 && m_scores_t)) return std::nullopt;  // S^T: P^T made
  const int64_t ng = heads_in(st.g);
  const int32_t rows = m_qtiles.rows_in(st.i), kc = m_ktiles.rows_in(st.j);
  const Slot tb = other_bank();
  for (int64_t h = 0; h < ng; ++h) {
    m_ctx.emit_transpose(LoweringContext::psum_ap(tb, kc, rows, h * rows),
                         ap(st.t.p, m_kvdt, rows, h * kc, kc));
  }
  auto PT = alloc(ng * rows, m_kvdt, "attn_pt");
  if (!PT) return m_ctx.no_room();
  m_ctx.evacuate(ap(*PT, m_kvdt, kc, 0, ng * rows), LoweringContext::psum_ap(tb, kc, ng * rows));
  m_ctx.release(st.t.p);
  st.t.p = *PT;
  return std::nullopt;
}

LowerResult FusedAttention::stage_pv(const Step& st) {
  Keys& ks = m_keys.at({st.g, st.s});
  if (st.pass == 1) return keys_done(st, ks);
  Item& it = m_items.at({st.g, st.i});
  const int64_t ng = heads_in(st.g);
  const int32_t rows = m_qtiles.rows_in(st.i), kc = m_ktiles.rows_in(st.j);
  const int64_t x = st.j - m_kt_of_seq[static_cast<size_t>(st.s)].front();
  const Slot PT = st.t.p;
  // P V per head into one bank; O = O alpha + P V. Two passes: P V accumulates in the query
  // tile's own bank over all its key tiles.
  const Slot ob = st.pass == 2 ? it.ob : other_bank();
  const int64_t cols = ng * m_hd;
  for (int64_t h = 0; h < ng; ++h) {
    const AccessPattern v =
        m_v.tiles ? LoweringContext::tile_ap(*m_v.tiles, st.j, (st.g * m_G + h) * m_hd, m_hd)
                  : ap(ks.v[static_cast<size_t>(x)], m_kvdt, kc, h * m_hd, m_hd);
    m_ctx.emit_matmul(LoweringContext::psum_ap(ob, rows, m_hd, h * m_hd),
                      ap(PT, m_kvdt, kc, h * rows, rows), v, st.pass == 0 || st.first,
                      st.pass == 0 || st.last);
  }
  if (st.pass == 2 && m_sums_by_array) {  // l += P.1 per head, beside O in its bank
    for (int64_t h = 0; h < ng; ++h) {
      m_ctx.emit_matmul(LoweringContext::psum_ap(ob, rows, 1, cols + h),
                        ap(PT, m_kvdt, kc, h * rows, rows), ap(m_ones, m_kvdt, kc, 0, 1), st.first,
                        st.last);
    }
  }
  m_ctx.release(PT);
  const AccessPattern Ops = LoweringContext::psum_ap(ob, rows, cols);
  const AccessPattern O = st.pass == 2 ? Ops : ap(it.o, DType::fp32, rows, 0, cols);
  if (st.pass == 2) {
  } else if (st.first) {
    m_ctx.evacuate(O, Ops);
  } else {
    const AccessPattern a = ap(st.t.alpha, DType::fp32, rows, 2 * m_G, ng);
    m_ctx.tensor_tensor(AluOp::mul, blocks(O, ng, m_hd, m_hd), blocks(O, ng, m_hd, m_hd),
                        blocks(a, ng, 1, m_hd, 0));
    m_ctx.tensor_tensor(AluOp::add, O, O, Ops);
  }
  if (st.pass == 0) m_ctx.release(st.t.alpha);
  if (st.last) {  // out = O / l
    const AccessPattern l = ap(it.l, DType::fp32, rows, 0, ng);
    if (st.pass == 2 && m_sums_by_array) {
      m_ctx.activation(ActFn::reciprocal, l, LoweringContext::psum_ap(ob, rows, ng, cols));
    } else {
      m_ctx.activation(ActFn::reciprocal, l, l);
    }
    std::optional<Slot> res;
    if (m_stream_out || !m_out_direct) {
      res = alloc(cols, m_odt, "attn_res");
      if (!res) return m_ctx.no_room();
    }
    const AccessPattern dst = res ? ap(*res, m_odt, rows, 0, cols)
                                  : LoweringContext::tile_ap(m_out, st.i, st.g * m_G * m_hd, cols);
    m_ctx.tensor_tensor(AluOp::mul, blocks(dst, ng, m_hd, m_hd), blocks(O, ng, m_hd, m_hd),
                        blocks(l, ng, 1, m_hd, 0));
    if (res && !m_stream_out) {
      const int64_t r0 = m_qtiles.row0(st.i);
      for (int64_t t = 0; t < m_out.count(); ++t) {
        const int64_t a = std::max(r0, m_out.row0(t));
        const int64_t b = std::min(r0 + rows, m_out.row0(t) + m_out.rows_in(t));
        if (a >= b) continue;
        AccessPattern to = LoweringContext::tile_ap(m_out, t, st.g * m_G * m_hd, cols);
        to.partition_start = static_cast<int32_t>(a - m_out.row0(t));
        to.partitions = static_cast<int32_t>(b - a);
        AccessPattern from = dst;
        from.partition_start = static_cast<int32_t>(a - r0);
        from.partitions = static_cast<int32_t>(b - a);
        m_ctx.dma(m_ctx.next_store_queue(), to, from);
      }
      m_ctx.release(*res);
    } else if (res) {
      m_ctx.copy_rows(false,
                      LoweringContext::hbm_ap(m_out_hbm, m_odt, View{m_Lq, m_D},
                                              m_qtiles.row0(st.i), rows, st.g * m_G * m_hd, cols),
                      dst);
      m_ctx.count_bytes_out(int64_t{rows} * cols * isa::dtype_bytes(m_odt));
      m_ctx.release(*res);
    }
    for (Slot s : {it.qt, it.m[0], it.m[1], it.l, m_two_pass ? it.mt : it.o}) m_ctx.release(s);
    m_items.erase({st.g, st.i});
    if (auto c = m_seg_rows.find({st.g, st.i}); c != m_seg_rows.end()) {
      m_ctx.release(c->second);
      m_seg_rows.erase(c);
    }
  }
  return keys_done(st, ks);
}

}  // namespace wallsim::compiler_stub::lowering
