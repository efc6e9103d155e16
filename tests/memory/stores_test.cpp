// Backing stores: on-chip partitions and named off-chip tensors, random fill, float export.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "wallsim/isa/dtype_convert.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/memory/on_chip_store.h"
#include "wallsim/memory/tensor_store.h"

namespace wallsim::memory {
namespace {

using isa::DType;
using isa::MemSpace;

TEST(OnChipStore, ZeroFilledAndContiguous) {
  OnChipStore s(4, 100);
  EXPECT_EQ(s.partitions(), 4);
  EXPECT_EQ(s.bytes_per_partition(), 100);
  EXPECT_EQ(s.at(1, 0), s.at(0, 0) + 100);
  EXPECT_EQ(s.at(3, 99), s.at(0, 0) + 399);
  for (int64_t i = 0; i < 400; ++i) ASSERT_EQ(s.at(0, 0)[i], 0);
  *s.at(2, 5) = 7;
  const OnChipStore& c = s;
  EXPECT_EQ(*c.at(2, 5), 7);
}

TEST(OnChipStore, RejectsInvalidSizes) {
  EXPECT_THROW(OnChipStore(-1, 10), std::invalid_argument);
  EXPECT_THROW(OnChipStore(1, -10), std::invalid_argument);
  EXPECT_THROW(OnChipStore(4, INT64_MAX / 2), std::invalid_argument);
  OnChipStore empty(0, 0);
  EXPECT_EQ(empty.partitions(), 0);
}

TEST(TensorStore, PutKeepsMatchingAndReplacesOthers) {
  TensorStore ts;
  TensorStore::Tensor& a = ts.put("a", MemSpace::hbm, DType::bf16, {3, 4});
  EXPECT_EQ(a.elements(), 12);
  EXPECT_EQ(a.bytes.size(), 24u);
  for (uint8_t b : a.bytes) ASSERT_EQ(b, 0);
  a.bytes[0] = 9;
  TensorStore::Tensor& again = ts.put("a", MemSpace::hbm, DType::bf16, {3, 4});
  EXPECT_EQ(&again, &a);
  EXPECT_EQ(again.bytes[0], 9);  // kept as is
  TensorStore::Tensor& reshaped = ts.put("a", MemSpace::hbm, DType::bf16, {4, 3});
  EXPECT_EQ(&reshaped, &a);  // same object, new contents
  EXPECT_EQ(reshaped.bytes[0], 0);
  EXPECT_EQ(reshaped.shape, (std::vector<int64_t>{4, 3}));
  ts.put("a", MemSpace::host, DType::bf16, {4, 3}).bytes[0] = 1;
  EXPECT_EQ(ts.find("a")->space, MemSpace::host);
  ts.put("a", MemSpace::host, DType::fp32, {4, 3});
  EXPECT_EQ(ts.find("a")->bytes.size(), 48u);
  EXPECT_EQ(ts.find("a")->bytes[0], 0);
}

TEST(TensorStore, FindAndSortedNames) {
  TensorStore ts;
  ts.put("zeta", MemSpace::hbm, DType::fp32, {2});
  ts.put("alpha", MemSpace::host, DType::int32, {});
  ts.put("mid", MemSpace::hbm, DType::fp16, {0, 5});
  EXPECT_EQ(ts.names(), (std::vector<std::string>{"alpha", "mid", "zeta"}));
  EXPECT_EQ(ts.find("nope"), nullptr);
  const TensorStore& c = ts;
  ASSERT_NE(c.find("alpha"), nullptr);
  EXPECT_EQ(c.find("alpha")->elements(), 1);  // a scalar
  EXPECT_EQ(c.find("mid")->elements(), 0);
  EXPECT_TRUE(c.find("mid")->bytes.empty());
}

TEST(TensorStore, RejectsInvalidShapes) {
  TensorStore ts;
  EXPECT_THROW(ts.put("neg", MemSpace::hbm, DType::fp32, {2, -1}), MemoryError);
  EXPECT_THROW(ts.put("big", MemSpace::hbm, DType::fp32, {INT64_MAX / 2, 4}), MemoryError);
  EXPECT_THROW(ts.put("big", MemSpace::hbm, DType::fp32, {INT64_MAX / 2}), MemoryError);
  EXPECT_TRUE(ts.names().empty());
}

TEST(TensorStore, FillRandomIsDeterministicAndInRange) {
  for (DType t : {DType::fp32, DType::bf16, DType::fp16, DType::int32}) {
    TensorStore ts;
    auto& a = ts.put("a", MemSpace::hbm, t, {64, 33});
    auto& b = ts.put("b", MemSpace::hbm, t, {64, 33});
    auto& c = ts.put("c", MemSpace::hbm, t, {64, 33});
    fill_random(a, 7);
    fill_random(b, 7);
    fill_random(c, 8);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_NE(a.bytes, c.bytes);
    std::vector<float> v = to_floats(a);
    ASSERT_EQ(v.size(), 64u * 33u);
    float lo = 1e9f, hi = -1e9f;
    for (float x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      if (t == DType::int32) {
        ASSERT_EQ(x, std::floor(x));
        ASSERT_GE(x, 0.0f);
        ASSERT_LT(x, 16.0f);
      } else {
        ASSERT_GE(x, -1.0f);
        ASSERT_LT(x, 1.0f);
      }
    }
    if (t == DType::int32) {
      EXPECT_EQ(lo, 0.0f);
      EXPECT_EQ(hi, 15.0f);
    } else {
      EXPECT_LT(lo, -0.9f);
      EXPECT_GT(hi, 0.9f);
    }
  }
}

// The mapping from the generator's output to values is part of the contract: pin it.
TEST(TensorStore, FillRandomGoldenValues) {
  TensorStore ts;
  auto& f = ts.put("f", MemSpace::hbm, DType::fp32, {3});
  fill_random(f, 42);
  std::vector<float> v = to_floats(f);
  EXPECT_EQ(v, (std::vector<float>{0.510311007f, 0.278062701f, 0.504290342f}));
  std::mt19937_64 rng(42);
  for (float x : v) EXPECT_EQ(x, static_cast<float>(rng() >> 40) * 0x1p-23f - 1.0f);
  auto& i = ts.put("i", MemSpace::hbm, DType::int32, {3});
  fill_random(i, 42);
  EXPECT_EQ(to_floats(i), (std::vector<float>{12, 10, 12}));
  std::mt19937_64 rng2(42);
  for (float x : to_floats(i)) EXPECT_EQ(x, static_cast<float>(rng2() >> 60));
}

TEST(TensorStore, ToFloatsWidensEachDType) {
  TensorStore ts;
  auto& h = ts.put("h", MemSpace::hbm, DType::fp16, {2});
  store_element(h.bytes.data(), DType::fp16, 0.5f);
  store_element(h.bytes.data() + 2, DType::fp16, -3.0f);
  EXPECT_EQ(to_floats(h), (std::vector<float>{0.5f, -3.0f}));
  auto& n = ts.put("n", MemSpace::hbm, DType::int32, {2});
  store_element(n.bytes.data() + 4, DType::int32, -12.0f);
  EXPECT_EQ(to_floats(n), (std::vector<float>{0.0f, -12.0f}));
}

}  // namespace
}  // namespace wallsim::memory
