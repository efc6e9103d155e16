// A core's exposed and overlapped communication, by a sweep over its activity changes.
#include "wallsim/sim/comm_overlap.h"

namespace wallsim::sim {

void CommOverlap::advance(int64_t at_ps) {
  if (at_ps <= m_last_ps) return;
  const int64_t span = at_ps - m_last_ps;
  if (m_collectives > 0) m_collective_ps += span;
  if (exposed()) {
    m_exposed_ps += span;
    if (m_hi != m_last_ps) {  // not touching the pending interval: that one has ended
      if (m_hi > m_lo && m_on_exposed) m_on_exposed(m_lo, m_hi);
      m_lo = m_last_ps;
    }
    m_hi = at_ps;
  }
  m_last_ps = at_ps;
}

void CommOverlap::begin(Activity a, int64_t at_ps) {
  advance(at_ps);
  ++(a == Activity::compute ? m_computing : m_collectives);
}

void CommOverlap::end(Activity a, int64_t at_ps) {
  advance(at_ps);
  --(a == Activity::compute ? m_computing : m_collectives);
}

void CommOverlap::finish() {
  if (m_hi > m_lo && m_on_exposed) m_on_exposed(m_lo, m_hi);
  m_lo = m_hi = -1;
}

}  // namespace wallsim::sim
