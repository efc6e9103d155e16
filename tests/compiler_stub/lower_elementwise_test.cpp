// Printed-plan tests of the element-wise family (lower_elementwise.cpp): activations, binary
// ops with broadcasting, reductions, softmax, norms, iota, compare and select. No SystemC.
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

const char* kX = R"({"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [256, 512]})";
// x's two row tiles loaded on two queues, the result's two stored on two.
// Two row tiles: loaded on engines 0 and 1, stored on the engines the loads left idle (2, 3).
const std::string kTwoTileIo =
    "ld0: dma_copy x1\nld1: dma_copy x1\nst2: dma_copy x1\nst3: dma_copy x1\n";

TEST(LowerElementwise, ReluLoadsEachRowTileOnItsOwnQueueAndRunsOnTheScalarEngine) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "relu", "inputs": [0]}])",
                                       "[1]"));
  EXPECT_EQ(stream_summary(p.text), kTwoTileIo + "scalar: activation.relu x2\n");
  EXPECT_TRUE(check_in_order(
      p.text,
      {"semaphores done_ld0 done_ld1 done_scalar", "tensor    x input hbm fp32[256,512]",
       "tensor    v1 output hbm fp32[256,512]",
       "ld1[0]       dma_copy dst=in_9<fp32>[p0:128][+0; 512*1] "
       "src=x<fp32>[r128*512][+65536; 512*1]",
       "st3[0]       dma_copy dst=v1<fp32>[r128*512][+65536; 512*1]", "wait(done_scalar>=2)",
       "scalar[0]    activation.relu dst=v1_10<fp32>[p0:128][+0; 512*1] src=in_8",
       "wait(done_ld0>=1) signal(done_scalar+=1)", "scalar[1]    activation.relu",
       "wait(done_ld1>=1)"}));
  EXPECT_EQ(p.stats().spills, 0);
  EXPECT_EQ(p.stats().hbm_bytes_in, 256 * 512 * 4);
}

TEST(LowerElementwise, AnIntermediateStaysOnChipAndAChainReadsItsProducersTiles) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "relu", "inputs": [0]},
      {"id": 2, "op": "add", "inputs": [1, 0]}])",
                                       "[2]"),
                            wallsim::test::trn2_arch(), GroupPolicy::whole, emission_order());
  // x is loaded once and read twice; v1 never goes to HBM.
  EXPECT_EQ(stream_summary(p.text), kTwoTileIo +
                                        "scalar: activation.relu x2\n"
                                        "vector: tensor_tensor.add x2\n");
  EXPECT_EQ(count_of(p.text, "tensor    v1 "), 0);
  EXPECT_TRUE(check_in_order(p.text, {"vector[0]    tensor_tensor.add dst=v2_12", "lhs=v1_10",
                                      "rhs=in_8", "wait(done_scalar>=1) wait(done_ld0>=1)"}));
}

TEST(LowerElementwise, ARowVectorOperandIsBroadcastToEveryPartitionByAStrideZeroLoad) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "input", "name": "b", "dtype": "fp32", "shape": [512]},
      {"id": 2, "op": "bias_add", "inputs": [0, 1]}])",
                                       "[2]"));
  EXPECT_TRUE(check_in_order(p.text, {"dma_copy dst=bcast_", "src=b<fp32>[r128*0][+0; 512*1]"}));
  EXPECT_EQ(count_of(p.text, "tensor_tensor.add"), 2);
  EXPECT_EQ(p.stats().hbm_bytes_in, 256 * 512 * 4 + 512 * 4);
}

TEST(LowerElementwise, SoftmaxIsMaxSubtractExpWithSumReciprocalAndMultiplyPerRowTile) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "softmax", "inputs": [0]}])",
                                       "[1]"),
                            wallsim::test::trn2_arch(), GroupPolicy::whole, emission_order());
  // Per row tile: max, x - max, (exp with its row sum on the scalar engine), 1 / sum, multiply.
  EXPECT_EQ(stream_summary(p.text), kTwoTileIo +
                                        "vector: tensor_reduce.max x1\n"
                                        "vector: tensor_tensor.sub x1\n"
                                        "vector: tensor_scalar.div x1\n"
                                        "vector: tensor_tensor.mul x1\n"
                                        "vector: tensor_reduce.max x1\n"
                                        "vector: tensor_tensor.sub x1\n"
                                        "vector: tensor_scalar.div x1\n"
                                        "vector: tensor_tensor.mul x1\n"
                                        "scalar: activation_reduce.exp x2\n");
  EXPECT_TRUE(check_in_order(p.text, {"vector[1]    tensor_tensor.sub",
                                      "vector[2]    tensor_scalar.div", "wait(done_scalar>=1)"}));
  EXPECT_EQ(count_of(p.text, "activation_reduce.exp"), 2);
  EXPECT_EQ(count_of(p.text, "tensor_scalar.div"), 2);
}

TEST(LowerElementwise, LogSoftmaxSubtractsTheLogOfTheSum) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "log_softmax", "inputs": [0]}])",
                                       "[1]"));
  EXPECT_EQ(count_of(p.text, "activation.log"), 2);
  EXPECT_EQ(count_of(p.text, "tensor_scalar.div"), 0);
}

