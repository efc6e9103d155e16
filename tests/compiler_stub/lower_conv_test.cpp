// Printed-plan tests of the convolution-window family (lower_conv.cpp: im2col, broadcast) and
// the immediate family (lower_activation.cpp: clip, affine). No SystemC.
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

// A 3x3 convolution of x[1, 2, 6, 6] as an implicit GEMM: [16 pixels, 18] x [18, 4].
const char* kConv = R"([
  {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [1, 2, 6, 6]},
  {"id": 1, "op": "input", "name": "w", "dtype": "fp32", "shape": [18, 4]},
  {"id": 2, "op": "im2col", "inputs": [0], "kernel": [3, 3]},
  {"id": 3, "op": "transpose", "inputs": [2], "perm": [0, 2, 3, 1, 4, 5]},
  {"id": 4, "op": "reshape", "inputs": [3], "shape": [16, 18]},
  {"id": 5, "op": "matmul", "inputs": [4, 1]},
  {"id": 6, "op": "clip", "inputs": [5], "lo": 0, "hi": 6}])";

TEST(LowerConv, Im2colIsAStridedReadStraightIntoTheMatmulsRowTiles) {
  // The rules' route (the window route, window_matmul.cpp, is WindowConvOnChip's).
  LoweringOptions rules;
  rules.matmul_schedule = -2;
  const auto p =
      print_plan(make_graph(kConv, "[6]"), wallsim::test::trn2_arch(), GroupPolicy::whole, rules);
  for (int n : {2, 3, 4}) EXPECT_EQ(count_of(p.text, "@node " + std::to_string(n) + "\n"), 0);
  // One row tile of the 16 pixels, one DMA per output row (4 pixels on 4 partitions, 1 element
  // apart); each partition reads its window: 2 channels x 3 rows x 3 columns of x, overlapping
  // its neighbours'.
  const char* rows[] = {"[p0:4]", "[p4:8]", "[p8:12]", "[p12:16]"};
  const char* at[] = {"+0;", "+6;", "+12;", "+18;"};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(count_of(p.text, std::string(rows[k]) + "[+0; 18*1] src=x<fp32>[r4*1][" + at[k] +
                                   " 2*36, 3*6, 3*1]"),
              1)
        << at[k] << "\n"
        << p.text;
  }
  EXPECT_EQ(count_of(p.text, " matmul dst="), 1);   // the 16 pixels times K = 18 at once
  EXPECT_EQ(count_of(p.text, "tensor    v2 "), 0);  // the window matrix is never written
}

TEST(LowerConv, ClipIsAMaxThenAMinOnTheVectorEngine) {
  const auto p = print_plan(make_graph(kConv, "[6]"));
  EXPECT_TRUE(check_in_order(p.text, {"tensor_scalar.max dst=v6_", "tensor_scalar.min dst=v6_"}))
      << p.text;
}

TEST(LowerConv, ABroadcastIsAStrideZeroRead) {
  const auto p = print_plan(make_graph(R"([
      {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [4, 8, 16]},
      {"id": 1, "op": "input", "name": "s", "dtype": "fp32", "shape": [8, 1]},
      {"id": 2, "op": "broadcast", "inputs": [1], "shape": [4, 8, 16]},
      {"id": 3, "op": "mul", "inputs": [0, 2]}])",
                                       "[3]"));
  EXPECT_EQ(count_of(p.text, "@node 2\n"), 0);
  // Each row reads its one scale 16 times (free stride 0).
  EXPECT_TRUE(check_in_order(p.text, {"dst=view_", "src=s<fp32>[r8*1][+0; 16*0]"})) << p.text;
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
