// fused: fused eager (lazy tensor). Ops are recorded; a flush (value read, step marker, buffer
// limit) cuts the pending graph into fusion groups by the materialization heuristics of
// runtime.lazy.heuristics (materialize.h), each group compiled on a miss.
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
  std::vector<std::vector<int32_t>> cut(const OpStream& s) const override {
    return plan_cuts(s, s.lazy.heuristics).groups(s.ops);
  }
  bool falls_back() const override { return true; }
  bool pre_lays_constants() const override { return true; }
};

}  // namespace

const ExecutionMode& fused_mode() {
  static const FusedMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
