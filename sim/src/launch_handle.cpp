// LaunchHandle: the runtime's view of a launch.
#include "wallsim/sim/launch_handle.h"

#include "wallsim/sim/system.h"

namespace wallsim::sim {

LaunchHandle::LaunchHandle(const Core& device, const engines::Launch& launch)
    : m_device(&device), m_index(static_cast<size_t>(launch.index)) {}

bool LaunchHandle::started() const {
  const engines::Launch* l = m_device->live_launch(m_index);
  return !l || l->started;
}
bool LaunchHandle::drained() const {
  const engines::Launch* l = m_device->live_launch(m_index);
  return !l || l->drained;
}
const sc_core::sc_event& LaunchHandle::drained_event() const {
  return m_device->live_launch(m_index)->drained_event;
}
int64_t LaunchHandle::launch_begin_ps() const {
  return static_cast<int64_t>(m_device->launch_times(m_index).launch_begin.value());
}
int64_t LaunchHandle::start_ps() const {
  return static_cast<int64_t>(m_device->launch_times(m_index).start.value());
}
int64_t LaunchHandle::end_ps() const {
  return static_cast<int64_t>(m_device->launch_times(m_index).end.value());
}

size_t launch_count(const Core& device) { return device.launch_count(); }
LaunchHandle launch_at(const Core& device, size_t index) { return {device, index}; }

}  // namespace wallsim::sim
