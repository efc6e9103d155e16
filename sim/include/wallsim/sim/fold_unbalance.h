// Tests only: makes one chip of a system folded across chips (System::fold) see traffic the
// others do not, so that the fold's exactness check (System::fold_mismatch) fires.
#pragma once

#include "wallsim/sim/system.h"

namespace wallsim::sim {

// Starts, at time 0, a 64 MiB transfer over chip `chip`'s HBM from its last core (which a folded
// run leaves idle); chip 0 does not see it, so the mirrors of chip 0's transfers on `chip`
// finish late. Before the simulation starts. Throws std::invalid_argument for a chip outside
// 1 .. chips-1.
void unbalance_chip_for_test(System& system, int chip);

}  // namespace wallsim::sim
