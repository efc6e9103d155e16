// Pipeline parallel from the command line (issue 38): a PP=2 training step by 1F1B and a PP=2
// forward complete under every mode, every rank's host states sum exactly to its wall time,
// and the pipeline's bubble shows as every rank's exposed communication.
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

// `exposed`: the host also waits for it (under eager a forward stage's core may wait only while its
// host compiles: compile, not comm_wait).
void expect_pipeline_run(const std::string& workload, const std::string& mode, int64_t world,
                         bool exposed) {
  const std::string dir =
      test::fresh_dir("pipeline_" + workload.substr(0, workload.find(':')), mode);
  std::string err;
  ASSERT_EQ(test::run_wallsim("run -c configs/trn2.json -w " + workload + " -m " + mode +
                                  " --steps 2 --trace-level none --out " + dir,
                              &err),
            0)
      << workload << " " << mode << "\n"
      << err;
  const Json d = Json::parse(test::slurp(dir + "/stats.json")).at("distributed");
  EXPECT_EQ(d.at("pp"), 2);
  ASSERT_EQ(d.at("ranks").size(), size_t(world));
  for (const Json& r : d.at("ranks")) {
    int64_t sum = 0;
    for (const char* k : kHostStates) sum += r.value(k, int64_t{0});
    EXPECT_EQ(sum, r.at("wall_ns").get<int64_t>()) << mode << " rank " << r.at("rank");
    // A stage waits for its neighbour's activations or gradients: the bubble.
    EXPECT_GT(r.at("collective_ns").get<int64_t>(), 0) << mode << " rank " << r.at("rank");
  }
  if (exposed) {
    EXPECT_GT(d.at("whole_run").at("comm_wait_ns").get<int64_t>(), 0) << mode;
  }
}

TEST(PipelineCli, TrainingStepByOneFOneBUnderEveryMode) {
  for (const std::string& mode : kModes) {
    expect_pipeline_run("train:batch=64,d_model=64,d_ff=128,layers=2,pp=2,microbatches=4", mode, 2,
                        true);
  }
}

TEST(PipelineCli, TensorParallelForwardPipelineUnderEveryMode) {
  for (const std::string& mode : kModes) {
    expect_pipeline_run(
        "transformer:layers=2,d_model=128,heads=4,d_ff=256,seq=64,batch=4,tp=2,pp=2,"
        "microbatches=2",
        mode, 4, mode != "eager");
  }
}

}  // namespace
}  // namespace wallsim
