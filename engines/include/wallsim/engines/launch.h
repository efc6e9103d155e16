// A launched plan: what every stream processor of the device shares while running it.
#pragma once

#include <systemc>

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wallsim/isa/plan.h"
#include "wallsim/memory/tile_io.h"

namespace wallsim::engines {

// The plan's semaphores. Values only grow while the plan runs; waiters block on a per-semaphore
// event. Owned by its Launch.
class SemaphoreSet {
 public:
  explicit SemaphoreSet(size_t count) : m_values(count, 0), m_changed(count) {}
  int64_t value(int sem) const { return m_values[sem]; }
  void add(int sem, int64_t amount) {
    m_values[sem] += amount;
    m_changed[sem].notify();
  }
  // Blocks the calling SC_THREAD until semaphore `sem` >= `value`.
  void wait_at_least(int sem, int64_t value) {
    while (m_values[sem] < value) sc_core::wait(m_changed[sem]);
  }

 private:
  std::vector<int64_t> m_values;
  std::deque<sc_core::sc_event> m_changed;
};

// Device time and bytes attributed to one graph node (provenance) of a launched plan.
struct NodeTotals {
  sc_core::sc_time busy[isa::kNumEngines];
  int64_t instructions = 0;
  int64_t dma_bytes = 0;
  double macs = 0;                        // tensor-engine multiply-accumulates
  std::vector<int64_t> dma_engine_bytes;  // by DMA engine (grown on use)
};

// When one instruction of a launch ran: issue, end of its occupancy, and its own result ready
// (its signals may fire later: a stream retires in order, after the previous result).
struct InstructionTimes {
  sc_core::sc_time start, end, ready;
};

struct Launch {
  Launch(const isa::Plan& p, int idx, std::vector<int64_t> scalar_values)
      : plan(&p),
        name(p.name),
        index(idx),
        scalars(std::move(scalar_values)),
        semaphores(p.semaphores.size()),
        nodes(p.nodes.size()) {
    for (size_t i = 0; i < p.nodes.size(); ++i) node_index.emplace(p.nodes[i].id, i);
    stream_offset.reserve(p.streams.size());
    size_t n = 0;
    for (const isa::Stream& s : p.streams) {
      stream_offset.push_back(n);
      n += s.instructions.size();
    }
    times.resize(n);
  }

  // The plan while the launch is live; null once the device retires it (Device::retire_drained).
  const isa::Plan* plan;
  std::string name;                  // the plan's name, kept after retirement
  std::shared_ptr<const void> keep;  // what keeps `plan` alive, when the launcher owns it
  int index;
  std::vector<int64_t> scalars;           // by Plan::scalars index
  std::vector<std::string> tensor_names;  // store names by Plan::tensors index; empty: own names
  // By Plan::comms index: the (chip, core) of each rank of the communicator, bound at launch.
  std::vector<std::vector<std::pair<int, int>>> comm_ranks;
  SemaphoreSet semaphores;
  memory::MemoryMap memory{};  // backing stores; all null in timing-only mode
  bool functional = false;
  std::vector<NodeTotals> nodes;  // by Plan::nodes index
  // By Plan::nodes index: the runtime's origin of each node (a layer or source op; -1 none),
  // so a cached plan shared by many layers reports per origin. Empty: the runtime set none.
  std::vector<int32_t> origins;
  std::unordered_map<int32_t, size_t> node_index;  // node id -> index into `nodes`
  // Every instruction's times, stream after stream: Plan::streams[s].instructions[i] is
  // times[stream_offset[s] + i]. Filled as the instructions run (the critical path's input).
  std::vector<size_t> stream_offset;
  std::vector<InstructionTimes> times;

  // An asynchronous launch (a plan of collectives, sends and recvs only, as on NCCL's stream of
  // its own): it still waits for the launch before it that is not asynchronous, but the launches
  // after it do not wait for it (timing.launch.wait_for_previous), only those that name it in
  // `after`. Set by whoever launches it, before the launcher takes it (Core::launch).
  bool async = false;
  // Launch numbers that must have drained before this one starts, besides the launch it waits
  // for anyway: its data dependencies on asynchronous launches (a cudaStreamWaitEvent).
  std::vector<size_t> after;

  int streams_pending = 0;
  bool started = false;
  bool drained = false;
  sc_core::sc_time launch_begin;  // the launcher took it (its launch cost starts)
  sc_core::sc_time start_time;    // streams dispatched
  sc_core::sc_time end_time;      // last result ready
  sc_core::sc_event drained_event;

  // Called for every instruction: a hash lookup, not a scan of the plan's nodes.
  NodeTotals* node_totals(int32_t node_id) {
    auto it = node_index.find(node_id);
    return it == node_index.end() ? nullptr : &nodes[it->second];
  }
};

}  // namespace wallsim::engines
