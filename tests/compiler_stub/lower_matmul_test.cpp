// Printed-plan tests of the matmul family (lower_matmul.cpp): stationaries by transposes
// through the array, K accumulation in PSUM, evacuation split between the vector and scalar
// engines by load, a bias_add fused into the evacuation, a large B streamed by panels, batch_matmul
// per batch. No SystemC.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "../support/chip_arch.h"
#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

// These tests print the rules' plan (compiler.matmul_schedule = -2): since a matmul whose B fits
// SBUF has a schedule space too, the model's pick at these small shapes streams B, and the
// space's points are tested in matmul_schedule_on_chip_test.cpp.
PrintedPlan rules_plan(Graph g, const isa::ArchSpec& arch = wallsim::test::trn2_arch(),
                       GroupPolicy policy = GroupPolicy::whole, LoweringOptions options = {}) {
  options.matmul_schedule = -2;
  return print_plan(std::move(g), arch, policy, options);
}

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

// a [dims of a] x b [dims of b], bf16, as a batch_matmul (with transpose_b when `tb`).
Graph bmm_graph(const std::string& a, const std::string& b, bool tb) {
  return make_graph(R"([{"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": )" + a +
                        R"(},
      {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": )" +
                        b + R"(},
      {"id": 2, "op": "batch_matmul", "inputs": [0, 1])" +
                        (tb ? R"(, "transpose_b": 1)" : "") + "}]",
                    "[2]");
}

TEST(LowerMatmul, TwoByTwoTilesTransposeAFirstThenAccumulateKChunksInOneBankEach) {
  const auto p = rules_plan(matmul_graph(256, 256, 512), wallsim::test::trn2_arch(),
                            GroupPolicy::whole, emission_order());
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

TEST(LowerMatmul, AInHbmGetsItsStationariesWhereTheModelledCostIsLeast) {
  // [256 x 512] x [512 x 2048] bf16 on trn2's geometry and speeds: the multiplies take 3.4 us
  // of tensor time per row tile, B's load 2.3 us of DMA. Through the array, A^T adds 0.2 us of
  // transposes to the tensor engine (the bound); by hardware DMA transpose it adds 0.85 us to
  // the DMA engines, still under the tensor time: the DMA wins on a chip that has it.
  const Graph g = matmul_graph(256, 512, 2048);
  isa::ArchSpec hw = wallsim::test::trn2_arch();
  hw.dma.hardware_transpose = true;  // as configs/trn2.json: in 256-byte chunks
  hw.costs.dma_transpose_chunk_bytes = 256;
  const auto by_array = rules_plan(g);
  const auto by_dma = rules_plan(g, hw);
  EXPECT_EQ(count_of(by_array.text, " transpose dst="), 8);  // 2 row tiles x 4 K chunks
  EXPECT_EQ(count_of(by_dma.text, " transpose dst="), 0);
  EXPECT_EQ(count_of(by_dma.text, " matmul dst="), 32);
  // Each stationary [128 K x 128 M] straight from A: K on partitions (stride 1), M by rows.
  EXPECT_EQ(count_of(by_dma.text, "src=a<bf16>[r128*1]"), 8) << by_dma.text;
  EXPECT_EQ(count_of(by_dma.text, "tensor_copy") + count_of(by_dma.text, "activation.identity"),
            8);  // the output blocks' evacuations only
  EXPECT_EQ(by_dma.stats().hbm_bytes_in, by_array.stats().hbm_bytes_in);
  // DMA engines 100x slower: the 3x of a hardware transpose would bound the op, the array wins.
  isa::ArchSpec slow_dma = hw;
  slow_dma.costs.dma_gb_per_s = 0.29;
  EXPECT_EQ(count_of(rules_plan(g, slow_dma).text, " transpose dst="), 8);
  // No hardware transpose but DMA engines 1000x faster: even element-by-element reads (1 + 512
  // / 2 of the bytes) cost less than the array's transposes: a strided DMA.
  isa::ArchSpec fast_dma = wallsim::test::trn2_arch();
  fast_dma.costs.dma_gb_per_s = 28990;
  const auto strided = rules_plan(g, fast_dma);
  EXPECT_EQ(count_of(strided.text, " transpose dst="), 0);
  EXPECT_EQ(count_of(strided.text, "src=a<bf16>[r128*1]"), 8);
}

TEST(LowerMatmul, APlanOutputsLastRowTilesAreStoredInFinerPiecesOverTheStoreQueues) {
  // [4096 x 128] x [128 x 256] bf16: 32 output row tiles of 64 KiB, each one piece at
  // dma_split_bytes. Nothing after the last ones overlaps their stores: the last as many as
  // there are store queues (16) are cut at dma_dependent_split_bytes (32 KiB: 2 pieces each).
  const auto p = rules_plan(matmul_graph(4096, 128, 256));
  const int64_t stores = count_of(p.text, "dma_copy dst=v2<");
  LoweringOptions whole;
  whole.dma_dependent_split_bytes = whole.dma_split_bytes;
  const auto q = rules_plan(matmul_graph(4096, 128, 256), wallsim::test::trn2_arch(),
                            GroupPolicy::whole, whole);
  EXPECT_EQ(count_of(q.text, "dma_copy dst=v2<"), 32) << q.text;
  EXPECT_EQ(stores, 16 + 16 * 2) << p.text;
  EXPECT_EQ(p.stats().hbm_bytes_out, q.stats().hbm_bytes_out);
}

TEST(LowerMatmul, ABLargerThanTheStreamedShareIsLoadedAPanelAtATime) {
  LoweringOptions streamed;
  streamed.streamed_operand_percent = 1;
  const auto whole = rules_plan(matmul_graph(128, 256, 2048));
  const auto p = rules_plan(matmul_graph(128, 256, 2048), wallsim::test::trn2_arch(),
                            GroupPolicy::whole, streamed);
  EXPECT_EQ(count_of(whole.text, "buffer    panel"), 0);
  // 2048 columns in panels of 512 (one PSUM bank of fp32), each panel two K chunks.
  EXPECT_EQ(count_of(p.text, "buffer    panel"), 4);
  EXPECT_EQ(count_of(p.text, " matmul dst="), 8);
  EXPECT_EQ(p.stats().hbm_bytes_in, whole.stats().hbm_bytes_in);
}

TEST(LowerMatmul, BatchMatmulMultipliesPerBatchEntry) {
  const auto p = rules_plan(bmm_graph("[4, 64, 128]", "[4, 128, 64]", false),
                            wallsim::test::trn2_arch(), GroupPolicy::whole, emission_order());
  // Each batch entry: one row tile of A, one K chunk of B: one transpose, one matmul.
  EXPECT_TRUE(check_in_order(
      stream_summary(p.text),
      {"tensor: transpose x1", "tensor: matmul x1", "tensor: transpose x1", "tensor: matmul x1"}));
  EXPECT_EQ(count_of(p.text, " matmul dst="), 4);
}

TEST(LowerMatmul, BatchMatmulWithTransposedBReadsBAsAStridedView) {
  const auto p = rules_plan(bmm_graph("[2, 64, 128]", "[2, 64, 128]", true));
  EXPECT_TRUE(check_in_order(p.text, {"dst=view_", "src=b<bf16>"}));
  EXPECT_EQ(count_of(p.text, " matmul dst="), 2);
}

// a [256, 256] x b [256, 512] (+ bias [512]), with `extra` nodes after and `outputs`.
Graph matmul_bias_graph(const std::string& extra, const std::string& outputs) {
  return make_graph(R"([{"id": 0, "op": "input", "name": "a", "dtype": "fp32", "shape": [256, 256]},
      {"id": 1, "op": "input", "name": "b", "dtype": "fp32", "shape": [256, 512], "role": "weight"},
      {"id": 2, "op": "input", "name": "bias", "dtype": "fp32", "shape": [512], "role": "weight"},
      {"id": 3, "op": "matmul", "inputs": [0, 1]},
      {"id": 4, "op": "bias_add", "inputs": [3, 2]})" +
                        extra + "]",
                    outputs);
}

TEST(LowerMatmul, AMatmulAndTheBiasAddThatAloneConsumesItAreOneOpTheArrayAddsTheBias) {
  const auto p = rules_plan(matmul_bias_graph("", "[4]"));
  // Per output tile: its 2 K chunks, then a ones row (stationary) times the bias row (moving,
  // partition 0 of the replicated row) into the same bank; 4 stationaries and the 2 output
  // tiles leave PSUM by plain copies (either lane engine): no vector add, no other pass.
  EXPECT_EQ(count_of(p.text, " matmul dst="), 2 * 3);
  EXPECT_EQ(count_of(p.text, "memset"), 1);  // the ones row
  EXPECT_EQ(count_of(p.text, "tensor_copy") + count_of(p.text, "activation.identity"), 6);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.add"), 0);
  EXPECT_TRUE(check_in_order(
      p.text, {"dma_copy dst=bcast_", "src=bias<fp32>[r128*0][+0; 512*1]", "moving=bcast_"}));
  EXPECT_EQ(count_of(p.text, "tensor    v3 "), 0);  // the matmul's result never exists apart
  EXPECT_EQ(p.stats().hbm_bytes_in, (256 * 256 + 256 * 512 + 512) * 4);
}

TEST(LowerMatmul, AMatmulWhoseResultHasASecondConsumerIsNotFusedWithItsBiasAdd) {
  const auto fused = rules_plan(matmul_bias_graph("", "[4]"));
  const auto p = rules_plan(matmul_bias_graph(R"(,
      {"id": 5, "op": "relu", "inputs": [3]})",
                                              "[4, 5]"));
  // The matmul's 2 output tiles are evacuated (copies), then added to the bias separately.
  EXPECT_EQ(count_of(p.text, "tensor_copy") + count_of(p.text, "activation.identity"), 6);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.add"), 2);
  EXPECT_EQ(count_of(p.text, "lhs=psum"), 0);
  EXPECT_EQ(count_of(p.text, "activation.relu"), 2);
  EXPECT_EQ(count_of(p.text, " matmul dst="), 4);
  // The matmul as a graph output is not fused either.
  const auto out = rules_plan(matmul_bias_graph("", "[3, 4]"));
  EXPECT_EQ(count_of(out.text, "tensor_tensor.add"), 2);
  EXPECT_EQ(count_of(out.text, "tensor    v3 "), 1);
  EXPECT_EQ(count_of(fused.text, "tensor_tensor.add"), 0);
}

