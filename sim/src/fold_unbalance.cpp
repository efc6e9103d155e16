// Tests only: one chip of a folded system loaded with traffic the others do not see.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "wallsim/sim/fold_unbalance.h"

#include <stdexcept>
#include <string>
#include <systemc>

#include "wallsim/dma/network.h"

namespace wallsim::sim {

void unbalance_chip_for_test(System& system, int chip) {
  if (chip < 1 || static_cast<size_t>(chip) >= system.chips()) {
    throw std::invalid_argument("names none of the system's chips 1 .. " +
                                std::to_string(system.chips() - 1));
  }
  dma::Network::Move move;
  move.key = {chip, static_cast<int>(system.cores_per_chip()) - 1, 0};
  move.bytes = 64.0 * (1 << 20);
  move.uses = {{system.chip(static_cast<size_t>(chip)).hbm, 1.0}};
  dma::Network& network = system.network();
  sc_core::sc_spawn([&network, move] { network.transfer_all({move}); }, "fold_test_unbalance");
}

}  // namespace wallsim::sim
