// Element conversions between the chip's dtypes (fp32, bf16, fp16, int32) and float.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "wallsim/isa/types.h"

namespace wallsim::isa {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "element bytes are stored little-endian and copied as host integers");

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t{h} << 16); }

// Round to nearest, ties to even; overflow rounds to inf; NaN stays NaN (quietened, sign kept).
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float fp16_to_float(uint16_t h) {
  uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {                                                         // zero, subnormal
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;          // mant * 2^-24
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// IEEE binary16: round to nearest, ties to even; overflow to inf; subnormals rounded exactly;
// NaN stays NaN (quietened, sign kept).
inline uint16_t float_to_fp16(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (u >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (u < 0x38800000u) {                                               // below 2^-14: subnormal
    uint32_t e = u >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    uint32_t m = (u & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    r += (rem > half || (rem == half && (r & 1u))) ? 1u : 0u;
    return static_cast<uint16_t>(sign | r);  // r == 0x400 is the smallest normal
  }
  uint32_t h = (u >> 13) - (112u << 10);
  uint32_t rem = u & 0x1fffu;
  h += (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ? 1u : 0u;
  return static_cast<uint16_t>(sign | h);
}

// Round to nearest (ties to even), saturating to the int32 range; NaN becomes 0.
inline int32_t float_to_int32(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483648.0f) return INT32_MAX;
  if (v <= -2147483648.0f) return INT32_MIN;
  return static_cast<int32_t>(std::nearbyint(v));
}

// One element of `t` at `p` (unaligned is fine), as float. int32 converts with rounding.
inline float load_element(const uint8_t* p, isa::DType t) {
  switch (t) {
    case isa::DType::fp32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case isa::DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_float(h);
    }
    case isa::DType::fp16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fp16_to_float(h);
    }
    case isa::DType::int32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return static_cast<float>(i);
    }
  }
  return 0.0f;
}

inline void store_element(uint8_t* p, isa::DType t, float v) {
  switch (t) {
    case isa::DType::fp32:
      std::memcpy(p, &v, 4);
      return;
    case isa::DType::bf16: {
      uint16_t h = float_to_bf16(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case isa::DType::fp16: {
      uint16_t h = float_to_fp16(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case isa::DType::int32: {
      int32_t i = float_to_int32(v);
      std::memcpy(p, &i, 4);
      return;
    }
  }
}

// Bulk forms over `n` consecutive elements: one dtype dispatch, then a tight loop.
void load_elements(const uint8_t* p, isa::DType t, float* out, int64_t n);
void store_elements(uint8_t* p, isa::DType t, const float* in, int64_t n);

}  // namespace wallsim::isa