TEST(LowerMatmul, AnActivationOrAResidualAddAfterTheBiasIsAppliedAsPsumIsEvacuated) {
  // bias_add -> gelu: the scalar engine evacuates each output block through the gelu.
  const auto gelu = rules_plan(matmul_bias_graph(R"(,
      {"id": 5, "op": "gelu", "inputs": [4]})",
                                                 "[5]"));
  EXPECT_EQ(count_of(gelu.text, "activation.gelu dst=v5_"), 2);
  EXPECT_TRUE(check_in_order(gelu.text, {"activation.gelu dst=v5_", "src=psum"}));
  EXPECT_EQ(count_of(gelu.text, "tensor    v4 "), 0);
  // bias_add -> add(residual a): the vector engine adds the residual as it evacuates.
  const auto res = rules_plan(make_graph(
      R"([{"id": 0, "op": "input", "name": "a", "dtype": "fp32", "shape": [256, 256]},
          {"id": 1, "op": "input", "name": "b", "dtype": "fp32", "shape": [256, 256], "role": "weight"},
          {"id": 2, "op": "input", "name": "bias", "dtype": "fp32", "shape": [256], "role": "weight"},
          {"id": 3, "op": "matmul", "inputs": [0, 1]},
          {"id": 4, "op": "bias_add", "inputs": [3, 2]},
          {"id": 5, "op": "add", "inputs": [0, 4]}])",
      "[5]"));
  EXPECT_EQ(count_of(res.text, "tensor_tensor.add dst=v5_"), 2);
  EXPECT_TRUE(check_in_order(res.text, {"tensor_tensor.add dst=v5_", "lhs=psum", "rhs=in_"}));
  // A bias_add that is also a graph output keeps its value: the gelu stays apart.
  const auto apart = rules_plan(matmul_bias_graph(R"(,
      {"id": 5, "op": "gelu", "inputs": [4]})",
                                                  "[4, 5]"));
  EXPECT_EQ(count_of(apart.text, "tensor    v4 "), 1);
  EXPECT_EQ(count_of(apart.text, "activation.gelu"), 2);
}

