// Data parallel from the command line (issue 38): a captured training program (DP=2 of
// mlp_sgd_dp.json) completes under every mode, every rank's host states sum exactly to its wall
// time, every rank all-reduces its gradients, and the same run twice is byte-identical; under
// AOT a bucket's all-reduce overlaps the rest of the backward.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace wallsim {
namespace {

using Json = nlohmann::json;

using test::kHostStates;

std::string run_dp(const std::string& mode, const std::string& name) {
  const std::string dir = test::fresh_dir("program_dp_" + name, mode);
  std::string err;
  EXPECT_EQ(test::run_wallsim("run -c configs/trn2.json -w program:file=tests/frontends/torch/"
                              "programs/mlp_sgd_dp.json,dp=2,bucket_mb=0.015 -m " +
                                  mode + " --trace-level none --out " + dir,
                              &err),
            0)
      << mode << "\n"
      << err;
  return dir;
}

TEST(ProgramDpCli, DataParallel2ReplayUnderEveryMode) {
  for (const std::string mode : {"native", "eager", "eager-debug", "fused", "aot"}) {
    const std::string dir = run_dp(mode, "a");
    const Json stats = Json::parse(test::slurp(dir + "/stats.json"));
    const Json& d = stats.at("distributed");
    EXPECT_EQ(d.at("dp"), 2);
    ASSERT_EQ(d.at("ranks").size(), 2u);
    for (const Json& r : d.at("ranks")) {
      int64_t sum = 0;
      for (const char* k : kHostStates) sum += r.value(k, int64_t{0});
      EXPECT_EQ(sum, r.at("wall_ns").get<int64_t>()) << mode << " rank " << r.at("rank");
      EXPECT_GT(r.at("collective_ns").get<int64_t>(), 0) << mode << " rank " << r.at("rank");
    }
    const Json& p = stats.at("program").at("data_parallel");
    EXPECT_EQ(p.at("rows_per_rank"), 4);
    ASSERT_EQ(p.at("buckets").size(), 2u);  // per program step: 2 buckets of 0.015 MB or more
    EXPECT_EQ(p.at("buckets")[0].size(), 2u) << mode;
    EXPECT_EQ(p.at("buckets")[0][0].at("bytes"), 19240) << mode;
  }
}

TEST(ProgramDpCli, SameRunTwiceIsByteIdentical) {
  for (const std::string mode : {"fused", "aot"}) {
    Json a = Json::parse(test::slurp(run_dp(mode, "a") + "/stats.json"));
    Json b = Json::parse(test::slurp(run_dp(mode, "b") + "/stats.json"));
    a.erase("measured");
    b.erase("measured");
    EXPECT_EQ(a.dump(), b.dump()) << mode;
  }
}

// The step's plan runs each bucket's all-reduce on its collective queue while the backward goes
// on, and applies SGD after the backward: a DP=2 step (4 blocks, 2 buckets of 10 MB) takes less
// than the same rows' step on one rank plus the rank's time in collectives, and at least a
// third of that time runs beside the core's compute (the device's comm_overlapped_ns; 45 % at
// 1.52 ms against 1.36 + 0.25 ms). Before the collective queue (collectives on store queues,
// each layer's update inside the backward waiting for its bucket) it took the sum and more:
// 2.36 ms against 1.45 + 0.13 ms. (Until issue 35's faster transposes the wall bound was
// alone + half the collectives; the faster one-rank step left the bound and not the overlap.)
TEST(ProgramDpCli, BucketAllReducesOverlapTheBackwardUnderAot) {
  const auto step = [](const std::string& workload, const std::string& name) {
    const std::string dir = test::fresh_dir("overlap_" + name, "aot");
    std::string err;
    EXPECT_EQ(test::run_wallsim("run -c configs/trn2.json -w " + workload +
                                    " -m aot --steps 1 --trace-level none --out " + dir,
                                &err),
              0)
        << err;
    return Json::parse(test::slurp(dir + "/stats.json"));
  };
  const std::string model = "train:d_model=768,d_ff=3072,layers=4";
  const Json one = step(model + ",batch=256", "one");
  const Json two = step(model + ",batch=512,dp=2,bucket_mb=10", "two");
  const int64_t alone = one.at("steps")[0].at("wall_ns").get<int64_t>();
  const Json& d = two.at("distributed");
  const int64_t wall = d.at("whole_run").at("step_wall_ns")[0].get<int64_t>();
  const int64_t comm = d.at("ranks")[0].at("collective_ns").get<int64_t>();
  const int64_t overlapped = d.at("ranks")[0].at("comm_overlapped_ns").get<int64_t>();
  EXPECT_GT(comm, alone / 20);  // communication worth hiding
  EXPECT_LT(wall, alone + comm) << "alone " << alone << " collectives " << comm;
  EXPECT_GT(overlapped, comm / 3) << "collectives " << comm;
}

// The device's exposed communication (sim/comm_overlap.h): a rank's collective time with no
// compute engine of its core busy. With each all-reduce a plan of its own, run after the plan
// before it drains and before the next starts (eager, runtime.async_collectives off), no compute
// runs beside it: all of it is exposed. In AOT's one plan a bucket's all-reduce runs beside the
// rest of the backward: part of it is hidden. Either way exposed + overlapped is the rank's
// collective time (its union, in ps; collective_ns rounds each interval down to whole ns).
Json run_train_dp(const std::string& mode, const std::string& async) {
  const std::string dir = test::fresh_dir("exposed_comm_" + async, mode);
  std::string err;
  EXPECT_EQ(
      test::run_wallsim("run -c configs/trn2.json -w train:dp=2,layers=4,bucket_mb=10 -m " + mode +
                            " --steps 1 --trace-level none --set "
                            "runtime.async_collectives=" +
                            async + " --out " + dir,
                        &err),
      0)
      << err;
  return Json::parse(test::slurp(dir + "/stats.json")).at("distributed");
}

TEST(ProgramDpCli, ExposedCommunicationIsTheCollectiveTimeNoComputeHides) {
  for (const std::string mode : {"eager", "aot"}) {
    const Json d = run_train_dp(mode, "off");
    int64_t exposed = 0, overlapped = 0;
    for (const Json& r : d.at("ranks")) {
      const int64_t e = r.at("comm_exposed_ns"), o = r.at("comm_overlapped_ns");
      const int64_t c = r.at("collective_ns");
      EXPECT_GT(c, 0) << mode;
      EXPECT_GE(e + o, c) << mode;
      EXPECT_LE(e + o, c + 8) << mode;  // a few collectives, each rounded down by < 1 ns
      if (mode == "eager") {
        EXPECT_EQ(o, 0) << "rank " << r.at("rank");
      } else {
        // Hidden in part: 43 % of the collective time (63 % before a row tile's A^T chunks left
        // PSUM in groups: the backward's array work now ends sooner, so less of the last bucket's
        // all-reduce runs beside it); under eager none is.
        EXPECT_GT(o, c / 4) << "rank " << r.at("rank") << " exposed " << e;
      }
      exposed += e;
      overlapped += o;
    }
    EXPECT_EQ(d.at("whole_run").at("comm_exposed_ns").get<int64_t>(), exposed) << mode;
    EXPECT_EQ(d.at("whole_run").at("comm_overlapped_ns").get<int64_t>(), overlapped) << mode;
  }
}

// Asynchronous collective launches (runtime.async_collectives): under native each bucket's
// all-reduce is a plan of its own; launched asynchronously it runs beside the rest of the
// backward (nothing reads its sum before the step's updates), so part of it hides under compute
// and the step is shorter; launched in order, all of it is exposed.
TEST(ProgramDpCli, AsyncCollectiveLaunchesOverlapTheBackwardUnderNative) {
  const Json on = run_train_dp("native", "on"), off = run_train_dp("native", "off");
  for (size_t r = 0; r < 2; ++r) {
    const Json &a = on.at("ranks")[r], &b = off.at("ranks")[r];
    const int64_t c_on = a.at("collective_ns"), c_off = b.at("collective_ns");
    EXPECT_GT(c_on, 0);
    EXPECT_LT(a.at("comm_exposed_ns").get<int64_t>(), c_on) << "rank " << r;
    EXPECT_GT(a.at("comm_overlapped_ns").get<int64_t>(), 0) << "rank " << r;
    EXPECT_GE(b.at("comm_exposed_ns").get<int64_t>(), c_off) << "rank " << r;
    EXPECT_LE(b.at("comm_exposed_ns").get<int64_t>(), c_off + 8) << "rank " << r;
    EXPECT_EQ(b.at("comm_overlapped_ns").get<int64_t>(), 0) << "rank " << r;
  }
  EXPECT_LT(on.at("whole_run").at("step_wall_ns")[0].get<int64_t>(),
            off.at("whole_run").at("step_wall_ns")[0].get<int64_t>());
}

// Each step's record holds the device's exposed communication of that step (rank 0's steps in
// stats.json): nonzero in every step of a data-parallel step, below its wall time, and the steps
// sum to the rank's whole-run figure.
TEST(ProgramDpCli, StepsHoldTheirExposedCommunicationSummingToTheRanks) {
  for (const std::string mode : {"native", "aot"}) {
    const std::string dir = test::fresh_dir("exposed_comm_steps", mode);
    std::string err;
    ASSERT_EQ(test::run_wallsim("run -c configs/trn2.json -w train:dp=2,layers=2,bucket_mb=10 -m " +
                                    mode + " --steps 2 --trace-level none --out " + dir,
                                &err),
              0)
        << err;
    const Json stats = Json::parse(test::slurp(dir + "/stats.json"));
    int64_t sum = 0;
    ASSERT_EQ(stats.at("steps").size(), 2u) << mode;
    for (const Json& st : stats.at("steps")) {
      const int64_t e = st.value("comm_exposed_ns", int64_t{0});
      EXPECT_GT(e, 0) << mode << " step " << st.at("index");
      EXPECT_LT(e, st.at("wall_ns").get<int64_t>()) << mode << " step " << st.at("index");
      sum += e;
    }
    EXPECT_EQ(sum, stats.at("distributed").at("ranks")[0].at("comm_exposed_ns").get<int64_t>())
        << mode;
  }
}

}  // namespace
}  // namespace wallsim
