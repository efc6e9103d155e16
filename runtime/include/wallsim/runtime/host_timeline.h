// HostTimeline: one host thread's simulated time. The thread is always in exactly one
// HostState; every wait and every modelled cost goes through here, so the states of each record
// of the StepLog sum to its wall time. Runs in a host SC_THREAD (it calls sc_core::wait).
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/runtime/host_clock.h"
#include "wallsim/runtime/step_log.h"
#include "wallsim/sim/launch_handle.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::runtime {

// HostSignal: one rank's host thread telling the others that something they wait for has
// happened (serve's pipeline stages wait for stage 0's scheduling decisions). Waiters block in
// simulated time (HostTimeline::idle_while); notify wakes them in the next delta cycle, so the
// order of same-instant events does not depend on which thread ran first.
class HostSignal {
 public:
  void notify() { event().notify(sc_core::SC_ZERO_TIME); }
  sc_core::sc_event& event() {
    if (!m_event) m_event = std::make_unique<sc_core::sc_event>();  // built in a running kernel
    return *m_event;
  }

 private:
  std::unique_ptr<sc_core::sc_event> m_event;
};

class HostTimeline {
 public:
  // Host time goes into `log.record()`.
  explicit HostTimeline(StepLog& log) : m_log(log) {}
  // A slice per state interval (host_other excepted) and flush instants on `track`.
  void trace_on(traces::TraceSink* sink, traces::Track track) {
    m_trace = sink;
    m_track = track;
  }
  bool traced() const { return m_track.has_value(); }
  const std::optional<traces::Track>& track() const { return m_track; }

  static int64_t now_ps() { return static_cast<int64_t>(sc_core::sc_time_stamp().value()); }
  static int64_t now_ns() { return now_ps() / 1000; }

  // Switches the host to state `s` now, closing the open interval into the current record.
  void enter(HostState s);
  // Advances the host clock by `ns` in state `s`; `args` go on that state's trace slice.
  void charge(HostState s, int64_t ns, const traces::TraceArgs* args = nullptr);
  // Waits in state `s` while `pending()` holds, for `event()` each time, then returns to
  // host_other on a whole nanosecond. Nothing when nothing is pending.
  template <class Pending, class Event>
  void wait_while(HostState s, Pending pending, Event event) {
    if (!pending()) return;
    enter(s);
    while (pending()) sc_core::wait(event());
    align_to_ns();
    enter(HostState::other);
  }
  // Waits in state `s` until the launch `l` has drained.
  void wait_drained(sim::LaunchHandle l, HostState s) {
    if (!l) return;
    wait_while(
        s, [&] { return !l.drained(); },
        [&]() -> const sc_core::sc_event& { return l.drained_event(); });
  }
  // Waits until `ns` in no record (idle between steps).
  void idle_until(int64_t ns);
  // Waits in no record (idle between steps) while `pending()` holds, for `signal` each time;
  // returns on a whole nanosecond. Nothing when nothing is pending.
  void idle_while(const std::function<bool()>& pending, HostSignal& signal);
  // An instant on the host track (why the pending graph was cut).
  void instant(const std::string& name);
  // Keeps the intervals spent in sync_wait from now on (a rank's; take_sync_waits hands them
  // over), as [start_ps, end_ps).
  void keep_sync_waits() { m_keep_sync = true; }
  std::vector<std::pair<int64_t, int64_t>> take_sync_waits() { return std::move(m_sync_waits); }
  traces::TraceSink* sink() const { return m_trace; }

 private:
  // The host clock stays on whole nanoseconds: the wait extends the current state.
  void align_to_ns();

  StepLog& m_log;
  HostClock m_clock;
  traces::TraceSink* m_trace = nullptr;
  std::optional<traces::Track> m_track;
  const traces::TraceArgs* m_slice_args = nullptr;  // for the host slice enter() closes next
  bool m_keep_sync = false;
  std::vector<std::pair<int64_t, int64_t>> m_sync_waits;
};

}  // namespace wallsim::runtime
