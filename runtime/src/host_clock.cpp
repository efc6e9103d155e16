// Host-state accounting.
#include "wallsim/runtime/host_clock.h"

namespace wallsim::runtime {

std::string_view name_of(HostState s) {
  static const char* const kNames[] = {"host_dispatch", "compile", "transfer", "sync_wait",
                                       "host_other"};
  return kNames[static_cast<int>(s)];
}

HostClock::Interval HostClock::enter(HostState s, int64_t now_ps, HostTimes& into) {
  const Interval closed{m_state, m_since_ps, now_ps - m_since_ps};
  if (closed.ps > 0) into[static_cast<int>(m_state)] += closed.ps / 1000;
  m_state = s;
  m_since_ps = now_ps;
  return closed;
}

}  // namespace wallsim::runtime
