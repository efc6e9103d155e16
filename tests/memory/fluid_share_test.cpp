// Tests of the max-min fair bandwidth model: shares, caps, finish times and cost.
#include "wallsim/memory/fluid_share.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace wallsim::memory {
namespace {

using Ps = FluidShare::Ps;
constexpr Ps kNs = 1'000;      // picoseconds per nanosecond
constexpr double kGBps = 1e9;  // bytes/second per GB/s

std::vector<uint64_t> ids(std::initializer_list<uint64_t> l) { return l; }

TEST(FluidShare, OneTransferRunsAtFullRateAndFinishesExactly) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 1 * kGBps);  // one byte per ns
  EXPECT_EQ(fs.resource_name(hbm), "hbm");
  EXPECT_EQ(fs.next_finish(), INT64_MAX);

  uint64_t id = fs.start(100 * kNs, 4096, {hbm});
  EXPECT_EQ(fs.active(), 1u);
  EXPECT_DOUBLE_EQ(fs.rate(id), 1 * kGBps);
  EXPECT_DOUBLE_EQ(fs.resource_rate(hbm), 1 * kGBps);
  EXPECT_EQ(fs.next_finish(), (100 + 4096) * kNs);

  EXPECT_TRUE(fs.advance((100 + 4096) * kNs - 1).empty());
  EXPECT_EQ(fs.advance((100 + 4096) * kNs), ids({id}));
  EXPECT_EQ(fs.active(), 0u);
  EXPECT_EQ(fs.next_finish(), INT64_MAX);
  EXPECT_DOUBLE_EQ(fs.resource_rate(hbm), 0.0);
  EXPECT_THROW(fs.rate(id), std::out_of_range);
}

TEST(FluidShare, FinishTimeRoundsUpToWholeFemtoseconds) {
  FluidShare fs;
  int dma = fs.add_resource("dma0", 28.99 * kGBps);
  uint64_t id = fs.start(0, 4096, {dma});
  const Ps expected = static_cast<Ps>(std::ceil(4096.0L * 1e12L / (28.99L * 1e9L)));
  EXPECT_EQ(fs.next_finish(), expected);
  EXPECT_TRUE(fs.advance(expected - 1).empty());
  EXPECT_EQ(fs.advance(expected), ids({id}));
}

TEST(FluidShare, ZeroBytesFinishAtOnce) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 1 * kGBps);
  uint64_t id = fs.start(7 * kNs, 0, {hbm});
  EXPECT_EQ(fs.next_finish(), 7 * kNs);
  EXPECT_DOUBLE_EQ(fs.rate(id), 0.0);
  EXPECT_EQ(fs.advance(7 * kNs), ids({id}));
}

TEST(FluidShare, TransfersOnOneResourceShareItEqually) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 1 * kGBps);
  std::vector<uint64_t> started;
  for (int i = 0; i < 5; ++i) started.push_back(fs.start(0, 1000, {hbm}));
  for (uint64_t id : started) EXPECT_DOUBLE_EQ(fs.rate(id), 0.2 * kGBps);
  EXPECT_DOUBLE_EQ(fs.resource_rate(hbm), 1 * kGBps);
  EXPECT_EQ(fs.next_finish(), 5000 * kNs);
  EXPECT_EQ(fs.advance(5000 * kNs), started);
}

TEST(FluidShare, EngineCapsLeaveTheRemainderToOthers) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 100 * kGBps);
  int slow = fs.add_resource("dma0", 10 * kGBps);
  int fast1 = fs.add_resource("dma1", 100 * kGBps);
  int fast2 = fs.add_resource("dma2", 100 * kGBps);
  uint64_t a = fs.start(0, 1e6, {hbm, slow});
  uint64_t b = fs.start(0, 1e6, {hbm, fast1});
  uint64_t c = fs.start(0, 1e6, {hbm, fast2});
  EXPECT_DOUBLE_EQ(fs.rate(a), 10 * kGBps);
  EXPECT_DOUBLE_EQ(fs.rate(b), 45 * kGBps);
  EXPECT_DOUBLE_EQ(fs.rate(c), 45 * kGBps);
  EXPECT_DOUBLE_EQ(fs.resource_rate(hbm), 100 * kGBps);
  EXPECT_DOUBLE_EQ(fs.resource_rate(slow), 10 * kGBps);
}

