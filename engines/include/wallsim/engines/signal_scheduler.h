// Delivers semaphore increments (and stream completions) at the time an instruction's result is
// ready: one timed event and a method, instead of a second blocking wait per instruction.
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "wallsim/engines/launch.h"

namespace wallsim::engines {

class SignalScheduler : public sc_core::sc_module {
 public:
  explicit SignalScheduler(sc_core::sc_module_name name);
  // At `at` (>= now), adds `amount` to semaphore `sem` of `launch`.
  void signal(sc_core::sc_time at, Launch* launch, int sem, int64_t amount);
  // At `at` (>= now), marks one stream of `launch` finished; the last one drains the launch.
  void stream_done(sc_core::sc_time at, Launch* launch);

 private:
  struct Entry {
    sc_core::sc_time at;
    uint64_t seq;  // FIFO among equal times: deterministic
    Launch* launch;
    int sem;  // -1: stream finished
    int64_t amount;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  void push(const Entry& e);
  void fire();

  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> m_queue;
  uint64_t m_seq = 0;
  sc_core::sc_event m_wake;
};

}  // namespace wallsim::engines
