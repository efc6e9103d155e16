// The plan's collective queue (issue 38): every all_reduce of a plan on one DMA queue of its own
// (NCCL's one communication stream), made only when the plan has a collective; on a chip whose
// plan already declares every queue, a store queue dedicated to them.
#include <gtest/gtest.h>

#include <variant>

#include "../support/chip_arch.h"
#include "graph_test_util.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

// matmul -> all_reduce, an independent matmul, their sum (a backward's gradient reduced while
// the rest of the backward runs).
Graph reduce_beside_matmul(bool collective) {
  const std::string reduced =
      collective ? R"({"id": 4, "op": "all_reduce", "inputs": [3], "comm": "dp", "ranks": 2},)"
                 : R"({"id": 4, "op": "relu", "inputs": [3]},)";
  Graph g = test::make_graph(R"([
    {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [128, 256], "role": "input"},
    {"id": 1, "op": "input", "name": "w1", "dtype": "fp32", "shape": [256, 256], "role": "weight"},
    {"id": 2, "op": "input", "name": "w2", "dtype": "fp32", "shape": [256, 256], "role": "weight"},
    {"id": 3, "op": "matmul", "inputs": [0, 1]},)" +
                                 reduced + R"(
    {"id": 5, "op": "matmul", "inputs": [0, 2]},
    {"id": 6, "op": "add", "inputs": [4, 5]}])",
                             "[6]");
  infer_types(g);
  return g;
}

const isa::Plan& only_plan(const std::variant<CompiledGraph, CompileError>& r) {
  if (const auto* e = std::get_if<CompileError>(&r)) ADD_FAILURE() << e->message();
  const auto& plans = std::get<CompiledGraph>(r).plans.plans;
  EXPECT_EQ(plans.size(), 1u);
  return plans.front();
}

bool collective_op(isa::Opcode op) {
  return op == isa::Opcode::all_reduce || op == isa::Opcode::all_gather ||
         op == isa::Opcode::reduce_scatter;
}

TEST(Compile, CollectivesTakeAQueueOfTheirOwn) {
  const isa::ArchSpec arch = wallsim::test::trn2_arch();
  const auto r = compile_graph(reduce_beside_matmul(true), arch, GroupPolicy::whole);
  const isa::Plan& p = only_plan(r);
  int cc = 0;
  for (const isa::Stream& s : p.streams) {
    int collectives = 0;
    for (const isa::Instruction& in : s.instructions) collectives += collective_op(in.op);
    if (s.name == "cc0") {
      ++cc;
      EXPECT_EQ(s.engine, isa::Engine::dma);
      EXPECT_EQ(collectives, 1);
      EXPECT_EQ(size_t(collectives), s.instructions.size());  // nothing but the collective
    } else {
      EXPECT_EQ(collectives, 0) << s.name;
    }
  }
  EXPECT_EQ(cc, 1);
  // The queue is declared after the plan's loads and stores: the core's next DMA queue.
  int dma = 0;
  for (const isa::Stream& s : p.streams) {
    if (s.engine != isa::Engine::dma) continue;
    if (s.name == "cc0") {
      EXPECT_EQ(dma, arch.dma.engines * 3);  // 2 load + 1 store per engine
    }
    ++dma;
  }
  // Without a collective, no such queue.
  const auto plain = compile_graph(reduce_beside_matmul(false), arch, GroupPolicy::whole);
  const isa::Plan& q = only_plan(plain);
  for (const isa::Stream& s : q.streams) EXPECT_NE(s.name, "cc0");
}

TEST(Compile, WithNoQueueToSpareACollectiveTakesAStoreQueueNothingFollows) {
  isa::ArchSpec arch = wallsim::test::trn2_arch();
  arch.dma.engines = 4;  // tiny's: 4 engines x 2 queues, all declared by the plan
  arch.dma.queues_per_engine = 2;
  const auto r = compile_graph(reduce_beside_matmul(true), arch, GroupPolicy::whole);
  const isa::Plan& p = only_plan(r);
  int found = 0;
  for (const isa::Stream& s : p.streams) {
    EXPECT_NE(s.name, "cc0");
    for (size_t k = 0; k < s.instructions.size(); ++k) {
      if (!collective_op(s.instructions[k].op)) continue;
      ++found;
      EXPECT_EQ(k + 1, s.instructions.size()) << s.name;  // out of the store rotation after it
    }
  }
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace wallsim::compiler_stub
