// Bulk element conversions: one dtype dispatch per run, then loops the compiler can vectorise.
#include "wallsim/isa/dtype_convert.h"

namespace wallsim::isa {

void load_elements(const uint8_t* p, isa::DType t, float* out, int64_t n) {
  switch (t) {
    case isa::DType::fp32:
      if (n > 0) std::memcpy(out, p, static_cast<size_t>(n) * 4);
      return;
    case isa::DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_float(h);
      }
      return;
    case isa::DType::fp16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = fp16_to_float(h);
      }
      return;
    case isa::DType::int32:
      for (int64_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = static_cast<float>(v);
      }
      return;
  }
}

void store_elements(uint8_t* p, isa::DType t, const float* in, int64_t n) {
  switch (t) {
    case isa::DType::fp32:
      if (n > 0) std::memcpy(p, in, static_cast<size_t>(n) * 4);
      return;
    case isa::DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = float_to_bf16(in[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    case isa::DType::fp16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = float_to_fp16(in[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    case isa::DType::int32:
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = float_to_int32(in[i]);
        std::memcpy(p + 4 * i, &v, 4);
      }
      return;
  }
}

}  // namespace wallsim::isa
