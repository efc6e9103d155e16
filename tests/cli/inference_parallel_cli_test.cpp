// Pipeline- and data-parallel inference from the command line (issue 38): decode on 2 pipeline
// stages and on 2 replicas, serve on 2 replicas, complete under every mode with every rank's host
// states summing exactly to its wall time; the same run twice writes the same report and trace.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace wallsim {
namespace {

using Json = nlohmann::json;

using test::kHostStates;
using test::kModes;
const char* const kDecode = "decode:layers=2,d_model=64,heads=4,d_ff=128,prompt=12,new_tokens=3";
const char* const kServe =
    "serve:requests=5,rate=50,layers=2,d_model=64,heads=4,d_ff=128,vocab=96,context=48,"
    "max_prompt=24,prompt_mean=10,output_mean=4,max_batch=4,block=4";

// Runs `workload` under `mode` into a fresh folder (named by `tag`); returns its stats.json.
Json run(const std::string& workload, const std::string& mode, const std::string& tag,
         std::string* dir_out = nullptr) {
  const std::string dir = test::fresh_dir("inference_" + tag, mode);
  std::string err;
  EXPECT_EQ(test::run_wallsim("run -c configs/trn2.json -w " + workload + " -m " + mode +
                                  " --trace-level plans --out " + dir,
                              &err),
            0)
      << workload << " " << mode << "\n"
      << err;
  if (dir_out) *dir_out = dir;
  return Json::parse(test::slurp(dir + "/stats.json"));
}

// Every rank of the run's `world` has host states summing to its wall time.
void expect_ranks_sum(const Json& stats, int64_t world, const std::string& what) {
  const Json& d = stats.at("distributed");
  ASSERT_EQ(d.at("ranks").size(), size_t(world)) << what;
  for (const Json& r : d.at("ranks")) {
    int64_t sum = 0;
    for (const char* k : kHostStates) sum += r.value(k, int64_t{0});
    EXPECT_EQ(sum, r.at("wall_ns").get<int64_t>()) << what << " rank " << r.at("rank");
  }
}

TEST(InferenceParallelCli, DecodePipelineAndDataParallelUnderEveryMode) {
  for (const std::string& mode : kModes) {
    const Json pp = run(std::string(kDecode) + ",pp=2", mode, "decode_pp");
    expect_ranks_sum(pp, 2, mode + " pp=2");
    EXPECT_EQ(pp.at("distributed").at("pp"), 2);
    // The hidden rows go stage to stage every step: each stage waits in its sends or recvs.
    for (const Json& r : pp.at("distributed").at("ranks")) {
      EXPECT_GT(r.at("collective_ns").get<int64_t>(), 0) << mode << " rank " << r.at("rank");
    }
    const Json dp = run(std::string(kDecode) + ",batch=2,dp=2", mode, "decode_dp");
    expect_ranks_sum(dp, 2, mode + " dp=2");
    EXPECT_EQ(dp.at("distributed").at("dp"), 2);
    // SPMD folding's decision: the stages differ; the replicas are one class of both ranks.
    const Json& pp_fold = pp.at("distributed").at("fold");
    EXPECT_FALSE(pp_fold.at("eligible").get<bool>()) << mode;
    EXPECT_EQ(pp_fold.at("why_not"), "pipeline stages run different layers (pp 2)") << mode;
    EXPECT_EQ(pp_fold.at("classes"), 2) << mode;
    const Json& dp_fold = dp.at("distributed").at("fold");
    EXPECT_TRUE(dp_fold.at("eligible").get<bool>()) << mode;
    EXPECT_EQ(dp_fold.at("representatives"), Json::array({0})) << mode;
    EXPECT_EQ(dp_fold.at("class_sizes"), Json::array({2})) << mode;
    EXPECT_EQ(dp_fold.at("folded"), true) << mode;  // --fold auto, the default
    EXPECT_EQ(dp_fold.at("simulated_ranks"), 1) << mode;
  }
}

TEST(InferenceParallelCli, ServeDataParallelUnderEveryMode) {
  for (const std::string& mode : kModes) {
    const Json st = run(std::string(kServe) + ",dp=2", mode, "serve_dp");
    expect_ranks_sum(st, 2, mode);
    const Json& s = st.at("serving");
    EXPECT_EQ(s.at("requests"), 5) << mode;  // the whole run: every replica's requests
    ASSERT_EQ(s.at("replicas").size(), 2u) << mode;
    EXPECT_EQ(s.at("replicas")[0].at("requests"), 3) << mode;  // 0, 2, 4: round-robin
    EXPECT_EQ(s.at("replicas")[1].at("requests"), 2) << mode;
    EXPECT_EQ(st.at("distributed").at("fold").at("why_not"),
              "serve's data-parallel replicas serve different requests (dp 2)")
        << mode;
  }
}

TEST(InferenceParallelCli, ServePipelineUnderEveryMode) {
  for (const std::string& mode : kModes) {
    // Requests arriving over time: stage 1 admits what stage 0 had admitted before each round.
    const Json st = run(std::string(kServe) + ",pp=2", mode, "serve_pp");
    expect_ranks_sum(st, 2, mode);
    const Json& s = st.at("serving");
    EXPECT_EQ(s.at("requests"), 5) << mode;
    // Arrivals are on stage 0's clock: no request's first token comes before it arrives. (Had
    // the stages decided differently, their sends and recvs would not pair and the run fail.)
    for (const Json& q : s.at("per_request")) {
      EXPECT_GT(q.at("ttft_ns").get<int64_t>(), 0) << mode << " request " << q.at("id");
    }
    for (const Json& r : st.at("distributed").at("ranks")) {
      EXPECT_GT(r.at("collective_ns").get<int64_t>(), 0) << mode << " rank " << r.at("rank");
    }
  }
}

// The same sharded run twice: the same report (but its real-time figures) and trace.
TEST(InferenceParallelCli, SameRunTwiceIsByteIdentical) {
  for (const std::string& w : {std::string(kDecode) + ",tp=2,pp=2,batch=2,microbatches=2",
                               std::string(kServe) + ",dp=2", std::string(kServe) + ",pp=2"}) {
    std::string a, b;
    Json first = run(w, "fused", "twice_a", &a), second = run(w, "fused", "twice_b", &b);
    first.erase("measured");
    second.erase("measured");
    EXPECT_EQ(first.dump(), second.dump()) << w;
    EXPECT_FALSE(test::slurp(a + "/trace.json").empty()) << w;
    EXPECT_EQ(test::slurp(a + "/trace.json"), test::slurp(b + "/trace.json")) << w;
  }
}

}  // namespace
}  // namespace wallsim
