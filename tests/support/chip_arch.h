// The ArchSpec tests compile for: the default chip's (trn2's), its cost hints derived from its
// timing as a loaded config's are (a default-constructed ArchSpec has none: the compiler refuses
// it).
#pragma once

#include "wallsim/sim/chip_config.h"

namespace wallsim::test {

inline isa::ArchSpec trn2_arch() { return sim::ChipConfig().arch; }

}  // namespace wallsim::test
