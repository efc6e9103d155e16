// Names and sizes of element types, memory spaces and engines.
#include "wallsim/isa/types.h"

#include <array>

namespace wallsim::isa {
namespace {

constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {"fp32", "bf16", "fp16", "int32"};
constexpr std::array<int, kNumDTypes> kDTypeBytes = {4, 2, 2, 4};
constexpr std::array<std::string_view, kNumMemSpaces> kSpaceNames = {"hbm", "sbuf", "psum", "host"};
constexpr std::array<std::string_view, kNumEngines> kEngineNames = {"tensor", "vector", "scalar",
                                                                    "dma"};

template <class E, size_t N>
std::optional<E> parse(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace

int dtype_bytes(DType t) { return kDTypeBytes[static_cast<size_t>(t)]; }
bool is_float(DType t) { return t != DType::int32; }

std::string_view name_of(DType t) { return kDTypeNames[static_cast<size_t>(t)]; }
std::string_view name_of(MemSpace s) { return kSpaceNames[static_cast<size_t>(s)]; }
std::string_view name_of(Engine e) { return kEngineNames[static_cast<size_t>(e)]; }

std::optional<DType> parse_dtype(std::string_view s) { return parse<DType>(kDTypeNames, s); }
std::optional<MemSpace> parse_mem_space(std::string_view s) {
  return parse<MemSpace>(kSpaceNames, s);
}
std::optional<Engine> parse_engine(std::string_view s) { return parse<Engine>(kEngineNames, s); }

}  // namespace wallsim::isa
