// Device memory accounting.
#include "wallsim/runtime/device_memory.h"

#include <unordered_set>

#include "wallsim/runtime/runtime_error.h"

namespace wallsim::runtime {

std::string DeviceMemory::allocate(int64_t bytes, const std::string& hint) {
  if (m_used + bytes > m_capacity) {
    throw RuntimeError("device memory exhausted: " + std::to_string(m_used) + " bytes in use, " +
                       std::to_string(bytes) + " more needed, arch.hbm.bytes is " +
                       std::to_string(m_capacity));
  }
  std::string name = hint + std::to_string(m_next++);
  m_used += bytes;
  m_bytes[name] = bytes;
  return name;
}

void DeviceMemory::release(std::string name, bool reusable_now) {
  if (reusable_now) {
    auto it = m_bytes.find(name);
    if (it != m_bytes.end()) {
      m_used -= it->second;
      m_bytes.erase(it);
    }
  }
  m_deferred.push_back(std::move(name));
}

std::vector<std::string> DeviceMemory::free_deferred() {
  std::vector<std::string> freed;
  std::unordered_set<std::string> seen;
  for (std::string& name : m_deferred) {
    if (!seen.insert(name).second) continue;
    auto it = m_bytes.find(name);
    if (it != m_bytes.end()) {
      m_used -= it->second;
      m_bytes.erase(it);
    }
    freed.push_back(std::move(name));
  }
  m_deferred.clear();
  return freed;
}

}  // namespace wallsim::runtime
