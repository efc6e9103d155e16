// Printed-plan tests of the matmul family (lower_matmul.cpp): stationaries by transposes
// through the array, K accumulation in PSUM, evacuation split between the vector and scalar
// engines, a large B streamed by panels, batch_matmul per batch. No SystemC.
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

Graph matmul_graph(int64_t m, int64_t k, int64_t n) {
  const auto dims = [](int64_t a, int64_t b) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + "]";
  };
  return make_graph(R"([{"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": )" +
                        dims(m, k) + R"(},
      {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": )" +
                        dims(k, n) + R"(, "role": "weight"},
      {"id": 2, "op": "matmul", "inputs": [0, 1]}])",
                    "[2]");
}

TEST(LowerMatmul, TwoByTwoTilesTransposeAFirstThenAccumulateKChunksInOneBankEach) {
  const auto p = print_plan(matmul_graph(256, 256, 512));
  const std::string s = stream_summary(p.text);
  // 2 row tiles x 2 K chunks: 4 transposes into stationaries, then per output tile a
  // start..stop accumulation of 2 matmuls.
  EXPECT_TRUE(check_in_order(s, {"tensor: transpose x4", "tensor: matmul x4"})) << s;
  EXPECT_TRUE(check_in_order(p.text, {"tensor[4]    matmul", " start ", "tensor[5]    matmul",
                                      " stop ", "tensor[6]    matmul", " start "}));
  // Six PSUM evacuations (4 stationaries, 2 output tiles) alternate vector and scalar.
  EXPECT_EQ(count_of(p.text, "tensor_copy"), 3);
  EXPECT_EQ(count_of(p.text, "activation.identity"), 3);
  EXPECT_EQ(count_of(p.text, "buffer    panel"), 0);
  EXPECT_EQ(p.stats().hbm_bytes_in, (256 * 256 + 256 * 512) * 2);
}

TEST(LowerMatmul, ABLargerThanTheStreamedShareIsLoadedAPanelAtATime) {
  LoweringOptions streamed;
  streamed.streamed_operand_percent = 1;
  const auto whole = print_plan(matmul_graph(128, 256, 2048));
  const auto p = print_plan(matmul_graph(128, 256, 2048), {}, GroupPolicy::whole, streamed);
  EXPECT_EQ(count_of(whole.text, "buffer    panel"), 0);
  // 2048 columns in panels of 512 (one PSUM bank of fp32), each panel two K chunks.
  EXPECT_EQ(count_of(p.text, "buffer    panel"), 4);
  EXPECT_EQ(count_of(p.text, " matmul dst="), 8);
  EXPECT_EQ(p.stats().hbm_bytes_in, whole.stats().hbm_bytes_in);
}

TEST(LowerMatmul, BatchMatmulMultipliesPerBatchEntry) {
  const auto p = print_plan(make_graph(
      R"([{"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": [4, 64, 128]},
          {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [4, 128, 64]},
          {"id": 2, "op": "batch_matmul", "inputs": [0, 1]}])",
      "[2]"));
  // Each batch entry: one row tile of A, one K chunk of B: one transpose, one matmul.
  EXPECT_TRUE(check_in_order(
      stream_summary(p.text),
      {"tensor: transpose x1", "tensor: matmul x1", "tensor: transpose x1", "tensor: matmul x1"}));
  EXPECT_EQ(count_of(p.text, " matmul dst="), 4);
}

TEST(LowerMatmul, BatchMatmulWithTransposedBReadsBAsAStridedView) {
  const auto p = print_plan(make_graph(
      R"([{"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": [2, 64, 128]},
          {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [2, 64, 128]},
          {"id": 2, "op": "batch_matmul", "inputs": [0, 1], "transpose_b": 1}])",
      "[2]"));
  EXPECT_TRUE(check_in_order(p.text, {"dst=view_", "src=b<bf16>"}));
  EXPECT_EQ(count_of(p.text, " matmul dst="), 2);
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
