// SPMD folding's decision (issue 39, step 5): symmetric runs are one class of every rank,
// represented by rank 0; each asymmetry is named and leaves every rank a class of its own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "wallsim/driver/ranks.h"
#include "wallsim/runtime/spmd_fold.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::runtime {
namespace {

struct FoldRun {
  ParallelSizes sizes;
  std::vector<std::string> overrides;  // --set on configs/trn2.json (8 cores a chip, 4x4 torus)
  FoldFacts facts;
};

FoldDecision decide(const FoldRun& run) {
  const Config config =
      load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json", run.overrides);
  const sim::SystemConfig system = driver::system_for_ranks(config.system, run.sizes.world());
  const ProcessGroup group(run.sizes, system.chips(), system.chip.cores, "test");
  return decide_fold(group, system, run.facts);
}

TEST(SpmdFold, SymmetricRunsAreOneClassOfEveryRank) {
  // TP=8 x DP=16 on the 16 chips of a trn2 instance; TP=2 x DP=2 on one chip's 4 cores; DP=4
  // over the 4 chips of a 2x2 torus, one core each, and TP=8 on one chip.
  for (const FoldRun& run :
       {FoldRun{{8, 1, 16}, {}, {}}, FoldRun{{2, 1, 2}, {}, {}}, FoldRun{{8, 1, 1}, {}, {}},
        FoldRun{{8, 1, 4}, {"topology.torus_x=2", "topology.torus_y=2"}, {}}}) {
    const FoldDecision d = decide(run);
    const int64_t world = run.sizes.world();
    EXPECT_TRUE(d.eligible) << world << ": " << d.why_not;
    EXPECT_EQ(d.classes(), 1) << world;
    EXPECT_EQ(d.representatives, std::vector<int64_t>{0}) << world;
    EXPECT_EQ(d.class_of, std::vector<int64_t>(static_cast<size_t>(world), 0)) << world;
  }
}

TEST(SpmdFold, AsymmetricRunsNameWhyAndSimulateEveryRank) {
  FoldFacts functional, chakra, workload, background;
  functional.functional = true;
  chakra.chakra = true;
  workload.workload_asymmetry = "its replicas differ";
  background.background_shared_compiles = true;
  const std::vector<std::pair<FoldRun, std::string>> cases = {
      {{{2, 1, 2}, {}, functional}, "functional runs compute each rank's own values"},
      {{{2, 1, 2}, {}, chakra}, "--chakra writes each rank's own execution trace"},
      {{{2, 2, 1}, {}, {}}, "pipeline stages run different layers (pp 2)"},
      {{{2, 1, 2}, {}, workload}, "its replicas differ"},
      {{{2, 1, 2}, {}, background},
       "a shared compile cache compiled in the background: the first rank to ask compiles while "
       "the others wait for it (runtime.compile_in_background)"},
      {{{8, 1, 16}, {"links.failed=chip3.x+"}, {}},
       "failed links (links.failed: chip3.x+) make the chips unequal"},
      {{{4, 1, 3}, {"topology.torus_x=2", "topology.torus_y=1"}, {}},
       "12 ranks fill 2 chips of 8 cores unevenly"},
      {{{8, 1, 2}, {}, {}},
       "the ranks use 2 of the system's 16 chips: only a whole system's chips are taken as alike"},
      {{{12, 1, 2}, {"topology.torus_x=3", "topology.torus_y=1"}, {}},
       "a 'tp' communicator has 4 members on one chip and 8 on another"},
      {{{2, 1, 4}, {"collectives.cores_per_chip=2"}, {}},
       "chip 0 has 7 communicators (2 'dp', 4 'tp', 1 'world') that may hold collectives at "
       "once, more than its 2 collective cores: they would wait in turn "
       "(collectives.cores_per_chip)"},
      // Each kind alone fits 6 collective cores; summed over the kinds (4 tp, 2 dp, world) not.
      {{{2, 1, 4}, {"collectives.cores_per_chip=6"}, {}},
       "chip 0 has 7 communicators (2 'dp', 4 'tp', 1 'world') that may hold collectives at "
       "once, more than its 6 collective cores: they would wait in turn "
       "(collectives.cores_per_chip)"},
  };
  for (const auto& [run, why] : cases) {
    const FoldDecision d = decide(run);
    EXPECT_FALSE(d.eligible) << why;
    EXPECT_EQ(d.why_not, why);
    const int64_t world = run.sizes.world();
    std::vector<int64_t> every(static_cast<size_t>(world));
    for (int64_t r = 0; r < world; ++r) every[static_cast<size_t>(r)] = r;
    EXPECT_EQ(d.representatives, every) << why;
    EXPECT_EQ(d.class_of, every) << why;
  }
  // The same collectives fit when the chip has cores enough for them.
  EXPECT_TRUE(decide({{2, 1, 4}, {"collectives.cores_per_chip=7"}, {}}).eligible);
}

TEST(SpmdFold, ServeReplicasDifferDecodeReplicasDoNot) {
  using workloads::make_workload;
  using workloads::parse_spec;
  EXPECT_EQ(make_workload(parse_spec("serve:requests=4,dp=2"))->rank_asymmetry().value_or(""),
            "serve's data-parallel replicas serve different requests (dp 2)");
  EXPECT_FALSE(make_workload(parse_spec("serve:requests=4,tp=2,vocab=50304"))->rank_asymmetry());
  EXPECT_FALSE(make_workload(parse_spec("decode:batch=2,dp=2"))->rank_asymmetry());
  EXPECT_FALSE(make_workload(parse_spec("train:dp=2"))->rank_asymmetry());
}

}  // namespace
}  // namespace wallsim::runtime
