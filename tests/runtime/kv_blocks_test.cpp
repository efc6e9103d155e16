// The paged KV cache's block manager.
#include "wallsim/runtime/kv_blocks.h"

#include <gtest/gtest.h>

#include <set>

namespace wallsim::runtime {
namespace {

TEST(KvBlockManager, ReservesGrowsAndReleases) {
  KvBlockManager m(8, 4);
  ASSERT_TRUE(m.reserve(1, 5));  // two blocks
  EXPECT_EQ(m.table(1).size(), 2u);
  EXPECT_EQ(m.used_blocks(), 2);
  EXPECT_DOUBLE_EQ(m.utilization(), 5.0 / 8.0);
  ASSERT_TRUE(m.reserve(1, 8));  // still two
  EXPECT_EQ(m.table(1).size(), 2u);
  ASSERT_TRUE(m.reserve(2, 24));  // six more: the pool is full
  EXPECT_FALSE(m.reserve(3, 1));
  EXPECT_FALSE(m.reserve(1, 9));  // no room to grow: nothing changes
  EXPECT_EQ(m.table(1).size(), 2u);
  m.release(2);
  EXPECT_EQ(m.used_blocks(), 2);
  EXPECT_TRUE(m.reserve(3, 16));
}

TEST(KvBlockManager, RowsFollowTheTable) {
  KvBlockManager m(16, 4, /*scatter_seed=*/7);
  ASSERT_TRUE(m.reserve(0, 10));
  const auto& t = m.table(0);
  std::set<int64_t> distinct(t.begin(), t.end());
  EXPECT_EQ(distinct.size(), t.size());
  for (int64_t p = 0; p < 10; ++p) EXPECT_EQ(m.row(0, p), t[p / 4] * 4 + p % 4);
  const auto rows = m.rows(0, 12);
  EXPECT_EQ(rows[9], float(m.row(0, 9)));
  EXPECT_EQ(rows[11], 0.0f);  // past the tokens: row 0, masked by the caller
  // Scattered: not the contiguous layout 0, 1, 2.
  EXPECT_NE(t, (std::vector<int64_t>{0, 1, 2}));
  // The same seed gives the same layout.
  KvBlockManager again(16, 4, 7);
  ASSERT_TRUE(again.reserve(0, 10));
  EXPECT_EQ(again.table(0), t);
}

}  // namespace
}  // namespace wallsim::runtime
