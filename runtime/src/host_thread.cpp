// run_hosts: each rank's host code as a SystemC thread of its own, simulated until every rank
// has ended.
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"

namespace wallsim::runtime {

namespace {

// What the ranks' threads share: how many are still running.
struct Ranks {
  size_t running = 0;
};

class HostThread : public sc_core::sc_module {
 public:
  HostThread(sc_core::sc_module_name name, std::function<void()> body, Ranks& ranks)
      : sc_core::sc_module(name), m_body(std::move(body)), m_ranks(ranks) {
    SC_HAS_PROCESS(HostThread);
    SC_THREAD(run);
  }
  std::exception_ptr error;
  bool done = false;

 private:
  void run() {
    try {
      m_body();
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
    // The run ends with the last rank, or at once on an error (the other ranks would wait for
    // this one forever).
    if (--m_ranks.running == 0 || error) sc_core::sc_stop();
  }
  std::function<void()> m_body;
  Ranks& m_ranks;
};

}  // namespace

void run_hosts(const std::vector<HostRank>& ranks) {
  Ranks shared{ranks.size()};
  std::vector<std::unique_ptr<HostThread>> hosts;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string name = ranks.size() == 1 ? "host" : "host_" + std::to_string(r);
    hosts.push_back(std::make_unique<HostThread>(name.c_str(), ranks[r].body, shared));
  }
  wallsim::sim::simulate();
  for (const auto& h : hosts) {
    if (h->error) std::rethrow_exception(h->error);
  }
  for (const HostRank& rank : ranks) {
    if (auto e = rank.device->error()) throw sim::SimulationError(*e);
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (hosts[r]->done) continue;
    std::string msg =
        ranks.size() == 1
            ? std::string("the device deadlocked before the host finished")
            : "rank " + std::to_string(r) + ": the device deadlocked before its host finished";
    for (const auto& line : ranks[r].device->deadlock_report()) msg += "; " + line;
    throw sim::SimulationError(msg);
  }
}

void run_host(sim::Core& device, const std::function<void()>& body) {
  run_hosts({HostRank{&device, body}});
}

}  // namespace wallsim::runtime
