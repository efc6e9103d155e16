// compiler_stub speed: compiling a GPT-2-small layer, compile time against node count (a relu
// chain, to show it grows linearly), building a plan's streams and semaphores, and computing a
// group's signature (the key of every compile-cache lookup, paid on every dispatch in a lazy
// runtime).
#include <benchmark/benchmark.h>

#include <fstream>
#include <iterator>
#include <string>

#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/plan_builder.h"
#include "wallsim/compiler_stub/signature.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/sim/chip_config.h"

namespace wallsim::compiler_stub {
namespace {

// The transformer-block example: GPT-2 small (d_model 768, 12 heads, d_ff 3072) at seq 512,
// or at `seq` (every 512 in the file is the sequence length). At seq 1024 the attention
// scores (24 MiB) exceed SBUF: they stream through HBM in row windows.
Graph gpt2_layer(int seq) {
  std::ifstream in(WALLSIM_SOURCE_DIR "/examples/graphs/transformer_block.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::string from = "512", to = std::to_string(seq);
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  Graph g = graph_from_json(base::Json::parse(text));
  infer_types(g);
  return g;
}

void BM_CompileGpt2Layer(benchmark::State& state) {
  const Graph g = gpt2_layer(static_cast<int>(state.range(1)));
  const isa::ArchSpec arch = sim::ChipConfig().arch;  // trn2, its cost hints from its timing
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
BENCHMARK(BM_CompileGpt2Layer)
    ->ArgsProduct({{0, 1}, {512, 1024}})
    ->ArgNames({"per_op", "seq"})
    ->Unit(benchmark::kMillisecond);

// One layer's decode attention at serving shapes: `B` sequences of `L` keys gathered from a
// pool of 32 x 1024 rows, GPT-2-small width (768, 12 heads), a length-mask bias.
void BM_CompileDecodeAttention(benchmark::State& state) {
  const int64_t B = state.range(0), L = state.range(1);
  const std::string shape2 = [](int64_t a, int64_t b) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + "]";
  }(B, L);
  const std::string text = R"({"format": "wallsim-graph", "version": 1, "name": "attn", "nodes": [
    {"id": 0, "op": "input", "name": "q", "dtype": "bf16", "shape": [)" +
                           std::to_string(B) + R"(, 768], "role": "input"},
    {"id": 1, "op": "input", "name": "k", "dtype": "bf16", "shape": [32768, 768], "role": "input"},
    {"id": 2, "op": "input", "name": "v", "dtype": "bf16", "shape": [32768, 768], "role": "input"},
    {"id": 3, "op": "input", "name": "ids", "dtype": "int32", "shape": )" +
                           shape2 + R"(, "role": "input"},
    {"id": 4, "op": "input", "name": "bias", "dtype": "fp32", "shape": [)" +
                           std::to_string(B) + ", 12, " + std::to_string(L) +
                           R"(], "role": "input"},
    {"id": 5, "op": "decode_attention", "inputs": [0, 1, 2, 3, 4], "heads": 12}],
    "outputs": [5]})";
  Graph g = graph_from_json(base::Json::parse(text));
  infer_types(g);
  const isa::ArchSpec arch = sim::ChipConfig().arch;
  int64_t instructions = 0;
  for (auto _ : state) {
    auto r = compile_graph(g, arch, GroupPolicy::whole);
    if (!std::holds_alternative<CompiledGraph>(r)) {
      state.SkipWithError(std::get<CompileError>(r).message().c_str());
      return;
    }
    instructions = std::get<CompiledGraph>(r).groups.at(0).instructions;
    benchmark::DoNotOptimize(r);
  }
  state.counters["instructions"] = double(instructions);
}
BENCHMARK(BM_CompileDecodeAttention)
    ->ArgsProduct({{8, 32}, {256, 1024}})
    ->ArgNames({"batch", "keys"})
    ->Unit(benchmark::kMillisecond);

// A chain of `n` relus on one [128, 64] fp32 tile: one instruction per node, so any cost that
// grows faster than the node count (a scan of the graph per node) shows up directly.
Graph relu_chain(int64_t n) {
  Graph g;
  g.name = "chain";
  Node x;
  x.id = 0;
  x.op = OpKind::input;
  x.name = "x";
  x.type.dtype = isa::DType::fp32;
  x.type.dims = {Dim::of(128), Dim::of(64)};
  g.nodes.push_back(x);
  for (int32_t i = 1; i <= n; ++i) {
    Node r;
    r.id = i;
    r.op = OpKind::relu;
    r.inputs = {i - 1};
    g.nodes.push_back(r);
  }
  g.outputs = {static_cast<int32_t>(n)};
  infer_types(g);
  return g;
}

// The whole compile (partition, lowering, the plan verifier).
void BM_CompileReluChain(benchmark::State& state) {
  const Graph g = relu_chain(state.range(0));
  const isa::ArchSpec arch = sim::ChipConfig().arch;
  for (auto _ : state) {
    auto r = compile_graph(g, arch, GroupPolicy::whole);
    if (!std::holds_alternative<CompiledGraph>(r)) {
      state.SkipWithError(std::get<CompileError>(r).message().c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_CompileReluChain)
    ->RangeMultiplier(2)
    ->Range(1250, 40000)
    ->Complexity()
    ->Unit(benchmark::kMillisecond);

// Lowering alone (no verifier): what compiler_stub's own passes cost per node.
void BM_LowerReluChain(benchmark::State& state) {
  const Graph g = relu_chain(state.range(0));
  const isa::ArchSpec arch = sim::ChipConfig().arch;
  const auto group = partition(g, GroupPolicy::whole).at(0);
  for (auto _ : state) {
    auto r = lower_group(g, group, arch, "chain");
    if (!std::holds_alternative<Lowered>(r)) {
      state.SkipWithError(std::get<CompileError>(r).message().c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_LowerReluChain)
    ->RangeMultiplier(2)
    ->Range(1250, 40000)
    ->Complexity()
    ->Unit(benchmark::kMillisecond);

void BM_GroupSignature20Ops(benchmark::State& state) {
  std::string text = R"({"format": "wallsim-graph", "version": 1, "name": "chain", "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "bf16", "shape": [512, 768], "role": "input"})";
  for (int i = 1; i <= 20; ++i) {
    text += ", {\"id\": " + std::to_string(i) + ", \"op\": \"" + (i % 2 ? "gelu" : "exp") +
            "\", \"inputs\": [" + std::to_string(i - 1) + "]}";
  }
  text += "], \"outputs\": [20]}";
  Graph g = graph_from_json(base::Json::parse(text));
  infer_types(g);
  std::vector<int32_t> group;
  for (int i = 1; i <= 20; ++i) group.push_back(i);
  const uint64_t arch = arch_fingerprint(sim::ChipConfig().arch);
  for (auto _ : state) benchmark::DoNotOptimize(group_signature(g, group, arch));
}
BENCHMARK(BM_GroupSignature20Ops)->Unit(benchmark::kMicrosecond);

// Issue 20, defect 19: a graph over HBM capacity was lowered in full before any check (65 s,
// 5.9 GB). A GEMM whose m grows past HBM: refused before lowering, so the time must not grow
// with m (the complexity fit: O(1)).
void BM_RejectGraphOverHbm(benchmark::State& state) {
  const int64_t m = state.range(0);
  const std::string text =
      R"({"format": "wallsim-graph", "version": 1, "name": "big", "nodes": [
        {"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": [)" +
      std::to_string(m) + R"(, 4096], "role": "input"},
        {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [4096, 4096],
         "role": "weight"},
        {"id": 2, "op": "matmul", "inputs": [0, 1], "name": "mm"}], "outputs": [2]})";
  Graph g = graph_from_json(base::parse_json(text, "bench"));
  infer_types(g);
  const isa::ArchSpec arch = sim::ChipConfig().arch;
  for (auto _ : state) {
    auto r = compile_graph(g, arch, GroupPolicy::whole);
    if (!std::holds_alternative<CompileError>(r)) state.SkipWithError("expected a refusal");
    benchmark::DoNotOptimize(r);
  }
  state.SetComplexityN(m);
}
BENCHMARK(BM_RejectGraphOverHbm)->RangeMultiplier(2)->Range(1 << 24, 1 << 27)->Complexity();

// Plan building alone (issue 39): PlanBuilder::emit then build() for a software pipeline over
// `n` tiles of 128 x 512 bf16: a DMA load into one of four SBUF tiles, a scalar activation into
// another, a vector copy out to one of two PSUM tiles and back, a DMA store. Every instruction
// depends on another engine, so each carries waits and most signal: the per-instruction
// semaphore lists are what this measures beside the instructions themselves.
isa::AccessPattern tile(isa::MemSpace space, int32_t buffer, int64_t offset) {
  isa::AccessPattern a;
  a.space = space;
  a.buffer = buffer;
  a.dtype = isa::DType::bf16;
  a.partitions = 128;
  a.offset = offset;
  a.num_free = 1;
  a.free[0] = {512, 1};
  if (!isa::is_on_chip(space)) a.partition_stride = 512;
  return a;
}

void BM_PlanBuilderPipeline(benchmark::State& state) {
  const int64_t n = state.range(0);
  using isa::MemSpace;
  for (auto _ : state) {
    PlanBuilder b("pipeline");
    const Slot in =
        b.add_tensor("x", MemSpace::hbm, isa::DType::bf16, {n * 128, 512}, isa::TensorRole::input);
    const Slot out =
        b.add_tensor("y", MemSpace::hbm, isa::DType::bf16, {n * 128, 512}, isa::TensorRole::output);
    Slot sb[4], ps[2];
    for (int k = 0; k < 4; ++k) sb[k] = b.add_buffer(MemSpace::sbuf, 0, 128, 1024 * k, 1024, "t");
    for (int k = 0; k < 2; ++k) ps[k] = b.add_buffer(MemSpace::psum, 0, 128, 2048 * k, 2048, "p");
    const int load = b.add_queue("load", 0), store = b.add_queue("store", 1);
    const int vec = b.stream(isa::Engine::vector), sc = b.stream(isa::Engine::scalar);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t a = sb[(2 * i) % 4].index, c = sb[(2 * i + 1) % 4].index;
      const int32_t p = ps[i % 2].index;
      isa::Instruction ld;
      ld.op = isa::Opcode::dma_copy;
      ld.dst = tile(MemSpace::sbuf, a, 0);
      ld.src[0] = tile(MemSpace::hbm, in.index, i * 128 * 512);
      b.emit(load, ld);
      isa::Instruction act;
      act.op = isa::Opcode::activation;
      act.act = isa::ActFn::gelu;
      act.dst = tile(MemSpace::sbuf, c, 0);
      act.src[0] = tile(MemSpace::sbuf, a, 0);
      b.emit(sc, act);
      isa::Instruction cp;
      cp.op = isa::Opcode::tensor_copy;
      cp.dst = tile(MemSpace::psum, p, 0);
      cp.dst.dtype = isa::DType::fp32;
      cp.src[0] = tile(MemSpace::sbuf, c, 0);
      b.emit(vec, cp);
      cp.dst = tile(MemSpace::sbuf, a, 0);
      cp.src[0] = tile(MemSpace::psum, p, 0);
      cp.src[0].dtype = isa::DType::fp32;
      b.emit(vec, cp);
      isa::Instruction st;
      st.op = isa::Opcode::dma_copy;
      st.dst = tile(MemSpace::hbm, out.index, i * 128 * 512);
      st.src[0] = tile(MemSpace::sbuf, a, 0);
      b.emit(store, st);
    }
    isa::Plan plan = b.build();
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * n * 5);
  state.counters["instruction_bytes"] = sizeof(isa::Instruction);
}
BENCHMARK(BM_PlanBuilderPipeline)->Arg(1 << 12)->Arg(1 << 15)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace wallsim::compiler_stub

BENCHMARK_MAIN();
