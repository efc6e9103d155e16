// Attention spelt out in ops is recognised and lowered as the fused `attention` op
// (fuse_attention.cpp) when the rewrite is exact, and left alone otherwise. Printed plans, no
// SystemC; the same graphs run on the chip in fused_attention_on_chip_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "attention_forms.h"
#include "plan_check.h"
#include "wallsim/compiler_stub/graph_io.h"

namespace wallsim::compiler_stub::test {
namespace {

bool fused(const PrintedPlan& p) { return p.text.find("(attention)") != std::string::npos; }

// The same attention written as the op: q = relu(x), attention(q, k, v).
Graph direct(const AttentionForm& f, const std::string& attrs) {
  const bool rows = f.layout == "rows";
  const std::string s = rows ? "[" + std::to_string(f.B * f.L) + ", " + std::to_string(f.D) + "]"
                             : "[" + std::to_string(f.B) + ", " + std::to_string(f.L) + ", " +
                                   std::to_string(f.D) + "]";
  auto in = [&](int id, const char* name) {
    return "{\"id\": " + std::to_string(id) + R"(, "op": "input", "name": ")" + name +
           R"(", "dtype": ")" + f.dtype + R"(", "shape": )" + s + "},";
  };
  return make_graph("[" + in(0, "q") + in(1, "k") + in(2, "v") +
                        R"({"id": 3, "op": "relu", "inputs": [0]},
      {"id": 4, "op": "attention", "inputs": [3, 1, 2], "heads": )" +
                        std::to_string(f.H) + attrs + "}]",
                    "[4]");
}

TEST(FuseAttention, HeadViewsAndACausalMaskBecomeTheFusedOp) {
  AttentionForm f;  // [256, 128] rows, 2 heads, scale on the scores, -1e9 x (key > query)
  const auto spelt = print_plan(attention_graph(f));
  EXPECT_TRUE(fused(spelt));
  // Instruction for instruction the op's own plan: the mask nodes, the views and the
  // separate softmax are gone, and only q, k, v and the output cross HBM.
  const auto op = print_plan(direct(f, R"(, "scale": 0.125, "causal": 1)"));
  EXPECT_EQ(stream_summary(spelt.text), stream_summary(op.text));
  EXPECT_EQ(spelt.stats().hbm_bytes_in, 3 * 256 * 128 * 4);
  EXPECT_EQ(spelt.stats().hbm_bytes_out, 256 * 128 * 4);
}

TEST(FuseAttention, OnnxStyleBatchedHeadsWithADenseBiasBecomeTheFusedOp) {
  AttentionForm f;
  f.layout = "onnx";
  f.B = 2;
  f.L = 200;
  f.mask = "bias";
  const auto spelt = print_plan(attention_graph(f));
  EXPECT_TRUE(fused(spelt));
  // The [1, 1, L, L] bias is reshaped to [L, L] (a view of the input) and read per step.
  EXPECT_EQ(spelt.stats().spills, 0);
}

TEST(FuseAttention, SelectMaskScaledQueryAndTransposeBAreRecognised) {
  AttentionForm f;
  f.mask = "causal_select";
  f.scale_query = true;
  f.transpose_b = true;
  f.B = 2;  // two sequences in [2 L, D] rows: `seq`
  f.L = 128;
  const auto spelt = print_plan(attention_graph(f));
  EXPECT_TRUE(fused(spelt));
  const auto op = print_plan(direct(f, R"(, "scale": 0.125, "causal": 1, "seq": 128)"));
  EXPECT_EQ(stream_summary(spelt.text), stream_summary(op.text));
}

TEST(FuseAttention, FormsThatAreNotExactlyAttentionStayUnfused) {
  for (const char* mask : {"bias_then_scale", "weak", "shifted"}) {
    AttentionForm f;
    f.mask = mask;
    EXPECT_FALSE(fused(print_plan(attention_graph(f)))) << mask;
  }
  AttentionForm f;
  f.scores_out = true;  // the probabilities are read after the group
  EXPECT_FALSE(fused(print_plan(attention_graph(f))));
  f.scores_out = false;
  f.layout = "onnx";
  f.B = 2;
  f.mask = "bias";
  // Several sequences in [B L, D] rows would need a bias per sequence: not the op's form.
  f.layout = "rows";
  EXPECT_FALSE(fused(print_plan(attention_graph(f))));
}

TEST(FuseAttention, OneOpGroupsAreNotRewritten) {
  EXPECT_FALSE(
      fused(print_plan(attention_graph({}), wallsim::test::trn2_arch(), GroupPolicy::per_op)));
}

TEST(FuseAttention, TheTransformerBlockExampleIsRecognised) {
  std::ifstream in(std::string(WALLSIM_SOURCE_DIR) + "/examples/graphs/transformer_block.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto p = print_plan(graph_from_json(base::Json::parse(text.str())));
  EXPECT_TRUE(fused(p));
  EXPECT_TRUE(check_in_order(p.text, {"node      40 context_merged (attention)"}));
  // The matmul + bias fusions still apply in the same group.
  EXPECT_TRUE(check_in_order(p.text, {"node      19 q_bias (matmul)"}));
  EXPECT_EQ(p.stats().spills, 0);
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
