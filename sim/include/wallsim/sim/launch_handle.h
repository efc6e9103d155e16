// LaunchHandle: what a host runtime may know of a plan launch on the Device — whether and when
// it started and drained, and the event to wait on — without the engines' Launch record.
#pragma once

#include <systemc>

#include <cstddef>
#include <cstdint>

namespace wallsim::engines {
struct Launch;
}  // namespace wallsim::engines

namespace wallsim::sim {

class Core;

// A non-owning view of launch number `index` of a Device, valid as long as the Device. The
// Device frees a launch's record once it is retired (Device::retire_drained); the handle then
// reports it started and drained, and its times only when the Device keeps them (tracing). A
// default-constructed handle names no launch.
class LaunchHandle {
 public:
  LaunchHandle() = default;
  LaunchHandle(const Core& device, const engines::Launch& launch);  // a launch() just made
  LaunchHandle(const Core& device, size_t index) : m_device(&device), m_index(index) {}

  explicit operator bool() const { return m_device != nullptr; }
  bool started() const;
  bool drained() const;
  // Only while not drained(): the event its drain notifies.
  const sc_core::sc_event& drained_event() const;
  int64_t launch_begin_ps() const;  // the launcher took it (its launch cost starts)
  int64_t start_ps() const;         // streams dispatched
  int64_t end_ps() const;           // last result ready

 private:
  const Core* m_device = nullptr;
  size_t m_index = 0;
};

// The Device's launches, in launch order: how many were ever made, and number `index`.
size_t launch_count(const Core& device);
LaunchHandle launch_at(const Core& device, size_t index);

}  // namespace wallsim::sim