TEST(LowerMatmul, PerOpGroupsKeepTheBiasAddApart) {
  // Fusion is within a group: one-op groups lower the matmul and the bias_add separately.
  const auto p =
      rules_plan(matmul_bias_graph("", "[4]"), wallsim::test::trn2_arch(), GroupPolicy::per_op);
  EXPECT_EQ(count_of(p.text, "lhs=psum"), 0);
  EXPECT_EQ(count_of(p.text, "tensor_tensor.add"), 2);
}

TEST(LowerMatmul, EvacuationsGoToTheLaneEngineWithLessModelledBusyTimeInTheOp) {
  // Alone the 6 evacuations alternate; a softmax before (vector-heavy) does not shift them (the
  // sums restart with each op) on lane engines of one clock; a slower vector engine (trn2's
  // clocks, the ArchSpec's cost hints) takes fewer.
  const isa::ArchSpec base = wallsim::test::trn2_arch();
  isa::ArchSpec even = base;
  even.costs.scalar_elements_per_ns = even.costs.vector_elements_per_ns;
  const auto alone = rules_plan(matmul_graph(256, 256, 512), even);
  const auto p = rules_plan(
      make_graph(
          R"([{"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": [256, 256]},
          {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [256, 512], "role": "weight"},
          {"id": 2, "op": "softmax", "inputs": [0]},
          {"id": 3, "op": "matmul", "inputs": [2, 1]}])",
          "[3]"),
      even);
  isa::ArchSpec slow = base;  // one default construction (GCC 12 warns on a second, inlined)
  slow.costs.vector_elements_per_ns = slow.costs.scalar_elements_per_ns / 4;
  const auto weighted = rules_plan(matmul_graph(256, 256, 512), slow);
  EXPECT_EQ(count_of(alone.text, "tensor_copy"), 3);
  EXPECT_EQ(count_of(p.text, "tensor_copy"), 3);
  EXPECT_EQ(count_of(p.text, "activation.identity"), 3);
  EXPECT_LT(count_of(weighted.text, "tensor_copy"), 3);
  EXPECT_EQ(count_of(weighted.text, "tensor_copy") + count_of(weighted.text, "activation.identity"),
            6);
}

