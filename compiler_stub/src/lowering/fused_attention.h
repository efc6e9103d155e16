// The fused attention kernel (`attention`: prefill and packed sequences): its plan
// (FusedAttentionPlan, fused_attention_plan.cpp) apart from its emission (FusedAttention:
// the pipeline, operands and keys in lower_fused_attention.cpp, the stages of one step in
// fused_attention_stages.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "lowering/attention_schedule.h"
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

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

// The kernel's plan for one attention: its shapes, heads per group and per transpose, which
// operands stay on chip, one pass or two, and the query and key tiles of each sequence. A
// function of the op and of what is on chip when it starts (make): nothing is emitted or
// allocated, so a schedule search can weigh plans before one is emitted.
class FusedAttentionPlan {
 public:
  // Fills the plan for attention `n`, or the reason the chip cannot run it.
  LowerResult make(const LoweringContext& ctx, const Node& n);
  int64_t heads_per_group() const { return m_G; }
  int64_t head_groups() const { return m_groups; }
  int64_t heads_per_transpose() const { return m_stack; }
  bool two_pass() const { return m_two_pass; }
  bool keys_resident() const { return m_kt_resident; }  // K^T kept per (group, sequence)
  bool streams_out() const { return m_stream_out; }     // each query tile stored when done
  // The points of the op's schedule space (attention_schedule.h; point 0: today's rules) and
  // the chosen one's predicted time (compiler.attention_schedule picks).
  const std::vector<AttentionSchedule>& points() const { return m_points; }
  double predicted_ns() const { return m_predicted_ns; }

 protected:
  // Bytes per partition the pipeline's temporaries take at most with G heads per group, `stack`
  // per transpose: the steps in flight (P, P^T, statistics, a mask tile), the query tiles in
  // flight (Q^T, maxima, sums, m^T or O, segment ids, the result), the operand tiles loaded
  // from HBM, and the op's constants.
  int64_t working_set(int64_t G, int64_t stack) const;
  // The key tiles query tile i sees: its sequence's, up to its last query when causal.
  std::vector<int64_t> keys_for(int64_t s, int64_t i) const;
  bool masked(int64_t i, int64_t j) const;

  int32_t m_T = 0;
  int64_t m_Lq = 0, m_Lk = 0, m_D = 0, m_H = 1, m_hd = 0, m_seq = 0, m_sequences = 1;
  int64_t m_G = 1, m_groups = 1, m_stack = 1;
  bool m_causal = false, m_segments = false, m_bias = false, m_batched = false;
  DType m_kvdt = DType::bf16, m_odt = DType::bf16, m_bdt = DType::bf16;
  Tiles m_qtiles, m_ktiles;
  std::vector<std::vector<int64_t>> m_qt_of_seq, m_kt_of_seq;
  bool m_kt_resident = true, m_stream_out = false;
  bool m_two_pass = false, m_sums_by_array = false, m_keep_masks = false;
  bool m_scores_t = false;  // the second pass's scores as S^T (AttentionSchedule)
  std::vector<AttentionSchedule> m_points;
  double m_predicted_ns = 0;
};

// The kernel's emission from its plan (run: plan, operands, then the steps in pipeline order).
class FusedAttention : private FusedAttentionPlan {
 public:
  FusedAttention(LoweringContext& ctx, const Node& n) : m_ctx(ctx), m_n(n) {}
  LowerResult run();

 private:
  // The additive mask value of a masked score: -2^30, exact in bf16, so exp() of it is 0.
  static constexpr double kMasked = -1073741824.0;
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

  std::optional<Slot> alloc(int64_t elems, DType dt, const char* hint);
  void vector_op(Opcode op, const AccessPattern& dst, double value, double pstep, double step);
  bool operand(Operand& o, int32_t id, const Tiles& tiling);
  // Columns [c0, c0 + nc) of row tile t of `o`: on chip, or loaded into `tmp`.
  AccessPattern rows_of(const Operand& o, const Tiles& tiling, int64_t t, int64_t c0, int64_t nc,
                        std::optional<Slot>& tmp, int64_t tmp_off = 0);
  LowerResult prepare();
  // PSUM banks 2.. in rotation, for values that live within one stage.
  Slot other_bank();
  int64_t heads_in(int64_t g) const { return std::min(m_G, m_H - g * m_G); }
  // Q_i^T (scaled) or K_j^T of group g: per stack of heads, a transpose into PSUM and a copy
  // out by the scalar engine into dst's columns [col0 + stack x cols, ...).
  void transpose_heads(const AccessPattern& src, int64_t g, Slot dst, int64_t col0, int64_t cols,
                       int64_t stack_stride, double scale);
  // Head h (of group g)'s rows in a stacked transposed buffer: partitions and a column offset.
  std::pair<int32_t, int64_t> stacked(int64_t h, int64_t stack_stride) const;
  LowerResult start_keys(int64_t g, int64_t s);
  LowerResult start_item(const Step& st);
  // The mask tile of a masked step: a dense bias tile loaded from HBM, or the 0/1 tile
  // M^T [keys, queries] compared from the segment ids (with the causal tile on a diagonal);
  // nothing for the causal tile alone (made once). Starts the step's query tile if need be.
  LowerResult prepare_mask(Step& st);
  LowerResult stage_scores(Step& st);
  // m^T [heads, queries] of the final maxima (two passes), made as the second pass begins,
  // a step ahead of the first subtraction that reads it.
  void final_maxima_transposed(const Step& st, const Item& it);
  // S -= m' by the array (m'^T [heads, queries] stationary, -I broadcast over each head's keys
  // moving), then P = exp(S) straight from PSUM with its row sums (scalar), l = l alpha + sums.
  LowerResult stage_softmax(Step& st);
  // P^T per head, evacuated by the scalar engine.
  LowerResult stage_pt(Step& st);
  LowerResult stage_pv(const Step& st);
  // A step is done with its sequence's keys: the last one releases them.
  LowerResult keys_done(const Step& st, Keys& ks);

  LoweringContext& m_ctx;
  const Node& m_n;
  Tiles m_out;
  Operand m_q, m_k, m_v;
  Slot m_neg_ident, m_minus_ident, m_bias_ident, m_causal_tile, m_seg_cols, m_seg_hbm, m_bias_hbm;
  bool m_out_direct = true;
  int64_t m_scores = 0, m_others = 0, m_items_started = 0;
  Slot m_ones;
  Slot m_out_hbm;
  std::vector<Slot> m_op_buffers;
  std::map<std::pair<int64_t, int64_t>, Item> m_items;      // (group, query tile)
  std::map<std::pair<int64_t, int64_t>, Slot> m_seg_rows;   // (group, query tile): segment ids
  std::map<std::pair<int64_t, int64_t>, Keys> m_keys;       // (group, sequence)
  std::map<std::pair<int64_t, int64_t>, Step> m_next_item;  // (group, query tile): the next
  std::map<std::array<int64_t, 3>, Slot> m_kept_masks;      // (group, query tile, key tile)
  // (group, query tile): Q's rows loaded from HBM an item ahead (start_item), and their buffer.
  std::map<std::pair<int64_t, int64_t>, std::pair<AccessPattern, Slot>> m_q_ahead;
};

}  // namespace wallsim::compiler_stub::lowering
