// MemoryError: an access outside a store, buffer or tensor, or to a tensor that is not there.
#pragma once

#include <stdexcept>
#include <string>

namespace wallsim::memory {

// Thrown instead of touching memory out of bounds; what() is one line naming the buffer or
// tensor and the offending index. Nothing has been read or written when it is thrown.
class MemoryError : public std::runtime_error {
 public:
  explicit MemoryError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace wallsim::memory
