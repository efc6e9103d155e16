// The run's records: start-up, steps and their trace slices.
#include "wallsim/runtime/step_log.h"

namespace wallsim::runtime {

void Counts::add(const Counts& o) { add_figures(*this, o); }

void StepLog::begin(int64_t index, int64_t now_ns) {
  close_startup(now_ns);
  m_in_step = true;
  m_current = StepRecord{};
  m_current.index = index;
  m_current.start_ns = now_ns;
}

void StepLog::close_startup(int64_t now_ns) {
  if (m_startup_closed) return;
  m_startup_closed = true;
  m_startup.wall_ns = now_ns - m_startup.start_ns;
  if (m_track && m_startup.wall_ns > 0) {
    const traces::TraceArgs args = traces::TraceArgs()
                                       .add("wall_ns", m_startup.wall_ns)
                                       .add("compiles", m_startup.counts.compiles);
    m_trace->slice(*m_track, static_cast<traces::TimePs>(m_startup.start_ns) * 1000,
                   static_cast<traces::TimePs>(m_startup.wall_ns) * 1000, "startup", "step", args);
  }
}

void StepLog::end(int64_t now_ns, int64_t device_busy_ns) {
  m_current.wall_ns = now_ns - m_current.start_ns;
  m_current.device_busy_ns = device_busy_ns;
  if (m_track) {
    const std::string name = "step " + std::to_string(m_current.index);
    const traces::TraceArgs args = traces::TraceArgs()
                                       .add("index", m_current.index)
                                       .add("wall_ns", m_current.wall_ns)
                                       .add("device_busy_ns", m_current.device_busy_ns)
                                       .add("compiles", m_current.counts.compiles)
                                       .add("launches", m_current.counts.plans_launched);
    m_trace->slice(*m_track, static_cast<traces::TimePs>(m_current.start_ns) * 1000,
                   static_cast<traces::TimePs>(m_current.wall_ns) * 1000, name, "step", args);
  }
  m_step_counts.add(m_current.counts);
  ++m_steps_done;
  if (m_keep_steps) m_steps.push_back(m_current);
  m_in_step = false;
  if (m_on_step_end) m_on_step_end(m_current);
}

Counts StepLog::totals() const {
  Counts c = m_startup.counts;
  c.add(m_step_counts);
  if (m_in_step) c.add(m_current.counts);
  return c;
}

}  // namespace wallsim::runtime
