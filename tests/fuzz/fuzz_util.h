// What the libFuzzer harnesses share: bad input must be a base::InputError (exit code 2 in the
// CLI); any other exception escapes the harness and is reported as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "wallsim/base/params.h"

namespace wallsim::fuzz {

inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs f; an InputError (a refused input) is the expected outcome for most inputs.
template <class F>
void expect_input_error_only(F&& f) {
  try {
    f();
  } catch (const base::InputError&) {
  }
}

}  // namespace wallsim::fuzz
