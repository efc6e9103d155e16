// A compute engine's datapath: timing from its model, values from the functional semantics.
#include "wallsim/engines/compute_unit.h"

#include <cmath>

#include "wallsim/engines/functional.h"

namespace wallsim::engines {

int64_t period_fs(double freq_mhz) { return std::llround(1e9 / freq_mhz); }

ComputeUnit::ComputeUnit(std::unique_ptr<TimingModel> model, SharedPort* port)
    : m_model(std::move(model)), m_port(port), m_period_fs(period_fs(m_model->freq_mhz())) {}

sc_core::sc_time ComputeUnit::run(const isa::Instruction& in, Launch& launch, bool back_to_back) {
  const InstructionTiming t = m_model->time(in, back_to_back);
  const auto occupancy =
      sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(t.occupancy_cycles * m_period_fs));
  if (m_port) {
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    if (m_port->free_at > now) sc_core::wait(m_port->free_at - now);
    m_port->free_at = sc_core::sc_time_stamp() + occupancy;
  }
  if (launch.functional) execute_compute(in, launch.memory);
  sc_core::wait(occupancy);
  return sc_core::sc_time::from_value(
      static_cast<sc_dt::uint64>((t.latency_cycles - t.occupancy_cycles) * m_period_fs));
}

}  // namespace wallsim::engines
