// Data-parallel replay of a captured training program (issue 38): mlp_sgd_dp.json (2 SGD-momentum
// steps, a global batch of 8 rows marked `batch`) on DP=2 and DP=4 ranks, each rank its rows and
// the gradients all-reduced per step, ends with the unsharded replay's weights. One system per
// process.
#include "distributed_run.h"
#include "wallsim/torch/program.h"

namespace wallsim::runtime {
namespace {

namespace pt = wallsim::torch;

const std::string kDir = std::string(WALLSIM_SOURCE_DIR) + "/tests/frontends/torch/programs/";
const std::string kFile = kDir + "mlp_sgd_dp.json";

// The captured weights' values before the steps, in weight-event order.
std::vector<compiler_stub::HostTensor> captured_weights(const std::string& file) {
  const pt::Program p = pt::read_program_file(file);
  std::vector<compiler_stub::HostTensor> out;
  for (const pt::Event& e : p.events) {
    if (e.kind != pt::EventKind::weight) continue;
    compiler_stub::HostTensor t;
    t.shape = e.out.shape;
    t.data = pt::read_values(pt::value_file(p, 'w', e.out.id), e.out);
    out.push_back(t);
  }
  return out;
}

void expect_matches(int64_t dp, const char* mode, const std::string& extra = "",
                    const std::string& file = kFile, size_t weights = 6, int64_t rows = 8,
                    double tolerance = 1e-4) {
  const std::string whole = "program:file=" + file;
  const Outcome o = run_both(whole + ",dp=" + std::to_string(dp) + extra, whole, mode, -1);
  const auto& want = o.values.back();  // the unsharded replay's weights after the steps
  const auto before = captured_weights(file);
  ASSERT_EQ(want.size(), weights);
  ASSERT_EQ(before.size(), weights);
  // The steps move the weights far more than the tolerance: a gradient scaled by 1/N (DDP's
  // average on top of the captured global-batch loss scale) would miss by about half of it.
  double moved = 0;
  for (size_t k = 0; k < want.size(); ++k)
    moved = std::max(moved, relative_error(want[k], before[k]));
  EXPECT_GT(moved, 100 * tolerance);  // a 1/N on top misses by about half of it
  ASSERT_EQ(o.values.size(), size_t(dp) + 1);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    ASSERT_EQ(o.values[r].size(), want.size()) << "rank " << r;
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_LT(relative_error(o.values[r][k], want[k]), tolerance)
          << "rank " << r << " weight " << k;
    const auto& d = o.reports.at(r).at("data_parallel");
    EXPECT_EQ(d.at("dp").get<int64_t>(), dp);
    EXPECT_EQ(d.at("rows_per_rank").get<int64_t>(), rows / dp);
    // every parameter (the causal mask is a buffer), 2 steps
    EXPECT_EQ(d.at("gradients").get<int64_t>(), 2 * int64_t(weights - (weights > 6)));
    EXPECT_EQ(d, o.reports.front().at("data_parallel"));
  }
  EXPECT_FALSE(o.reports.back().contains("data_parallel"));  // dp = 1: no section
  EXPECT_GT(o.reports.back().at("reads_checked").get<int64_t>(), 0);
}

TEST(Distributed, DataParallel2ProgramMatchesUnshardedUnderAot) { expect_matches(2, "aot"); }
TEST(Distributed, DataParallel2ProgramMatchesUnshardedUnderEager) { expect_matches(2, "eager"); }
// Two buckets of each step's gradients (4.bias, 4.weight, 2.bias, 2.weight: 19,240 bytes; then
// 0.bias, 0.weight), each one concat, all-reduce and a slice per gradient.
TEST(Distributed, DataParallel2BucketedProgramMatchesUnshardedUnderFused) {
  expect_matches(2, "fused", ",bucket_mb=0.015");
}
// The bucket plan: in both steps (step 1's gradients are views re-derived from their accumulated
// bases) the order the backward made them, the last layer first, filled to 15,000 bytes or more.
TEST(Distributed, DataParallelProgramBucketsFollowTheBackwardOrder) {
  const std::string whole = "program:file=" + kFile;
  const Outcome o = run_both(whole + ",dp=2,bucket_mb=0.015", whole, "aot", -1);
  const auto& buckets = o.reports.front().at("data_parallel").at("buckets");
  ASSERT_EQ(buckets.size(), 2u);
  for (const auto& step : buckets) {
    ASSERT_EQ(step.size(), 2u);
    EXPECT_EQ(step[0].at("grads"),
              nlohmann::ordered_json({"4.bias", "4.weight", "2.bias", "2.weight"}));
    EXPECT_EQ(step[0].at("bytes").get<int64_t>(), 40 + 2560 + 256 + 16384);
    EXPECT_EQ(step[1].at("grads"), nlohmann::ordered_json({"0.bias", "0.weight"}));
    EXPECT_EQ(step[1].at("bytes").get<int64_t>(), 256 + 4096);
  }
}
TEST(Distributed, DataParallel4ProgramMatchesUnshardedUnderFused) { expect_matches(4, "fused"); }
// A 2-block transformer LM (embeddings, layer norms, causal attention, GELU MLP, cross-entropy
// over batch*seq rows), 2 SGD steps over 6 sequences: 3 a rank, the merged [batch*seq, d] rows
// of each rank's sequences.
TEST(Distributed, DataParallel2TransformerProgramMatchesUnshardedUnderAot) {
  expect_matches(2, "aot", "", kDir + "transformer_sgd_dp.json", 31, 6);
}

}  // namespace
}  // namespace wallsim::runtime
