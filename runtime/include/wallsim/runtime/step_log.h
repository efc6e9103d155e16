// StepLog: the run's records — the start-up, each step, idle time — and the run report's
// figures, each described once (describe(), as config sections describe their keys).
//
// Who changes what: the host timeline adds host time to record(); the compile service and the
// device queue count into it; the Session begins and ends steps. A record's host states sum to
// its wall_ns.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wallsim/runtime/host_clock.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::runtime {

// A figure's visibility in a report: always, or only when nonzero (a state that today's runs
// never enter, so their reports stay as they were).
enum class Shown : uint8_t { always, when_nonzero };

struct Counts {
  int64_t ops = 0;
  int64_t plans_launched = 0;
  int64_t compiles = 0;
  int64_t compile_failures = 0;
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  int64_t recompiles = 0;
  int64_t fallbacks = 0;
  int64_t cache_evictions = 0;
  int64_t transfers = 0;
  int64_t disk_hits = 0;
  void add(const Counts& o);
};

// The run report's figures. A visitor implements
//   void field(std::string_view key, int64_t& value, std::string_view doc, Shown shown)
// and is walked over the figures in the report's order: RunReport's JSON writer and reader,
// the sums of records, the sweeps' columns.
template <class V>
void describe(V& v, Counts& c) {
  v.field("ops", c.ops, "Tensor API ops issued by the workload (AOT traces not counted)",
          Shown::always);
  v.field("plans_launched", c.plans_launched,
          "compiled plans and library kernels launched (transfers excluded)", Shown::always);
  v.field("compiles", c.compiles, "compiler invocations, failures and split retries included",
          Shown::always);
  v.field("compile_failures", c.compile_failures, "compiles that failed", Shown::always);
  v.field("cache_hits", c.cache_hits, "compile-cache lookups that found a plan", Shown::always);
  v.field("cache_misses", c.cache_misses, "compile-cache lookups that did not", Shown::always);
  v.field("recompiles", c.recompiles,
          "compiles in a step of a shape-free signature compiled before at other shapes",
          Shown::always);
  v.field("fallbacks", c.fallbacks, "groups that fell back after a failed compile", Shown::always);
  v.field("cache_evictions", c.cache_evictions, "plans the LRU cache dropped", Shown::always);
  v.field("transfers", c.transfers, "host<->device copies", Shown::always);
  v.field("disk_hits", c.disk_hits,
          "AOT: plans loaded from the on-disk cache instead of compiled (also hits)",
          Shown::always);
}

// The host states' times, "<state>_ns" each (comm_wait only when nonzero).
template <class V>
void describe(V& v, HostTimes& t) {
  static const std::array<std::string, kNumHostStates> kKeys = [] {
    std::array<std::string, kNumHostStates> keys;
    for (int s = 0; s < kNumHostStates; ++s)
      keys[s] = std::string(name_of(static_cast<HostState>(s))) + "_ns";
    return keys;
  }();
  for (int s = 0; s < kNumHostStates; ++s) {
    const auto state = static_cast<HostState>(s);
    v.field(kKeys[s], t[s], doc_of(state),
            host_state_always_shown(state) ? Shown::always : Shown::when_nonzero);
  }
}

// One step, or the start-up before the first (AOT traces and compiles there).
struct StepRecord {
  int64_t index = -1;  // -1 for startup
  int64_t start_ns = 0;
  int64_t wall_ns = 0;
  HostTimes host_ns{};         // by HostState; they sum to wall_ns
  int64_t device_busy_ns = 0;  // union of the spans of plans running during the step
  // Device time of the step in the core's collectives, sends and recvs with none of its compute
  // engines busy (sim/comm_overlap.h): the communication nothing hid. 0 without collectives.
  int64_t comm_exposed_ns = 0;
  Counts counts;
  double padded_macs = 0;  // tensor-engine MACs the step's plans do at the shapes they run
  double real_macs = 0;    // ... and at the workload's real shapes
};

// A record's figures as the report holds them (`index` apart: absent for the start-up).
template <class V>
void describe(V& v, StepRecord& r) {
  v.field("start_ns", r.start_ns, "when the record begins", Shown::always);
  v.field("wall_ns", r.wall_ns, "its wall time; the host states sum to it", Shown::always);
  describe(v, r.host_ns);
  v.field("device_busy_ns", r.device_busy_ns, "the union of the spans of the plans that ran in it",
          Shown::always);
  v.field("comm_exposed_ns", r.comm_exposed_ns,
          "device time in its collectives, sends and recvs with no compute engine of the core busy",
          Shown::when_nonzero);
  describe(v, r.counts);
}

// Calls f(key, value, shown) for every figure of `x` (a Counts, HostTimes or StepRecord).
template <class T, class F>
void for_each_figure(T& x, F&& f) {
  struct Visitor {
    F& f;
    void field(std::string_view key, int64_t& v, std::string_view, Shown shown) {
      f(key, v, shown);
    }
  } v{f};
  describe(v, x);
}

// Adds every figure of `from` into `into` (same type).
template <class T>
void add_figures(T& into, const T& from) {
  T copy = from;
  std::vector<int64_t> values;
  for_each_figure(copy, [&](std::string_view, int64_t& v, Shown) { values.push_back(v); });
  size_t i = 0;
  for_each_figure(into, [&](std::string_view, int64_t& v, Shown) { v += values[i++]; });
}

class StepLog {
 public:
  // `on_step_end` is called with each finished step; `keep_steps` keeps every record.
  StepLog(std::function<void(const StepRecord&)> on_step_end, bool keep_steps)
      : m_on_step_end(std::move(on_step_end)), m_keep_steps(keep_steps) {}
  // A slice per step (and one for the start-up) on `track`.
  void trace_on(traces::TraceSink* sink, traces::Track track) {
    m_trace = sink;
    m_track = track;
  }

  // The record being written: the current step's, or the start-up's.
  StepRecord& record() { return m_in_step ? m_current : m_startup; }
  bool in_step() const { return m_in_step; }
  // The current step's index; -1 in the start-up or between steps.
  int64_t current_index() const { return m_in_step ? m_current.index : -1; }

  // Opens step `index` at `now_ns` (closing the start-up record if still open).
  void begin(int64_t index, int64_t now_ns);
  // The start-up record ends at the first step or idle wait.
  void close_startup(int64_t now_ns);
  // Closes the current step at `now_ns` with its device busy time.
  void end(int64_t now_ns, int64_t device_busy_ns);
  void add_idle(int64_t ns) { m_idle_ns += ns; }
  void add_real_macs(double macs) { m_current.real_macs += macs; }

  const StepRecord& startup() const { return m_startup; }
  const std::vector<StepRecord>& steps() const { return m_steps; }
  int64_t steps_done() const { return m_steps_done; }
  int64_t idle_ns() const { return m_idle_ns; }
  Counts totals() const;

 private:
  std::function<void(const StepRecord&)> m_on_step_end;
  bool m_keep_steps;
  traces::TraceSink* m_trace = nullptr;
  std::optional<traces::Track> m_track;
  bool m_in_step = false;
  bool m_startup_closed = false;
  int64_t m_idle_ns = 0;
  StepRecord m_startup;
  StepRecord m_current;
  std::vector<StepRecord> m_steps;  // keep_steps only
  Counts m_step_counts;             // summed over the finished steps
  int64_t m_steps_done = 0;
};

}  // namespace wallsim::runtime
