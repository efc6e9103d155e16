// Consistency checks across the chip's config sections.
#include "wallsim/sim/chip_config.h"

namespace wallsim::sim {

void check_consistency(const ChipConfig& chip) {
  if (chip.name.empty()) throw isa::InputError("name", "expected a non-empty chip name");
  isa::check_consistency(chip.arch, "arch");
}

}  // namespace wallsim::sim
