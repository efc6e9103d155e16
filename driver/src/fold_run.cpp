// A folded distributed run: the plan, the world's communicators, the other ranks' figures.
#include "wallsim/driver/fold_run.h"

#include <set>

namespace wallsim::driver {

FoldPlan plan_fold(FoldMode mode, const runtime::FoldDecision& decision,
                   const runtime::ProcessGroup& group) {
  FoldPlan p;
  p.world = group.world();
  if (!decision.eligible) return p;
  if (mode == FoldMode::off) {
    p.why_unfolded = "--fold off";
  } else if (group.chips_used() > 1) {
    p.why_unfolded = "ranks on " + std::to_string(group.chips_used()) +
                     " chips: folding across chips is not built yet";
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

void copy_folded_core_stats(traces::StatsRegistry& stats, int64_t world) {
  for (int64_t k = 1; k < world; ++k)
    stats.copy_scope("chip0.core0", "chip0.core" + std::to_string(k));
}

}  // namespace wallsim::driver
