// eager-debug: strict eager with every op synchronous (the host waits for each op to finish),
// as a debugging eager runtime does.
#include "mode_util.h"
#include "wallsim/runtime/execution_mode.h"

namespace wallsim::runtime {
namespace {

class EagerDebugMode final : public ExecutionMode {
 public:
  std::string_view name() const override { return "eager-debug"; }
  std::string_view help() const override { return "eager, every op synchronous"; }
  std::string_view family() const override { return "eager"; }
  OpCost op_cost(const RuntimeConfig& r) const override { return {r.dispatch_ns_per_op, 0}; }
  const char* flush_after_op(int64_t, const RuntimeConfig&) const override { return "op"; }
  bool sync_every_op() const override { return true; }
  std::vector<std::vector<int32_t>> cut(const std::vector<int32_t>& ops,
                                        const compiler_stub::Graph&,
                                        const RuntimeConfig&) const override {
    return modes::one_group_per_op(ops);
  }
  compiler_stub::CompileKind compile_kind() const override {
    return compiler_stub::CompileKind::per_op;
  }
};

}  // namespace

const ExecutionMode& eager_debug_mode() {
  static const EagerDebugMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
