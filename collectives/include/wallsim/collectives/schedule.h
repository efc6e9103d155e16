// Collective algorithms as schedules: the steps of sends between ranks that each algorithm
// makes, the size-based choice Neuron uses, and the alpha-beta closed forms (plain C++).
#pragma once

#include <cstdint>
#include <optional>
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
struct Schedule {
  Algorithm algorithm = Algorithm::ring;
  std::vector<Step> steps;
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
// std::invalid_argument for rhd on a rank count that is not a power of two.
Schedule make_schedule(CollectiveOp op, Algorithm algorithm, int ranks, double bytes, int peer = 1);

// The alpha-beta cost model (docs/COLLECTIVES.md): alpha s per step, beta s per byte a rank
// sends, gamma s per byte it reduces.
struct AlphaBeta {
  double alpha_s = 0, beta_s_per_byte = 0, gamma_s_per_byte = 0;
};
double closed_form_seconds(CollectiveOp op, Algorithm algorithm, int ranks, double bytes,
                           const AlphaBeta& ab);

// nccl-tests' bus-bandwidth factor: busbw = algbw x factor (2(n-1)/n all_reduce; (n-1)/n
// all_gather, reduce_scatter, all_to_all; 1 permute and send/recv).
double busbw_factor(CollectiveOp op, int ranks);

}  // namespace wallsim::collectives
