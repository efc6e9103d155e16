// DeviceMemory: the runtime's view of HBM — named tensors, bytes in use against the capacity,
// and frees deferred until the device is done with them. Plain C++: it models capacity, not
// placement (the device's tensor store holds the bytes of functional runs).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace wallsim::runtime {

class DeviceMemory {
 public:
  explicit DeviceMemory(int64_t capacity_bytes) : m_capacity(capacity_bytes) {}
  // A new tensor named `hint` followed by a serial number. Over the capacity: RuntimeError.
  std::string allocate(int64_t bytes, const std::string& hint);
  bool holds(const std::string& name) const { return m_bytes.count(name) > 0; }
  // Freed at the next free_deferred() (the device may still be reading it).
  void defer_free(std::string name) { m_deferred.push_back(std::move(name)); }
  // Frees what was deferred; returns the names freed (each once).
  std::vector<std::string> free_deferred();
  int64_t used_bytes() const { return m_used; }

 private:
  int64_t m_capacity;
  int64_t m_used = 0;
  int64_t m_next = 0;
  std::unordered_map<std::string, int64_t> m_bytes;
  std::vector<std::string> m_deferred;
};

}  // namespace wallsim::runtime
