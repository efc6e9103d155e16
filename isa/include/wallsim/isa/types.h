// Element types, memory spaces and engines: the vocabulary shared by compiler, plans and chip.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "wallsim/base/enum_traits.h"

namespace wallsim::isa {

enum class DType : uint8_t { fp32, bf16, fp16, int32 };
enum class MemSpace : uint8_t { hbm, sbuf, psum, host };
// The engines that execute instruction streams. DMA streams are queues served by DMA engines.
enum class Engine : uint8_t { tensor, vector, scalar, dma };

inline constexpr int kNumDTypes = 4;
inline constexpr int kNumMemSpaces = 4;
inline constexpr int kNumEngines = 4;

int dtype_bytes(DType t);
bool is_float(DType t);

std::string_view name_of(DType t);
std::string_view name_of(MemSpace s);
std::string_view name_of(Engine e);

std::optional<DType> parse_dtype(std::string_view s);
std::optional<MemSpace> parse_mem_space(std::string_view s);
std::optional<Engine> parse_engine(std::string_view s);

// SBUF and PSUM are partitioned on-chip memories; HBM and host memory hold named tensors.
inline bool is_on_chip(MemSpace s) { return s == MemSpace::sbuf || s == MemSpace::psum; }

}  // namespace wallsim::isa

namespace wallsim::base {
template <>
struct EnumTraits<isa::DType> {
  static constexpr int kCount = isa::kNumDTypes;
};
template <>
struct EnumTraits<isa::MemSpace> {
  static constexpr int kCount = isa::kNumMemSpaces;
};
template <>
struct EnumTraits<isa::Engine> {
  static constexpr int kCount = isa::kNumEngines;
};
}  // namespace wallsim::base
