// Ops of the torchvision models issue 40 tried, compiled and run on the chip model against the
// reference evaluator: a channel shuffle feeding a conv (shufflenet_v2), a concat along the last
// axis too large for SBUF (deeplabv3's and efficientnet_b0's padding) and a slice through a
// merged dim (swin's windows), and mobilenet_v2's padded image. One device per process.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "on_chip_run.h"
#include "wallsim/compiler_stub/compile.h"

namespace wallsim::compiler_stub {
namespace {

using test::graph;
using test::load;
using test::Outcome;
using test::run_on_chip;

// shufflenet_v2's channel shuffle (view [N, g, C/g, H, W], swap g and C/g, view back) feeding a
// 3x3 conv: im2col reads C as two strided sub-dims ("im2col of a merged strided view is not
// supported" before).
Graph shuffled_conv() {
  return graph(R"({"format": "wallsim-graph", "version": 1, "name": "shuffle", "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [2, 8, 6, 6], "role": "input"},
    {"id": 1, "op": "input", "name": "w", "dtype": "fp32", "shape": [5, 72], "role": "weight"},
    {"id": 2, "op": "reshape", "inputs": [0], "shape": [2, 2, 4, 6, 6]},
    {"id": 3, "op": "transpose", "inputs": [2], "perm": [0, 2, 1, 3, 4]},
    {"id": 4, "op": "reshape", "inputs": [3], "shape": [2, 8, 6, 6]},
    {"id": 5, "op": "im2col", "inputs": [4], "kernel": [3, 3], "strides": [1, 1], "dilations": [1, 1]},
    {"id": 6, "op": "transpose", "inputs": [5], "perm": [0, 2, 3, 1, 4, 5]},
    {"id": 7, "op": "reshape", "inputs": [6], "shape": [32, 72]},
    {"id": 8, "op": "transpose", "inputs": [1], "perm": [1, 0]},
    {"id": 9, "op": "matmul", "inputs": [7, 8]}], "outputs": [9]})");
}

TEST(ModelOpsOnChip, ChannelShuffleFeedingAConvWholeOnTrn2) {
  Outcome o = run_on_chip(shuffled_conv(), "trn2", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-5);
}

TEST(ModelOpsOnChip, ChannelShuffleFeedingAConvWholeOnTiny) {
  Outcome o = run_on_chip(shuffled_conv(), "tiny", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-5);
}

// On tiny (16 KiB a partition), the output's two row tiles of 8 KiB and the operands' 16 KiB
// cannot all be on chip: the concat is joined in HBM ("does not fit in SBUF even with every
// other value spilled" before). The add after it reads the result back in row tiles.
Graph wide_concat() {
  return graph(R"({"format": "wallsim-graph", "version": 1, "name": "cat", "nodes": [
    {"id": 0, "op": "input", "name": "a", "dtype": "fp32", "shape": [2, 32, 1024], "role": "input"},
    {"id": 1, "op": "input", "name": "b", "dtype": "fp32", "shape": [2, 32, 1024], "role": "input"},
    {"id": 2, "op": "relu", "inputs": [0]},
    {"id": 3, "op": "concat", "inputs": [2, 1], "axis": 2},
    {"id": 4, "op": "add", "inputs": [3, 3]}], "outputs": [4]})");
}

TEST(ModelOpsOnChip, WideLastAxisConcatIsJoinedInHbmOnTiny) {
  auto r = compile_graph(wide_concat(), load("tiny").chip.arch, GroupPolicy::whole);
  ASSERT_TRUE(std::holds_alternative<CompiledGraph>(r)) << std::get<CompileError>(r).message();
  Outcome o = run_on_chip(wide_concat(), "tiny", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-6);
}

TEST(ModelOpsOnChip, WideLastAxisConcatOpByOpOnTiny) {
  Outcome o = run_on_chip(wide_concat(), "tiny", GroupPolicy::per_op);
  EXPECT_LT(o.max_error, 1e-6);
}

// swin's window partition cuts a dim that a reshape merged from a transposed view, through its
// inner sub-dim ("this slice of a merged dimension is not supported" before): the view is
// copied into its own tensor first and sliced there.
Graph slice_through_merged_dims() {
  return graph(R"({"format": "wallsim-graph", "version": 1, "name": "win", "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [2, 6, 4], "role": "input"},
    {"id": 1, "op": "transpose", "inputs": [0], "perm": [0, 2, 1]},
    {"id": 2, "op": "reshape", "inputs": [1], "shape": [8, 6]},
    {"id": 3, "op": "slice", "inputs": [2], "axis": 0, "start": 1, "limit": 6},
    {"id": 4, "op": "relu", "inputs": [3]}], "outputs": [4]})");
}

TEST(ModelOpsOnChip, SliceThroughAMergedDimWholeOnTrn2) {
  Outcome o = run_on_chip(slice_through_merged_dims(), "trn2", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-6);
}

TEST(ModelOpsOnChip, SliceThroughAMergedDimWholeOnTiny) {
  Outcome o = run_on_chip(slice_through_merged_dims(), "tiny", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-6);
}

// mobilenet_v2's last blocks: a 960-channel 7x7 image padded by 1 for a 3x3 depthwise conv,
// with the composite pad (issue 41). Its expansion pads W on the [N C H, W] rows: concatenated
// as [N, C, H, W] pieces, the rows load as one 7-row tile per channel, 960 of them, more than
// SBUF holds; then a reduction over H and W (the composite reduce, a global average pool).
Graph padded_image() {
  return graph(R"({"format": "wallsim-graph", "version": 1, "name": "pad", "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [1, 960, 7, 7], "role": "input"},
    {"id": 1, "op": "pad", "inputs": [0], "begin": [0, 0, 1, 1], "end": [0, 0, 1, 1]},
    {"id": 2, "op": "relu", "inputs": [1]},
    {"id": 3, "op": "reduce", "inputs": [2], "reduction": "mean", "axes": [2, 3], "keepdim": 1}],
    "outputs": [1, 3]})");
}

TEST(ModelOpsOnChip, PaddedWideImageWholeOnTrn2) {
  Outcome o = run_on_chip(padded_image(), "trn2", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-5);
}

TEST(ModelOpsOnChip, PaddedWideImageOpByOpOnTrn2) {
  Outcome o = run_on_chip(padded_image(), "trn2", GroupPolicy::per_op);
  EXPECT_LT(o.max_error, 1e-5);
}

}  // namespace
}  // namespace wallsim::compiler_stub
