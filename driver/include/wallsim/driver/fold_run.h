// A folded distributed `run` (SPMD folding, issue 39 step 8; docs/SPMD_FOLDING.md): whether the
// run folds, the world's communicators for sim::System::fold, and what the ranks it does not
// simulate report — rank 0's figures under their own identity and core names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wallsim/runtime/process_group.h"
#include "wallsim/runtime/spmd_fold.h"
#include "wallsim/runtime/step_log.h"
#include "wallsim/sim/collective_engine.h"
#include "wallsim/sim/system.h"
#include "wallsim/traces/stats.h"

namespace wallsim::driver {

// `run --fold`: off (every rank simulated) or auto (fold when the decision allows).
enum class FoldMode { off, automatic };

// Whether the run folds, and when it is eligible but does not, why.
struct FoldPlan {
  bool folded = false;
  std::optional<std::string> why_unfolded;
  int64_t world = 1;
  int64_t simulated_ranks() const { return folded ? 1 : world; }
};

// Folds when `mode` is auto and the decision eligible: the ranks are on one chip or fill every
// chip of the system (sim::System::fold mirrors chip 0 on the others).
FoldPlan plan_fold(FoldMode mode, const runtime::FoldDecision& decision,
                   const runtime::ProcessGroup& group);

// Every communicator of the world once (in rank order of their first members, then by name),
// its members as (chip, core) by rank within it: what System::fold gives the collective engine.
std::vector<sim::CollectiveFold::Communicator> world_communicators(
    const runtime::ProcessGroup& group);

// A record of rank 0's as any other rank's of a folded run with a shared compile cache: rank 0
// compiles each plan (the lowest rank asking in a picosecond takes the compile,
// runtime/compile_service.cpp), every other rank finds it in the shared cache and waits for it as
// long — a cache hit instead of a miss, no compile or recompile counted. Failed compiles are not
// shared: each rank counts its own.
runtime::StepRecord as_shared_cache_hits(runtime::StepRecord r);

// Rank 0's core's stats (chip0.core0.*) given to the cores of ranks 1 .. world-1 (chipC.coreK,
// on every chip the ranks fill), in its order, as the unfolded run writes them. After
// System::finalize.
void copy_folded_core_stats(traces::StatsRegistry& stats, const runtime::ProcessGroup& group);

// Throws std::logic_error (an internal error: the eligibility rules admitted a run whose chips
// did not stay alike) when a mirror chip's copy of a transfer did not finish in the
// representative's picosecond (sim::System::fold_mismatch): a folded run never reports inexact
// figures. After the simulation, and when it stopped on an error (the network throws at the
// transfer after a mismatch).
void check_fold_exact(const sim::System& system);

// Tests only (`run --fold-test-unbalance CHIP`, hidden): a 64 MiB transfer over chip CHIP's HBM
// from time 0, which no other chip sees, so that a folded run's mirrors of chip 0 on CHIP finish
// late and check_fold_exact fires. Throws base::InputError for a chip outside 1 .. chips-1.
// Before the simulation starts.
void unbalance_chip_for_test(sim::System& system, int chip);

}  // namespace wallsim::driver
