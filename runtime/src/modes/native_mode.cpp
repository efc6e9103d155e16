// native: the GPU-like reference. Each op runs at once as a library kernel that exists for
// every shape: no compile, no cache, a kernel launch per op.
#include "mode_util.h"

namespace wallsim::runtime {
namespace {

class NativeMode final : public modes::PerOpMode {
 public:
  std::string_view name() const override { return "native"; }
  std::string_view help() const override { return "GPU-like: a library kernel per op, no compile"; }
  bool is_baseline() const override { return true; }
  bool compiles() const override { return false; }
  int64_t launch_ns(const RuntimeConfig& r) const override { return r.kernel_launch_ns; }
  bool pre_lays_constants() const override { return true; }
};

}  // namespace

const ExecutionMode& native_mode() {
  static const NativeMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
