// CommOverlap: a core's communication against its compute, swept as the simulation runs — how
// long a collective (or send, recv) of the core was in progress while none of its compute
// engines was busy (exposed), and how long while one was (overlapped). Plain C++, no SystemC.
#pragma once

#include <cstdint>
#include <functional>

namespace wallsim::sim {

// Fed the start and end of every compute instruction's occupancy and of every collective
// instruction (from the core's arrival to the collective's end), in non-decreasing time, it
// keeps the length of the union of collective intervals minus the union of compute intervals
// (exposed) and of the union of collective intervals (collective), in picoseconds. Events at
// one instant may come in any order: the totals and the exposed intervals reported do not
// depend on it (an exposed interval that ends where the next begins is reported as one).
class CommOverlap {
 public:
  enum class Activity { compute, collective };
  // Called with each maximal exposed interval [lo, hi) in ps once it is known to have ended
  // (the last one by finish()); optional.
  void on_exposed(std::function<void(int64_t lo, int64_t hi)> f) { m_on_exposed = std::move(f); }
  void begin(Activity a, int64_t at_ps);
  void end(Activity a, int64_t at_ps);
  // Reports the pending exposed interval, if any (after the last event).
  void finish();

  int64_t collective_ps() const { return m_collective_ps; }
  int64_t exposed_ps() const { return m_exposed_ps; }
  int64_t overlapped_ps() const { return m_collective_ps - m_exposed_ps; }

 private:
  void advance(int64_t at_ps);
  bool exposed() const { return m_collectives > 0 && m_computing == 0; }

  int m_computing = 0, m_collectives = 0;
  int64_t m_last_ps = 0;
  int64_t m_collective_ps = 0, m_exposed_ps = 0;
  // The exposed interval being built: [m_lo, m_hi), reported once a later one does not touch it.
  int64_t m_lo = -1, m_hi = -1;
  std::function<void(int64_t, int64_t)> m_on_exposed;
};

}  // namespace wallsim::sim
