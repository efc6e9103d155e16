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

class Device;

// A non-owning view; valid as long as the Device (launches live as long as it does). A
// default-constructed handle names no launch.
class LaunchHandle {
 public:
  LaunchHandle() = default;
  LaunchHandle(const engines::Launch& l) : m_launch(&l) {}  // NOLINT: the Device's launch()

  explicit operator bool() const { return m_launch != nullptr; }
  bool started() const;
  bool drained() const;
  const sc_core::sc_event& drained_event() const;
  int64_t launch_begin_ps() const;  // the launcher took it (its launch cost starts)
  int64_t start_ps() const;         // streams dispatched
  int64_t end_ps() const;           // last result ready

 private:
  const engines::Launch* m_launch = nullptr;
};

// The Device's launches, in launch order.
size_t launch_count(const Device& device);
LaunchHandle launch_at(const Device& device, size_t index);

}  // namespace wallsim::sim
