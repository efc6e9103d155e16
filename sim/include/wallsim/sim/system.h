// System: the simulated hardware — chips of cores joined by one bandwidth network — elaborated
// from configuration. Every binding between its parts happens in system.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "wallsim/dma/network.h"
#include "wallsim/memory/tensor_store.h"
#include "wallsim/sim/chip_config.h"
#include "wallsim/sim/core.h"

namespace wallsim::sim {

// A chip: its cores, its off-chip tensor store (HBM, and host memory as the cores see it) and
// its shared resources in the network.
struct Chip {
  int index = 0;
  int hbm = -1;        // network resource: the chip's HBM
  int host_link = -1;  // network resource: its link to host memory
  memory::TensorStore tensors;
  std::vector<std::unique_ptr<Core>> cores;
};

class System {
 public:
  // The one-core view: one chip of one core elaborated from `chip`, named `core_name` (the
  // SystemC module name; "device" as wallsim has always run), reporting stats under "device."
  // and tracing as process 1 "core0". Its results are those of the single-core simulator.
  System(const ChipConfig& chip, CoreOptions options, const std::string& core_name = "device");
  ~System();
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  size_t chips() const { return m_chips.size(); }
  Chip& chip(size_t i) { return *m_chips.at(i); }
  Core& core(size_t chip = 0, size_t core = 0) { return *m_chips.at(chip)->cores.at(core); }
  dma::Network& network() { return *m_network; }

 private:
  std::unique_ptr<dma::Network> m_network;
  std::vector<std::unique_ptr<Chip>> m_chips;
};

}  // namespace wallsim::sim
