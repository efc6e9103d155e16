// The compile-cost model: how long the emulated production compiler takes for a group. An input
// of the study, not something a simulator can discover — so every figure is a config value
// with a cited source (configs/README.md), chosen by a named profile and fitted by
// tools/fit_compile_cost.py (docs/CALIBRATION.md).
#pragma once

#include <cstdint>

#include "wallsim/base/params.h"

namespace wallsim::compiler_stub {

// The work a compile does: the graph's nodes, the instructions it is lowered to, and the bytes
// it spills because its working set exceeds SBUF (scheduling and spilling work).
struct CompileWork {
  int64_t nodes = 0;
  int64_t instructions = 0;
  int64_t spill_bytes = 0;
};

// latency_ms = fixed_ms + per_node_ms * nodes^node_exponent
//              + per_instruction_us * instructions / 1000 + per_spill_mib_ms * spilled MiB
// The same graph costs the same whoever compiles it (strict eager, fused or AOT): the fixed
// cost of one compiler invocation belongs to the profile, not to the execution mode.
struct CompileCostCurve {
  double fixed_ms = 0;
  double per_node_ms = 0;
  double node_exponent = 1;
  double per_instruction_us = 0;
  double per_spill_mib_ms = 0;
};

enum class CompileProfile : uint8_t { neuron, xla };
std::string_view name_of(CompileProfile p);

struct CompileCostConfig {
  CompileProfile profile = CompileProfile::neuron;
  // Neuron-like (neuronx-cc): a ~10 s invocation, then instructions dominate (fitted).
  CompileCostCurve neuron{9197, 0, 1, 1170, 0};
  // XLA-like (PyTorch/XLA): milliseconds per invocation, ~1.75 ms per IR node (fitted).
  CompileCostCurve xla{5, 1.754, 1, 0, 0};
  const CompileCostCurve& active() const { return profile == CompileProfile::xla ? xla : neuron; }
};

// Modelled compile latency in milliseconds.
double compile_latency_ms(const CompileCostCurve& curve, const CompileWork& work);

template <class V>
void describe(V& v, CompileCostCurve& c) {
  v.field("fixed_ms", c.fixed_ms, {0.0, 1e9}, "ms", "fixed cost of one compiler invocation");
  v.field("per_node_ms", c.per_node_ms, {0.0, 1e6}, "ms",
          "per graph node (raised to node_exponent)");
  v.field("node_exponent", c.node_exponent, {1.0, 3.0}, "",
          "exponent of the node term: 1 linear, above 1 superlinear");
  v.field("per_instruction_us", c.per_instruction_us, {0.0, 1e9}, "us",
          "per instruction of the lowered plan");
  v.field("per_spill_mib_ms", c.per_spill_mib_ms, {0.0, 1e9}, "ms",
          "per MiB spilled to HBM because the working set exceeds SBUF");
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
