// Timed delivery of semaphore increments and stream completions.
#include "wallsim/engines/signal_scheduler.h"

namespace wallsim::engines {

using sc_core::sc_time;

SignalScheduler::SignalScheduler(sc_core::sc_module_name name) : sc_module(name) {
  SC_HAS_PROCESS(SignalScheduler);
  SC_METHOD(fire);
  sensitive << m_wake;
  dont_initialize();
}

void SignalScheduler::push(const Entry& e) {
  m_queue.push(e);
  // sc_event keeps the earliest pending notification, so this never delays an earlier entry.
  m_wake.notify(e.at - sc_core::sc_time_stamp());
}

void SignalScheduler::signal(sc_time at, Launch* launch, int sem, int64_t amount) {
  push({at, m_seq++, launch, sem, amount});
}

void SignalScheduler::stream_done(sc_time at, Launch* launch) {
  push({at, m_seq++, launch, -1, 0});
}

void SignalScheduler::fire() {
  const sc_time now = sc_core::sc_time_stamp();
  while (!m_queue.empty() && m_queue.top().at <= now) {
    Entry e = m_queue.top();
    m_queue.pop();
    if (e.sem >= 0) {
      e.launch->semaphores.add(e.sem, e.amount);
    } else if (--e.launch->streams_pending == 0) {
      e.launch->drained = true;
      e.launch->end_time = now;
      e.launch->drained_event.notify();
    }
  }
  if (!m_queue.empty()) m_wake.notify(m_queue.top().at - now);
}

}  // namespace wallsim::engines
