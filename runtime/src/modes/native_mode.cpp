// native: the GPU-like reference. Each op runs at once as a library kernel that exists for
// every shape: no compile, no cache, a kernel launch per op.
#include "mode_util.h"
#include "wallsim/runtime/execution_mode.h"

namespace wallsim::runtime {
namespace {

class NativeMode final : public ExecutionMode {
 public:
  std::string_view name() const override { return "native"; }
  std::string_view help() const override { return "GPU-like: a library kernel per op, no compile"; }
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
  bool compiles() const override { return false; }
  int64_t launch_ns(const RuntimeConfig& r) const override { return r.kernel_launch_ns; }
};

}  // namespace

const ExecutionMode& native_mode() {
  static const NativeMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
