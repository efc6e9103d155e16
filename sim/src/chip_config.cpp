// Consistency checks across the chip's config sections.
#include "wallsim/sim/chip_config.h"

namespace wallsim::sim {

void check_consistency(const ChipConfig& chip) {
  if (chip.name.empty()) throw base::InputError("name", "expected a non-empty chip name");
  isa::check_consistency(chip.arch, "arch");
  for (isa::Engine e : chip.timing.shared_sbuf_port) {
    if (e == isa::Engine::dma) {
      throw base::InputError("timing.shared_sbuf_port", "lists compute engines only, not dma");
    }
  }
}

}  // namespace wallsim::sim