TEST(FluidShare, SixteenEnginesShareTheHbm) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 362.5 * kGBps);
  std::vector<int> engines;
  for (int i = 0; i < 16; ++i) engines.push_back(fs.add_resource("dma", 28.99 * kGBps));
  std::vector<uint64_t> started;
  for (int e : engines) started.push_back(fs.start(0, 1 << 20, {hbm, e}));
  for (uint64_t id : started) EXPECT_DOUBLE_EQ(fs.rate(id), 362.5 * kGBps / 16);
  for (int e : engines) EXPECT_DOUBLE_EQ(fs.resource_rate(e), 362.5 * kGBps / 16);
  EXPECT_NEAR(fs.resource_rate(hbm), 362.5 * kGBps, 1e-3);
}

TEST(FluidShare, TwelveEnginesAreBoundByTheirOwnBandwidth) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 362.5 * kGBps);
  for (int i = 0; i < 12; ++i) {
    int e = fs.add_resource("dma", 28.99 * kGBps);
    uint64_t id = fs.start(0, 1 << 20, {hbm, e});
    EXPECT_DOUBLE_EQ(fs.rate(id), 28.99 * kGBps);
  }
  EXPECT_NEAR(fs.resource_rate(hbm), 12 * 28.99 * kGBps, 1e-3);
}

// A (1000 B) runs alone for 400 ns, then shares with B (1000 B): A's remaining 600 B at half rate
// take 1200 ns (A ends at 1600 ns); B then has 400 B left at full rate (B ends at 2000 ns).
// With `scale` bytes per byte the times scale too.
struct MidwayResult {
  Ps a_finish = -1;
  Ps b_finish = -1;
  uint64_t work = 0;
};
MidwayResult run_midway(double scale) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 1 * kGBps);
  const Ps ns = static_cast<Ps>(kNs * scale);
  MidwayResult out;
  uint64_t a = fs.start(0, 1000 * scale, {hbm});
  EXPECT_TRUE(fs.advance(400 * ns).empty());
  uint64_t b = fs.start(400 * ns, 1000 * scale, {hbm});
  EXPECT_DOUBLE_EQ(fs.rate(a), 0.5 * kGBps);
  EXPECT_DOUBLE_EQ(fs.rate(b), 0.5 * kGBps);
  while (fs.active() > 0) {
    Ps t = fs.next_finish();
    for (uint64_t id : fs.advance(t)) (id == a ? out.a_finish : out.b_finish) = t;
  }
  out.work = fs.work();
  return out;
}

TEST(FluidShare, LateStarterSlowsOthersAndAllFinishOnTime) {
  MidwayResult r = run_midway(1.0);
  EXPECT_EQ(r.a_finish, 1600 * kNs);
  EXPECT_EQ(r.b_finish, 2000 * kNs);
}

TEST(FluidShare, CostDoesNotDependOnBytesOrTime) {
  MidwayResult kb = run_midway(1.0);        // 1 KB transfers, microseconds
  MidwayResult gb = run_midway(1'000'000);  // 1 GB transfers, seconds
  EXPECT_EQ(gb.a_finish, 1600 * kNs * 1'000'000);
  EXPECT_EQ(gb.b_finish, 2000 * kNs * 1'000'000);
  EXPECT_EQ(kb.work, gb.work);
  EXPECT_GT(kb.work, 0u);
}

TEST(FluidShare, LatePollingReplaysFinishEvents) {
  // Same as the midway case, but the caller polls only at the very end: A must still stop
  // taking bandwidth at 1600 ns so that B ends at 2000 ns.
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 1 * kGBps);
  uint64_t a = fs.start(0, 1000, {hbm});
  uint64_t b = fs.start(400 * kNs, 1000, {hbm});
  EXPECT_DOUBLE_EQ(fs.rate(b), 0.5 * kGBps);
  EXPECT_EQ(fs.advance(1999 * kNs), ids({a}));
  EXPECT_EQ(fs.next_finish(), 2000 * kNs);
  EXPECT_EQ(fs.advance(2000 * kNs), ids({b}));
}

