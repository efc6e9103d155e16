// fused: fused eager (lazy tensor). Ops are recorded; a flush (value read, step marker, buffer
// limit) cuts the pending graph into fusion groups, each compiled (micro-graph curve) on a miss.
#include <set>

#include "wallsim/runtime/execution_mode.h"

namespace wallsim::runtime {
namespace {

class FusedMode final : public ExecutionMode {
 public:
  std::string_view name() const override { return "fused"; }
  std::string_view help() const override {
    return "lazy: ops recorded, cut into fusion groups at a flush, each compiled and cached";
  }
  OpCost op_cost(const RuntimeConfig& r) const override {
    return {r.dispatch_ns_per_op, r.lazy.record_ns_per_op};
  }
  const char* flush_after_op(int64_t pending_ops, const RuntimeConfig& r) const override {
    return pending_ops >= r.lazy.max_pending_ops ? "buffer limit" : nullptr;
  }
  // In program order; a not_fusible op stands alone; a group closes at max_group_ops.
  std::vector<std::vector<int32_t>> cut(const std::vector<int32_t>& ops,
                                        const compiler_stub::Graph& pending,
                                        const RuntimeConfig& r) const override {
    const auto& lazy = r.lazy;
    const std::set<compiler_stub::OpKind> alone(lazy.not_fusible.begin(), lazy.not_fusible.end());
    std::vector<std::vector<int32_t>> groups;
    std::vector<int32_t> group;
    for (int32_t id : ops) {
      const bool solo = alone.count(pending.find(id)->op) > 0;
      if (!group.empty() && (solo || (lazy.max_group_ops > 0 &&
                                      static_cast<int64_t>(group.size()) >= lazy.max_group_ops))) {
        groups.push_back(std::move(group));
        group.clear();
      }
      group.push_back(id);
      if (solo) {
        groups.push_back(std::move(group));
        group.clear();
      }
    }
    if (!group.empty()) groups.push_back(std::move(group));
    return groups;
  }
  compiler_stub::CompileKind compile_kind() const override {
    return compiler_stub::CompileKind::micro_graph;
  }
  bool falls_back() const override { return true; }
};

}  // namespace

const ExecutionMode& fused_mode() {
  static const FusedMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
