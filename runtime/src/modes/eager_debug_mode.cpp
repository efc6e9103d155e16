// eager-debug: strict eager with every op synchronous (the host waits for each op to finish),
// as a debugging eager runtime does.
#include "mode_util.h"

namespace wallsim::runtime {
namespace {

class EagerDebugMode final : public modes::PerOpMode {
 public:
  std::string_view name() const override { return "eager-debug"; }
  std::string_view help() const override { return "eager, every op synchronous"; }
  std::string_view family() const override { return "eager"; }
  bool sync_every_op() const override { return true; }
};

}  // namespace

const ExecutionMode& eager_debug_mode() {
  static const EagerDebugMode kMode;
  return kMode;
}

}  // namespace wallsim::runtime