TEST(LowerElementwise, LayernormStatisticsOnTheScalarEngineScalingByTheArray) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "input", "name": "g", "dtype": "fp32", "shape": [512]},
      {"id": 2, "op": "input", "name": "b", "dtype": "fp32", "shape": [512]},
      {"id": 3, "op": "layernorm", "inputs": [0, 1, 2]}])",
                                       "[3]"));
  // Once: the identity (iota, == 0) and a ones row. Per row tile: the row's first element p
  // transposed into a row and negated (scalar engine), xs = I . x + (-p) (x) 1 by two matmuls,
  // -mean(xs) and E[xs^2] by the scalar engine's accumulate, xg = x * gamma (the one vector pass
  // over the row), mean^2, var, rsqrt, -mean = -mean(xs) - p, -mean * rstd and D = identity *
  // rstd on the columns, -mean * rstd transposed into a row, then y = 1 (x)
  // beta + (-mean * rstd) (x) gamma + D . xg: three matmuls into one bank, evacuated by a plain
  // copy.
  EXPECT_EQ(count_of(p.text, "iota dst="), 1);
  EXPECT_EQ(count_of(p.text, "tensor_scalar.eq"), 1);
  EXPECT_EQ(count_of(p.text, "memset"), 1);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.mul"), 2 * 4);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.sub"), 2 * 2);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.add"), 0);
  EXPECT_EQ(count_of(p.text, "activation_reduce.identity"), 2);
  EXPECT_EQ(count_of(p.text, "activation_reduce.square"), 2);
  EXPECT_EQ(count_of(p.text, "activation.rsqrt"), 2);
  EXPECT_EQ(count_of(p.text, "transpose"), 2 * 2);
  EXPECT_EQ(count_of(p.text, " matmul dst="), 2 * 5);
  // Per tile the negated pivot row, and two copies (the row and the output) on either lane
  // engine.
  EXPECT_EQ(count_of(p.text, "tensor_copy") + count_of(p.text, "activation.identity"), 2 * 3);
  EXPECT_EQ(count_of(p.text, "tensor_reduce"), 0);
  EXPECT_EQ(count_of(p.text, "dst=bcast_"), 2);  // gamma and beta, each once
}

TEST(LowerElementwise, RmsnormHasNoMeanAndNoBeta) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "input", "name": "g", "dtype": "fp32", "shape": [512]},
      {"id": 2, "op": "rmsnorm", "inputs": [0, 1]}])",
                                       "[2]"));
  EXPECT_EQ(count_of(p.text, "tensor_reduce.add"), 0);
  EXPECT_EQ(count_of(p.text, "activation_reduce.square"), 2);
  EXPECT_EQ(count_of(p.text, "dst=bcast_"), 1);
  // Per row tile: xg = x * gamma, D = identity * rstd, y = D . xg (one matmul), no transpose.
  EXPECT_EQ(count_of(p.text, "transpose"), 0);
  EXPECT_EQ(count_of(p.text, " matmul dst="), 2);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.mul"), 4);
}

TEST(LowerElementwise, ReduceMeanIsASumThenAScaleIntoOneColumn) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "reduce_mean", "inputs": [0]}])",
                                       "[1]"),
                            wallsim::test::trn2_arch(), GroupPolicy::whole, emission_order());
  EXPECT_EQ(stream_summary(p.text), kTwoTileIo +
                                        "vector: tensor_reduce.add x1\n"
                                        "vector: tensor_scalar.mul x1\n"
                                        "vector: tensor_reduce.add x1\n"
                                        "vector: tensor_scalar.mul x1\n");
  EXPECT_TRUE(check_in_order(p.text, {"tensor    v1 output hbm fp32[256,1]"}));
}

TEST(LowerElementwise, ACompareWithARunTimeScalarDeclaresItAndReadsItAtRunTime) {
  const auto p = print_plan(
      make_graph(R"([{"id": 0, "op": "iota", "shape": [128, 256], "dtype": "fp32", "axis": 1},
                     {"id": 1, "op": "compare", "inputs": [0], "cmp": "lt", "scalar": "len"}])",
                 "[1]", R"([{"name": "len", "min": 1, "max": 256}])"));
  EXPECT_EQ(stream_summary(p.text),
            "st0: dma_copy x1\n"
            "vector: iota x1\n"
            "vector: tensor_scalar.lt x1\n");
  EXPECT_TRUE(
      check_in_order(p.text, {"scalar    $len in [1, 256]", "tensor_scalar.lt", "scalar=$len"}));
}

TEST(LowerElementwise, SelectTakesThreeOperandsInOneVectorInstructionPerTile) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "input", "name": "y", "dtype": "fp32", "shape": [256, 512]},
      {"id": 2, "op": "compare", "inputs": [0, 1], "cmp": "gt"},
      {"id": 3, "op": "select", "inputs": [2, 0, 1]}])",
                                       "[3]"));
  EXPECT_EQ(count_of(p.text, " select dst="), 2);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.gt"), 2);
  EXPECT_EQ(count_of(p.text, "tensor    v2 "), 0);  // the predicate stays on chip
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
