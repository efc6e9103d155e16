// Printed-plan tests of the fused-attention family (lower_fused_attention.cpp): tiles a causal
// or sequence structure leaves empty are skipped, the mask is added by the array, exponentials
// run on the scalar engine, and the op's HBM traffic grows with L x D. No SystemC.
#include <gtest/gtest.h>

#include "../support/chip_arch.h"
#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

// q, k, v [L, D] bf16 inputs, `heads` heads; attrs as JSON text (", \"causal\": 1").
Graph fused(int64_t L, int64_t D, int64_t heads, const std::string& attrs,
            const std::string& mask_dtype = "") {
  const std::string s = "[" + std::to_string(L) + ", " + std::to_string(D) + "]";
  std::string nodes = R"([{"id": 0, "op": "input", "name": "q", "dtype": "bf16", "shape": )" + s +
                      R"(},
    {"id": 1, "op": "input", "name": "k", "dtype": "bf16", "shape": )" +
                      s + R"(},
    {"id": 2, "op": "input", "name": "v", "dtype": "bf16", "shape": )" +
                      s + "},";
  std::string in = "[0, 1, 2]";
  if (mask_dtype == "int32") {
    nodes += R"({"id": 3, "op": "input", "name": "seg", "dtype": "int32", "shape": [)" +
             std::to_string(L) + "]},";
    in = "[0, 1, 2, 3]";
  } else if (!mask_dtype.empty()) {
    nodes += R"({"id": 3, "op": "input", "name": "bias", "dtype": ")" + mask_dtype +
             R"(", "shape": [)" + std::to_string(L) + ", " + std::to_string(L) + "]},";
    in = "[0, 1, 2, 3]";
  }
  nodes += R"({"id": 4, "op": "attention", "inputs": )" + in +
           ", \"heads\": " + std::to_string(heads) + attrs + "}]";
  return make_graph(nodes, "[4]");
}

TEST(LowerFusedAttention, CausalTilesAfterTheLastQueryAreSkipped) {
  // 512 rows: 4 query and 4 key tiles; 2 heads of 64 share each step (one PSUM bank).
  const auto causal = print_plan(fused(512, 128, 2, ", \"causal\": 1"));
  const auto full = print_plan(fused(512, 128, 2, ""));
  // Two passes over the keys: the first takes the row maxima (a QK^T matmul per head and a
  // reduce per step), the second makes the scores transposed (S^T = K Q^T per head), subtracts
  // the final maxima (one matmul per head), so that its exponential is P^T, and accumulates P.V
  // and the row sums P.1 (one each per head) in PSUM. Causal steps 4+3+2+1 = 10 of 16 per pass,
  // and a mask matmul on each of the 4 diagonal tiles in each pass.
  EXPECT_EQ(count_of(full.text, " matmul dst="), 16 * (2 + 8));
  EXPECT_EQ(count_of(causal.text, " matmul dst="), 10 * (2 + 8) + 4 * 2);
  // One exp per step for both heads on the scalar engine; no rescale of O or l (the online
  // softmax's alpha = exp(m - m')) is ever needed.
  EXPECT_EQ(count_of(causal.text, "activation.exp"), 10);
  EXPECT_EQ(count_of(causal.text, "activation_reduce.exp"), 0);
  EXPECT_EQ(count_of(causal.text, "tensor_reduce"), 10);
  // Nothing spills; the only HBM traffic is q, k, v in and the output out.
  EXPECT_EQ(causal.stats().spills, 0);
  EXPECT_EQ(causal.stats().hbm_bytes_in, 3 * 512 * 128 * 2);
  EXPECT_EQ(causal.stats().hbm_bytes_out, 512 * 128 * 2);
}

TEST(LowerFusedAttention, ExponentialsRunOnTheScalarEngineAndTheMaskOnTheArray) {
  const auto p = print_plan(fused(256, 128, 2, ", \"causal\": 1"));
  const std::string sum = stream_summary(p.text);
  EXPECT_EQ(sum.find("vector: activation"), std::string::npos) << sum;
  EXPECT_NE(sum.find("scalar: activation.exp"), std::string::npos) << sum;
  // The causal tile is made once (iota, compare), not per step.
  EXPECT_EQ(count_of(p.text, " iota "), 2);
  EXPECT_EQ(count_of(p.text, "tensor_scalar.gt"), 1);
}

