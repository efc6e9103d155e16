// A captured training program replayed data parallel from the command line (issue 38): DP=2 of
// mlp_sgd_dp.json completes under every mode, every rank's host states sum exactly to its wall
// time, every rank all-reduces its gradients, and the same run twice is byte-identical.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace wallsim {
namespace {

using Json = nlohmann::json;

const char* const kHostStates[] = {"host_dispatch_ns", "compile_ns",   "transfer_ns",
                                   "sync_wait_ns",     "comm_wait_ns", "host_other_ns"};

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

}  // namespace
}  // namespace wallsim
