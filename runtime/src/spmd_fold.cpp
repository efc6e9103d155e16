// SPMD folding's decision: the rules that make a run's ranks one equivalence class.
#include "wallsim/runtime/spmd_fold.h"

#include <algorithm>
#include <map>
#include <set>

namespace wallsim::runtime {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The first rule the run breaks, if any.
std::optional<std::string> asymmetry(const ProcessGroup& group, const sim::SystemConfig& system,
                                     const FoldFacts& facts) {
  if (facts.functional) return "functional runs compute each rank's own values";
  if (facts.chakra) return "--chakra writes each rank's own execution trace";
  const ParallelSizes& s = group.sizes();
  if (s.pp > 1) return "pipeline stages run different layers (pp " + str(s.pp) + ")";
  if (facts.workload_asymmetry) return *facts.workload_asymmetry;
  if (facts.background_shared_compiles) {
    return "a shared compile cache compiled in the background: the first rank to ask compiles "
           "while the others wait for it (runtime.compile_in_background)";
  }
  if (!system.links.failed.empty()) {
    return "failed links (links.failed: " + system.links.failed + ") make the chips unequal";
  }
  const int64_t world = group.world(), cores = system.chip.cores;
  const int64_t used = group.chips_used();
  if (used > 1 && world % cores != 0) {
    return str(world) + " ranks fill " + str(used) + " chips of " + str(cores) + " cores unevenly";
  }
  if (used > 1 && used != system.chips()) {
    return "the ranks use " + str(used) + " of the system's " + str(system.chips()) +
           " chips: only a whole system's chips are taken as alike";
  }
  // Every communicator of a kind has the same number of members on each chip it spans, and no
  // chip holds more communicators than it has collective cores, summed over the kinds: a
  // rank's collectives of one communicator come one at a time (a plan's run in order on its
  // collective queue), so then every collective finds its cores when it is ready.
  // A folded meeting takes its twins' cores together, where unfolded a meeting keyed between
  // two twins could start first: with cores for all at once, no meeting waits and the order in
  // which they are granted does not matter (the collective engine stops a folded run whose
  // twins would wait anyway: CollectiveEngine::schedule).
  std::map<int, std::map<std::string, size_t>> demand;  // chip -> kind -> its communicators
  for (const char* kind : {"tp", "dp", "world"}) {
    std::set<int64_t> members_per_chip;
    std::map<int, std::set<std::pair<int, int>>> on_chip;  // chip -> communicators (first member)
    for (int64_t r = 0; r < world; ++r) {
      const RankContext c = group.context(r);
      const auto it = c.comms.find(kind);
      if (it == c.comms.end()) break;  // no communicator of this kind (one rank)
      std::map<int, int64_t> per_chip;
      for (const auto& [chip, core] : it->second) ++per_chip[chip];
      for (const auto& [chip, n] : per_chip) {
        members_per_chip.insert(n);
        on_chip[chip].insert(it->second.front());
      }
    }
    if (members_per_chip.size() > 1) {
      return std::string("a '") + kind + "' communicator has " + str(*members_per_chip.begin()) +
             " members on one chip and " + str(*members_per_chip.rbegin()) + " on another";
    }
    for (const auto& [chip, comms] : on_chip) demand[chip][kind] = comms.size();
  }
  for (const auto& [chip, kinds] : demand) {
    int64_t sum = 0;
    for (const auto& [kind, n] : kinds) sum += static_cast<int64_t>(n);
    if (sum <= system.collectives.cores_per_chip) continue;
    std::string each;
    for (const auto& [kind, n] : kinds) {
      each +=
          std::string(each.empty() ? "" : ", ") + str(static_cast<int64_t>(n)) + " '" + kind + "'";
    }
    return "chip " + str(chip) + " has " + str(sum) + " communicators (" + each +
           ") that may hold collectives at once, more than its " +
           str(system.collectives.cores_per_chip) +
           " collective cores: they would wait in turn (collectives.cores_per_chip)";
  }
  return std::nullopt;
}

}  // namespace

FoldDecision decide_fold(const ProcessGroup& group, const sim::SystemConfig& system,
                         const FoldFacts& facts) {
  FoldDecision d;
  const int64_t world = group.world();
  if (const auto why = asymmetry(group, system, facts)) {
    d.why_not = *why;
    for (int64_t r = 0; r < world; ++r) {
      d.class_of.push_back(r);
      d.representatives.push_back(r);
    }
    return d;
  }
  d.eligible = true;
  d.class_of.assign(static_cast<size_t>(world), 0);
  d.representatives = {0};
  return d;
}

}  // namespace wallsim::runtime
