// A compute engine's datapath: timing from its model, values from the functional semantics.
#include "wallsim/engines/compute_unit.h"

#include <cmath>

#include "wallsim/engines/functional.h"

namespace wallsim::engines {

int64_t period_fs(double freq_mhz) { return std::llround(1e9 / freq_mhz); }

int64_t time_to_cycles(sc_core::sc_time t, int64_t period_fs) {
  return period_fs > 0 ? std::llround(double(t.value()) * 1000.0 / double(period_fs)) : 0;
}

ComputeUnit::ComputeUnit(std::unique_ptr<TimingModel> model, SharedPort* port)
    : m_model(std::move(model)), m_port(port), m_period_fs(period_fs(m_model->freq_mhz())) {}

sc_core::sc_time ComputeUnit::run(const isa::Instruction& in, Launch& launch, bool back_to_back) {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  int64_t idle = TimingModel::kIdleUnknown;
  if (back_to_back) {
    idle = 0;
  } else if (m_have_prev) {
    const double cycles = double((now - m_last_end).value()) * 1000.0 / double(m_period_fs);
    idle = cycles < 9.0e18 ? static_cast<int64_t>(cycles) : TimingModel::kIdleUnknown;
  }
  const InstructionTiming t = m_model->time_after(in, idle);
  // The engine's clock edges stay on their exact grid: the fraction of a picosecond an
  // occupancy does not fill carries into the next one, so back-to-back work never drifts.
  const int64_t fs = t.occupancy_cycles * m_period_fs + m_carry_fs;
  m_carry_fs = fs % 1000;
  const auto occupancy = sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(fs / 1000));
  if (m_port) {
    if (m_port->free_at > now) sc_core::wait(m_port->free_at - now);
    m_port->free_at = sc_core::sc_time_stamp() + occupancy;
  }
  if (launch.functional) execute_compute(in, launch.memory);
  sc_core::wait(occupancy);
  m_last_end = sc_core::sc_time_stamp();
  m_have_prev = true;
  // The result is ready at the latency after the start, rounded to the nearest picosecond.
  const int64_t ready_fs = fs + (t.latency_cycles - t.occupancy_cycles) * m_period_fs;
  return sc_core::sc_time::from_value(
      static_cast<sc_dt::uint64>((ready_fs + 500) / 1000 - fs / 1000));
}

}  // namespace wallsim::engines
