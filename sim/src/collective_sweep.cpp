// One collective per size on one System, timed by the collective engine.
#include "wallsim/sim/collective_sweep.h"

#include <deque>
#include <set>

#include "wallsim/collectives/plan_maker.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim::sim {

std::vector<CollectiveSweepRow> run_collective_sweep(const ChipConfig& core,
                                                     const SystemConfig& system,
                                                     collectives::CollectiveOp op,
                                                     const std::vector<std::pair<int, int>>& ranks,
                                                     const std::vector<int64_t>& sizes,
                                                     isa::DType dtype) {
  using collectives::CollectiveOp;
  const int p = static_cast<int>(ranks.size());
  std::set<std::pair<int, int>> seen;
  for (const auto& [c, k] : ranks) {
    if (c < 0 || k < 0 || c >= system.chips() || k >= system.chip.cores) {
      throw base::InputError("--ranks", "[" + std::to_string(c) + ", " + std::to_string(k) +
                                            "] is not a core of the system (" +
                                            std::to_string(system.chips()) + " chips x " +
                                            std::to_string(system.chip.cores) + " cores)");
    }
    if (!seen.insert({c, k}).second) throw base::InputError("--ranks", "a core is named twice");
  }
  if (p < 1) throw base::InputError("--ranks", "a communicator needs a rank");
  if (op == CollectiveOp::send_recv && p != 2)
    throw base::InputError("--ranks", "send_recv takes two ranks: the sender and the receiver");
  const bool splits = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter ||
                      op == CollectiveOp::all_to_all;
  const int64_t esize = isa::dtype_bytes(dtype);

  init_systemc();
  System sys(core, system, CoreOptions{});
  std::deque<isa::Plan> plans;
  std::vector<CollectiveSweepRow> rows;
  for (int64_t bytes : sizes) {
    int64_t count = bytes / esize;
    if (splits) count = count / p * p;
    if (count < 1) continue;
    CollectiveSweepRow row;
    row.count = count;
    row.bytes = count * esize;
    rows.push_back(row);
    if (op == CollectiveOp::send_recv) {
      plans.push_back(collectives::collective_plan(op, 2, count, dtype, 1, false));
      sys.core(ranks[0].first, ranks[0].second).launch(plans.back(), {}).comm_ranks = {ranks};
      plans.push_back(collectives::collective_plan(op, 2, count, dtype, 0, true));
      sys.core(ranks[1].first, ranks[1].second).launch(plans.back(), {}).comm_ranks = {ranks};
      continue;
    }
    plans.push_back(collectives::collective_plan(op, p, count, dtype));
    for (const auto& [c, k] : ranks) {
      sys.core(static_cast<size_t>(c), static_cast<size_t>(k)).launch(plans.back(), {}).comm_ranks =
          {ranks};
    }
  }
  wallsim::sim::simulate();
  for (const auto& [c, k] : ranks) {
    check_finished(sys, sys.core(static_cast<size_t>(c), static_cast<size_t>(k)));
  }
  const auto& records = sys.collectives()->records();
  if (records.size() != rows.size())
    throw SimulationError("collectives: " + std::to_string(records.size()) + " of " +
                          std::to_string(rows.size()) + " collectives completed");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = records[i];
    const double seconds = double(r.end_ps - r.ready_ps) * 1e-12;
    rows[i].algorithm = r.algorithm;
    rows[i].label = r.label;
    rows[i].bound_by = r.bound_by;
    rows[i].time_us = seconds * 1e6;
    rows[i].algbw_gb_per_s = seconds > 0 ? double(rows[i].bytes) / seconds / 1e9 : 0.0;
    rows[i].busbw_gb_per_s = rows[i].algbw_gb_per_s * collectives::busbw_factor(op, p);
  }
  return rows;
}

}  // namespace wallsim::sim
