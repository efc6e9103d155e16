// The fused-attention family: `attention` (prefill and packed sequences) as one flash-style
// kernel. Scores and probabilities never leave PSUM and SBUF; K and V are read once per group
// of heads, so the op's HBM traffic grows as O(L x D), not O(L^2).
#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <map>

#include "lowering/attention_aps.h"
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {
namespace {

// The additive mask value of a masked score: -2^30, exact in bf16, so exp() of it is 0.
constexpr double kMasked = -1073741824.0;

// attention(q [Lq, D], k [Lk, D], v [Lk, D], mask?): per group of G heads (as many as one PSUM
// bank holds side by side), per sequence, per query tile i (T rows) and key tile j (T keys), a
// step in three stages:
//  A. Scores: S [rows, G x keys] = (mask) + Q_i^T . K_j^T per head, in one PSUM bank. The mask
//     is added by the array: a 0/1 tile M^T [keys, queries] (stationary) times -2^30 x the
//     identity (moving, broadcast over the heads): the causal tile from iota and a compare,
//     made once; a block-diagonal tile from the keys' segment ids (one per partition) and the
//     queries' (a row) and a compare, per step; or the identity times a dense bias tile read
//     from HBM. The vector engine takes the row maxima and the running max m' = max(m, rowmax),
//     kept in bf16, and m - m'.
//  B. Softmax: the array subtracts m' (m'^T [heads, queries] stationary, -I broadcast over each
//     head's keys moving); the scalar engine takes exp straight from PSUM with its row sum
//     fused (activation_reduce), and alpha = exp(m - m'); l = l alpha + rowsum.
//  C. P.V: P's key tiles go through the array as P^T (the scalar engine evacuates them),
//     P^T . V_j per head into a PSUM bank, and O = O alpha + P V on the vector engine.
// At the end of a query tile the output is O / l. Tiles a causal structure leaves empty (keys
// after the tile's last query, keys of another sequence) are not computed; which tiles run
// depends on shapes and attributes only, never on data. Engines run their streams in order, so
// the stages are a software pipeline (A of step k, B of k - 1, C of k - 3 and k - 5) that runs on
// across query tiles, sequences and head groups. Q^T and K^T come from the array too, a stack of
// heads per transpose when the head width leaves rows of the array free (the score matmuls of a
// stack then use partitions 0.., hd.., ...); Q is scaled on the way out of PSUM by the scalar
// engine's fused scale.
class FusedAttention {
 public:
  FusedAttention(LoweringContext& ctx, const Node& n) : m_ctx(ctx), m_n(n) {}

  LowerResult run() {
    if (auto e = plan()) return e;
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

 private:
  // Per-step temporaries that stage B needs.
  struct Step {
    int64_t g, s, i, j;
    bool first, last;
    int mnew = 0;  // which of the item's two running-max columns this step writes
    struct {
      Slot s, p, alpha, rmax;
    } t;
    int pass = 0;              // 0: online softmax; two passes: 1 the row maxima, 2 exp and P.V
    std::optional<Slot> mask;  // the step's mask tile, once made (prepare_mask)
    bool mask_made = false;
  };
  // One query tile of one head group: the online-softmax state.
  struct Item {
    Slot qt, m[2], l, o;
    Slot mt, ob;  // two passes: m^T (the final maxima) and O's PSUM bank
    int cur = 0;
  };
  // K^T and V of one sequence for one head group.
  struct Keys {
    std::optional<Slot> kt;  // K^T, unless made per step
    // V's key tiles when V is not on chip, a buffer each: one buffer for them all needs a run
    // of SBUF that long, which the operands' row tiles may not leave (a 12-layer seq-4096
    // step's q, k and v, 96 tiles of 1.5 KB over SBUF, left no 16 KB run with 76 KB free).
    std::vector<Slot> v;
    int64_t steps_left = 0;
  };
  // A value read by row tiles: on chip in the op's tiling, or loaded from HBM per use.
  struct Operand {
    int32_t id = -1;
    DType dt = DType::fp32;
    std::optional<Tiles> tiles;
    Slot hbm;
  };

  // Bytes per partition the pipeline's temporaries take at most with G heads per group, `stack`
  // per transpose: the steps in flight (P, P^T, statistics, a mask tile), the query tiles in
  // flight (Q^T, maxima, sums, m^T or O, segment ids, the result), the operand tiles loaded
  // from HBM, and the op's constants.
  int64_t working_set(int64_t G, int64_t stack) const {
    auto a = [](int64_t b) { return SbufAllocator::aligned(b); };
    const int64_t kvb = isa::dtype_bytes(m_kvdt), T = m_T;
    const int64_t step = 2 * a(G * T * kvb) + a(3 * G * 4) + a(G * 2) + a(T * 2) + a(T * 4);
    const int64_t item = a((G + stack - 1) / stack * T * kvb) + 2 * a(G * 2) + a(G * 4) +
                         a(std::max(T * 2, G * m_hd * 4)) + a(T * 4) +
                         a(G * m_hd * isa::dtype_bytes(m_odt));
    const int64_t consts = 4 * a(T * 4) + a(((m_Lk + T - 1) / T) * 4) + a(kvb);
    return 8 * step + 3 * item + 2 * a(G * m_hd * 4) + consts;
  }

  LowerResult plan() {
    const int32_t qid = m_n.inputs[0], kid = m_n.inputs[1];
    const TensorType& qt = m_ctx.type_of(qid);
    const TensorType& kt = m_ctx.type_of(kid);
    m_T = m_ctx.tile_rows();
    m_Lq = view_of(qt).rows;
    m_Lk = view_of(kt).rows;
    m_D = qt.dims.back().size;
    m_H = *m_n.int_attr("heads");
    m_hd = m_D / m_H;
    const int64_t* causal = m_n.int_attr("causal");
    m_causal = causal && *causal != 0;
    // [B, L, D] operands are B sequences of L rows, tiled as such (as `seq` = L on [B L, D]).
    m_batched = qt.dims.size() == 3 && qt.dims[0].size > 1;
    const int64_t* seq_attr = m_n.int_attr("seq");
    const int64_t seq_rows = m_batched ? qt.dims[1].size : seq_attr ? *seq_attr : 0;
    const int64_t* seq = seq_rows ? &seq_rows : nullptr;
    m_seq = seq ? *seq : std::max(m_Lq, m_Lk);
    m_sequences = seq ? m_Lq / m_seq : 1;
    m_kvdt = kt.dtype;
    m_odt = m_n.type.dtype;
    if (m_n.inputs.size() > 3) {
      const DType mdt = m_ctx.type_of(m_n.inputs[3]).dtype;
      (mdt == DType::int32 ? m_segments : m_bias) = true;
      m_bdt = mdt;
    }
    const int64_t bank_cols = m_ctx.arch().psum.bank_bytes / 4;
    const int64_t C = moving_cols(m_ctx);
    if (m_hd > m_T) {
      return m_ctx.error("head width " + std::to_string(m_hd) + " exceeds the " +
                         std::to_string(m_T) + " rows of the array");
    }
    if (m_hd > C || C < m_T) return m_ctx.error("a PSUM bank is narrower than a key tile");
    if (m_ctx.psum_bank_count() < 6) return m_ctx.error("needs at least 6 PSUM banks");
    // Two passes over the keys when PSUM holds O of two query tiles beside the rotation: the
    // first takes the row maxima, the second exp(S - m) and P.V accumulated in PSUM, so no
    // rescale of O or l is ever made (the vector engine's per-step work is the max alone).
    // A dense bias would be read from HBM twice: it keeps the online softmax (one pass).
    m_two_pass = m_ctx.psum_bank_count() >= 8 && !m_bias;
    // G heads side by side: G key tiles in S, G P^T tiles, G output blocks in one bank each.
    const int64_t G0 = std::max<int64_t>(1, std::min({m_H, C / m_T, bank_cols / m_hd}));
    m_G = G0;
    const int32_t align = m_ctx.arch().partition_alignment;
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
    for (int32_t id : m_n.inputs) {
      if (m_ctx.on_chip(id)) {
        const TensorType& t = m_ctx.type_of(id);
        const View v = view_of(t);
        pinned += (v.rows + m_T - 1) / m_T * v.cols * isa::dtype_bytes(t.dtype);
      }
    }
    const int64_t share = m_ctx.options().attention_pipeline_percent;
    const int64_t left = std::max<int64_t>(0, m_ctx.sbuf_capacity() - pinned);
    const int64_t budget = std::max(left * share / 100, left - 2 * working_set(G0, stack_of(G0)));
    const bool v_on_chip = m_ctx.on_chip(m_n.inputs[2]);
    auto stacks_of = [&](int64_t G) { return (G + stack_of(G) - 1) / stack_of(G); };
    // Two (group, sequence) pairs' keys overlap while the pipeline passes from one to the next;
    // a single pair's keys are alone.
    auto resident = [&](int64_t G, bool kt) {
      const int64_t pairs = (m_H + G - 1) / G * m_sequences;
      return (pairs > 1 ? 2 : 1) * ((kt ? stacks_of(G) * key_tiles * m_T * kvb : 0) +
                                    (v_on_chip ? 0 : key_tiles * G * m_hd * kvb));
    };
    while (m_G > 1 && resident(m_G, true) > budget) --m_G;
    m_kt_resident = resident(m_G, true) <= budget;
    if (!m_kt_resident) {
      m_G = G0;
      while (m_G > 1 && resident(m_G, false) > budget) --m_G;
    }
    // The output stays on chip unless, with the operands and the keys, it would take more than
    // that share: then each query tile's result is stored to HBM as soon as it is done.
    const int64_t out_bytes = (m_Lq + m_T - 1) / m_T * m_D * isa::dtype_bytes(m_odt);
    m_stream_out = pinned + out_bytes + resident(m_G, m_kt_resident) > m_ctx.sbuf_share(share);
    m_groups = (m_H + m_G - 1) / m_G;
    m_stack = stack_of(m_G);
    // Two passes over segment ids: the first pass's mask tiles are kept for the second (two
    // query tiles' worth: one in each pass) when they fit beside the keys and the pipeline.
    const int64_t masks = 2 * key_tiles * SbufAllocator::aligned(m_T * 2);
    m_keep_masks = m_two_pass && m_segments &&
                   resident(m_G, m_kt_resident) + working_set(G0, stack_of(G0)) + masks <= left;
    // Two passes: each head's row sums accumulate beside O in its bank when it has the room.
    m_sums_by_array = m_two_pass && m_G * m_hd + m_G <= bank_cols;
    const int64_t run = seq ? m_seq : 0;
    m_qtiles = m_ctx.tiling(m_Lq, m_D, qt.dtype, run);
    m_ktiles = m_ctx.tiling(m_Lk, m_D, m_kvdt, run);
    m_qt_of_seq.assign(static_cast<size_t>(m_sequences), {});
    m_kt_of_seq.assign(static_cast<size_t>(m_sequences), {});
    for (int64_t t = 0; t < m_qtiles.count(); ++t) {
      m_qt_of_seq[static_cast<size_t>(m_qtiles.row0(t) / m_seq)].push_back(t);
    }
    for (int64_t t = 0; t < m_ktiles.count(); ++t) {
      m_kt_of_seq[static_cast<size_t>(m_ktiles.row0(t) / m_seq)].push_back(t);
    }
    return std::nullopt;
  }

  // The key tiles query tile i sees: its sequence's, up to its last query when causal.
  std::vector<int64_t> keys_for(int64_t s, int64_t i) const {
    std::vector<int64_t> out;
    const int64_t last_q = m_qtiles.row0(i) + m_qtiles.rows_in(i) - 1;
    for (int64_t j : m_kt_of_seq[static_cast<size_t>(s)]) {
      if (m_causal && m_ktiles.row0(j) > last_q) continue;
      out.push_back(j);
    }
    return out;
  }
  bool masked(int64_t i, int64_t j) const {
    if (m_segments || m_bias) return true;
    return m_causal && m_ktiles.row0(j) + m_ktiles.rows_in(j) - 1 > m_qtiles.row0(i);
  }

  std::optional<Slot> alloc(int64_t elems, DType dt, const char* hint) {
    return m_ctx.sbuf_alloc(elems * isa::dtype_bytes(dt), hint);
  }
  void vector_op(Opcode op, const AccessPattern& dst, double value, double pstep, double step) {
    Instruction in = LoweringContext::vec(op, dst);
    in.value = value;
    in.partition_step = pstep;
    in.step = step;
    m_ctx.emit(m_ctx.stream(Engine::vector), in);
  }

  bool operand(Operand& o, int32_t id, const Tiles& tiling) {
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
  // Columns [c0, c0 + nc) of row tile t of `o`: on chip, or loaded into `tmp`.
  AccessPattern rows_of(const Operand& o, const Tiles& tiling, int64_t t, int64_t c0, int64_t nc,
                        std::optional<Slot>& tmp, int64_t tmp_off = 0) {
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

  LowerResult prepare() {
    if (!operand(m_q, m_n.inputs[0], m_qtiles) || !operand(m_k, m_n.inputs[1], m_ktiles) ||
        !operand(m_v, m_n.inputs[2], m_ktiles)) {
      return m_ctx.no_room();
    }
    // The mask is read from HBM by rows: a value of the group (or a view) is stored first.
    if (m_n.inputs.size() > 3 && !m_ctx.ensure_hbm(m_n.inputs[3])) return m_ctx.no_room();
    if (m_stream_out) {
      m_out_hbm = m_ctx.hbm_tensor(m_n.id, m_ctx.needed_outside(m_n.id) ? isa::TensorRole::output
                                                                        : isa::TensorRole::scratch);
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

  // PSUM banks 2.. in rotation, for values that live within one stage.
  Slot other_bank() {
    const int64_t first = m_two_pass ? 5 : 2;  // scores; two passes: and O of two query tiles
    return m_ctx.psum_bank(
        static_cast<size_t>(first + m_others++ % (m_ctx.psum_bank_count() - first)));
  }
  int64_t heads_in(int64_t g) const { return std::min(m_G, m_H - g * m_G); }

  // Q_i^T (scaled) or K_j^T of group g: per stack of heads, a transpose into PSUM and a copy
  // out by the scalar engine into dst's columns [col0 + stack x cols, ...).
  void transpose_heads(const AccessPattern& src, int64_t g, Slot dst, int64_t col0, int64_t cols,
                       int64_t stack_stride, double scale) {
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
  // Head h (of group g)'s rows in a stacked transposed buffer: partitions and a column offset.
  std::pair<int32_t, int64_t> stacked(int64_t h, int64_t stack_stride) const {
    return {static_cast<int32_t>((h % m_stack) * m_hd), (h / m_stack) * stack_stride};
  }

  LowerResult start_keys(int64_t g, int64_t s) {
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

  LowerResult start_item(const Step& st) {
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
    const AccessPattern src = rows_of(m_q, m_qtiles, st.i, st.g * m_G * m_hd, ng * m_hd, tmp);
    if (!src.valid()) return m_ctx.no_room();
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

  // The mask tile of a masked step: a dense bias tile loaded from HBM, or the 0/1 tile
  // M^T [keys, queries] compared from the segment ids (with the causal tile on a diagonal);
  // nothing for the causal tile alone (made once). Starts the step's query tile if need be.
  LowerResult prepare_mask(Step& st) {
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

  LowerResult stage_scores(Step& st) {
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
    const AccessPattern S = LoweringContext::psum_ap(sb, rows, ng * kc);
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
      m_ctx.emit_matmul(LoweringContext::psum_ap(sb, rows, kc, h * kc),
                        ap(it.qt, m_kvdt, static_cast<int32_t>(m_hd), qoff, rows, q0),
                        ap(kt, m_kvdt, static_cast<int32_t>(m_hd), off + kx, kc, p0), !mk, false);
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

  // m^T [heads, queries] of the final maxima (two passes), made as the second pass begins,
  // a step ahead of the first subtraction that reads it.
  void final_maxima_transposed(const Step& st, const Item& it) {
    const int32_t rows = m_qtiles.rows_in(st.i), G = static_cast<int32_t>(heads_in(st.g));
    const Slot mb = other_bank();
    m_ctx.emit_transpose(LoweringContext::psum_ap(mb, G, rows),
                         ap(it.m[it.cur], DType::bf16, rows, 0, G));
    m_ctx.activation(ActFn::identity, ap(it.mt, DType::bf16, G, 0, rows),
                     LoweringContext::psum_ap(mb, G, rows));
  }

  // S -= m' by the array (m'^T [heads, queries] stationary, -I broadcast over each head's keys
  // moving), then P = exp(S) straight from PSUM with its row sums (scalar), l = l alpha + sums.
  LowerResult stage_softmax(Step& st) {
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
    auto P = alloc(ng * kc, m_kvdt, "attn_p");
    if (!P) return m_ctx.no_room();
    const AccessPattern mtap = ap(st.pass == 0 ? *mt : it.mt, DType::bf16, G, 0, rows);
    const AccessPattern S = LoweringContext::psum_ap(st.t.s, rows, ng * kc);
    m_ctx.emit_matmul(S, mtap, blocks(ap(m_minus_ident, DType::bf16, G, 0, ng), ng, 1, kc, 0),
                      false, true);
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

  // P^T per head, evacuated by the scalar engine.
  LowerResult stage_pt(Step& st) {
    if (st.pass == 1) return std::nullopt;
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

  LowerResult stage_pv(const Step& st) {
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
                          ap(PT, m_kvdt, kc, h * rows, rows), ap(m_ones, m_kvdt, kc, 0, 1),
                          st.first, st.last);
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
      const AccessPattern dst =
          res ? ap(*res, m_odt, rows, 0, cols)
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
  // A step is done with its sequence's keys: the last one releases them.
  LowerResult keys_done(const Step& st, Keys& ks) {
    if (--ks.steps_left == 0) {
      if (ks.kt) m_ctx.release(*ks.kt);
      for (Slot v : ks.v) m_ctx.release(v);
      m_keys.erase({st.g, st.s});
    }
    return std::nullopt;
  }

  LoweringContext& m_ctx;
  const Node& m_n;
  int32_t m_T = 0;
  int64_t m_Lq = 0, m_Lk = 0, m_D = 0, m_H = 1, m_hd = 0, m_seq = 0, m_sequences = 1;
  int64_t m_G = 1, m_groups = 1, m_stack = 1;
  bool m_causal = false, m_segments = false, m_bias = false, m_batched = false;
  DType m_kvdt = DType::bf16, m_odt = DType::bf16, m_bdt = DType::bf16;
  Tiles m_qtiles, m_ktiles, m_out;
  std::vector<std::vector<int64_t>> m_qt_of_seq, m_kt_of_seq;
  Operand m_q, m_k, m_v;
  Slot m_neg_ident, m_minus_ident, m_bias_ident, m_causal_tile, m_seg_cols, m_seg_hbm, m_bias_hbm;
  bool m_kt_resident = true, m_stream_out = false, m_out_direct = true;
  int64_t m_scores = 0, m_others = 0, m_items_started = 0;
  bool m_two_pass = false, m_sums_by_array = false, m_keep_masks = false;
  Slot m_ones;
  Slot m_out_hbm;
  std::vector<Slot> m_op_buffers;
  std::map<std::pair<int64_t, int64_t>, Item> m_items;      // (group, query tile)
  std::map<std::pair<int64_t, int64_t>, Slot> m_seg_rows;   // (group, query tile): segment ids
  std::map<std::pair<int64_t, int64_t>, Keys> m_keys;       // (group, sequence)
  std::map<std::pair<int64_t, int64_t>, Step> m_next_item;  // (group, query tile): the next
  std::map<std::array<int64_t, 3>, Slot> m_kept_masks;      // (group, query tile, key tile)
};

LowerResult lower_attention(LoweringContext& ctx, const Node& n) {
  if (decode_row_attention_applies(ctx, n)) return lower_decode_row_attention(ctx, n);
  return FusedAttention(ctx, n).run();
}

}  // namespace

void populate_fused_attention_lowerings(LoweringTable& table) {
  table.add(OpKind::attention, lower_attention);
}

}  // namespace wallsim::compiler_stub::lowering
