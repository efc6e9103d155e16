// compiler_stub speed: compiling a GPT-2-small layer, and computing a group's signature (the
// key of every compile-cache lookup, paid on every dispatch in a lazy runtime).
#include <benchmark/benchmark.h>

#include <string>

#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/signature.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

// The transformer-block example: GPT-2 small (d_model 768, 12 heads, d_ff 3072) at seq 512. At
// seq 1024 its attention scores no longer fit SBUF, and spilling is not implemented yet.
Graph gpt2_layer() {
  Graph g = read_graph_file(WALLSIM_SOURCE_DIR "/examples/graphs/transformer_block.json");
  infer_types(g);
  return g;
}

void BM_CompileGpt2Layer(benchmark::State& state) {
  const Graph g = gpt2_layer();
  const isa::ArchSpec arch;  // trn2 defaults
  const auto policy = state.range(0) ? GroupPolicy::per_op : GroupPolicy::whole;
  for (auto _ : state) {
    auto r = compile_graph(g, arch, policy);
    if (!std::holds_alternative<CompiledGraph>(r)) {
      state.SkipWithError(std::get<CompileError>(r).message().c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_CompileGpt2Layer)->Arg(0)->Arg(1)->ArgName("per_op")->Unit(benchmark::kMillisecond);

void BM_GroupSignature20Ops(benchmark::State& state) {
  std::string text = R"({"format": "wallsim-graph", "version": 1, "name": "chain", "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "bf16", "shape": [512, 768], "role": "input"})";
  for (int i = 1; i <= 20; ++i) {
    text += ", {\"id\": " + std::to_string(i) + ", \"op\": \"" + (i % 2 ? "gelu" : "exp") +
            "\", \"inputs\": [" + std::to_string(i - 1) + "]}";
  }
  text += "], \"outputs\": [20]}";
  Graph g = graph_from_json(isa::Json::parse(text));
  infer_types(g);
  std::vector<int32_t> group;
  for (int i = 1; i <= 20; ++i) group.push_back(i);
  const uint64_t arch = arch_fingerprint(isa::ArchSpec{});
  for (auto _ : state) benchmark::DoNotOptimize(group_signature(g, group, arch));
}
BENCHMARK(BM_GroupSignature20Ops)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace wallsim::compiler_stub

BENCHMARK_MAIN();
