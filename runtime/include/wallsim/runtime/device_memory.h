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
  // The host dropped `name`. Its bytes are reusable at once when `reusable_now` (launches run
  // in order, so every launch that reads it finishes before any later one starts: a
  // stream-ordered allocator), else at the next free_deferred(). Either way its name is
  // returned by the next free_deferred(), when the device is done with its contents.
  void release(std::string name, bool reusable_now);
  // Frees what was released; returns the names released since the last call (each once).
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
