#include "wallsim/compiler_stub/estimate.h"

#include <cmath>

namespace wallsim::compiler_stub {

int64_t min_plan_instructions(const Graph& g, const std::vector<int32_t>& nodes,
                              const isa::ArchSpec& arch) {
  double macs = 0;
  for (int32_t id : nodes) {
    const Node& n = *g.find(id);
    if (n.op != OpKind::matmul && n.op != OpKind::batch_matmul) continue;
    double out = 1;
    for (const Dim& d : n.type.dims) out *= double(d.size);
    macs += out * double(g.find(n.inputs[0])->type.dims.back().size);
  }
  const double per_instruction =
      double(arch.tensor.rows) * double(arch.tensor.cols) * double(arch.tensor.moving_free_max);
  const double n = std::ceil(macs / per_instruction);
  return n >= 9e18 ? INT64_MAX : static_cast<int64_t>(n);
}

}  // namespace wallsim::compiler_stub
