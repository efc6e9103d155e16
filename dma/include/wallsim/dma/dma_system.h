// DmaSystem: one core's DMA engines and its view of its chip's HBM and host link. DMA
// descriptors and instruction fetches move bytes here; descriptor_cost (dma_route.h) says what
// each descriptor uses and the simulation's Network (network.h) divides the bandwidth.
#pragma once

#include <systemc>

#include <string>
#include <utility>
#include <vector>

#include "wallsim/dma/dma_route.h"
#include "wallsim/dma/dma_timing.h"
#include "wallsim/dma/network.h"
#include "wallsim/isa/instruction.h"
#include "wallsim/memory/memory_timing.h"
#include "wallsim/memory/tile_io.h"
#include "wallsim/traces/stats.h"

namespace wallsim::dma {

// Another chip's HBM seen from this one: the link directions a transfer crosses (weight 1
// each), that chip's HBM resource, and the route's latency.
struct RemoteHbm {
  std::vector<int> links;
  int hbm = -1;
  int64_t latency_ns = 0;
};

// Where a core's DMA system sits in the network: its key (chip, core), its chip's HBM and host
// link, its own engines (resource indices), and the routes to other chips' HBM by chip (empty
// in a one-chip system). A plan's HBM tensor named "chip<N>:..." lives on chip N.
struct DmaWiring {
  Network* network = nullptr;
  int chip = 0, core = 0;
  int hbm = -1, host_link = -1;
  std::vector<int> engines;
  std::vector<RemoteHbm> remote;  // by chip; the own chip's entry is unused
};

class DmaSystem : public sc_core::sc_module {
 public:
  // `stats` is the registry the system reports to under `scope` ("device" for a one-core view).
  DmaSystem(sc_core::sc_module_name name, const DmaTiming& dma, const memory::HbmTiming& hbm,
            const HostLinkTiming& link, DmaWiring wiring, traces::StatsRegistry* stats,
            std::string scope = "device");

  // What a queue's descriptor generation carries from one descriptor to the next.
  struct QueueIssue {
    sc_core::sc_time generated;  // when the last descriptor's generation ended
    bool any = false;
  };
  // Runs one DMA instruction on behalf of DMA engine `engine`, from the calling SC_THREAD:
  // the descriptor issue cost, then the transfer under fair sharing (blocking). With `mem`, it
  // also moves the real data. Returns how long after the transfer its data is visible.
  // `issue` is the issuing queue's state; `back_to_back` says the instruction starts as its
  // predecessor on the queue ends (timing.dma.issue_overlaps_transfer then hides the issue
  // cost behind that transfer); `queue` orders it among transfers starting in the same
  // picosecond; `plan` (the instruction's) names its tensors, which may live on another chip.
  // Timing depends on sizes only, never on values (indirect accesses included).
  sc_core::sc_time execute(const isa::Instruction& in, int engine, const memory::MemoryMap* mem,
                           QueueIssue& issue, bool back_to_back, int queue = 0,
                           const isa::Plan* plan = nullptr);
  // Reads `bytes` from HBM without a DMA engine (plan instruction fetch). Blocking.
  void fetch_from_hbm(int64_t bytes);
  // Bytes a DMA instruction moves.
  static int64_t bytes_moved(const isa::Instruction& in);
  // Per resource it uses ("hbm", "host_link", "dma<N>"): the least time the capacity it gave (bytes
  // times each transfer's weight) needs at its full bandwidth. No run can be shorter than the
  // largest of these.
  std::vector<std::pair<std::string, sc_core::sc_time>> transfer_floors() const;
  // Writes derived stats (busy times, achieved bandwidth over `elapsed`).
  void finalize(sc_core::sc_time elapsed);

 private:
  void transfer(double bytes, std::vector<memory::ResourceUse> uses, int queue);
  // Moves the HBM use of each end that names another chip's tensor to that chip's HBM and the
  // links on the way; returns the routes' latency.
  int64_t route_remote(const isa::Instruction& in, const isa::Plan& plan,
                       std::vector<memory::ResourceUse>& uses) const;

  DmaTiming m_dma;
  memory::HbmTiming m_hbm_timing;
  HostLinkTiming m_link_timing;
  Network& m_net;
  TransferKey m_key;
  int m_hbm = -1;
  int m_link = -1;
  std::vector<int> m_engines;  // resource index of each DMA engine
  std::vector<RemoteHbm> m_remote;

  traces::StatsRegistry* m_stats;
  std::string m_scope;
  traces::Counter* m_hbm_read = nullptr;
  traces::Counter* m_hbm_write = nullptr;
  traces::Counter* m_link_bytes = nullptr;
  traces::Counter* m_descriptors = nullptr;
  traces::Counter* m_chunks = nullptr;
  traces::Counter* m_transposes = nullptr;
};

}  // namespace wallsim::dma
