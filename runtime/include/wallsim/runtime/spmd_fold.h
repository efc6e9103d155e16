// SPMD folding's decision (issue 39): which ranks of a distributed run are one equivalence class
// — they run the same plans on symmetric hardware and see the same network — so that a folded
// run could simulate one rank per class and give the others its timing. Plain C++.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wallsim/runtime/process_group.h"
#include "wallsim/sim/system_config.h"

namespace wallsim::runtime {

// What the decision needs beyond the process group and the system.
struct FoldFacts {
  bool functional = false;  // every rank computes its own values
  bool chakra = false;      // every rank writes its own execution trace
  // Why the workload's ranks do not all run the same program at the same sizes, if they do not
  // (Workload::rank_asymmetry: serve's data-parallel replicas serve different requests).
  std::optional<std::string> workload_asymmetry;
  // A compile cache shared by the ranks, compiled in the background (runtime.compile_in_
  // background): the first rank to ask compiles while the host goes on; the others wait for it.
  bool background_shared_compiles = false;
};

// The classes of a run's ranks. Eligible: every rank is in one class whose representative is
// rank 0 (the only symmetry recognised so far: SPMD ranks filling whole chips of a system whose
// chips are all alike). Not eligible: `why_not` names the first rule that fails, and every rank
// is a class of its own.
struct FoldDecision {
  bool eligible = false;
  std::string why_not;
  std::vector<int64_t> class_of;         // by rank: the index of its class
  std::vector<int64_t> representatives;  // by class: its lowest rank, ascending
  int64_t classes() const { return static_cast<int64_t>(representatives.size()); }
};

// Decides from the process group, the system the run elaborates (driver::system_for_ranks)
// and the facts. The rules, in order: values and traces computed per rank (functional,
// --chakra); pipeline stages (pp > 1); the workload's own asymmetry; a shared cache compiled in
// the background; failed links; ranks not
// filling whole chips (on more than one chip), or not every chip of the system; a communicator
// with different numbers of members on the chips it spans; more communicators on a chip, summed
// over the kinds (tp, dp, world), than collective cores (collectives.cores_per_chip: their
// collectives could be in flight at once and would run in turn, in key order, so the twins
// would not end together, and a folded meeting, which takes its twins' cores together, could
// be granted them in another order than the unfolded run's meetings).
FoldDecision decide_fold(const ProcessGroup& group, const sim::SystemConfig& system,
                         const FoldFacts& facts);

}  // namespace wallsim::runtime
