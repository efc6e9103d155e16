// Estimates before lowering (estimate.h): the instruction bound never exceeds what the compiler
// emits, so the host-memory check built on it never refuses a run that would fit.
#include "wallsim/compiler_stub/estimate.h"

#include <gtest/gtest.h>

#include "../support/chip_arch.h"
#include "graph_test_util.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

std::vector<int32_t> op_nodes(const Graph& g) {
  std::vector<int32_t> ids;
  for (const Node& n : g.nodes) {
    if (n.op != OpKind::input) ids.push_back(n.id);
  }
  return ids;
}

// The default array and a small one (fewer MACs per instruction: a larger bound).
std::vector<isa::ArchSpec> arches() {
  isa::ArchSpec small = wallsim::test::trn2_arch();
  small.tensor.rows = 32;
  small.tensor.cols = 32;
  small.tensor.moving_free_max = 128;
  return {wallsim::test::trn2_arch(), small};
}

TEST(Estimate, InstructionBoundIsAtMostWhatEveryExampleGraphCompilesTo) {
  // gemm_4096 (the bound is tightest there) on the default array only: on the small one it
  // lowers to over a hundred thousand instructions, seconds of test time for nothing new.
  for (const char* name : {"mlp", "transformer_block", "decode_attention", "gemm_4096"}) {
    Graph g =
        read_graph_file(std::string(WALLSIM_SOURCE_DIR) + "/examples/graphs/" + name + ".json");
    infer_types(g);
    for (const isa::ArchSpec& arch : arches()) {
      if (std::string(name) == "gemm_4096" && arch.tensor.rows != isa::ArchSpec{}.tensor.rows)
        continue;
      for (GroupPolicy policy : {GroupPolicy::whole, GroupPolicy::per_op}) {
        auto r = compile_graph(g, arch, policy);
        auto* ok = std::get_if<CompiledGraph>(&r);
        if (!ok) continue;  // a graph this arch cannot hold says so elsewhere
        int64_t emitted = 0;
        for (const LowerStats& s : ok->groups) emitted += s.instructions;
        const int64_t bound = min_plan_instructions(g, op_nodes(g), arch);
        EXPECT_GT(bound, 0) << name;
        EXPECT_LE(bound, emitted) << name << " on a " << arch.tensor.rows << "-row array";
      }
    }
  }
}

TEST(Estimate, InstructionBoundGrowsWithTheMacs) {
  auto gemm = [](int64_t m) {
    Graph g =
        test::make_graph(R"([{"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": [)" +
                             std::to_string(m) + R"(, 4096], "role": "input"},
            {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [4096, 4096],
             "role": "weight"},
            {"id": 2, "op": "matmul", "inputs": [0, 1]}])",
                         "[2]");
    infer_types(g);
    return min_plan_instructions(g, op_nodes(g), wallsim::test::trn2_arch());
  };
  // 4096^3 MACs over 128 x 128 x 512 per instruction.
  EXPECT_EQ(gemm(4096), 8192);
  EXPECT_EQ(gemm(8192), 2 * gemm(4096));
}

// An ArchSpec made by hand carries no engine rates: the compiler refuses it in one line
// instead of pricing with some chip's speeds.
TEST(Compile, AnArchSpecWithoutCostHintsIsRefused) {
  Graph g = test::make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "bf16",
                                  "shape": [128, 128], "role": "input"},
                                 {"id": 1, "op": "relu", "inputs": [0]}])",
                             "[1]");
  infer_types(g);
  try {
    (void)compile_graph(g, isa::ArchSpec{}, GroupPolicy::whole);
    FAIL() << "compiled without cost hints";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cost hints are unset"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::holds_alternative<CompiledGraph>(
      compile_graph(g, wallsim::test::trn2_arch(), GroupPolicy::whole)));
}

}  // namespace
}  // namespace wallsim::compiler_stub