TEST(FluidShare, StartAfterAFinishIsSeenByTheNextAdvance) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 1 * kGBps);
  uint64_t a = fs.start(0, 100, {hbm});
  uint64_t b = fs.start(100 * kNs, 100, {hbm});  // A finished at this very time
  EXPECT_DOUBLE_EQ(fs.rate(a), 0.0);
  EXPECT_DOUBLE_EQ(fs.rate(b), 1 * kGBps);
  EXPECT_EQ(fs.next_finish(), 100 * kNs);
  EXPECT_EQ(fs.advance(100 * kNs), ids({a}));
  EXPECT_EQ(fs.advance(fs.next_finish()), ids({b}));
}

TEST(FluidShare, StaggeredTransfersNeverLeaveCrumbsAndConserveBytes) {
  // Awkward rates and start times, with phases bound by the engines and phases bound by HBM:
  // every advance(next_finish()) must return a transfer (none is left with a few bytes), and the
  // bytes moved through HBM must match the bytes requested.
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 362.5 * kGBps);
  std::vector<int> engines;
  for (int i = 0; i < 16; ++i) engines.push_back(fs.add_resource("dma", 28.99 * kGBps));
  double requested = 0, moved = 0, peak = 0;
  Ps now = 0;
  size_t finished = 0;
  auto step_to = [&](Ps t) {
    moved += fs.resource_rate(hbm) * static_cast<double>(t - now) / 1e12;
    now = t;
  };
  for (int i = 0; i < 200; ++i) {
    Ps t = Ps{i} * 33'333;  // one start about every 33 ns
    while (fs.next_finish() <= t) {
      step_to(fs.next_finish());
      auto done = fs.advance(now);
      ASSERT_FALSE(done.empty());
      finished += done.size();
    }
    step_to(t);
    double bytes = 4096.0 * (1 + i % 7) + 13 * i;
    requested += bytes;
    fs.start(t, bytes, {hbm, engines[(i * 5) % 16]});
    peak = std::max(peak, fs.resource_rate(hbm));
  }
  while (fs.active() > 0) {
    step_to(fs.next_finish());
    auto done = fs.advance(now);
    ASSERT_FALSE(done.empty());
    finished += done.size();
  }
  EXPECT_EQ(finished, 200u);
  EXPECT_NEAR(peak, 362.5 * kGBps, 1.0);  // HBM was the bottleneck at some point
  // Finish times round up to whole picoseconds: a transfer may hold its rate for up to 1 ps
  // longer than its bytes need (at most ~0.4 B each here).
  EXPECT_NEAR(moved, requested, requested * 1e-4);
}

TEST(FluidShare, RejectsBadInput) {
  FluidShare fs;
  EXPECT_THROW(fs.add_resource("zero", 0.0), std::invalid_argument);
  int hbm = fs.add_resource("hbm", 1 * kGBps);
  EXPECT_THROW(fs.start(0, 10, {}), std::invalid_argument);
  EXPECT_THROW(fs.start(0, 10, {hbm + 1}), std::out_of_range);
  EXPECT_THROW(fs.start(0, -1, {hbm}), std::invalid_argument);
  fs.start(10, 10, {hbm});
  EXPECT_THROW(fs.advance(9), std::invalid_argument);
  EXPECT_THROW(fs.resource_rate(-1), std::out_of_range);
}

// A start or finish recomputes only its connected component: transfers sharing no resource
// with it, directly or through others, keep their rates and their resources are not touched.
TEST(FluidShare, StartsAndFinishesTouchOnlyTheirComponent) {
  FluidShare fs;
  int hbm0 = fs.add_resource("chip0.hbm", 10 * kGBps);
  int e0 = fs.add_resource("chip0.dma0", 4 * kGBps);
  int e1 = fs.add_resource("chip0.dma1", 8 * kGBps);
  int hbm1 = fs.add_resource("chip1.hbm", 10 * kGBps);
  int e2 = fs.add_resource("chip1.dma0", 2 * kGBps);
  const auto sorted = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  uint64_t a = fs.start(0, 4000, {hbm0, e0});  // 1000 ns at its engine's 4 GB/s
  uint64_t c = fs.start(0, 1000, {hbm1, e2});  // 500 ns at 2 GB/s
  fs.take_touched();
  uint64_t b = fs.start(0, 10000, {hbm0, e1});  // joins a's component only
  EXPECT_EQ(sorted(fs.take_touched()), (std::vector<int>{hbm0, e0, e1}));
  EXPECT_DOUBLE_EQ(fs.rate(a), 4 * kGBps);
  EXPECT_DOUBLE_EQ(fs.rate(b), 6 * kGBps);  // the rest of chip 0's HBM
  EXPECT_DOUBLE_EQ(fs.rate(c), 2 * kGBps);
  EXPECT_EQ(fs.advance(500 * kNs), ids({c}));  // chip 0 is not touched
  EXPECT_EQ(sorted(fs.take_touched()), (std::vector<int>{hbm1, e2}));
  EXPECT_EQ(fs.advance(1000 * kNs), ids({a}));
  EXPECT_EQ(sorted(fs.take_touched()), (std::vector<int>{hbm0, e0, e1}));
  // b moved 6000 B in 1 us; its last 4000 B run at its engine's 8 GB/s: 500 ns more.
  EXPECT_DOUBLE_EQ(fs.rate(b), 8 * kGBps);
  EXPECT_EQ(fs.next_finish(), 1500 * kNs);
}