// A decode step's projection: one row of A times a bf16 weight whose rows are 1536 B. Loaded by
// row tiles, each weight row is a DMA chunk of its own; K-interleaved
// (compiler.matmul_k_interleave), a partition holds consecutive rows, so every chunk of the
// weight's loads is at least compiler.dma_min_chunk_bytes.
int64_t shortest_weight_run(const isa::Plan& plan) {
  const int w = plan.find_tensor("b");
  int64_t shortest = INT64_MAX;
  for (const auto& st : plan.streams) {
    for (const auto& in : st.instructions) {
      if (in.op != isa::Opcode::dma_copy || in.src[0].space != isa::MemSpace::hbm ||
          in.src[0].buffer != w)
        continue;
      EXPECT_EQ(in.dst.num_free, 1);
      shortest = std::min(shortest, in.dst.free[0].size * isa::dtype_bytes(in.dst.dtype));
    }
  }
  return shortest;
}

TEST(LowerMatmul, OneRowMatmulLoadsItsWeightInChunksOfAtLeastTheMinimum) {
  const LoweringOptions on;
  LoweringOptions off;
  off.matmul_k_interleave = 0;
  const auto p =
      rules_plan(matmul_graph(1, 768, 768), wallsim::test::trn2_arch(), GroupPolicy::whole, on);
  const auto q =
      rules_plan(matmul_graph(1, 768, 768), wallsim::test::trn2_arch(), GroupPolicy::whole, off);
  EXPECT_GE(shortest_weight_run(p.plan()), on.dma_min_chunk_bytes);
  EXPECT_EQ(shortest_weight_run(q.plan()), 768 * 2);  // one weight row per chunk
  // Several row tiles of A keep plain row tiles of B.
  const auto r =
      rules_plan(matmul_graph(256, 768, 768), wallsim::test::trn2_arch(), GroupPolicy::whole, on);
  EXPECT_EQ(shortest_weight_run(r.plan()), 768 * 2);
}

// A row tile's A^T chunks leave PSUM in groups (at_group): the first alone, then as many side by
// side in one bank as its 512 fp32 columns hold (4 chunks of 128 rows), one lane instruction a
// group; a lone row tile's groups hold at most 2 (one is evacuated while the array multiplies the
// one before). 8 K chunks: [0] [1-4] [5-7] a row tile of two, [0] [1-2] [3-4] [5-6] [7] alone.
TEST(LowerMatmul, ARowTilesStationariesLeavePsumInGroupsSideBySideInABank) {
  const auto lane_copies = [](const std::string& text) {
    return count_of(text, "tensor_copy") + count_of(text, "activation.identity");
  };
  const auto two = rules_plan(matmul_graph(256, 1024, 512), wallsim::test::trn2_arch(),
                              GroupPolicy::whole, emission_order());
  EXPECT_EQ(count_of(two.text, "transpose"), 16);
  EXPECT_EQ(lane_copies(two.text), 2 * 3 + 2);  // the stationaries' groups, then 2 output tiles
  const auto lone = rules_plan(matmul_graph(128, 1024, 512), wallsim::test::trn2_arch(),
                               GroupPolicy::whole, emission_order());
  EXPECT_EQ(count_of(lone.text, "transpose"), 8);
  EXPECT_EQ(lane_copies(lone.text), 5 + 1);
}

