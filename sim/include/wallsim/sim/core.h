// Core: one NeuronCore-style core elaborated from a ChipConfig — engines, DMA queues and
// engines, SBUF/PSUM — and the plan launcher. A System (system.h) wires it to its chip.
#pragma once

#include <systemc>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wallsim/dma/dma_system.h"
#include "wallsim/engines/compute_unit.h"
#include "wallsim/engines/launch.h"
#include "wallsim/engines/signal_scheduler.h"
#include "wallsim/engines/stream_processor.h"
#include "wallsim/memory/on_chip_store.h"
#include "wallsim/memory/tensor_store.h"
#include "wallsim/sim/chip_config.h"
#include "wallsim/traces/csv_log.h"
#include "wallsim/traces/stats.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::sim {

class CollectiveEngine;
class CommOverlap;

struct CoreOptions {
  bool functional = false;  // compute real values (else timing only: no data moves)
  traces::StatsRegistry* stats = nullptr;
  traces::TraceSink* trace = nullptr;
  engines::TraceLevel trace_level = engines::TraceLevel::none;
  traces::CsvLog* instruction_log = nullptr;
};

// Where a core sits in its system (System::wire fills it): the bandwidth network with its
// chip's HBM and host link and the core's own DMA engines (resource indices), the chip's
// off-chip tensors, and its trace process.
struct CoreWiring {
  dma::Network* network = nullptr;
  int chip = 0, core = 0;
  int hbm = -1, host_link = -1;
  std::vector<int> dma_engines;
  std::vector<dma::RemoteHbm> remote_hbm;  // by chip: the routes to other chips' HBM
  memory::TensorStore* tensors = nullptr;
  CollectiveEngine* collectives = nullptr;  // the system's; null in the one-core view
  int trace_pid = 1;
  std::string trace_process = "core0";
  std::string stats_scope = "device";
};

class Core : public sc_core::sc_module {
 public:
  Core(sc_core::sc_module_name name, const ChipConfig& chip, CoreOptions options,
       CoreWiring wiring);
  ~Core() override;

  // Off-chip tensors (HBM and host memory) by name; holds data in functional mode. The
  // chip's, shared by its cores.
  memory::TensorStore& tensors() { return *m_tensors; }

  // Queues a launch of `plan` after those queued before; `scalars` are its run-time scalars in
  // Plan::scalars order. Callable before the simulation starts or from any SC_THREAD; returns
  // at once. `plan` must outlive the Core; the Launch lives until retire_drained frees it
  // (a LaunchHandle outlives it).
  // `tensor_names`, when not empty, binds each of the plan's tensors (by index) to a tensor of
  // the store with another name: how a runtime launches one cached plan on many tensors.
  // `keep`, when given, owns `plan` instead: held until the launch is retired.
  engines::Launch& launch(const isa::Plan& plan, std::vector<int64_t> scalars,
                          std::vector<std::string> tensor_names = {},
                          std::shared_ptr<const void> keep = nullptr);

  // Per-op totals over every drained launch: what each op kind cost, summed over plans.
  struct OpTotals {
    int64_t nodes = 0, instructions = 0, dma_bytes = 0;
    double macs = 0;
    sc_core::sc_time busy[isa::kNumEngines];
    // The op's time on its launches' critical paths (sim/critical_path.h): each instant of a
    // launch, from its start to its end, belongs to the one node whose instruction the launch
    // waited on then. Over every op, plus critical_time_outside_ops(), the launches' time. ns.
    double exposed_ns = 0;
    // The time any of the op's DMA transfers was in flight, summed over launches (in each, the
    // union over its nodes of the op: sim/critical_path.h dma_active_by_group). ns.
    double dma_active_ns = 0;
    std::vector<int64_t> dma_engine_bytes;  // by DMA engine

    // Adds one node's totals, its exposed time `exposed` on its launch's critical path.
    void add(const engines::NodeTotals& t, sc_core::sc_time exposed);
    // Adds another set of totals (the sum over several ops, origins or layers).
    OpTotals& operator+=(const OpTotals& o);
  };
  // Folds the launches drained so far (in launch order) into op_totals() and
  // launch_busy_time(), and frees them: a long run's memory stays bounded by the live
  // launches. When a trace is written, each retired launch's name and times are kept for it.
  void retire_drained();
  // Called by retire_drained with each launch before it is freed (its plan still valid), in
  // launch order; unset by default (the Chakra export sets it).
  void on_retire(std::function<void(const engines::Launch&)> f) { m_on_retire = std::move(f); }
  const std::map<std::string, OpTotals>& op_totals() const { return m_op_totals; }
  // The same totals by the runtime's origin of each node (engines::Launch::origins).
  const std::map<int32_t, OpTotals>& origin_totals() const { return m_origin_totals; }
  // The union of the spans (start to end) of every retired launch, copies included.
  sc_core::sc_time launch_busy_time() const { return m_busy; }
  // The retired launches' critical-path time on no op: instructions without provenance (the
  // copy plans') and input nodes.
  sc_core::sc_time critical_time_outside_ops() const { return m_outside_ops; }

