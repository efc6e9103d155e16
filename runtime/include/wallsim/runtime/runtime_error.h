// RuntimeError: the run cannot go on — a compile failure under the `fail` policy, a shape beyond
// every AOT bucket, device memory exhausted. One line.
#pragma once

#include <stdexcept>

namespace wallsim::runtime {

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace wallsim::runtime
