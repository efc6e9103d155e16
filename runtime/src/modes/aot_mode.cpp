// aot: ahead-of-time, whole graph. The step is traced and compiled per shape bucket before the
// first step; a step records its ops at no host cost, finds its bucket's plan by the shapes of
// its inputs (no graph hash) and launches it; dynamic extents are padded up to their bucket;
// plans may persist in an on-disk cache.
#include "wallsim/runtime/execution_mode.h"

namespace wallsim::runtime {
namespace {

class AotMode final : public ExecutionMode {
 public:
  std::string_view name() const override { return "aot"; }
  std::string_view help() const override {
    return "whole step compiled per shape bucket at start-up, inputs padded to their bucket";
  }
  OpCost op_cost(const RuntimeConfig&) const override { return {0, 0}; }
  const char* flush_after_op(int64_t, const RuntimeConfig&) const override { return nullptr; }
  std::vector<std::vector<int32_t>> cut(const OpStream& s) const override { return {s.ops}; }
  PlanKey plan_key() const override { return PlanKey::input_shapes; }
  bool uses_disk_cache() const override { return true; }
  bool compiles_ahead() const override { return true; }
  bool pads_shapes() const override { return true; }
  bool pre_lays_constants() const override { return true; }
};

}  // namespace

const ExecutionMode& aot_mode() {
  static const AotMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
