// System: the simulated hardware — chips of cores joined by links, one bandwidth network for
// every transfer — elaborated from configuration. Every binding happens in system.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/dma/network.h"
#include "wallsim/memory/tensor_store.h"
#include "wallsim/sim/chip_config.h"
#include "wallsim/sim/collective_engine.h"
#include "wallsim/sim/core.h"
#include "wallsim/sim/system_config.h"
#include "wallsim/sim/topology.h"

namespace wallsim::sim {

// A chip: its cores, its off-chip tensor store (HBM, and host memory as its cores see it) and
// its shared resources in the network.
struct Chip {
  int index = 0;
  int hbm = -1;        // network resource: the chip's HBM
  int host_link = -1;  // network resource: its link to host memory
  int cc_dma = -1;     // network resource: its collective DMA (-1 when not modelled)
  std::vector<std::vector<int>> dma_engines;  // per core: its DMA engines' network resources
  int trace_pid = 0;  // trace process of its HBM and link counters (0: none)
  memory::TensorStore tensors;
  std::vector<std::unique_ptr<Core>> cores;
};

class System {
 public:
  // The one-core view: one chip of one core elaborated from `chip`, named `core_name` (the
  // SystemC module name; "device" as wallsim has always run), reporting stats under "device."
  // and tracing as process 1 "core0". Its results are those of the single-core simulator.
  System(const ChipConfig& chip, CoreOptions options, const std::string& core_name = "device");
  // The whole system: system.chips() chips of system.chip.cores cores each (`core` describes
  // one), HBM shared per chip, links per topology. Core (c, k) is module "chip<c>_core<k>",
  // stats "chip<c>.core<k>.", trace process "chip<c>.core<k>"; chip c's HBM and link counters
  // are process "chip<c>". `order` lists (chip, core) in the order to elaborate the cores
  // (empty: chip by chip); results do not depend on it.
  System(const ChipConfig& core, const SystemConfig& system, CoreOptions options,
         const std::vector<std::pair<int, int>>& order = {});
  ~System();
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  size_t chips() const { return m_chips.size(); }
  size_t cores_per_chip() const { return m_chips.empty() ? 0 : m_chips[0]->cores.size(); }
  Chip& chip(size_t i) { return *m_chips.at(i); }
  Core& core(size_t chip = 0, size_t core = 0) { return *m_chips.at(chip)->cores.at(core); }
  dma::Network& network() { return *m_network; }
  // The chips' collective engines (null in the one-core view).
  CollectiveEngine* collectives() { return m_collectives.get(); }
  const Topology* topology() const { return m_topology.get(); }
  // The network resource of each link direction, in Topology::links() order.
  const std::vector<std::pair<LinkId, int>>& links() const { return m_links; }
  // SPMD folding (docs/DISTRIBUTED.md): core (0, 0) is simulated for the `ranks` identical
  // ranks — it alone runs, their transfers starting in the same picosecond as its own. Either
  // the ranks fit one chip (cores 0 .. ranks-1 of chip 0): each of its transfers counts `ranks`
  // times on the resources they share (the chip's HBM, host link and collective DMA) and once on
  // its own DMA engines (dma::Network::set_fold); any other resource is refused. Or they fill
  // chips 0 .. C-1 (rank r on core (r / cores, r % cores)): chip 0 folds its cores as above and
  // each chip c in 1 .. C-1 mirrors it (every transfer of core (0, 0) also runs on chip c's
  // HBM, host link and core (c, 0)'s engines, dma::Network::FoldMap); fold_mismatch() says
  // when a chip's copy ended at another time. Throws std::invalid_argument for other `ranks`
  // or the one-core view. `communicators` are the world's (every rank's, each once): the
  // collective engine runs core (0, 0)'s collectives for every member and every twin
  // communicator (CollectiveEngine::set_fold, which throws for a communicator that does not
  // fit). Before the simulation starts.
  void fold(int ranks, std::vector<CollectiveFold::Communicator> communicators = {});
  // Folded across chips: the first mirror copy that did not finish with core (0, 0)'s transfer
  // (the run is not exact), as one line naming the chip; none otherwise.
  std::optional<std::string> fold_mismatch() const { return m_network->fold_mismatch(); }
  // Writes every core's stats and, for a multi-core system, per chip HBM and per link bytes
  // and busy time under "system." (and the collectives run, when any did). Call once after the
  // simulation.
  void finalize();

 private:
  std::unique_ptr<dma::Network> m_network;
  std::unique_ptr<Topology> m_topology;
  std::unique_ptr<CollectiveEngine> m_collectives;
  std::vector<std::unique_ptr<Chip>> m_chips;
  std::vector<std::pair<LinkId, int>> m_links;
  CoreOptions m_options;
};

}  // namespace wallsim::sim
