// Access-pattern arithmetic: element counts, spans, aliasing, strides.
#include "wallsim/isa/access_pattern.h"

#include <gtest/gtest.h>

namespace wallsim::isa {
namespace {

AccessPattern on_chip(int32_t parts, std::initializer_list<Dim> dims, int64_t offset = 0) {
  AccessPattern ap;
  ap.space = MemSpace::sbuf;
  ap.buffer = 0;
  ap.partitions = parts;
  ap.offset = offset;
  for (Dim d : dims) ap.free[ap.num_free++] = d;
  return ap;
}

TEST(AccessPattern, CountsElementsAndBytes) {
  AccessPattern ap = on_chip(128, {{4, 512}, {128, 1}});
  ap.dtype = DType::bf16;
  EXPECT_EQ(ap.free_elements(), 512);
  EXPECT_EQ(ap.elements(), 128 * 512);
  EXPECT_EQ(ap.bytes(), 128 * 512 * 2);
  EXPECT_EQ(on_chip(3, {}).free_elements(), 1);
}

TEST(AccessPattern, SpanCoversAllFreeOffsets) {
  auto span = on_chip(128, {{4, 512}, {128, 1}}, 10).span();
  ASSERT_TRUE(span);
  EXPECT_EQ(span->lo, 10);
  EXPECT_EQ(span->hi, 10 + 3 * 512 + 127);
}

TEST(AccessPattern, SpanWithNegativeStrideExtendsDownwards) {
  auto span = on_chip(1, {{8, -1}}, 100).span();
  ASSERT_TRUE(span);
  EXPECT_EQ(span->lo, 93);
  EXPECT_EQ(span->hi, 100);
}

TEST(AccessPattern, OffChipSpanIncludesRows) {
  AccessPattern ap = on_chip(128, {{64, 1}});
  ap.space = MemSpace::hbm;
  ap.partition_stride = 1000;
  auto span = ap.span();
  ASSERT_TRUE(span);
  EXPECT_EQ(span->hi, 127 * 1000 + 63);
}

TEST(AccessPattern, SpanReportsOverflow) {
  AccessPattern ap = on_chip(1, {{int64_t{1} << 40, int64_t{1} << 40}});
  EXPECT_FALSE(ap.span());
}

TEST(AccessPattern, DetectsAliasing) {
  EXPECT_FALSE(on_chip(1, {{4, 512}, {512, 1}}).has_aliasing());
  EXPECT_TRUE(on_chip(1, {{512, 0}}).has_aliasing());             // broadcast
  EXPECT_TRUE(on_chip(1, {{4, 100}, {128, 1}}).has_aliasing());   // rows overlap
  EXPECT_FALSE(on_chip(1, {{1, 0}, {16, 1}}).has_aliasing());     // size-1 dims are free
  EXPECT_FALSE(on_chip(1, {{128, 1}, {4, 128}}).has_aliasing());  // transposed order
}

TEST(AccessPattern, InnerStrideInBytes) {
  AccessPattern ap = on_chip(1, {{16, 8}});
  ap.dtype = DType::fp32;
  EXPECT_EQ(ap.inner_stride_bytes(), 32);
  EXPECT_EQ(on_chip(1, {}).inner_stride_bytes(), 4);
}

}  // namespace
}  // namespace wallsim::isa