TEST(LowerFusedAttention, HbmTrafficGrowsWithLNotLSquared) {
  for (const char* m : {"int32", "", "causal"}) {
    const std::string attrs = std::string(m) == "causal" ? ", \"causal\": 1" : "";
    const std::string dt = std::string(m) == "int32" ? "int32" : "";
    const auto a = print_plan(fused(1024, 256, 4, attrs, dt));
    const auto b = print_plan(fused(2048, 256, 4, attrs, dt));
    EXPECT_EQ(a.stats().spills, 0) << m;
    EXPECT_EQ(b.stats().hbm_bytes_in + b.stats().hbm_bytes_out,
              2 * (a.stats().hbm_bytes_in + a.stats().hbm_bytes_out))
        << m;
  }
}

TEST(LowerFusedAttention, SegmentMasksAreComparedPerTileFromTheIds) {
  // 256 rows: 2 x 2 tiles, 4 heads of 64 in one group; a compare (ne) per step, its tile kept
  // from the maxima pass for the exponential pass.
  const auto p = print_plan(fused(256, 256, 4, "", "int32"));
  EXPECT_EQ(count_of(p.text, "tensor_tensor.ne"), 4);
  EXPECT_EQ(p.stats().spills, 0);
  // With too little SBUF left beside the pipeline to keep them, each pass compares again.
  isa::ArchSpec small = wallsim::test::trn2_arch();
  small.sbuf.bytes_per_partition = 32 * 1024;
  const auto q = print_plan(fused(256, 256, 4, "", "int32"), small);
  EXPECT_EQ(count_of(q.text, "tensor_tensor.ne"), 2 * 4);
  EXPECT_EQ(q.stats().spills, 0);
}

TEST(LowerFusedAttention, ADenseBiasIsReadTilePerStep) {
  const auto p = print_plan(fused(256, 128, 2, "", "bf16"));
  EXPECT_EQ(p.stats().hbm_bytes_in, 3 * 256 * 128 * 2 + 256 * 256 * 2);
  // Read once: a dense bias keeps the one-pass online softmax (row sums fused into each
  // exponential, alpha = exp(m - m') per step after a query tile's first: 2 x 1 of 4 steps).
  EXPECT_EQ(count_of(p.text, "activation_reduce.exp"), 4 * 2);
  EXPECT_EQ(count_of(p.text, "activation.exp"), 2);
}

TEST(LowerFusedAttention, OnTinyHeadsAreStackedOnTheArrayRows) {
  isa::ArchSpec tiny = wallsim::test::trn2_arch();
  tiny.partition_alignment = 8;
  tiny.sbuf.partitions = tiny.psum.partitions = tiny.tensor.rows = tiny.tensor.cols = 32;
  tiny.sbuf.bytes_per_partition = 16384;
  tiny.psum.bytes_per_partition = 4096;
  tiny.psum.bank_bytes = 512;
  tiny.tensor.moving_free_max = 96;
  // 4 heads of 8: 3 per group (96 moving columns), stacked 3 to a transpose (24 rows).
  const auto p = print_plan(fused(64, 32, 4, ", \"causal\": 1"), tiny);
  EXPECT_GT(count_of(p.text, "<fp32>[p0:24][+0; 32*1] src=attn_in"), 0);
  // Head 3 of a stack: its score matmul reads rows 16..23 of Q^T and K^T.
  EXPECT_GT(count_of(p.text, "<bf16>[p16:24][+0; 32*1] moving=attn_kt"), 0);
}

TEST(LowerFusedAttention, BadAttributesAreOneLineErrors) {
  auto error = [](Graph g) { return error_of([&] { infer_types(g); }); };
  EXPECT_NE(error(fused(100, 64, 3, "")).find("heads 3 must divide the width 64"),
            std::string::npos);
  EXPECT_NE(error(fused(100, 64, 2, ", \"seq\": 30")).find("seq 30 must divide"),
            std::string::npos);
  EXPECT_NE(error(fused(100, 64, 2, ", \"causal\": 2")).find("causal must be 0 or 1"),
            std::string::npos);
  EXPECT_EQ(error(fused(100, 64, 2, ", \"causal\": 1", "int32")), "no error");
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
