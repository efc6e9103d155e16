// The fused attention op on the chip model: causal, block-diagonal (segment ids), dense-bias
// and unmasked attention, at lengths that are and are not multiples of the tile, on trn2 and
// tiny, match the reference evaluator. One device per process.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attention_forms.h"
#include "on_chip_run.h"
#include "plan_check.h"

namespace wallsim::compiler_stub {
namespace {

using test::Adjust;
using test::Outcome;
using test::run_on_chip;

std::string dims(std::vector<int64_t> d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// q = relu(x) is produced on the chip (its tiles used in place), or x itself (from HBM) when
// `q_in_hbm`; k and v come from HBM.
// `mask`: "" (none), "seg" (int32 ids [Lq]) or "bias" (fp32 [Lq, Lk]).
Graph fused_graph(const char* dtype, int64_t Lq, int64_t Lk, int64_t D, int64_t H,
                  const std::string& attrs, const std::string& mask, bool q_in_hbm = false,
                  bool add_x = false) {
  auto input = [&](int id, const std::string& name, const std::string& dt,
                   const std::string& shape) {
    return "{\"id\": " + std::to_string(id) + ", \"op\": \"input\", \"name\": \"" + name +
           "\", \"dtype\": \"" + dt + "\", \"shape\": " + shape + ", \"role\": \"input\"},";
  };
  std::string text = R"({"format": "wallsim-graph", "version": 1, "name": "fa", "nodes": [)";
  text += input(0, "x", dtype, dims({Lq, D})) + input(1, "k", dtype, dims({Lk, D})) +
          input(2, "v", dtype, dims({Lk, D}));
  std::string in = "[4, 1, 2]";
  if (mask == "seg") {
    text += input(3, "seg", "int32", dims({Lq}));
    in = "[4, 1, 2, 3]";
  } else if (mask == "bias") {
    text += input(3, "bias", "fp32", dims({Lq, Lk}));
    in = "[4, 1, 2, 3]";
  }
  text += q_in_hbm ? R"({"id": 4, "op": "reshape", "inputs": [0], "shape": )" + dims({Lq, D}) + "},"
                   : std::string(R"({"id": 4, "op": "relu", "inputs": [0]},)");
  text += R"({"id": 5, "op": "attention", "inputs": )" + in + ", \"heads\": " + std::to_string(H) +
          attrs + "}";
  // A consumer tiled plainly: the output must come out in the plain row tiles.
  text += add_x ? R"(, {"id": 6, "op": "add", "inputs": [5, 0]}], "outputs": [6]})"
                : R"(], "outputs": [5]})";
  return test::graph(text);
}

// Segment ids in runs of `run` tokens (the last one shorter); a bias of -1e9 on keys after
// query i + 3, small noise elsewhere.
Adjust mask_inputs(const std::string& mask, int64_t Lq, int64_t Lk, int64_t run) {
  return [=](sim::Core& device, std::map<std::string, HostTensor>& inputs) {
    if (mask == "seg") {
      std::vector<int32_t> ids(static_cast<size_t>(Lq));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(int64_t(i) / run);
      test::set_ints(device, inputs, "seg", ids);
    } else if (mask == "bias") {
      auto& t = *device.tensors().find("bias");
      std::vector<float> vals = inputs["bias"].data;
      for (int64_t i = 0; i < Lq; ++i) {
        for (int64_t j = i + 4; j < Lk; ++j) vals[static_cast<size_t>(i * Lk + j)] = -1e9f;
      }
      std::memcpy(t.bytes.data(), vals.data(), 4 * vals.size());
      inputs["bias"].data = vals;
    }
  };
}

Outcome run(const char* dtype, int64_t Lq, int64_t Lk, int64_t D, int64_t H,
            const std::string& attrs, const std::string& mask, const std::string& config,
            int64_t run_len = 100) {
  return run_on_chip(fused_graph(dtype, Lq, Lk, D, H, attrs, mask), config, GroupPolicy::whole,
                     mask_inputs(mask, Lq, Lk, run_len));
}

// trn2: 128-row tiles, 2 heads of 64 (stacked on the array's rows), 4 to a step.
TEST(FusedAttentionOnChip, CausalMatchesReferenceOnTrn2AtATileMultiple) {
  EXPECT_LT(run("fp32", 256, 256, 128, 2, ", \"causal\": 1", "", "trn2").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, CausalMatchesReferenceOnTrn2OffTheTile) {
  EXPECT_LT(run("fp32", 300, 300, 256, 4, ", \"causal\": 1", "", "trn2").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, CausalSequencesMatchReferenceOnTrn2) {
  // Two sequences of 150 rows: tiles never cross a sequence, the other sequence is skipped.
  EXPECT_LT(run("fp32", 300, 300, 128, 2, ", \"causal\": 1, \"seq\": 150", "", "trn2").max_error,
            1e-4);
}
TEST(FusedAttentionOnChip, BlockDiagonalMatchesReferenceOnTrn2) {
  EXPECT_LT(run("fp32", 256, 256, 128, 2, "", "seg", "trn2", 100).max_error, 1e-4);
}
TEST(FusedAttentionOnChip, BlockDiagonalInTwoHeadGroupsMatchesReferenceOnTrn2) {
  // 6 heads: a group of 4 and one of 2; segments of 77 rows cross the tiles.
  EXPECT_LT(run("fp32", 300, 300, 384, 6, "", "seg", "trn2", 77).max_error, 1e-4);
}
TEST(FusedAttentionOnChip, CausalBlockDiagonalMatchesReferenceOnTrn2) {
  EXPECT_LT(run("fp32", 300, 300, 128, 2, ", \"causal\": 1", "seg", "trn2", 90).max_error, 1e-4);
}
TEST(FusedAttentionOnChip, UnmaskedCrossAttentionMatchesReferenceOnTrn2) {
  EXPECT_LT(run("fp32", 200, 300, 128, 2, "", "", "trn2").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, UnmaskedAtTileMultiplesMatchesReferenceOnTrn2) {
  EXPECT_LT(run("fp32", 256, 512, 128, 2, "", "", "trn2").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, DenseBiasMatchesReferenceOnTrn2) {
  EXPECT_LT(run("fp32", 200, 300, 128, 2, "", "bias", "trn2").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, Bf16MatchesReferenceWithinRounding) {
  EXPECT_LT(run("bf16", 300, 300, 256, 4, ", \"causal\": 1", "", "trn2").max_error, 3e-2);
}

// tiny: 32-row tiles, 96 moving columns: 3 heads of 8 per step, stacked on 24 rows.
TEST(FusedAttentionOnChip, CausalMatchesReferenceOnTinyAtATileMultiple) {
  EXPECT_LT(run("fp32", 64, 64, 32, 4, ", \"causal\": 1", "", "tiny").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, CausalMatchesReferenceOnTinyOffTheTile) {
  EXPECT_LT(run("fp32", 70, 70, 32, 4, ", \"causal\": 1", "", "tiny").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, BlockDiagonalMatchesReferenceOnTiny) {
  EXPECT_LT(run("fp32", 70, 70, 32, 4, "", "seg", "tiny", 25).max_error, 1e-4);
}
TEST(FusedAttentionOnChip, UnmaskedMatchesReferenceOnTiny) {
  EXPECT_LT(run("fp32", 50, 70, 48, 2, "", "", "tiny").max_error, 1e-4);
}
TEST(FusedAttentionOnChip, CausalSequencesMatchReferenceOnTiny) {
  EXPECT_LT(run("fp32", 90, 90, 32, 2, ", \"causal\": 1, \"seq\": 45", "", "tiny").max_error, 1e-4);
}

TEST(FusedAttentionOnChip, SequencesOffTheTileFeedAPlainlyTiledConsumerOnTrn2) {
  Graph g = fused_graph("fp32", 200, 200, 128, 2, ", \"causal\": 1, \"seq\": 100", "", false, true);
  EXPECT_LT(run_on_chip(g, "trn2", GroupPolicy::whole).max_error, 1e-4);
}

TEST(FusedAttentionOnChip, KeysTransposedPerStepAndOutputStreamedMatchReferenceOnTiny) {
  // 1500 keys of 4 heads of 8 in fp32, two groups of 2 heads (3 would not fit): two groups'
  // K^T (47 tiles) would take more than half of tiny's 16 KiB SBUF, so K^T is made per step,
  // and the output is stored a tile at a time.
  Graph g = fused_graph("fp32", 1500, 1500, 32, 4, ", \"causal\": 1", "", true);
  EXPECT_LT(run_on_chip(g, "tiny", GroupPolicy::whole).max_error, 1e-4);
}

TEST(FusedAttentionOnChip, BlockDiagonalOverManyKeysMatchesReferenceOnTiny) {
  // 1500 tokens in segments of 100: the maxima pass's 47 mask tiles per query tile do not fit
  // beside the pipeline in tiny's SBUF, so the exponential pass compares the ids again.
  EXPECT_LT(run("fp32", 1500, 1500, 32, 4, "", "seg", "tiny", 100).max_error, 1e-4);
}

// Decode attention (one query row over a KV cache): the heads on partitions, one [H, keys]
// score tile. Keys that are and are not a tile multiple, a dense bias row, 2 heads per row tile
// of the array (trn2's 64-wide heads) and heads narrower than the alignment's share.
TEST(DecodeAttentionOnChip, OneQueryRowMatchesReferenceOnTrn2AtATileMultiple) {
  EXPECT_LT(run("fp32", 1, 256, 768, 12, "", "", "trn2").max_error, 1e-4);
}
TEST(DecodeAttentionOnChip, OneQueryRowWithABiasMatchesReferenceOnTrn2OffTheTile) {
  EXPECT_LT(run("fp32", 1, 200, 256, 4, "", "bias", "trn2").max_error, 1e-4);
}
TEST(DecodeAttentionOnChip, OneQueryRowOverManyKeysMatchesReferenceOnTrn2InBf16) {
  // 700 keys: two score banks of 512 and 188 keys, six key tiles.
  EXPECT_LT(run("bf16", 1, 700, 768, 12, "", "bias", "trn2").max_error, 3e-2);
}
TEST(DecodeAttentionOnChip, OneQueryRowWithABiasMatchesReferenceOnTinyOffTheTile) {
  EXPECT_LT(run("fp32", 1, 45, 64, 2, "", "bias", "tiny").max_error, 1e-4);
}
TEST(DecodeAttentionOnChip, OneQueryRowMatchesReferenceOnTinyAtATileMultiple) {
  EXPECT_LT(run("fp32", 1, 64, 128, 4, "", "", "tiny").max_error, 1e-4);
}

// Attention spelt out in ops (fuse_attention.cpp): recognised (the plan has the fused op, or
// not when `fused` is false) and, on the chip, equal to the reference of the unfused graph.
Outcome run_form(const test::AttentionForm& f, const std::string& config, bool fused = true) {
  const Graph g = test::attention_graph(f);
  const auto p = test::print_plan(g, test::load(config).chip.arch);
  EXPECT_EQ(p.text.find("(attention)") != std::string::npos, fused);
  return run_on_chip(g, config, GroupPolicy::whole);
}
test::AttentionForm form(const std::string& layout, int64_t B, int64_t L, int64_t D, int64_t H,
                         const std::string& mask) {
  test::AttentionForm f;
  f.layout = layout;
  f.B = B;
  f.L = L;
  f.D = D;
  f.H = H;
  f.mask = mask;
  return f;
}

TEST(AttentionFromOpsOnChip, CausalHeadViewsMatchReferenceOnTrn2AtATileMultiple) {
  EXPECT_LT(run_form(form("rows", 1, 256, 128, 2, "causal_add"), "trn2").max_error, 1e-4);
}
TEST(AttentionFromOpsOnChip, CausalHeadViewsMatchReferenceOnTrn2OffTheTile) {
  EXPECT_LT(run_form(form("rows", 1, 200, 256, 4, "causal_add"), "trn2").max_error, 1e-4);
}
TEST(AttentionFromOpsOnChip, OnnxStyleBiasedBatchesMatchReferenceOnTrn2) {
  EXPECT_LT(run_form(form("onnx", 2, 200, 128, 2, "bias"), "trn2").max_error, 1e-4);
}
TEST(AttentionFromOpsOnChip, OnnxStyleCausalBatchesMatchReferenceOnTrn2InBf16) {
  auto f = form("onnx", 2, 256, 128, 2, "causal_add");
  f.dtype = "bf16";
  EXPECT_LT(run_form(f, "trn2").max_error, 0.05);
}
TEST(AttentionFromOpsOnChip, SelectMaskedSequencesInRowsMatchReferenceOnTrn2) {
  auto f = form("rows", 2, 150, 128, 2, "causal_select");
  f.scale_query = true;
  f.transpose_b = true;
  EXPECT_LT(run_form(f, "trn2").max_error, 1e-4);
}
TEST(AttentionFromOpsOnChip, OnnxStyleCausalBatchesMatchReferenceOnTiny) {
  EXPECT_LT(run_form(form("onnx", 2, 70, 32, 4, "causal_add"), "tiny").max_error, 1e-4);
}
TEST(AttentionFromOpsOnChip, UnmaskedHeadViewsMatchReferenceOnTinyAtATileMultiple) {
  EXPECT_LT(run_form(form("rows", 1, 64, 32, 4, "none"), "tiny").max_error, 1e-4);
}
TEST(AttentionFromOpsOnChip, SelectMaskedSequencesMatchReferenceOnTinyOffTheTile) {
  EXPECT_LT(run_form(form("rows", 2, 45, 48, 2, "causal_select"), "tiny").max_error, 1e-4);
}
TEST(AttentionFromOpsOnChip, AShiftedMaskStaysUnfusedAndMatchesReferenceOnTrn2) {
  EXPECT_LT(run_form(form("rows", 1, 200, 128, 2, "shifted"), "trn2", false).max_error, 1e-4);
}

}  // namespace
}  // namespace wallsim::compiler_stub
