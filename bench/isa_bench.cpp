// Plan-file throughput: what users wait on when large compiled plans are read and verified.
#include <benchmark/benchmark.h>

#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/plan_pack.h"
#include "wallsim/isa/verifier.h"

namespace wallsim::isa {

using base::Json;
namespace {

// A plan of `n` vector adds over [128 x 512] fp32 tiles, chained by one semaphore each.
Plan make_plan(int n) {
  Plan p;
  p.name = "bench";
  p.semaphores = {"s"};
  p.buffers.push_back({"a", MemSpace::sbuf, 0, 128, 0, 512 * 4 * 2});
  p.nodes.push_back({0, "add", "add"});
  Stream vec{Engine::vector, "vector", -1, {}};
  Stream sc{Engine::scalar, "scalar", -1, {}};
  for (int i = 0; i < n; ++i) {
    Instruction in;
    in.op = Opcode::tensor_tensor;
    AccessPattern ap;
    ap.space = MemSpace::sbuf;
    ap.buffer = 0;
    ap.partitions = 128;
    ap.num_free = 1;
    ap.free[0] = {512, 1};
    in.dst = in.src[0] = ap;
    ap.offset = 512;
    in.src[1] = ap;
    in.node = 0;
    in.signals.push_back({0, 1});
    vec.instructions.push_back(in);
    Instruction act;
    act.op = Opcode::activation;
    act.act = ActFn::exp;
    act.dst = act.src[0] = in.src[1];
    act.waits.push_back({0, i + 1});
    sc.instructions.push_back(act);
  }
  p.streams = {vec, sc};
  return p;
}

void BM_VerifyPlan(benchmark::State& state) {
  Plan p = make_plan(static_cast<int>(state.range(0)));
  ArchSpec arch;
  for (auto _ : state) benchmark::DoNotOptimize(verify(p, arch));
  state.SetItemsProcessed(state.iterations() * p.instruction_count());
}
BENCHMARK(BM_VerifyPlan)->Arg(1 << 14);

void BM_ParsePlanJson(benchmark::State& state) {
  PlanSequence seq{{make_plan(static_cast<int>(state.range(0)))}};
  std::string text = format_json(to_json(seq));
  for (auto _ : state) benchmark::DoNotOptimize(plan_sequence_from_json(Json::parse(text)));
  state.SetItemsProcessed(state.iterations() * seq.plans[0].instruction_count());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParsePlanJson)->Arg(1 << 12);

// Issue 23p: a dropped plan body is packed, and unpacked on its next hit (compile_cache.h);
// the counters give the packed bytes per instruction against sizeof(Instruction).
void BM_PackPlan(benchmark::State& state) {
  Plan p = make_plan(static_cast<int>(state.range(0)));
  int64_t bytes = 0;
  for (auto _ : state) {
    PackedPlan pk(p);
    bytes = pk.instruction_bytes();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * p.instruction_count());
  state.counters["packed_bytes_per_instruction"] =
      static_cast<double>(bytes) / static_cast<double>(p.instruction_count());
  state.counters["instruction_bytes"] = sizeof(Instruction);
}
BENCHMARK(BM_PackPlan)->Arg(1 << 14);

void BM_UnpackPlan(benchmark::State& state) {
  const PackedPlan pk(make_plan(static_cast<int>(state.range(0))));
  for (auto _ : state) benchmark::DoNotOptimize(pk.unpack());
  state.SetItemsProcessed(state.iterations() * pk.instruction_count());
}
BENCHMARK(BM_UnpackPlan)->Arg(1 << 14);

// Issue 20, defect 20: reading was quadratic in declared semaphores and tensors (40k: 3.6 s /
// 4.6 s). A plan declaring n of each; the complexity fit must come out O(n).
std::string declarations_plan(int n) {
  Json sems = Json::array(), tensors = Json::array();
  for (int i = 0; i < n; ++i) {
    sems.push_back("s" + std::to_string(i));
    tensors.push_back({{"name", "t" + std::to_string(i)},
                       {"space", "hbm"},
                       {"dtype", "fp32"},
                       {"shape", {4}},
                       {"role", "input"}});
  }
  Json plan = {
      {"name", "decls"}, {"semaphores", sems}, {"tensors", tensors}, {"streams", Json::array()}};
  Json j = {
      {"format", "wallsim-plan"}, {"version", kPlanFormatVersion}, {"plans", Json::array({plan})}};
  return j.dump();
}

void BM_ReadPlanDeclarations(benchmark::State& state) {
  const std::string text = declarations_plan(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(plan_sequence_from_json(base::parse_json(text, "bench")));
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ReadPlanDeclarations)->RangeMultiplier(4)->Range(1 << 10, 1 << 16)->Complexity();

// The strict reader (depth, duplicate keys) against the plain parse: both linear in the text.
void BM_StrictJsonParse(benchmark::State& state) {
  const std::string text = declarations_plan(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(base::parse_json(text, "bench"));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_StrictJsonParse)->RangeMultiplier(4)->Range(1 << 10, 1 << 16)->Complexity();

}  // namespace
}  // namespace wallsim::isa

BENCHMARK_MAIN();
