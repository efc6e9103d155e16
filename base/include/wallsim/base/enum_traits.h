// Enumerations usable as config values: EnumTraits<E>::kCount and `name_of(E)` (found by
// argument-dependent lookup) for each value. The owner of an enum specialises EnumTraits.
#pragma once

#include <string>
#include <vector>

namespace wallsim::base {

template <class E>
struct EnumTraits;

template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (int i = 0; i < EnumTraits<E>::kCount; ++i) out.emplace_back(name_of(static_cast<E>(i)));
  return out;
}

}  // namespace wallsim::base
