// HostClock: the host thread's time accounting. The host is always in exactly one HostState;
// switching state closes an interval that is added to the current record, so the states of a
// step sum exactly to its wall time. Plain C++: the Session reads simulated time and waits.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace wallsim::runtime {

// comm_wait: the part of a step's sync waits during which the rank's core was blocked in a
// collective, from its arrival to the collective's end (Session::split_comm_wait, at each
// step's end). A report lists it only when nonzero (host_state_always_shown), so runs without
// communication report as before.
enum class HostState : uint8_t { dispatch, compile, transfer, sync_wait, comm_wait, other };
inline constexpr int kNumHostStates = 6;
std::string_view name_of(HostState s);  // "host_dispatch", "compile", ...
// What the state's time is, for reports ("host time dispatching ops and launches").
std::string_view doc_of(HostState s);
// Whether reports list the state even at zero (every state but comm_wait).
bool host_state_always_shown(HostState s);

using HostTimes = std::array<int64_t, kNumHostStates>;  // ns by HostState

class HostClock {
 public:
  // A closed interval of one state.
  struct Interval {
    HostState state;
    int64_t start_ps;
    int64_t ps;
  };
  // Switches to `s` at `now_ps`; the whole nanoseconds since the last switch go to the previous
  // state in `into`. Returns the closed interval (ps may be 0).
  Interval enter(HostState s, int64_t now_ps, HostTimes& into);
  // Restarts the open interval at `now_ps` without accounting it (idle time between steps).
  void restart(int64_t now_ps) { m_since_ps = now_ps; }
  HostState state() const { return m_state; }
  // Picoseconds to wait from `now_ps` to the next whole nanosecond (0 if on one): the host clock
  // stays on whole nanoseconds, so every state's time is a whole number of them.
  static int64_t to_whole_ns(int64_t now_ps) {
    const int64_t rem = now_ps % 1000;
    return rem == 0 ? 0 : 1000 - rem;
  }

 private:
  HostState m_state = HostState::other;
  int64_t m_since_ps = 0;
};

}  // namespace wallsim::runtime