  // Launches ever made; launch number `index` while it is live (null once retired).
  size_t launch_count() const { return m_first_live + m_launches.size(); }
  const engines::Launch* live_launch(size_t index) const {
    return index >= m_first_live && index < launch_count() ? &m_launches[index - m_first_live]
                                                           : nullptr;
  }
  struct LaunchTimes {
    sc_core::sc_time launch_begin, start, end;
  };
  // A live launch's times; a retired one's when a trace is written (else zero).
  LaunchTimes launch_times(size_t index) const;

  // After sc_start returns: a run-time invariant violation, if one stopped the simulation.
  std::optional<std::string> error() const;
  bool all_drained() const;
  // One line per stream that never finished: engine, instruction, semaphore, awaited value.
  std::vector<std::string> deadlock_report() const;
  // When the last launched plan drained (its last result was ready).
  sc_core::sc_time end_time() const;
  // Writes the derived stats; call once after the simulation.
  void finalize();
  // The live launches (every launch when nothing retired them), in launch order.
  const std::deque<engines::Launch>& launches() const { return m_launches; }
  const ChipConfig& config() const { return m_chip; }
  // This core's communication against its compute so far (comm_overlap.h): the time its
  // collectives, sends and recvs were in progress, and the part with no compute engine busy.
  const CommOverlap& comm_overlap() const { return *m_comm; }
  // The trace track of plan launches and spans (when tracing): flows from a host end there.
  const std::optional<traces::Track>& plan_track() const { return m_launch_track; }

 private:
  void launcher();
  engines::StreamProcessor& processor_for(const isa::Stream& stream, int dma_ordinal);

  ChipConfig m_chip;
  CoreOptions m_options;
  CoreWiring m_wiring;
  std::unique_ptr<memory::OnChipStore> m_sbuf;
  std::unique_ptr<memory::OnChipStore> m_psum;
  memory::TensorStore* m_tensors;

  engines::SharedPort m_sbuf_port;
  std::unique_ptr<engines::SignalScheduler> m_signals;
  std::unique_ptr<dma::DmaSystem> m_dma;
  std::vector<std::unique_ptr<engines::ExecutionUnit>> m_units;
  std::vector<std::unique_ptr<engines::StreamProcessor>> m_compute;  // tensor, vector, scalar
  std::vector<std::unique_ptr<engines::StreamProcessor>> m_queues;   // DMA queue slots

  std::deque<engines::Launch> m_launches;  // live: numbers [m_first_live, launch_count())
  size_t m_first_live = 0;                 // launches before it are retired and freed
  size_t m_next_launch = 0;                // the launcher's next launch number
  size_t m_last_ordered = 0;      // the last launch taken that is not asynchronous (Launch::async)
  size_t m_ordered_launches = 0;  // how many such launches were taken
  struct Retired {
    std::string name;
    LaunchTimes times;
    bool async = false;
  };
  std::vector<Retired> m_retired;  // by launch number, only when a trace is written
  sc_core::sc_time m_busy, m_busy_end, m_retired_end;  // retired launches' span union, last end
  sc_core::sc_time m_outside_ops;
  std::map<std::string, OpTotals> m_op_totals;
  std::map<int32_t, OpTotals> m_origin_totals;
  sc_core::sc_event m_launch_added;
  std::optional<traces::Track> m_launch_track;
  std::unique_ptr<CommOverlap> m_comm;
  std::optional<traces::Track> m_exposed_track;  // declared at the first exposed interval
  std::function<void(const engines::Launch&)> m_on_retire;

  traces::Counter* m_plans_stat = nullptr;
  traces::Value* m_launch_ns_stat = nullptr;
  sc_core::sc_time m_launch_overhead;
  int64_t m_sbuf_peak = 0;
  int64_t m_psum_peak = 0;
};

}  // namespace wallsim::sim
