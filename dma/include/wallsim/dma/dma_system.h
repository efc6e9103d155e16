// DmaSystem: the SystemC adapter of the core's DMA engines, HBM and the host link. DMA
// descriptors and instruction fetches move bytes here; descriptor_cost (dma_route.h) says what
// each descriptor uses and a memory::BandwidthShare policy divides the bandwidth.
#pragma once

#include <systemc>

#include <map>
#include <memory>
#include <vector>

#include "wallsim/dma/dma_route.h"
#include "wallsim/dma/dma_timing.h"
#include "wallsim/isa/instruction.h"
#include "wallsim/memory/bandwidth_share.h"
#include "wallsim/memory/memory_timing.h"
#include "wallsim/memory/tile_io.h"
#include "wallsim/traces/stats.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::dma {

class DmaSystem : public sc_core::sc_module {
 public:
  // `stats` is the registry the system reports to under "device."; `trace` may be null.
  DmaSystem(sc_core::sc_module_name name, int engines, const DmaTiming& dma,
            const memory::HbmTiming& hbm, const HostLinkTiming& link, traces::StatsRegistry* stats,
            traces::TraceSink* trace, int trace_pid);

  // What a queue's descriptor generation carries from one descriptor to the next.
  struct QueueIssue {
    sc_core::sc_time generated;  // when the last descriptor's generation ended
    bool any = false;
  };
  // Runs one DMA instruction on behalf of DMA engine `engine`, from the calling SC_THREAD:
  // the descriptor issue cost, then the transfer under fair sharing (blocking). With `mem`, it
  // also moves the real data. Returns how long after the transfer its data is visible.
  // `queue` is the issuing queue's state; `back_to_back` says the instruction starts as its
  // predecessor on the queue ends (timing.dma.issue_overlaps_transfer then hides the issue
  // cost behind that transfer). Timing depends on sizes only, never on values.
  sc_core::sc_time execute(const isa::Instruction& in, int engine, const memory::MemoryMap* mem,
                           QueueIssue& queue, bool back_to_back);
  // Reads `bytes` from HBM without a DMA engine (plan instruction fetch). Blocking.
  void fetch_from_hbm(int64_t bytes);
  // Bytes a DMA instruction moves.
  static int64_t bytes_moved(const isa::Instruction& in);
  // Per resource ("hbm", "host_link", "dma<N>"): the least time the capacity it gave (bytes
  // times each transfer's weight) needs at its full bandwidth. No run can be shorter than the
  // largest of these.
  std::vector<std::pair<std::string, sc_core::sc_time>> transfer_floors() const;
  // Writes derived stats (busy times, achieved bandwidth over `elapsed`).
  void finalize(sc_core::sc_time elapsed);

 private:
  using Ps = memory::BandwidthShare::Ps;
  void transfer(double bytes, std::vector<memory::ResourceUse> uses);
  void wake();
  void account(Ps now);
  void reschedule(Ps now);
  void complete(const std::vector<uint64_t>& done);
  void trace_bandwidth(Ps now);

  DmaTiming m_dma;
  memory::HbmTiming m_hbm_timing;
  HostLinkTiming m_link_timing;
  std::unique_ptr<memory::BandwidthShare> m_share_owner;
  memory::BandwidthShare& m_share;
  int m_hbm = -1;
  int m_link = -1;
  std::vector<int> m_engines;  // resource index of each DMA engine
  std::map<uint64_t, sc_core::sc_event*> m_waiting;
  sc_core::sc_event m_wake;
  Ps m_last_account = 0;
  std::vector<Ps> m_busy_ps;     // per resource: time with a transfer in flight
  std::vector<int64_t> m_bytes;  // per resource: payload bytes carried
  std::vector<double> m_load;    // per resource: capacity used (payload x weight)

  traces::StatsRegistry* m_stats;
  traces::Counter* m_hbm_read = nullptr;
  traces::Counter* m_hbm_write = nullptr;
  traces::Counter* m_link_bytes = nullptr;
  traces::Counter* m_descriptors = nullptr;
  traces::Counter* m_chunks = nullptr;
  traces::Counter* m_transposes = nullptr;
  traces::TraceSink* m_trace;
  int m_trace_pid;
  double m_last_hbm_rate = -1.0;
};

}  // namespace wallsim::dma
