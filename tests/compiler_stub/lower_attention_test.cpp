// Printed-plan tests of the attention family (lower_attention.cpp): decode_attention's
// gathers, scores on the array, softmax and P.V, software-pipelined over sequences. No SystemC.
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

// B sequences of L keys from pools of 512 rows of width 64, 2 heads.
Graph attention(int64_t B, int64_t L) {
  const std::string b = std::to_string(B), l = std::to_string(L);
  return make_graph(R"([{"id": 0, "op": "input", "name": "q", "dtype": "bf16", "shape": [)" + b +
                        R"(, 64]},
          {"id": 1, "op": "input", "name": "k", "dtype": "bf16", "shape": [512, 64]},
          {"id": 2, "op": "input", "name": "v", "dtype": "bf16", "shape": [512, 64]},
          {"id": 3, "op": "input", "name": "ids", "dtype": "int32", "shape": [)" +
                        b + ", " + l + R"(]},
          {"id": 4, "op": "decode_attention", "inputs": [0, 1, 2, 3], "heads": 2}])",
                    "[4]");
}

TEST(LowerAttention, EachSequenceGathersItsKeyAndValueTilesByIds) {
  const auto p = print_plan(attention(3, 200));
  // 200 keys: two key tiles (128 and 72 rows); per sequence a K and a V gather per tile, in
  // pieces of at least 32 rows on queues of their own (4 and 3 pieces).
  EXPECT_EQ(count_of(p.text, "dma_gather"), 3 * 2 * 7);
  EXPECT_EQ(count_of(p.text, "table=k<bf16>"), 3 * 7);
  EXPECT_EQ(count_of(p.text, "table=v<bf16>"), 3 * 7);
  // Per sequence: the query's one chunk and each K tile's chunk transposed through the array,
  // the two P^T tiles back: 5.
  EXPECT_EQ(count_of(p.text, " transpose dst="), 3 * 5);
  // Per sequence: a score matmul per key tile (one chunk), a P.V matmul per key tile (64
  // columns fit one bank), then the head sum by the reciprocal sums: 5.
  EXPECT_EQ(count_of(p.text, " matmul dst="), 3 * 5);
  // Softmax once per sequence over all heads at once.
  EXPECT_EQ(count_of(p.text, "activation_reduce.exp"), 3);
  // The output rows go to their partitions by SBUF-to-SBUF copies on the store queues.
  EXPECT_EQ(count_of(p.text, "tensor    v4 output hbm bf16[3,64]"), 1);
}

TEST(LowerAttention, SequencesArePipelinedUnlessTheirStateCrowdsSbuf) {
  // The lowering's own order (the list schedule, schedule.h, would interleave both).
  LoweringOptions one_at_a_time = emission_order();
  one_at_a_time.attention_pipeline_percent = 1;
  const auto pipelined = print_plan(attention(3, 200), wallsim::test::trn2_arch(),
                                    GroupPolicy::whole, emission_order());
  const auto serial =
      print_plan(attention(3, 200), wallsim::test::trn2_arch(), GroupPolicy::whole, one_at_a_time);
  EXPECT_EQ(pipelined.plan().instruction_count(), serial.plan().instruction_count());
  // On the vector engine, sequence 1's block-diagonal query comes before sequence 0's stage 3
  // (its head mask) when pipelined, after it when not.
  auto order = [](const std::string& text) {
    const size_t stage3 = text.find("dst=masked");
    const size_t first_q = text.find("dst=q_bd");
    const size_t second_q = text.find("dst=q_bd", first_q + 1);
    return second_q < stage3;
  };
  EXPECT_TRUE(order(pipelined.text));
  EXPECT_FALSE(order(serial.text));
}

TEST(LowerAttention, MoreHeadsThanArrayColumnsAreRefused) {
  const auto g = make_graph(
      R"([{"id": 0, "op": "input", "name": "q", "dtype": "bf16", "shape": [1, 256]},
          {"id": 1, "op": "input", "name": "k", "dtype": "bf16", "shape": [64, 256]},
          {"id": 2, "op": "input", "name": "v", "dtype": "bf16", "shape": [64, 256]},
          {"id": 3, "op": "input", "name": "ids", "dtype": "int32", "shape": [1, 16]},
          {"id": 4, "op": "decode_attention", "inputs": [0, 1, 2, 3], "heads": 256}])",
      "[4]");
  EXPECT_EQ(compile_error(g),
            "node 4 (decode_attention): 256 heads exceed the 128 columns of the array");
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
