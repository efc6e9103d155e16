// The fused attention's cost model (attention_schedule.h): each engine's busy time counted from
// the instructions a point emits (lower_fused_attention.cpp, fused_attention_stages.cpp), priced
// as the chip model prices them from isa::CostHints.
#include "lowering/attention_schedule.h"

#include <algorithm>

namespace wallsim::compiler_stub::lowering {

std::string AttentionSchedule::describe() const {
  return std::string(two_pass ? "two passes" : "online") + ", " + std::to_string(heads_per_group) +
         " heads per group, K^T " + (keys_resident ? "kept" : "per step") +
         (keep_masks ? ", masks kept" : "") + (sums_by_array ? ", sums by the array" : "") +
         (scores_transposed ? ", S^T" : "");
}

// The engines overlap only in part: a step's stages wait on each other (scores, maxima,
// exponential, P^T, P.V), so the busiest engine's time is exposed whole and the others' by half
// (checked against the simulator by AttentionScheduleOnChip).
double AttentionCost::total_ns() const {
  const double busiest = std::max({tensor_ns, vector_ns, scalar_ns, dma_ns});
  return busiest + 0.5 * (tensor_ns + vector_ns + scalar_ns + dma_ns - busiest);
}

namespace {

// Tallies one point's instructions per engine.
struct Tally {
  const AttentionFacts& f;
  const isa::CostHints& h;
  AttentionCost c;
  double scalar_fixed_ns() const {
    return double(h.vector_fixed_ns) * h.vector_elements_per_ns / h.scalar_elements_per_ns;
  }
  // A matmul or transpose streaming `n` columns (a transpose: the source's partitions).
  void array(double count, int64_t n) {
    c.tensor_ns += count * double(std::max(n, h.moving_min_cycles)) * 1e3 / h.tensor_freq_mhz;
    c.instructions += static_cast<int64_t>(count);
  }
  void vector(double count, int64_t elems) {
    c.vector_ns += count * (double(h.vector_fixed_ns) + double(elems) / h.vector_elements_per_ns);
    c.instructions += static_cast<int64_t>(count);
  }
  void scalar(double count, int64_t elems) {
    c.scalar_ns += count * (scalar_fixed_ns() + double(elems) / h.scalar_elements_per_ns);
    c.instructions += static_cast<int64_t>(count);
  }
  // A copy out of PSUM: the less loaded of the vector and scalar engines (LoweringContext::
  // evacuate).
  void evacuate(double count, int64_t elems) {
    if (c.vector_ns <= c.scalar_ns) {
      vector(count, elems);
    } else {
      scalar(count, elems);
    }
  }
  // `count` DMAs of `rows` rows of `row_bytes` contiguous bytes each.
  void dma(double count, int64_t rows, int64_t row_bytes, bool hbm = true) {
    const double payload = double(rows) * double(row_bytes);
    c.dma_ns += count * h.dma_engine_bytes(payload, double(rows)) /
                (h.dma_gb_per_s * double(std::max<int64_t>(1, f.dma_engines)));
    if (hbm) c.hbm_bytes += static_cast<int64_t>(count * payload);
    c.instructions += static_cast<int64_t>(count);
  }
};

}  // namespace

AttentionCost predict_attention(const AttentionFacts& f, const AttentionSchedule& s,
                                const isa::ArchSpec& arch) {
  Tally t{f, arch.costs, {}};
  const int64_t T = f.tile, hd = f.head_dim, G = std::max<int64_t>(1, s.heads_per_group);
  const int64_t key_tiles = (f.keys + T - 1) / T;
  for (int64_t g0 = 0; g0 < f.heads; g0 += G) {
    const int64_t ng = std::min(G, f.heads - g0);
    const int64_t stack = std::max<int64_t>(1, std::min(ng, f.stack_max));
    const int64_t stacks = (ng + stack - 1) / stack;
    const double steps = double(f.steps), masked = double(f.masked_steps);
    const double first = double(f.query_tiles), later = steps - first;
    // Operands: Q once, V once, K once (kept) or per step, the output once.
    if (!f.q_on_chip) t.dma(double(f.query_tiles), T, ng * hd * f.kv_bytes);
    if (!f.v_on_chip) t.dma(double(key_tiles), T, ng * hd * f.kv_bytes);
    if (!f.k_on_chip) t.dma(s.keys_resident ? double(key_tiles) : steps, T, ng * hd * f.kv_bytes);
    t.dma(double(f.query_tiles), T, ng * hd * f.out_bytes);
    if (f.segments) t.dma(double(f.query_tiles), T, T * 4);  // the queries' ids, every partition
    // K^T per sequence (kept) or per step (each pass).
    const int passes = s.two_pass ? 2 : 1;
    const double kt_makes = s.keys_resident ? double(key_tiles) : steps * passes;
    t.array(kt_makes * double(stacks), T);
    t.evacuate(s.keys_resident ? double(key_tiles) * double(stacks) / 4 : kt_makes * stacks,
               s.keys_resident ? 4 * T : T);
    // Per query tile: Q^T (scaled by the scalar engine), O / l at the end.
    t.array(first * double(stacks), T);
    t.scalar(first * double(stacks), T);
    t.scalar(first, ng);
    t.vector(first, ng * hd);
    if (s.two_pass) {  // m^T of the final maxima
      t.array(first, T);
      t.scalar(first, T);
    }
    // Mask tiles: compared from the ids (once, or per pass unless kept), or loaded.
    if (f.segments) t.vector(masked * (s.two_pass && !s.keep_masks ? 2 : 1), T);
    if (f.bias) t.dma(masked, T, T * f.kv_bytes);
    // Scores, each pass: the mask by the array, a matmul per head.
    t.array(masked * passes, ng * T);
    t.array(steps * double(ng) * passes, T);
    // Row maxima (the first pass's in two passes).
    t.vector(steps, ng * T);
    t.vector(later, ng);
    // The softmax: S - m by the array (per head on S^T), exp with the row sums.
    const bool st = s.makes_pt();
    t.array(st ? steps * double(ng) : steps, st ? T : ng * T);
    if (!s.two_pass) {
      t.array(steps, T);  // m'^T
      t.scalar(steps, T);
      t.vector(later, ng);  // m - m'
      t.scalar(steps * double(ng), T);
      t.scalar(later, ng);      // alpha
      t.vector(later * 2, ng);  // l alpha + sums
    } else if (s.sums_by_array) {
      t.scalar(steps, ng * T);
    } else {
      t.scalar(steps * double(ng), T);
      t.vector(later, ng);
    }
    // P^T (unless the exponential made it) and P.V (and P^T . 1 for the sums).
    if (!st) {
      t.array(steps * double(ng), T);
      t.evacuate(steps, ng * T);
    }
    t.array(steps * double(ng), hd);
    if (s.two_pass && s.sums_by_array) t.array(steps * double(ng), 1);
    if (!s.two_pass) {
      t.evacuate(first, ng * hd);
      t.vector(later * 2, ng * hd);  // O alpha + P V
    }
  }
  return t.c;
}

}  // namespace wallsim::compiler_stub::lowering
