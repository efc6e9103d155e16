#include "wallsim/compiler_stub/estimate.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace wallsim::compiler_stub {

// What a group must hold in HBM whatever the lowering does: the graph inputs it reads and the
// graph outputs it writes (at their bounds; unknown sizes count 0). Checked before lowering,
// which takes long and much memory on a graph far over capacity.
int64_t min_hbm_bytes(const Graph& g, const std::vector<int32_t>& group) {
  std::unordered_map<int32_t, const Node*> by_id;
  for (const Node& n : g.nodes) by_id[n.id] = &n;
  std::unordered_set<int32_t> counted;
  int64_t bytes = 0;
  auto add = [&](int32_t id) {
    auto it = by_id.find(id);
    if (it == by_id.end() || !counted.insert(id).second) return;
    const int64_t e = it->second->type.elements();
    const int64_t b = e > 0 ? e * isa::dtype_bytes(it->second->type.dtype) : 0;
    bytes = b > INT64_MAX - bytes ? INT64_MAX : bytes + b;
  };
  std::unordered_set<int32_t> in_group(group.begin(), group.end());
  for (int32_t id : group) {
    auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    for (int32_t x : it->second->inputs) {
      auto in = by_id.find(x);
      if (in != by_id.end() && in->second->op == OpKind::input) add(x);
    }
  }
  for (int32_t id : g.outputs) {
    if (in_group.count(id)) add(id);
  }
  return bytes;
}

int64_t min_plan_instructions(const Graph& g, const std::vector<int32_t>& nodes,
                              const isa::ArchSpec& arch) {
  double macs = 0;
  for (int32_t id : nodes) macs += node_macs(g, *g.find(id));
  const double per_instruction =
      double(arch.tensor.rows) * double(arch.tensor.cols) * double(arch.tensor.moving_free_max);
  const double n = std::ceil(macs / per_instruction);
  return n >= 9e18 ? INT64_MAX : static_cast<int64_t>(n);
}

int64_t min_compile_host_bytes(const Graph& g, const std::vector<int32_t>& nodes,
                               const isa::ArchSpec& arch) {
  const int64_t n = min_plan_instructions(g, nodes, arch);
  return n > INT64_MAX / kHostBytesPerInstruction ? INT64_MAX : n * kHostBytesPerInstruction;
}

}  // namespace wallsim::compiler_stub
