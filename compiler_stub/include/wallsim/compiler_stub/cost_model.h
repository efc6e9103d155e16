// The compile-cost model: how long the emulated production compiler takes for a group. An input
// of the study, not something a simulator can discover — so every figure is a config value
// with a cited source (configs/README.md), chosen by a named profile.
#pragma once

#include <cstdint>

#include "wallsim/base/params.h"

namespace wallsim::compiler_stub {

// latency = fixed_ms + per_node_ms * graph nodes + per_instruction_us * plan instructions / 1000
struct CompileCostCurve {
  double fixed_ms = 0;
  double per_node_ms = 0;
  double per_instruction_us = 0;
};

// What is compiled: one op (strict eager), a micro-graph cut at a flush (fused eager), or a
// whole step (AOT).
enum class CompileKind : uint8_t { per_op, micro_graph, whole_graph };

struct CompileCostProfile {
  CompileCostCurve per_op;
  CompileCostCurve micro_graph;
  CompileCostCurve whole_graph;
  const CompileCostCurve& curve(CompileKind k) const;
};

enum class CompileProfile : uint8_t { neuron, xla };
std::string_view name_of(CompileProfile p);

struct CompileCostConfig {
  CompileProfile profile = CompileProfile::neuron;
  // Neuron-like: every compile runs the full compiler, whose fixed cost dominates small graphs.
  CompileCostProfile neuron{{10000, 1.7, 0}, {10000, 1.7, 0}, {10000, 1.7, 0}};
  // XLA-like: a cheap in-process compile for small graphs; the same per-node slope for big ones.
  CompileCostProfile xla{{2, 1.75, 0}, {5, 1.75, 0}, {500, 1.75, 0}};
  const CompileCostProfile& active() const { return profile == CompileProfile::xla ? xla : neuron; }
};

// Modelled compile latency in milliseconds.
double compile_latency_ms(const CompileCostCurve& curve, int64_t nodes, int64_t instructions);

template <class V>
void describe(V& v, CompileCostCurve& c) {
  v.field("fixed_ms", c.fixed_ms, {0.0, 1e9}, "ms", "fixed cost of one compiler invocation");
  v.field("per_node_ms", c.per_node_ms, {0.0, 1e6}, "ms", "added per graph node compiled");
  v.field("per_instruction_us", c.per_instruction_us, {0.0, 1e6}, "us",
          "added per instruction of the emitted plan");
}
template <class V>
void describe(V& v, CompileCostProfile& p) {
  v.section("per_op", p.per_op, "one op compiled on its own (strict eager)");
  v.section("micro_graph", p.micro_graph, "a group cut at a flush (fused eager)");
  v.section("whole_graph", p.whole_graph, "a whole step, per shape bucket (AOT)");
}
template <class V>
void describe(V& v, CompileCostConfig& c) {
  v.field("profile", c.profile, "which profile's latencies are charged");
  v.section("neuron", c.neuron, "Neuron-like compiler (neuronx-cc)");
  v.section("xla", c.xla, "XLA-like compiler (PyTorch/XLA)");
}

}  // namespace wallsim::compiler_stub

namespace wallsim::base {
template <>
struct EnumTraits<compiler_stub::CompileProfile> {
  static constexpr int kCount = 2;
};
}  // namespace wallsim::base
