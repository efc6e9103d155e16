// DeviceQueue: one core as the host runtime sees it — its HBM allocations, the plans launched
// on it in program order (at once, or held until the background compiler is done with them),
// the host<->device copies, and which launches ran in which step.
//
// Who changes what: the Session allocates and launches; the queue's own launcher (an SC
// process, with compile_in_background) issues held launches; a launch counts into the record
// that issued it.
#pragma once

#include <systemc>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/runtime/compile_cache.h"
#include "wallsim/runtime/device_memory.h"
#include "wallsim/runtime/step_log.h"
#include "wallsim/sim/core.h"
#include "wallsim/sim/launch_handle.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::runtime {

struct TensorImpl;

class DeviceQueue {
 public:
  // `functional`: tensors hold values on the core; `in_order`: the core runs each launch after
  // the previous one (timing.launch.wait_for_previous); `async_collectives`: a plan of
  // collectives, sends and recvs only is launched asynchronously (engines::Launch::async), and
  // each later launch waits for the asynchronous ones still running whose tensors it conflicts
  // with (it reads what one writes, or writes what one reads or writes).
  DeviceQueue(sim::Core& core, int64_t hbm_bytes, bool functional, bool in_order,
              bool async_collectives = false);
  sim::Core& core() { return m_core; }
  // Draws a flow from the host's launch to the plan on the device (finish_trace).
  void trace_flows() { m_flows_on = true; }
  // Starts the launcher of held launches (compile_in_background).
  void start_launcher();

  // A rank's: its tensors' names start with `prefix` (ranks on one chip share its store), and
  // each communicator a plan declares is bound to `comms`' members of that name at launch.
  void set_rank(std::string prefix, std::map<std::string, std::vector<std::pair<int, int>>> comms) {
    m_prefix = std::move(prefix);
    m_comms = std::move(comms);
  }

  // ---- memory ----
  std::string allocate(const compiler_stub::TensorType& type, const std::string& hint);
  bool holds(const std::string& name) const { return m_memory.holds(name); }
  // Frees `name`, its bytes reusable at once when launches run in order (in_order()); a tensor
  // an asynchronous launch still running reads or writes is freed when that launch has drained
  // (seen at the next allocate, release or launch, or at the step's end).
  void release(std::string name, bool now);
  // Frees what release deferred (at a step's end).
  void free_deferred();
  // Whether the core runs every launch issued so far before any later one (none is held for
  // the background compiler): then a released tensor's bytes are reusable at once.
  bool in_order() const { return m_in_order && m_held.empty(); }

  // ---- launches ----
  // What a launch needs: the plan, its tensors by plan tensor, scalars, the origin of each plan
  // node (or none), the tensors it produces, and the record it counts into.
  struct Launch {
    std::shared_ptr<CompiledPlan> compiled;
    std::vector<std::string> names;
    std::vector<int64_t> scalars;
    std::vector<int32_t> origins;
    std::vector<std::shared_ptr<TensorImpl>> outs;
    StepRecord* record = nullptr;
  };
  // Launches now (the flow drawn from `host_ps`).
  void launch(Launch l, int64_t host_ps);
  // Holds the launch until `ready` and every launch held before it.
  void hold(Launch l, sc_core::sc_time ready);
  bool holding() const { return !m_held.empty(); }
  // Notified each time a held launch is issued.
  const sc_core::sc_event& launched_event() const { return m_launched; }
  // A copy plan between host and device (counted as a transfer in `counts`).
  sim::LaunchHandle transfer(const std::string& src, isa::MemSpace src_space,
                             const std::string& dst, isa::MemSpace dst_space,
                             const compiler_stub::TensorType& type, Counts& counts);
  // Launches issued so far, and the i-th of them.
  size_t launches() const { return sim::launch_count(m_core); }
  sim::LaunchHandle launch_at(size_t i) const { return sim::launch_at(m_core, i); }
  // The union of the spans of launches [first, launches()) in ns; folds the drained launches
  // into the core's totals and frees them.
  int64_t busy_ns_since(size_t first);
  // Device totals of drained launches by origin index.
  const std::map<int32_t, sim::Core::OpTotals>& origin_totals() const;
  // After the simulation: the flows from each launch on `host_track` to the plan's launch.
  void finish_trace(traces::TraceSink& sink, traces::Track host_track);

 private:
  void launcher();
  sim::LaunchHandle issue(Launch& l, const std::shared_ptr<const isa::Plan>& plan);
  // Marks `launch` (of `plan`, just made) asynchronous when it may be, and gives it its
  // dependencies on the asynchronous launches still running (async_collectives).
  void order(engines::Launch& launch, const isa::Plan& plan);

  sim::Core& m_core;
  bool m_functional;
  bool m_in_order;
  bool m_async;
  bool m_flows_on = false;
  // The asynchronous launches that may still run: their number and the tensors (store names)
  // they read and write. Pruned as they drain.
  struct Running {
    size_t index;
    std::vector<std::string> reads, writes;
  };
  std::vector<Running> m_async_running;
  // Tensors released while an asynchronous launch (its number) used them: freed once it drains.
  std::vector<std::pair<size_t, std::string>> m_async_frees;
  // Forgets the drained asynchronous launches and frees the tensors only they held.
  void settle_async();
  DeviceMemory m_memory;
  std::string m_prefix;
  std::map<std::string, std::vector<std::pair<int, int>>> m_comms;
  std::vector<std::shared_ptr<const isa::Plan>> m_transfer_plans;  // kept alive for the device
  std::unordered_map<std::string, size_t> m_transfer_index;
  struct Held {
    Launch launch;
    std::shared_ptr<const isa::Plan> plan;  // held until launched (its body may be dropped)
    sc_core::sc_time ready;                 // when its compile is done
  };
  std::deque<Held> m_held;
  sc_core::sc_event m_held_added;
  sc_core::sc_event m_launched;
  std::vector<std::pair<int64_t, sim::LaunchHandle>> m_flows;  // host ps, launch
};

}  // namespace wallsim::runtime
