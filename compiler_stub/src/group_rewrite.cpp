// A group copied out of its graph for a rewrite before lowering (group_rewrite.h).
#include "group_rewrite.h"

namespace wallsim::compiler_stub {

GroupGraph extract_group(const Graph& g, const std::vector<int32_t>& group, const GraphUses& uses) {
  GroupGraph r;
  r.group = group;
  r.graph.name = g.name;
  r.graph.scalars = g.scalars;
  const std::set<int32_t> in_group(group.begin(), group.end());
  std::set<int32_t> ids(group.begin(), group.end());
  // A value read from outside, and the in-place chain behind it (value_name follows it).
  auto add_read = [&](int32_t id) {
    for (const Node* n = g.find(id); n && ids.insert(id).second; n = g.find(id)) {
      if (info(n->op).result != OpResult::in_place || n->inputs.empty()) return;
      id = n->inputs[0];
    }
  };
  for (int32_t id : group) {
    if (const Node* n = g.find(id)) {
      for (int32_t in : n->inputs) add_read(in);
    }
  }
  r.graph.nodes.reserve(ids.size());
  for (int32_t id : ids) {
    if (const Node* n = g.find(id)) r.graph.nodes.push_back(*n);
  }
  for (int32_t id : group) {
    const auto& readers = uses.consumers(id);
    bool outside = uses.is_output(id);
    for (int32_t c : readers) outside = outside || !in_group.count(c);
    if (outside) r.graph.outputs.push_back(id);
  }
  return r;
}

}  // namespace wallsim::compiler_stub
