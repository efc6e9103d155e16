// The fused attention's schedule space (issue 35): a point (one or two passes over the keys, heads
// per group, K^T kept or made per step, mask tiles kept, row sums by the array), the facts of one
// attention it is priced on, and the cost model ranking the points from isa::CostHints.
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/isa/arch_spec.h"

namespace wallsim::compiler_stub::lowering {

// One point of a fused attention's schedule space (fused_attention.h). The loop order is fixed:
// head groups, sequences, query tiles (T rows, the query block), key tiles (T keys, the key
// tile); the softmax statistics live in SBUF per query tile (online softmax, or the final
// maxima of a first pass), so its HBM traffic is q, k, v and the output once per head group.
struct AttentionSchedule {
  bool two_pass = false;        // a maxima pass, then exp and P.V (else one online pass)
  int64_t heads_per_group = 1;  // G: heads side by side in one PSUM bank per step
  bool keys_resident = true;    // K^T (and V when not on chip) kept per (group, sequence)
  bool keep_masks = false;      // two passes over segment ids: the first pass's mask tiles kept
  bool sums_by_array = false;   // two passes: row sums by P^T . 1 beside O in its bank
  // Two passes with the sums by the array: the second pass makes S^T = K Q^T (keys on
  // partitions, the mask tile as it is compared), so its exponential is P^T: no transposes of P
  // and no copy of P^T out of PSUM per step. Offered with K^T kept only (fused_attention_plan.cpp).
  bool scores_transposed = false;
  // Whether the second pass's exponential makes P^T (S^T with the sums by the array).
  bool makes_pt() const { return two_pass && sums_by_array && scores_transposed; }
  std::string describe() const;
};

// What the cost model needs of one attention: its sizes and the structure of its masks.
struct AttentionFacts {
  int64_t heads = 1, head_dim = 64, tile = 128, stack_max = 1;  // stack: heads per transpose
  int64_t query_tiles = 1;                                      // over all sequences
  int64_t steps = 1;              // (query tile, key tile) pairs computed, per head group
  int64_t masked_steps = 0;       // of which carry a mask tile
  int64_t keys = 1, queries = 1;  // rows of K (per sequence, summed) and of Q
  int64_t kv_bytes = 2, out_bytes = 2;
  bool segments = false, causal = false, bias = false;
  bool q_on_chip = false, k_on_chip = false, v_on_chip = false;
  int64_t dma_engines = 16;
};

// The model's breakdown (ns): each engine's busy time (they overlap in part across the
// pipeline's steps), the DMA engines' time, and the plan's HBM bytes and instruction count.
struct AttentionCost {
  double tensor_ns = 0, vector_ns = 0, scalar_ns = 0, dma_ns = 0;
  int64_t hbm_bytes = 0;
  int64_t instructions = 0;
  double total_ns() const;
};

AttentionCost predict_attention(const AttentionFacts& f, const AttentionSchedule& s,
                                const isa::ArchSpec& arch);

}  // namespace wallsim::compiler_stub::lowering
