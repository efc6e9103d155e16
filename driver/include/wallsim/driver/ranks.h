// The ranks of a distributed `run` (issue 38): the system they run on, their per-rank sums, and
// the report's "distributed" section — per-rank and whole-run figures.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wallsim/driver/fold_run.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/process_group.h"
#include "wallsim/runtime/session.h"
#include "wallsim/runtime/spmd_fold.h"
#include "wallsim/sim/system.h"

namespace wallsim::driver {

// The system a distributed run elaborates: the configured one, trimmed to the chips the ranks
// use — one chip when they fit on one, else the fewest instances that hold them (all of them
// when instances form a ring, whose size sets its routes).
sim::SystemConfig system_for_ranks(const sim::SystemConfig& configured, int64_t world);

// One rank's steps summed (start-up excluded), and each step's wall time.
struct RankSums {
  runtime::StepRecord sum;
  std::vector<int64_t> step_wall_ns;
  void add(const runtime::StepRecord& r);
};

// What a rank reports: its place, its steps summed, its start-up, its time in collectives.
struct RankFigures {
  runtime::RankContext rank;
  RankSums sums;
  runtime::StepRecord startup;
  int64_t collective_ns = 0;  // blocked in collectives, from its arrival to the end
  int64_t exposed_ns = 0;     // in collectives with no compute engine of its core busy
  int64_t overlapped_ns = 0;  // in collectives with one busy (sim/comm_overlap.h)
};

// A simulated rank's figures from its session (its identity, its start-up, its core's
// collectives) and its step sums.
RankFigures rank_figures(runtime::Session& session, RankSums sums);

// The "distributed" section: the process group (world, tp, pp, dp, the compile cache), whether
// its ranks could fold and did (`fold`: eligible, or why not; the classes; folded, or why not;
// the ranks simulated), the whole run (each step's time is its slowest rank's; compute, exposed
// communication and compiles summed over the ranks; bytes per link kind) and each rank's
// figures (its place, its steps' host states — they sum to its wall time — device busy time,
// time blocked in collectives, compiles).
nlohmann::ordered_json distributed_section(const runtime::ProcessGroup& group,
                                           const std::vector<RankFigures>& ranks,
                                           sim::System& system, bool shared_cache,
                                           const runtime::FoldDecision& fold, const FoldPlan& plan);

}  // namespace wallsim::driver
