// Host-state accounting.
#include "wallsim/runtime/host_clock.h"

namespace wallsim::runtime {

std::string_view name_of(HostState s) {
  static const char* const kNames[] = {"host_dispatch", "compile",   "transfer",
                                       "sync_wait",     "comm_wait", "host_other"};
  return kNames[static_cast<int>(s)];
}

std::string_view doc_of(HostState s) {
  static const char* const kDocs[] = {
      "dispatch and recording of ops, finding each group's plan, cache lookups, launches",
      "the modelled latency of compiles, or waiting for the background compiler",
      "host<->device copies: issuing them and waiting for them",
      "waiting for device results: a value read, the end of a step, eager-debug",
      "waiting for the peers of a collective",
      "anything else: the host's own compute, laying out weights, plans loaded from disk"};
  return kDocs[static_cast<int>(s)];
}

bool host_state_always_shown(HostState s) { return s != HostState::comm_wait; }

HostClock::Interval HostClock::enter(HostState s, int64_t now_ps, HostTimes& into) {
  const Interval closed{m_state, m_since_ps, now_ps - m_since_ps};
  if (closed.ps > 0) into[static_cast<int>(m_state)] += closed.ps / 1000;
  m_state = s;
  m_since_ps = now_ps;
  return closed;
}

}  // namespace wallsim::runtime
