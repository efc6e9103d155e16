// A folded distributed run: the plan, the world's communicators, the other ranks' figures.
#include "wallsim/driver/fold_run.h"

#include <set>
#include <stdexcept>

#include "wallsim/base/params.h"
#include "wallsim/sim/fold_unbalance.h"

namespace wallsim::driver {

FoldPlan plan_fold(FoldMode mode, const runtime::FoldDecision& decision,
                   const runtime::ProcessGroup& group) {
  FoldPlan p;
  p.world = group.world();
  if (!decision.eligible) return p;
  if (mode == FoldMode::off) {
    p.why_unfolded = "--fold off";
  } else {
    p.folded = true;
  }
  return p;
}

std::vector<sim::CollectiveFold::Communicator> world_communicators(
    const runtime::ProcessGroup& group) {
  std::vector<sim::CollectiveFold::Communicator> out;
  std::set<std::pair<std::string, std::vector<std::pair<int, int>>>> seen;
  for (int64_t r = 0; r < group.world(); ++r) {
    for (const auto& [name, members] : group.context(r).comms) {
      if (seen.insert({name, members}).second) out.push_back({name, members});
    }
  }
  return out;
}

runtime::StepRecord as_shared_cache_hits(runtime::StepRecord r) {
  runtime::Counts& c = r.counts;
  const int64_t shared = c.compiles - c.compile_failures;
  c.compiles -= shared;
  c.cache_misses -= shared;
  c.cache_hits += shared;
  c.recompiles = 0;
  return r;
}

void copy_folded_core_stats(traces::StatsRegistry& stats, const runtime::ProcessGroup& group) {
  for (int64_t r = 1; r < group.world(); ++r) {
    const runtime::RankContext c = group.context(r);
    stats.copy_scope("chip0.core0",
                     "chip" + std::to_string(c.chip) + ".core" + std::to_string(c.core));
  }
}

void check_fold_exact(const sim::System& system) {
  if (const std::optional<std::string> mismatch = system.fold_mismatch()) {
    throw std::logic_error(
        "an invariant of the folded run broke (the eligibility rules admitted "
        "a run whose chips did not stay alike): " +
        *mismatch);
  }
}

void unbalance_chip_for_test(sim::System& system, int chip) {
  try {
    sim::unbalance_chip_for_test(system, chip);
  } catch (const std::invalid_argument& e) {
    throw base::InputError("--fold-test-unbalance " + std::to_string(chip), e.what());
  }
}

}  // namespace wallsim::driver
