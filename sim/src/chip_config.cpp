// Consistency checks across the chip's config sections.
#include "wallsim/sim/chip_config.h"

#include <stdexcept>

#include "wallsim/memory/bandwidth_share.h"

namespace wallsim::sim {

void check_consistency(const ChipConfig& chip) {
  if (chip.name.empty()) throw base::InputError("name", "expected a non-empty chip name");
  isa::check_consistency(chip.arch, "arch");
  for (isa::Engine e : chip.timing.shared_sbuf_port) {
    if (e == isa::Engine::dma) {
      throw base::InputError("timing.shared_sbuf_port", "lists compute engines only, not dma");
    }
  }
  try {
    memory::make_bandwidth_share(chip.timing.hbm.sharing);
  } catch (const std::invalid_argument& e) {
    throw base::InputError("timing.hbm.sharing", e.what());
  }
}

}  // namespace wallsim::sim