// One row tile of A: the array multiplies once the first stationaries are made, and makes the
// rest between the first column block's matmuls (24 K chunks for a decode step's fc2), instead
// of transposing every K chunk first.
TEST(LowerMatmul, OneRowTileMultipliesBeforeItsLastStationaryIsMade) {
  for (int64_t rows : {1, 128, 256}) {
    const auto p = rules_plan(matmul_graph(rows, 3072, 768), wallsim::test::trn2_arch(),
                              GroupPolicy::whole, emission_order());
    int64_t first_matmul = -1, last_transpose = -1, i = 0;
    for (const auto& st : p.plan().streams) {
      if (st.engine != isa::Engine::tensor) continue;
      for (const auto& in : st.instructions) {
        if (in.op == isa::Opcode::matmul && first_matmul < 0) first_matmul = i;
        if (in.op == isa::Opcode::transpose) last_transpose = i;
        ++i;
      }
    }
    ASSERT_GE(first_matmul, 0);
    if (rows <= 128) {
      EXPECT_LT(first_matmul, last_transpose) << rows;
    } else {  // two row tiles: every stationary first, as before
      EXPECT_GT(first_matmul, last_transpose) << rows;
    }
  }
}

// A GEMM's B given transposed (x @ W^T) goes through the array; with one row tile of A every
// multiply waits for all of B^T, so B's row tiles (128 x 512 bf16: 128 KiB, under
// dma_split_bytes) load in finer pieces, where with two row tiles each is one piece.
TEST(LowerMatmul, TransposedBOfOneRowTileLoadsInFinePieces) {
  const auto b_loads = [](int64_t m) {
    const auto p = rules_plan(
        make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "bf16", "shape": [)" +
                       std::to_string(m) + R"(, 512]},
            {"id": 1, "op": "input", "name": "w", "dtype": "bf16", "shape": [1024, 512]},
            {"id": 2, "op": "transpose", "inputs": [1], "perm": [1, 0]},
            {"id": 3, "op": "matmul", "inputs": [0, 2]}])",
                   "[3]"));
    EXPECT_EQ(count_of(p.text, "src=view_"), 8 * 4) << m;  // B's transposes: 8 N tiles, 4 K chunks
    return count_of(p.text, "src=w<bf16>");
  };
  EXPECT_GT(b_loads(64), 8);
  EXPECT_EQ(b_loads(256), 8);
}

// A batch_matmul with transpose_b whose B^T goes through the array (no DMA transpose): each
// entry's [N, K] rows (4 row tiles of 64 KiB) load in pieces finer than a tile, and per K chunk
// an entry's 4 N tiles go side by side into one PSUM bank and leave it by one copy.
TEST(LowerMatmul, TransposedBatchBEntriesLoadFineAndLeavePsumABankAtATime) {
  const auto p = rules_plan(bmm_graph("[3, 64, 256]", "[3, 512, 256]", true));
  EXPECT_EQ(count_of(p.text, "src=view_"), 3 * 4 * 2) << p.text;  // B's transposes
  EXPECT_EQ(
      count_of(p.text, "tensor_copy dst=bT_") + count_of(p.text, "activation.identity dst=bT_"),
      3 * 2);
  EXPECT_EQ(count_of(p.text, "[+384; 128*1] src=view_"), 3 * 2);  // a bank's fourth tile
  // B's loads by entry (512 x 256 elements each): their pieces.
  std::map<int64_t, int> pieces;
  std::istringstream lines(p.text);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("src=b<bf16>");
    if (line.find("dma_copy") == std::string::npos || at == std::string::npos) continue;
    const int64_t entry = std::stoll(line.substr(line.find("[+", at) + 2)) / (512 * 256);
    ++pieces[entry];
  }
  ASSERT_EQ(pieces.size(), 3u) << p.text;
  for (const auto& [entry, n] : pieces) EXPECT_GT(n, 4) << entry;
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
