// Collective algorithms as schedules: the steps of sends between ranks that each algorithm
// makes, the size-based choice Neuron uses, and the alpha-beta closed forms (plain C++).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wallsim/collectives/collective_config.h"
#include "wallsim/isa/instruction.h"

namespace wallsim::collectives {

enum class CollectiveOp : uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  permute,
  send_recv
};
inline constexpr int kNumCollectiveOps = 6;
std::string_view name_of(CollectiveOp op);
std::optional<CollectiveOp> parse_collective_op(std::string_view s);
// The op an instruction runs (send and recv are the two ends of send_recv); none for others.
std::optional<CollectiveOp> collective_op_of(isa::Opcode op);

// One step: every send moves `bytes` from rank `from` to rank `to`, all at once; then each rank
// reduces `reduce_bytes` of what it received into its own data.
struct Send {
  int from = 0, to = 0;
  double bytes = 0;
};
struct Step {
  std::vector<Send> sends;
  double reduce_bytes = 0;
};
// One stage of a hierarchical collective: `op` on groups of `group_size` ranks along level
// `level` (0 innermost), every group at once, on `bytes` (the stage's size as nccl-tests counts
// it), by `algorithm`.
struct Stage {
  CollectiveOp op = CollectiveOp::all_reduce;
  int level = 0;
  int group_size = 1;
  double bytes = 0;
  Algorithm algorithm = Algorithm::automatic;
};
struct Schedule {
  Algorithm algorithm = Algorithm::ring;  // flat; a hierarchical one: its first stage's
  std::vector<Step> steps;
  std::vector<Stage> stages;  // hierarchical: the stages in order; flat: none
  // "ring", or for a hierarchical schedule "hier:" and each stage's algorithm
  // ("hier:rhd/ring/rhd").
  std::string label() const;
};

// The algorithm a collective of `bytes` (its size as nccl-tests counts it: the buffer of an
// all_reduce, all_to_all or permute, the output of an all_gather, the input of a
// reduce_scatter) on `ranks` ranks runs: the config's, or by size (Neuron: direct mesh below
// mesh_below_bytes, recursive halving/doubling below rhd_below_bytes, ring above). rhd needs a
// power-of-two rank count (else ring); all_to_all runs mesh, else pairwise (`ring`); permute
// and send_recv are one step whatever the choice (`mesh`).
Algorithm choose_algorithm(CollectiveOp op, int ranks, double bytes, const CollectivesConfig& c);

// The steps of `op` by `algorithm` (not automatic) on `ranks` ranks for a size of `bytes`;
// `peer` is the permute offset, or the send_recv pair (from 0 to 1 of two ranks). Throws
// std::invalid_argument for rhd on a rank count that is not a power of two. `ring_directions`
// 2: each ring step of all_reduce, all_gather and reduce_scatter sends half its chunk to rank + 1
// and half to rank - 1 (two rings at once), when ranks > 2.
Schedule make_schedule(CollectiveOp op, Algorithm algorithm, int ranks, double bytes, int peer = 1,
                       int ring_directions = 1);

// The stages of `op` (all_reduce, all_gather or reduce_scatter) composed over `levels` (their
// sizes, innermost first; rank r = i0 + d0 (i1 + d1 (i2 + ...))), the algorithms not chosen:
// all_reduce reduce-scatters level by level from the innermost, all-reduces the outermost on
// n / (d0 ... d_{k-2}) and all-gathers back (ASTRA-sim; with two levels, Neuron's intra-node
// reduce-scatter, inter-node all-reduce on 1/Y, intra-node all-gather); reduce_scatter
// reduce-scatters from the innermost level out; all_gather gathers from the outermost level in
// (Neuron: the inter-node stage first, where the data is smallest). Levels of size 1 are left
// out. Throws std::invalid_argument for any other op.
std::vector<Stage> hierarchical_stages(CollectiveOp op, const std::vector<int>& levels,
                                       double bytes);
// Those stages as one schedule on every rank: each stage's algorithm from `choose`, its steps
// run by every group of its level at once (stage after stage, not pipelined).
Schedule make_hierarchical_schedule(CollectiveOp op, const std::vector<int>& levels, double bytes,
                                    const std::function<Algorithm(const Stage&)>& choose,
                                    int ring_directions = 1);
// The most sends any one rank makes in `step`: the peers its collective core handshakes with.
int peers_per_step(const Step& step);

// The alpha-beta cost model (docs/COLLECTIVES.md): alpha s per step, plus handshake s per peer
// a rank sends to in the step (p - 1 for mesh, ring_directions for ring, 1 otherwise), beta s
// per byte a rank sends (over all its ring directions), gamma s per byte it reduces.
struct AlphaBeta {
  double alpha_s = 0, beta_s_per_byte = 0, gamma_s_per_byte = 0;
  double handshake_s = 0;
  int ring_directions = 1;
};
// The form plus `launch_s` once (the per-collective cost).
double closed_form_seconds(CollectiveOp op, Algorithm algorithm, int ranks, double bytes,
                           const AlphaBeta& ab, double launch_s = 0);
// A hierarchical collective's: the sum of its stages' closed forms, each with its level's
// alpha, beta, gamma and handshake (`per_level[stage.level]`), plus `launch_s` once. With two
// levels (Y ranks per instance, X instances) and one-direction ring stages, all_reduce is
// L + 2(Y-1)(a1+h) + 2((Y-1)/Y)n(b1) + ((Y-1)/Y)n(g) + 2(X-1)(a2+h) + 2((X-1)/X)(n/Y)(b2)
// + ((X-1)/X)(n/Y)g.
double hierarchical_closed_form_seconds(const std::vector<Stage>& stages,
                                        const std::vector<AlphaBeta>& per_level,
                                        double launch_s = 0);

// nccl-tests' bus-bandwidth factor: busbw = algbw x factor (2(n-1)/n all_reduce; (n-1)/n
// all_gather, reduce_scatter, all_to_all; 1 permute and send/recv).
double busbw_factor(CollectiveOp op, int ranks);

}  // namespace wallsim::collectives
