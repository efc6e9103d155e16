// Lowering order: KV-cache writes moved up (see cache_write_order.h).
#include "lowering/cache_write_order.h"

#include <algorithm>

namespace wallsim::compiler_stub::lowering {

std::vector<int32_t> hoist_cache_writes(const Graph& g, const std::vector<int32_t>& group,
                                        const GraphUses& uses) {
  std::vector<int32_t> order = group;
  auto position = [&](int32_t id) {
    auto it = std::find(order.begin(), order.end(), id);
    return it == order.end() ? -1 : static_cast<int>(it - order.begin());
  };
  int next = 0;  // moved ones keep their order: each goes after the one moved before it
  for (int32_t id : group) {
    const Node* d = g.find(id);
    if (!d || d->op != OpKind::dynamic_update_slice || d->inputs.size() != 2) continue;
    const int32_t cache = d->inputs[0], update = d->inputs[1];
    const Node* u = g.find(update);
    const int pu = position(update);
    if (!u || u->op == OpKind::input || pu < 0 || uses.consumers(cache).size() != 1) continue;
    int target = std::max(next, position(cache) + 1);
    for (int32_t in : u->inputs) target = std::max(target, position(in) + 1);
    if (target >= pu) {  // the update stays; its write follows it at once
      next = pu + 1;
      if (position(id) > next) {
        order.erase(order.begin() + position(id));
        order.insert(order.begin() + next, id);
      }
      ++next;
      continue;
    }
    order.erase(order.begin() + position(id));
    order.erase(order.begin() + pu);
    order.insert(order.begin() + target, {update, id});
    next = target + 2;
  }
  return order;
}

}  // namespace wallsim::compiler_stub::lowering
