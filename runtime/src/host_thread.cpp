// run_host: the workload's host code as a SystemC thread, simulated to the end.
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"

namespace wallsim::runtime {

namespace {

class HostThread : public sc_core::sc_module {
 public:
  HostThread(sc_core::sc_module_name name, std::function<void()> body)
      : sc_core::sc_module(name), m_body(std::move(body)) {
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
    sc_core::sc_stop();
  }
  std::function<void()> m_body;
};

}  // namespace

void run_host(sim::Core& device, const std::function<void()>& body) {
  HostThread host("host", body);
  wallsim::sim::simulate();
  if (host.error) std::rethrow_exception(host.error);
  if (auto e = device.error()) throw sim::SimulationError(*e);
  if (!host.done) {
    std::string msg = "the device deadlocked before the host finished";
    for (const auto& line : device.deadlock_report()) msg += "; " + line;
    throw sim::SimulationError(msg);
  }
}

}  // namespace wallsim::runtime
