// The compile-cost model.
#include "wallsim/compiler_stub/cost_model.h"

namespace wallsim::compiler_stub {

std::string_view name_of(CompileProfile p) { return p == CompileProfile::xla ? "xla" : "neuron"; }

const CompileCostCurve& CompileCostProfile::curve(CompileKind k) const {
  switch (k) {
    case CompileKind::per_op:
      return per_op;
    case CompileKind::micro_graph:
      return micro_graph;
    case CompileKind::whole_graph:
      return whole_graph;
  }
  return whole_graph;
}

double compile_latency_ms(const CompileCostCurve& c, int64_t nodes, int64_t instructions) {
  return c.fixed_ms + c.per_node_ms * double(nodes) +
         c.per_instruction_us * double(instructions) / 1000.0;
}

}  // namespace wallsim::compiler_stub
