// SPMD folding's collectives (CollectiveEngine::set_fold through System::fold): TP x DP ranks on
// the cores of one trn2 chip, each launching the same plans — compute, host transfers and
// collectives over its tp and dp communicators — against core (0, 0) alone, folded for them.
// The folded meeting completes when the representative arrives and moves its twin
// communicators' traffic as a multiplicity: core (0, 0)'s figures, the chip's HBM, the
// collective records of its communicators and the network must be those of the unfolded run
// bit for bit. Each run is a SystemC elaboration, so each runs in a child process of its own.
#include <gtest/gtest.h>

#include <systemc>

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fold_plans.h"
#include "in_child.h"
#include "wallsim/collectives/plan_maker.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"
#include "wallsim/traces/stats.h"

namespace wallsim::sim {
namespace {

using collectives::CollectiveOp;
using nlohmann::ordered_json;
using test_util::copy_plan;
using test_util::example;
using test_util::in_child;
using Ranks = std::vector<std::pair<int, int>>;

// tp x dp ranks, rank r = t + tp d: its tp communicator the ranks of its d, its dp
// communicator those of its t (as runtime::ProcessGroup numbers them). cores == 0: on cores
// 0 .. tp*dp-1 of one trn2 chip; else on chips of `cores` cores (rank r on core (r / cores,
// r % cores)) in a torus_x x torus_y torus.
struct Grid {
  int tp = 1, dp = 1;
  int cores = 0;
  int torus_x = 1, torus_y = 1;
  int ranks() const { return tp * dp; }
  std::pair<int, int> place(int r) const {
    return cores == 0 ? std::pair<int, int>{0, r} : std::pair<int, int>{r / cores, r % cores};
  }
  Ranks tp_group(int r) const {
    Ranks g;
    for (int t = 0; t < tp; ++t) g.push_back(place((r / tp) * tp + t));
    return g;
  }
  Ranks dp_group(int r) const {
    Ranks g;
    for (int d = 0; d < dp; ++d) g.push_back(place(r % tp + tp * d));
    return g;
  }
  // Every communicator of the world, once; none of one rank.
  std::vector<CollectiveFold::Communicator> world() const {
    std::vector<CollectiveFold::Communicator> out;
    for (int d = 0; tp > 1 && d < dp; ++d) out.push_back({"tp", tp_group(d * tp)});
    for (int t = 0; dp > 1 && t < tp; ++t) out.push_back({"dp", dp_group(t)});
    return out;
  }
};

// One collective on communicator `comm`, `count` fp32 elements as nccl-tests counts them.
isa::Plan collective(CollectiveOp op, const std::string& comm, int ranks, int64_t count) {
  isa::Plan p = collectives::collective_plan(op, ranks, count, isa::DType::fp32);
  p.comms.at(0).name = comm;
  p.name = comm + "." + p.name;
  return p;
}

// What one rank launches, in order; `comm` names the communicator of a collective (empty for
// compute and host transfers), `async` launches it asynchronously (the next launch does not
// wait for it, the one `after` it does).
struct Step {
  isa::Plan plan;
  std::string comm;
  bool async = false;
};

// Compute and host transfers between all-reduces (mesh, recursive halving-doubling and ring
// sizes), an all-gather and a reduce-scatter over the tp and dp communicators, one all-reduce
// asynchronous beside a matmul and a softmax.
std::vector<Step> rank_steps(const Grid& g) {
  std::vector<Step> steps;
  const auto add_collective = [&](CollectiveOp op, const std::string& comm, int64_t count,
                                  bool async = false) {
    const int size = comm == "tp" ? g.tp : g.dp;
    if (size > 1) steps.push_back({collective(op, comm, size, count), comm, async});
  };
  steps.push_back({copy_plan(isa::MemSpace::host, isa::MemSpace::hbm, 128, 4096), ""});
  steps.push_back({example("matmul"), ""});
  add_collective(CollectiveOp::all_reduce, "tp", int64_t{1} << 18);  // 1 MiB
  steps.push_back({example("softmax"), ""});
  add_collective(CollectiveOp::all_reduce, "dp", int64_t{1} << 14);  // 64 KiB: mesh
  add_collective(CollectiveOp::all_gather, "tp", int64_t{1} << 20);
  add_collective(CollectiveOp::reduce_scatter, "dp", int64_t{1} << 20);
  add_collective(CollectiveOp::all_reduce, "dp", int64_t{1} << 24, /*async=*/true);  // 64 MiB
  steps.push_back({example("matmul"), ""});
  steps.push_back({example("softmax"), ""});
  add_collective(CollectiveOp::all_reduce, "tp", int64_t{1} << 24);  // ring
  steps.push_back({example("vector_add"), ""});
  steps.push_back({copy_plan(isa::MemSpace::hbm, isa::MemSpace::host, 128, 3000), ""});
  return steps;
}

struct CollectiveRun {
  Grid grid;
  bool fold = false;    // core (0, 0) alone runs, folded for the grid's ranks
  bool world = true;    // folded: System::fold is given the world's communicators
  bool compute = true;  // chips other than 0: launch the compute and host transfers too
};

// Core (0, 0)'s figures: its launches' times and stats, chip 0's HBM stats, the collectives'
// stats and the records of its own communicators, and the network's figures on the chip's
// shared resources and its own DMA engines.
ordered_json simulate_grid(const CollectiveRun& run) {
  runtime::Config cfg =
      runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json");
  const Grid& g = run.grid;
  cfg.system.topology.torus_x = g.torus_x;
  cfg.system.topology.torus_y = g.torus_y;
  if (g.cores > 0) cfg.system.chip.cores = g.cores;
  init_systemc();
  traces::StatsRegistry stats;
  CoreOptions options;
  options.stats = &stats;
  System sys(cfg.chip, cfg.system, options);
  if (run.fold) {
    sys.fold(g.ranks(), run.world ? g.world() : std::vector<CollectiveFold::Communicator>{});
  }
  const std::vector<Step> steps = rank_steps(g);
  const int running = run.fold ? 1 : g.ranks();
  for (int r = 0; r < running; ++r) {
    const auto [chip_index, core_index] = g.place(r);
    Core& core = sys.core(static_cast<size_t>(chip_index), static_cast<size_t>(core_index));
    size_t last_async = 0;
    bool any_async = false;
    for (const Step& s : steps) {
      if (!run.compute && chip_index > 0 && s.comm.empty()) continue;
      engines::Launch& l = core.launch(s.plan, {});
      if (!s.comm.empty()) l.comm_ranks = {s.comm == "tp" ? g.tp_group(r) : g.dp_group(r)};
      if (any_async && s.plan.comms.empty() && s.plan.name == "vector_add") {
        l.after.push_back(last_async);  // the first launch after the matmul that uses its result
      }
      if (s.async) {
        l.async = true;
        last_async = static_cast<size_t>(l.index);
        any_async = true;
      }
    }
  }
  simulate();
  for (int r = 0; r < running; ++r) {
    const auto [chip_index, core_index] = g.place(r);
    check_finished(sys, sys.core(static_cast<size_t>(chip_index), static_cast<size_t>(core_index)));
  }
  if (const auto mismatch = sys.fold_mismatch()) throw std::runtime_error(*mismatch);
  Core& core = sys.core(0, 0);
  ordered_json times = ordered_json::array();
  for (size_t i = 0; i < core.launch_count(); ++i) {
    const Core::LaunchTimes t = core.launch_times(i);
    times.push_back({t.launch_begin.value(), t.start.value(), t.end.value()});
  }
  sys.finalize();
  const ordered_json all = stats_to_json(stats);
  ordered_json out;
  out["launches"] = times;
  out["core"] = all.at("chip0").at("core0");
  out["chip"] = all.at("system").at("chips").at("chip0");
  out["collectives"] = all.at("system").at("collectives");
  out["chips"] = all.at("system").at("chips");
  if (all.at("system").contains("links")) out["links"] = all.at("system").at("links");
  // Core (0, 0)'s collectives, in (communicator, index) order.
  std::vector<const CollectiveEngine::Record*> mine;
  for (const CollectiveEngine::Record& r : sys.collectives()->records()) {
    if (std::find(r.members.begin(), r.members.end(), std::pair<int, int>{0, 0}) !=
        r.members.end()) {
      mine.push_back(&r);
    }
  }
  std::sort(mine.begin(), mine.end(), [](const auto* a, const auto* b) {
    return std::tie(a->comm, a->index) < std::tie(b->comm, b->index);
  });
  for (const CollectiveEngine::Record* r : mine) {
    out["records"].push_back({{"comm", r->comm},
                              {"index", r->index},
                              {"op", collectives::name_of(r->op)},
                              {"label", r->label},
                              {"ranks", r->ranks},
                              {"bytes", r->bytes},
                              {"ps", {r->ready_ps, r->start_ps, r->end_ps}},
                              {"bound", {r->bound_by, r->bound_ns}},
                              {"members", r->members},
                              {"arrived_ps", r->arrived_ps}});
    out["twins"][r->comm] = r->twins;
  }
  // Every chip the ranks fill: its HBM, host link, collective DMA and core (c, 0)'s engines.
  dma::Network& net = sys.network();
  for (int c = 0; c <= g.place(g.ranks() - 1).first; ++c) {
    const Chip& chip = sys.chip(static_cast<size_t>(c));
    std::vector<int> resources = {chip.hbm, chip.host_link, chip.cc_dma};
    for (int e : chip.dma_engines.front()) resources.push_back(e);
    for (int r : resources) {
      out["network"][net.resource_name(r)] = {net.bytes(r), net.busy_ps(r), net.load(r)};
    }
  }
  return out;
}

// The folded collective stats without the twins each communicator's collectives stood for.
ordered_json without_twins(ordered_json collectives) {
  for (auto& [comm, ops] : collectives.items()) {
    for (auto& [name, op] : ops.items()) op.erase("twins");
  }
  return collectives;
}

void expect_folded_equals_unfolded(const Grid& g) {
  const ordered_json unfolded = in_child([&] { return simulate_grid({g, false}); });
  const ordered_json folded = in_child([&] { return simulate_grid({g, true}); });
  ASSERT_TRUE(unfolded.is_object()) << unfolded.dump();
  ASSERT_TRUE(folded.is_object()) << folded.dump();
  EXPECT_EQ(folded.at("launches"), unfolded.at("launches"));
  EXPECT_EQ(folded.at("records").dump(2), unfolded.at("records").dump(2));
  EXPECT_EQ(folded.at("core").dump(2), unfolded.at("core").dump(2));
  EXPECT_EQ(folded.at("chip").dump(2), unfolded.at("chip").dump(2));
  EXPECT_EQ(folded.at("network").dump(2), unfolded.at("network").dump(2));
  EXPECT_EQ(folded.at("chips").dump(2), unfolded.at("chips").dump(2));
  EXPECT_EQ(folded.value("links", ordered_json()).dump(2),
            unfolded.value("links", ordered_json()).dump(2));
  EXPECT_EQ(without_twins(folded.at("collectives")).dump(2), unfolded.at("collectives").dump(2));
  // The asynchronous all-reduce runs beside the launch after it.
  const std::vector<Step> steps = rank_steps(g);
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    if (!steps[i].async) continue;
    const ordered_json& l = unfolded.at("launches");
    EXPECT_LT(l.at(i + 1)[1].get<int64_t>(), l.at(i)[2].get<int64_t>()) << "launch " << i;
  }
  // The twins: the number of communicators of each name; none in the unfolded stats.
  const ordered_json twins = {{"dp", g.tp}, {"tp", g.dp}};
  ASSERT_EQ(folded.at("twins").size(), static_cast<size_t>((g.tp > 1) + (g.dp > 1)));
  for (const auto& [comm, n] : folded.at("twins").items()) {
    EXPECT_EQ(n, twins.at(comm)) << comm;
    for (const auto& [name, op] : folded.at("collectives").at(comm).items()) {
      EXPECT_EQ(op.at("twins"), n) << comm << "." << name;
    }
  }
  for (const auto& [comm, ops] : unfolded.at("collectives").items()) {
    for (const auto& [name, op] : ops.items()) EXPECT_FALSE(op.contains("twins")) << name;
  }
}

TEST(SpmdFoldCollectives, TwoByTwoOnOneChipFoldBitForBit) { expect_folded_equals_unfolded({2, 2}); }

TEST(SpmdFoldCollectives, TensorParallelFourFoldsBitForBit) {
  expect_folded_equals_unfolded({4, 1});
}

TEST(SpmdFoldCollectives, DataParallelFourFoldsBitForBit) { expect_folded_equals_unfolded({1, 4}); }

TEST(SpmdFoldCollectives, FourByTwoOnOneChipFoldBitForBit) {
  expect_folded_equals_unfolded({4, 2});
}

// The twins load the shared resources: the same collectives take longer with a twin beside
// them than alone (else the tests above would not show the multiplicity matters).
TEST(SpmdFoldCollectives, TwinsContendOnTheChip) {
  const auto tp_durations = [](const ordered_json& run) {
    std::vector<int64_t> d;
    for (const auto& r : run.at("records")) {
      if (r.at("comm") == "tp")
        d.push_back(r.at("ps")[2].get<int64_t>() - r.at("ps")[0].get<int64_t>());
    }
    return d;
  };
  const ordered_json alone = in_child([] { return simulate_grid({{2, 1}, false}); });
  const ordered_json twinned = in_child([] { return simulate_grid({{2, 2}, true}); });
  ASSERT_TRUE(alone.is_object()) << alone.dump();
  ASSERT_TRUE(twinned.is_object()) << twinned.dump();
  const std::vector<int64_t> a = tp_durations(alone), t = tp_durations(twinned);
  ASSERT_EQ(a.size(), t.size());
  ASSERT_FALSE(a.empty());
  EXPECT_LT(a.back(), t.back()) << "the 64 MiB ring all-reduce shares the chip's collective DMA";
}

TEST(SpmdFoldCollectives, ACommunicatorTheFoldWasNotGivenIsRefused) {
  const ordered_json r = in_child([] {
    CollectiveRun run{{2, 2}, true, /*world=*/false};
    return simulate_grid(run);
  });
  ASSERT_TRUE(r.is_string()) << r.dump();
  EXPECT_NE(r.get<std::string>().find("communicator 'tp' of ranks [0, 0][0, 1] is not one of the "
                                      "folded run's communicators"),
            std::string::npos)
      << r;
}

TEST(SpmdFoldCollectives, CommunicatorsThatDoNotFitAreRefused) {
  const auto refused = [](std::vector<CollectiveFold::Communicator> world) {
    const ordered_json r = in_child([&] {
      runtime::Config cfg =
          runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json");
      cfg.system.topology.torus_x = 1;
      cfg.system.topology.torus_y = 1;
      init_systemc();
      System sys(cfg.chip, cfg.system, CoreOptions{});
      sys.fold(4, world);
      return ordered_json("folded");
    });
    return r.is_string() ? r.get<std::string>() : r.dump();
  };
  EXPECT_NE(
      refused({{"tp", {{0, 0}, {0, 4}}}})
          .find("communicator 'tp' has rank [0, 4], which the representative does not stand for"),
      std::string::npos);
  EXPECT_NE(refused({{"tp", {{0, 0}, {0, 1}}}, {"tp", {{0, 1}, {0, 2}}}})
                .find("rank [0, 1] is twice in the 'tp' communicators"),
            std::string::npos);
  EXPECT_NE(refused({{"tp", {{0, 0}, {0, 1}}}, {"tp", {{0, 2}, {0, 3}, {0, 1}}}})
                .find("'tp' communicators of 2 and 3 ranks are not twins"),
            std::string::npos);
}

// Folding across chips (issue 39): chips 1 .. C-1 mirror chip 0's compute traffic and each
// twin communicator moves from its own members' chips. The other chips' compute must matter:
// without it, core (0, 0)'s collectives end at other times (else a fold without mirrors would
// pass too).
void expect_folds_across_chips(const Grid& g) {
  expect_folded_equals_unfolded(g);
  CollectiveRun chip0_only{g, false};
  chip0_only.compute = false;
  const ordered_json full = in_child([&] { return simulate_grid({g, false}); });
  const ordered_json alone = in_child([&] { return simulate_grid(chip0_only); });
  ASSERT_TRUE(full.is_object()) << full.dump();
  ASSERT_TRUE(alone.is_object()) << alone.dump();
  EXPECT_NE(alone.at("records").dump(), full.at("records").dump());
}

Grid on_chips(int tp, int dp, int cores, int torus_x, int torus_y) {
  Grid g{tp, dp};
  g.cores = cores;
  g.torus_x = torus_x;
  g.torus_y = torus_y;
  return g;
}

TEST(SpmdFoldCollectives, TwoByTwoOnTwoChipsFoldsBitForBit) {
  expect_folds_across_chips(on_chips(2, 2, 2, 2, 1));  // dp twins span both chips
}

TEST(SpmdFoldCollectives, TensorParallelFourAcrossTwoChipsFoldsBitForBit) {
  expect_folds_across_chips(on_chips(4, 1, 2, 2, 1));  // one communicator on two chips
}

TEST(SpmdFoldCollectives, TwoByFourOnATwoByTwoTorusFoldsBitForBit) {
  expect_folds_across_chips(on_chips(2, 4, 2, 2, 2));  // routes of two hops
}

}  // namespace
}  // namespace wallsim::sim
