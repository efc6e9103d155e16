// The compile-cost model.
#include "wallsim/compiler_stub/cost_model.h"

#include <cmath>

namespace wallsim::compiler_stub {

std::string_view name_of(CompileProfile p) { return p == CompileProfile::xla ? "xla" : "neuron"; }

double compile_latency_ms(const CompileCostCurve& c, const CompileWork& w) {
  const double nodes = double(w.nodes);
  const double node_term = c.node_exponent == 1.0 ? nodes : std::pow(nodes, c.node_exponent);
  return c.fixed_ms + c.per_node_ms * node_term +
         c.per_instruction_us * double(w.instructions) / 1000.0 +
         c.per_spill_mib_ms * double(w.spill_bytes) / double(1 << 20);
}

}  // namespace wallsim::compiler_stub
