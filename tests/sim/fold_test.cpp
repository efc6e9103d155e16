// SPMD folding's network (System::fold, dma::Network::set_fold): k cores of one chip running the
// same plans at the same time against one core simulated for the k with the fold map. The
// simulated core's figures must be bit for bit those of core 0 among the k. Each run is a
// SystemC elaboration, so each runs in a child process of its own.
#include <gtest/gtest.h>

#include <systemc>

#include <deque>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fold_plans.h"
#include "in_child.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"
#include "wallsim/traces/stats.h"

namespace wallsim::sim {
namespace {

using nlohmann::ordered_json;
using test_util::copy_plan;
using test_util::example;
using test_util::in_child;

// What one rank does: host to HBM uploads, HBM loads and stores with compute (matmul,
// softmax, vector add), a gather, an HBM to HBM copy, a download; every plan fetched from HBM.
std::deque<isa::Plan> rank_plans() {
  std::deque<isa::Plan> plans;
  plans.push_back(copy_plan(isa::MemSpace::host, isa::MemSpace::hbm, 128, 4096));
  plans.push_back(example("matmul"));
  plans.push_back(copy_plan(isa::MemSpace::host, isa::MemSpace::hbm, 64, 1000));
  plans.push_back(example("softmax"));
  plans.push_back(example("gather"));
  plans.push_back(copy_plan(isa::MemSpace::hbm, isa::MemSpace::hbm, 128, 2048));
  plans.push_back(example("vector_add"));
  plans.push_back(example("matmul"));
  plans.push_back(copy_plan(isa::MemSpace::hbm, isa::MemSpace::host, 128, 3000));
  return plans;
}

struct RankRun {
  int chips = 1;  // a chips x torus_y torus
  int torus_y = 1;
  int cores = 0;      // per chip; 0: the config's
  int ranks = 1;      // rank r on core (r / cores, r % cores) runs rank_plans()
  bool fold = false;  // core 0 alone runs, folded for `ranks`
  // Changes every rank's plans.
  std::function<void(std::deque<isa::Plan>&)> extra = nullptr;
};

RankRun rank_run(int chips, int ranks, bool fold) {
  RankRun r;
  r.chips = chips;
  r.ranks = ranks;
  r.fold = fold;
  return r;
}

// Core (0, 0)'s figures: its launches' start and end picoseconds, its stats, chip 0's HBM and
// host-link figures, and the network's per-resource figures for the resources it used.
ordered_json simulate_ranks(const RankRun& run) {
  runtime::Config cfg =
      runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json");
  cfg.system.topology.torus_x = run.chips;
  cfg.system.topology.torus_y = run.torus_y;
  if (run.cores > 0) cfg.system.chip.cores = run.cores;
  init_systemc();
  traces::StatsRegistry stats;
  CoreOptions options;
  options.stats = &stats;
  System sys(cfg.chip, cfg.system, options);
  if (run.fold) sys.fold(run.ranks);
  std::deque<isa::Plan> plans = rank_plans();
  if (run.extra) run.extra(plans);
  const size_t per_chip = sys.cores_per_chip();
  const auto core_of = [&](int r) -> Core& {
    return sys.core(static_cast<size_t>(r) / per_chip, static_cast<size_t>(r) % per_chip);
  };
  for (int r = 0; r < (run.fold ? 1 : run.ranks); ++r) {
    for (const isa::Plan& p : plans) core_of(r).launch(p, {});
  }
  simulate();
  for (int r = 0; r < (run.fold ? 1 : run.ranks); ++r) check_finished(sys, core_of(r));
  if (const auto mismatch = sys.fold_mismatch()) throw std::runtime_error(*mismatch);
  Core& core = sys.core(0, 0);
  ordered_json times = ordered_json::array();
  for (size_t i = 0; i < core.launch_count(); ++i) {
    const Core::LaunchTimes t = core.launch_times(i);
    times.push_back({t.start.value(), t.end.value()});
  }
  sys.finalize();
  const ordered_json all = stats_to_json(stats);
  ordered_json out;
  out["launches"] = times;
  out["core"] = all.at("chip0").at("core0");
  out["chip"] = all.at("system").at("chips").at("chip0");
  out["chips"] = all.at("system").at("chips");
  // Every chip the ranks fill: its HBM, host link and core (c, 0)'s engines.
  dma::Network& net = sys.network();
  for (size_t c = 0; c <= static_cast<size_t>(run.ranks - 1) / per_chip; ++c) {
    const Chip& chip = sys.chip(c);
    std::vector<int> resources = {chip.hbm, chip.host_link};
    for (int e : chip.dma_engines.front()) resources.push_back(e);
    for (int r : resources) {
      out["network"][net.resource_name(r)] = {net.bytes(r), net.busy_ps(r), net.load(r)};
    }
  }
  return out;
}

void expect_folded_equals_unfolded(int chips, int ranks) {
  const ordered_json unfolded =
      in_child([&] { return simulate_ranks(rank_run(chips, ranks, false)); });
  const ordered_json folded =
      in_child([&] { return simulate_ranks(rank_run(chips, ranks, true)); });
  ASSERT_TRUE(unfolded.is_object()) << unfolded.dump();
  ASSERT_TRUE(folded.is_object()) << folded.dump();
  EXPECT_EQ(folded.at("launches"), unfolded.at("launches"));
  EXPECT_EQ(folded.at("core").dump(2), unfolded.at("core").dump(2));
  EXPECT_EQ(folded.at("chip").dump(2), unfolded.at("chip").dump(2));
  EXPECT_EQ(folded.at("network").dump(2), unfolded.at("network").dump(2));
  EXPECT_EQ(folded.at("chips").dump(2), unfolded.at("chips").dump(2));
  // The ranks contend: one core alone, unfolded, is faster. Else the test would show nothing.
  const ordered_json alone = in_child([&] { return simulate_ranks(rank_run(chips, 1, false)); });
  ASSERT_TRUE(alone.is_object()) << alone.dump();
  EXPECT_LT(alone.at("launches").back()[1].get<int64_t>(),
            unfolded.at("launches").back()[1].get<int64_t>());
  EXPECT_LT(alone.at("chip").at("hbm").at("bytes").get<int64_t>(),
            unfolded.at("chip").at("hbm").at("bytes").get<int64_t>());
}

TEST(SpmdFoldNetwork, FourRanksOfAChipFoldBitForBit) { expect_folded_equals_unfolded(1, 4); }

TEST(SpmdFoldNetwork, EveryCoreOfAChipFoldsBitForBit) { expect_folded_equals_unfolded(1, 8); }

TEST(SpmdFoldNetwork, RanksOnChipZeroOfATwoChipSystemFoldBitForBit) {
  expect_folded_equals_unfolded(2, 2);
}

TEST(SpmdFoldNetwork, FoldedTransferToAnotherChipsHbmIsRefused) {
  const ordered_json r = in_child([] {
    RankRun run = rank_run(2, 2, true);
    run.extra = [](std::deque<isa::Plan>& plans) {
      isa::Plan p = copy_plan(isa::MemSpace::hbm, isa::MemSpace::hbm, 4, 256);
      p.tensors[1].name = "chip1:remote";
      plans.push_back(std::move(p));
    };
    return simulate_ranks(run);
  });
  ASSERT_TRUE(r.is_string()) << r.dump();
  EXPECT_NE(r.get<std::string>().find("chip1.hbm"), std::string::npos) << r;
}

TEST(SpmdFoldNetwork, FoldNeedsRanksOnOneChipOrWholeChips) {
  const ordered_json r = in_child([] { return simulate_ranks(rank_run(2, 9, true)); });
  ASSERT_TRUE(r.is_string()) << r.dump();
  EXPECT_NE(r.get<std::string>().find("9 ranks neither fit one chip of 8 cores nor fill whole "
                                      "chips (the system has 2)"),
            std::string::npos)
      << r;
}

// Folding across chips: core (0, 0) simulated for every core of 2 (then 4) chips of 2 cores;
// chips 1 .. C-1 mirror chip 0's traffic, so every chip's HBM, host link and core (c, 0)'s
// engines carry what they carry unfolded.
void expect_whole_chips_fold(int torus_x, int torus_y) {
  RankRun run = rank_run(torus_x, 2 * torus_x * torus_y, false);
  run.torus_y = torus_y;
  run.cores = 2;
  RankRun fold = run;
  fold.fold = true;
  const ordered_json unfolded = in_child([&] { return simulate_ranks(run); });
  const ordered_json folded = in_child([&] { return simulate_ranks(fold); });
  ASSERT_TRUE(unfolded.is_object()) << unfolded.dump();
  ASSERT_TRUE(folded.is_object()) << folded.dump();
  EXPECT_EQ(folded.at("launches"), unfolded.at("launches"));
  EXPECT_EQ(folded.at("core").dump(2), unfolded.at("core").dump(2));
  EXPECT_EQ(folded.at("chips").dump(2), unfolded.at("chips").dump(2));
  EXPECT_EQ(folded.at("network").dump(2), unfolded.at("network").dump(2));
  EXPECT_GT(unfolded.at("chips").at("chip1").at("hbm").at("bytes").get<int64_t>(), 0);
}

TEST(SpmdFoldNetwork, WholeChipsFoldBitForBit) {
  expect_whole_chips_fold(2, 1);
  expect_whole_chips_fold(2, 2);
}

}  // namespace
}  // namespace wallsim::sim
