// Element conversions: exhaustive round trips, rounding ties, NaN, inf, subnormals, int32.
#include "wallsim/isa/dtype_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace wallsim::isa {
namespace {

bool is_nan_bf16(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }
bool is_nan_fp16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(Bf16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t b = static_cast<uint16_t>(h);
    float f = bf16_to_float(b);
    if (is_nan_bf16(b)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(is_nan_bf16(float_to_bf16(f)));
    } else {
      ASSERT_EQ(float_to_bf16(f), b) << std::hex << h;
    }
  }
}

// For each pair of neighbouring finite values a < b: the midpoint goes to the even one, and
// anything just off the midpoint goes to the nearer one.
TEST(Bf16, RoundsToNearestTiesToEven) {
  for (uint16_t a = 0; a < 0x7f7f; ++a) {
    uint16_t b = a + 1;
    float fa = bf16_to_float(a), fb = bf16_to_float(b);
    float mid = fa + (fb - fa) / 2;  // exact: 9 significant bits
    ASSERT_EQ(float_to_bf16(mid), (a & 1) ? b : a) << std::hex << a;
    ASSERT_EQ(float_to_bf16(std::nextafter(mid, 0.0f)), a);
    ASSERT_EQ(float_to_bf16(std::nextafter(mid, fb)), b);
    ASSERT_EQ(float_to_bf16(-mid), ((a & 1) ? b : a) | 0x8000);
  }
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie, even below
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, even above
}

TEST(Bf16, InfinityNaNAndOverflow) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(float_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_TRUE(is_nan_bf16(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lives only in the low bits must not truncate to infinity.
  EXPECT_TRUE(is_nan_bf16(float_to_bf16(bits_float(0x7f800001u))));
  EXPECT_TRUE(is_nan_bf16(float_to_bf16(bits_float(0xffffffffu))));
  EXPECT_EQ(float_to_bf16(bits_float(0xffc00000u)) & 0x8000, 0x8000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(bits_float(0x00000001u)), 0x0000);  // float subnormal rounds down
  EXPECT_EQ(float_to_bf16(bits_float(0x00018000u)), 0x0002);  // tie between 1 and 2 -> 2
}

TEST(Fp16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t b = static_cast<uint16_t>(h);
    float f = fp16_to_float(b);
    if (is_nan_fp16(b)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(is_nan_fp16(float_to_fp16(f)));
    } else {
      ASSERT_EQ(float_to_fp16(f), b) << std::hex << h;
    }
  }
}

TEST(Fp16, DecodesKnownValues) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_float(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(fp16_to_float(0x0400), 0x1p-14f);
  EXPECT_EQ(fp16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(fp16_to_float(0x8000)));
}

TEST(Fp16, RoundsToNearestTiesToEvenIncludingSubnormals) {
  for (uint16_t a = 0; a < 0x7bff; ++a) {
    uint16_t b = a + 1;
    float fa = fp16_to_float(a), fb = fp16_to_float(b);
    float mid = fa + (fb - fa) / 2;
    ASSERT_EQ(float_to_fp16(mid), (a & 1) ? b : a) << std::hex << a;
    ASSERT_EQ(float_to_fp16(std::nextafter(mid, 0.0f)), a) << std::hex << a;
    ASSERT_EQ(float_to_fp16(std::nextafter(mid, fb)), b) << std::hex << a;
    ASSERT_EQ(float_to_fp16(-mid), ((a & 1) ? b : a) | 0x8000);
  }
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);  // tie between 0 and 1 -> 0
  EXPECT_EQ(float_to_fp16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_fp16(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 -> 2
  EXPECT_EQ(float_to_fp16(1e-10f), 0x0000);
  EXPECT_EQ(float_to_fp16(-1e-10f), 0x8000);
  EXPECT_EQ(float_to_fp16(1023.5f * 0x1p-24f), 0x0400);  // rounds up into the normals
}

TEST(Fp16, OverflowInfinityAndNaN) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // tie with 65536 goes to even: infinity
  EXPECT_EQ(float_to_fp16(1e9f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-1e9f), 0xfc00);
  EXPECT_EQ(float_to_fp16(kInf), 0x7c00);
  EXPECT_EQ(float_to_fp16(-kInf), 0xfc00);
  EXPECT_TRUE(is_nan_fp16(float_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_nan_fp16(float_to_fp16(bits_float(0x7f800001u))));
  EXPECT_TRUE(is_nan_fp16(float_to_fp16(bits_float(0xff800001u))));
}

TEST(Int32, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(float_to_int32(2.5f), 2);
  EXPECT_EQ(float_to_int32(3.5f), 4);
  EXPECT_EQ(float_to_int32(-2.5f), -2);
  EXPECT_EQ(float_to_int32(2.4f), 2);
  EXPECT_EQ(float_to_int32(-2.6f), -3);
  EXPECT_EQ(float_to_int32(2147483520.0f), 2147483520);
  EXPECT_EQ(float_to_int32(2147483648.0f), INT32_MAX);
  EXPECT_EQ(float_to_int32(1e20f), INT32_MAX);
  EXPECT_EQ(float_to_int32(-2147483648.0f), INT32_MIN);
  EXPECT_EQ(float_to_int32(-1e20f), INT32_MIN);
  EXPECT_EQ(float_to_int32(std::numeric_limits<float>::infinity()), INT32_MAX);
  EXPECT_EQ(float_to_int32(-std::numeric_limits<float>::infinity()), INT32_MIN);
  EXPECT_EQ(float_to_int32(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST(Elements, LoadAndStoreEachDType) {
  uint8_t buf[8] = {};
  store_element(buf + 1, DType::fp32, 1.5f);  // unaligned is fine
  EXPECT_EQ(load_element(buf + 1, DType::fp32), 1.5f);
  store_element(buf + 1, DType::bf16, 1.5f);
  EXPECT_EQ(buf[1], 0xc0);
  EXPECT_EQ(buf[2], 0x3f);
  EXPECT_EQ(load_element(buf + 1, DType::bf16), 1.5f);
  store_element(buf, DType::fp16, -2.0f);
  EXPECT_EQ(buf[0], 0x00);
  EXPECT_EQ(buf[1], 0xc0);
  EXPECT_EQ(load_element(buf, DType::fp16), -2.0f);
  store_element(buf + 3, DType::int32, -7.6f);
  EXPECT_EQ(load_element(buf + 3, DType::int32), -8.0f);
  store_element(buf, DType::int32, 3e9f);
  int32_t v;
  std::memcpy(&v, buf, 4);
  EXPECT_EQ(v, INT32_MAX);
}

TEST(Elements, BulkMatchesPerElement) {
  std::vector<float> values;
  for (int i = -300; i < 300; ++i) values.push_back(i * 0.37f + 1e-6f * i * i);
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  values.push_back(1e30f);
  int64_t n = static_cast<int64_t>(values.size());
  for (DType t : {DType::fp32, DType::bf16, DType::fp16, DType::int32}) {
    int eb = isa::dtype_bytes(t);
    std::vector<uint8_t> bulk(n * eb), single(n * eb);
    store_elements(bulk.data(), t, values.data(), n);
    for (int64_t i = 0; i < n; ++i) store_element(single.data() + i * eb, t, values[i]);
    EXPECT_EQ(bulk, single) << isa::name_of(t);
    std::vector<float> back(n);
    load_elements(bulk.data(), t, back.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      float want = load_element(single.data() + i * eb, t);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(back[i]));
      } else {
        EXPECT_EQ(back[i], want);
      }
    }
  }
}

}  // namespace
}  // namespace wallsim::isa