TEST(FluidShare, DuplicateResourcesCountOnce) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 1 * kGBps);
  uint64_t id = fs.start(0, 10, {hbm, hbm});
  EXPECT_DOUBLE_EQ(fs.rate(id), 1 * kGBps);
}

TEST(FluidShare, WeightedUseTakesThatMuchOfTheResource) {
  FluidShare fs;
  int hbm = fs.add_resource("hbm", 100 * kGBps);
  int e0 = fs.add_resource("dma0", 80 * kGBps);
  // An HBM->HBM copy reads and writes HBM: weight 2, so it runs at 50 GB/s, not 80.
  uint64_t copy = fs.start_weighted(0, 1000, {{e0, 1.0}, {hbm, 1.0}, {hbm, 1.0}});
  EXPECT_DOUBLE_EQ(fs.rate(copy), 50 * kGBps);
  EXPECT_DOUBLE_EQ(fs.resource_rate(hbm), 100 * kGBps);
  EXPECT_DOUBLE_EQ(fs.resource_rate(e0), 50 * kGBps);
  // A second transfer of weight 1 on HBM: equal rates r with 2r + r = 100.
  uint64_t load = fs.start_weighted(0, 1000, {{hbm, 1.0}});
  EXPECT_NEAR(fs.rate(copy), 100.0 / 3 * kGBps, 1.0);
  EXPECT_NEAR(fs.rate(load), 100.0 / 3 * kGBps, 1.0);
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 0.0}}), std::invalid_argument);
}

TEST(BandwidthShare, PoliciesAreChosenByName) {
  auto share = make_bandwidth_share("max_min_fair");
  int r = share->add_resource("link", 1 * kGBps);
  share->start_weighted(0, 1000, {{r, 1.0}});
  EXPECT_EQ(share->next_finish(), 1000 * kNs);
  EXPECT_THROW(make_bandwidth_share("round_robin"), std::invalid_argument);
}

// Every short transfer's start and finish changes the long one's rate, so its finish event is
// queued again 400 times (stale entries, compacted as they pile up): the events still come in
// time order, each transfer once, and the long one finishes when its bytes say.
TEST(FluidShare, RequeuedFinishesStayInOrder) {
  FluidShare fs;
  const int r = fs.add_resource("link", 1e9);
  const uint64_t long_id = fs.start(0, 1e6, {r});
  Ps now = 0;
  for (int k = 0; k < 200; ++k) {
    const uint64_t id = fs.start(now, 1000.0, {r});  // both at 5e8 B/s: 2 us
    EXPECT_DOUBLE_EQ(fs.rate(long_id), 5e8);
    EXPECT_EQ(fs.next_finish(), now + 2'000'000);
    now = fs.next_finish();
    EXPECT_EQ(fs.advance(now), std::vector<uint64_t>{id});
    EXPECT_DOUBLE_EQ(fs.rate(long_id), 1e9);
  }
  // 200 x 1000 bytes moved while shared; 800,000 bytes left at 1e9 B/s: 0.8 ms.
  EXPECT_EQ(fs.next_finish(), Ps{1'200'000'000});
  EXPECT_EQ(fs.advance(1'199'999'999), std::vector<uint64_t>{});
  EXPECT_EQ(fs.advance(1'200'000'000), std::vector<uint64_t>{long_id});
  EXPECT_EQ(fs.next_finish(), INT64_MAX);
  EXPECT_EQ(fs.active(), 0u);
}

}  // namespace
}  // namespace wallsim::memory
