// LaunchHandle: the runtime's view of a launch.
#include "wallsim/sim/launch_handle.h"

#include "wallsim/sim/device.h"

namespace wallsim::sim {

bool LaunchHandle::started() const { return m_launch->started; }
bool LaunchHandle::drained() const { return m_launch->drained; }
const sc_core::sc_event& LaunchHandle::drained_event() const { return m_launch->drained_event; }
int64_t LaunchHandle::launch_begin_ps() const {
  return static_cast<int64_t>(m_launch->launch_begin.value());
}
int64_t LaunchHandle::start_ps() const {
  return static_cast<int64_t>(m_launch->start_time.value());
}
int64_t LaunchHandle::end_ps() const { return static_cast<int64_t>(m_launch->end_time.value()); }

size_t launch_count(const Device& device) { return device.launches().size(); }
LaunchHandle launch_at(const Device& device, size_t index) { return device.launches()[index]; }

}  // namespace wallsim::sim
