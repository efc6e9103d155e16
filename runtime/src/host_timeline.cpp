// One host thread's simulated time and its trace slices.
#include "wallsim/runtime/host_timeline.h"

namespace wallsim::runtime {

using sc_core::sc_time;

void HostTimeline::enter(HostState s) {
  const HostClock::Interval closed = m_clock.enter(s, now_ps(), m_log.record().host_ns);
  if (m_keep_sync && closed.state == HostState::sync_wait && closed.ps > 0)
    m_sync_waits.emplace_back(closed.start_ps, closed.start_ps + closed.ps);
  if (closed.ps > 0 && m_track && closed.state != HostState::other) {
    static const traces::TraceArgs kNoArgs;
    m_trace->slice(*m_track, static_cast<traces::TimePs>(closed.start_ps),
                   static_cast<traces::TimePs>(closed.ps), name_of(closed.state), "host",
                   m_slice_args ? *m_slice_args : kNoArgs);
  }
}

void HostTimeline::charge(HostState s, int64_t ns, const traces::TraceArgs* args) {
  if (ns <= 0) return;
  enter(s);
  sc_core::wait(sc_time(static_cast<double>(ns), sc_core::SC_NS));
  m_slice_args = args;
  enter(HostState::other);
  m_slice_args = nullptr;
}

void HostTimeline::align_to_ns() {
  const int64_t ps = HostClock::to_whole_ns(now_ps());
  if (ps > 0) sc_core::wait(sc_time(static_cast<double>(ps), sc_core::SC_PS));
}

void HostTimeline::idle_until(int64_t ns) {
  enter(HostState::other);  // closes the accounting up to now
  const int64_t now = now_ns();
  if (ns <= now) return;
  m_log.close_startup(now);
  sc_core::wait(sc_time(static_cast<double>(ns - now), sc_core::SC_NS));
  m_clock.restart(now_ps());  // the wait belongs to no record
  m_log.add_idle(ns - now);
}

void HostTimeline::idle_while(const std::function<bool()>& pending, HostSignal& signal) {
  enter(HostState::other);  // closes the accounting up to now
  if (!pending()) return;
  const int64_t from = now_ns();
  m_log.close_startup(from);
  while (pending()) sc_core::wait(signal.event());
  align_to_ns();
  m_clock.restart(now_ps());  // the wait belongs to no record
  m_log.add_idle(now_ns() - from);
}

void HostTimeline::instant(const std::string& name) {
  if (m_track) m_trace->instant(*m_track, static_cast<traces::TimePs>(now_ps()), name, "host", {});
}

}  // namespace wallsim::runtime
