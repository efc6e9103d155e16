// Printed-plan tests of the layout family (lower_layout.cpp): reshape and transpose as views of
// HBM, a 2-D on-chip transpose through the array, slice and concat. No SystemC.
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

const char* kX = R"({"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [256, 512]})";

TEST(LowerLayout, AReshapeEmitsNothingItsConsumerLoadsTheView) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "reshape", "inputs": [0], "shape": [128, 1024]},
      {"id": 2, "op": "relu", "inputs": [1]}])",
                                       "[2]"));
  EXPECT_EQ(count_of(p.text, "@node 1\n"), 0);
  // One row tile of the view: each partition reads two rows of x.
  EXPECT_TRUE(check_in_order(p.text, {"dma_copy dst=view_", "[p0:128][+0; 1024*1] src=x<fp32>"}));
  EXPECT_EQ(count_of(p.text, "activation.relu"), 1);
}

TEST(LowerLayout, ATransposeOfAnOnChipMatrixGoesThroughTheArray) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "relu", "inputs": [0]},
      {"id": 2, "op": "transpose", "inputs": [1], "perm": [1, 0]}])",
                                       "[2]"));
  // [256 x 512] -> [512 x 256]: 2 input row tiles x 4 output row tiles.
  EXPECT_EQ(stream_summary(p.text).find("tensor: transpose x8\n") != std::string::npos, true)
      << stream_summary(p.text);
  EXPECT_EQ(count_of(p.text, "tensor    v1 "), 0);
}

TEST(LowerLayout, ATransposeOfAnInputIsAStridedReadOfHbm) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "transpose", "inputs": [0], "perm": [1, 0]},
      {"id": 2, "op": "relu", "inputs": [1]}])",
                                       "[2]"));
  EXPECT_EQ(count_of(p.text, " transpose dst="), 0);
  EXPECT_TRUE(check_in_order(p.text, {"dst=view_", "src=x<fp32>[r128*1]"}));
}

TEST(LowerLayout, ALastAxisSliceOfAnOnChipValueIsAVectorCopy) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "relu", "inputs": [0]},
      {"id": 2, "op": "slice", "inputs": [1], "axis": 1, "start": 128, "limit": 384}])",
                                       "[2]"));
  EXPECT_TRUE(check_in_order(
      p.text, {"vector[0]    tensor_copy dst=v2_", "[+0; 256*1] src=v1_", "[+128; 256*1]"}));
  EXPECT_EQ(count_of(p.text, "tensor_copy"), 2);
}

TEST(LowerLayout, AConcatAlongRowsCopiesEachInputHbmToHbmOnTheStoreQueues) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "input", "name": "y", "dtype": "fp32", "shape": [128, 512]},
      {"id": 2, "op": "concat", "inputs": [0, 1], "axis": 0}])",
                                       "[2]"));
  EXPECT_EQ(stream_summary(p.text),
            "st0: dma_copy x1\n"
            "st1: dma_copy x1\n");
  EXPECT_TRUE(check_in_order(
      p.text, {"dma_copy dst=v2<fp32>", "src=x<fp32>", "dma_copy dst=v2", "src=y<fp32>"}));
}

TEST(LowerLayout, AConcatAlongTheLastAxisCopiesIntoTheOutputsColumns) {
  const auto p = print_plan(make_graph(std::string("[") + kX + R"(,
      {"id": 1, "op": "relu", "inputs": [0]},
      {"id": 2, "op": "concat", "inputs": [0, 1], "axis": 1}])",
                                       "[2]"));
  EXPECT_EQ(count_of(p.text, "tensor_copy"), 4);
  EXPECT_TRUE(check_in_order(p.text, {"tensor    v2 output hbm fp32[256,1024]", "[+512; 512*1]"}));
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
