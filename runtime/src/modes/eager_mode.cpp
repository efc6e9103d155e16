// eager: strict eager on a dataflow chip. Each op is its own plan: signature, cache lookup, a
// per-op compile on a miss, a plan launch.
#include "mode_util.h"
#include "wallsim/runtime/execution_mode.h"

namespace wallsim::runtime {
namespace {

class EagerMode final : public ExecutionMode {
 public:
  std::string_view name() const override { return "eager"; }
  std::string_view help() const override { return "each op compiled on first sight and cached"; }
  OpCost op_cost(const RuntimeConfig& r) const override { return {r.dispatch_ns_per_op, 0}; }
  const char* flush_after_op(int64_t, const RuntimeConfig&) const override { return "op"; }
  std::vector<std::vector<int32_t>> cut(const std::vector<int32_t>& ops,
                                        const compiler_stub::Graph&,
                                        const RuntimeConfig&) const override {
    return modes::one_group_per_op(ops);
  }
  bool is_baseline() const override { return true; }
  compiler_stub::CompileKind compile_kind() const override {
    return compiler_stub::CompileKind::per_op;
  }
};

}  // namespace

const ExecutionMode& eager_mode() {
  static const EagerMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
