// eager: strict eager on a dataflow chip. Each op is its own plan: signature, cache lookup, a
// per-op compile on a miss, a plan launch.
#include "mode_util.h"

namespace wallsim::runtime {
namespace {

class EagerMode final : public modes::PerOpMode {
 public:
  std::string_view name() const override { return "eager"; }
  std::string_view help() const override { return "each op compiled on first sight and cached"; }
  bool is_baseline() const override { return true; }
};

}  // namespace

const ExecutionMode& eager_mode() {
  static const EagerMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
