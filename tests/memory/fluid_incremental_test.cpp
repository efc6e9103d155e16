// Tests that FluidShare's fast paths (an event that provably changes no other rate skips the
// refill of its component) give bit for bit what refilling at every event gives.
#include "wallsim/memory/fluid_share.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace wallsim::memory {
namespace {

using Ps = FluidShare::Ps;
constexpr double kGBps = 1e9;  // bytes/second per GB/s

// The same resources in two models, one refilling at every event (the reference).
struct Pair {
  FluidShare fast, full;
  std::vector<int> resources;
  std::vector<uint64_t> live;  // ids started and not yet handed back
  Pair() { full.set_incremental(false); }
  void add(const std::string& name, double gbps) {
    resources.push_back(fast.add_resource(name, gbps * kGBps));
    ASSERT_EQ(full.add_resource(name, gbps * kGBps), resources.back());
  }
  void start(Ps now, double bytes, const std::vector<ResourceUse>& uses, int64_t multiplicity) {
    const uint64_t id = fast.start_weighted(now, bytes, uses, multiplicity);
    ASSERT_EQ(full.start_weighted(now, bytes, uses, multiplicity), id);
    live.push_back(id);
  }
  void advance(Ps now) {
    const std::vector<uint64_t> done = fast.advance(now);
    ASSERT_EQ(full.advance(now), done);
    for (uint64_t id : done) live.erase(std::find(live.begin(), live.end(), id));
  }
  // Bit-equal rates, allocations and next finish; equal touched sets modulo resources whose
  // allocation did not change (the network reads only their rates).
  void expect_same(const std::string& when) const {
    SCOPED_TRACE(when);
    ASSERT_EQ(fast.next_finish(), full.next_finish());
    for (uint64_t id : live) ASSERT_EQ(fast.rate(id), full.rate(id)) << "transfer " << id;
    for (int r : resources) {
      ASSERT_EQ(fast.resource_rate(r), full.resource_rate(r)) << fast.resource_name(r);
    }
  }
};

// Engines of a core on one HBM and a host link, as dma::DmaSystem builds them: most events
// find the HBM unsaturated (the fast paths), some saturate it (weights 2, many engines busy)
// or put two transfers on one engine, or an engine is slower (another share).
void run_random(uint64_t seed, double hbm_gbps, int events, double engine7_gbps,
                uint64_t min_fast) {
  Pair p;
  constexpr int kEngines = 8;
  for (int e = 0; e < kEngines; ++e)
    p.add("dma" + std::to_string(e), e == 7 ? engine7_gbps : 100.0);
  p.add("hbm", hbm_gbps);
  p.add("link", 50.0);
  const int hbm = kEngines, link = kEngines + 1;
  std::mt19937_64 rng(seed);
  Ps now = 0;
  for (int i = 0; i < events; ++i) {
    const uint64_t x = rng();
    if (x % 2 == 0) {
      now += static_cast<Ps>(rng() % 400'000);  // up to 400 ns
      p.advance(now);
    } else {
      const double engine_weights[] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.3, 0.5};
      const double hbm_weights[] = {1.0, 1.0, 2.0, 0.75};
      std::vector<ResourceUse> uses{
          {static_cast<int>(x / 3 % kEngines), engine_weights[x / 29 % 8]},
          {hbm, hbm_weights[x / 149 % 4]}};
      if (x / 601 % 9 == 0) uses.push_back({link, 1.0});
      const int64_t multiplicity = x / 5413 % 7 == 0 ? 3 : 1;
      p.start(now, static_cast<double>(512 + rng() % 65'536), uses, multiplicity);
    }
    p.expect_same("event " + std::to_string(i));
    if (::testing::Test::HasFatalFailure()) return;
  }
  p.advance(INT64_MAX / 2);
  p.expect_same("drained");
  EXPECT_TRUE(p.live.empty());
  EXPECT_EQ(p.full.fast_events(), 0u);
  // The fast paths must have been taken, or this test proves nothing.
  EXPECT_GE(p.fast.fast_events(), min_fast) << "seed " << seed;
}

TEST(FluidShareIncremental, UnsaturatedHbmMatchesRefills) {
  for (uint64_t seed = 1; seed <= 20; ++seed) run_random(seed, 2900.0, 2000, 100.0, 50);
}

TEST(FluidShareIncremental, OftenSaturatedHbmMatchesRefills) {
  for (uint64_t seed = 1; seed <= 20; ++seed) run_random(seed, 450.0, 2000, 61.7, 20);
}

// The cases at the edge of the proof: a start whose own engine ties exactly with the others'
// share (fast), one whose HBM share falls to the component's share (a refill: the HBM would
// tie), and finishes that leave a tied resource with users.
TEST(FluidShareIncremental, EdgesOfTheProof) {
  Pair p;
  p.add("e0", 100.0);
  p.add("e1", 100.0);
  p.add("e2", 100.0);
  p.add("hbm", 300.0);
  p.start(0, 1e4, {{0, 1.0}, {3, 1.0}}, 1);
  p.start(0, 2e4, {{1, 1.0}, {3, 1.0}}, 1);
  p.expect_same("two engines, HBM at 200 of 300");
  const uint64_t before = p.fast.fast_events();
  p.start(0, 3e4, {{2, 1.0}, {3, 1.0}}, 1);  // HBM share 100 = the engines': it ties
  p.expect_same("three engines, HBM tied");
  EXPECT_EQ(p.fast.fast_events(), before);   // refilled
  p.start(0, 1e4, {{0, 1.0}, {3, 1.0}}, 1);  // a second transfer on e0: e0 was tied
  p.expect_same("two on e0");
  for (Ps t = 0; !p.live.empty(); t += 10'000) {
    p.advance(t);
    p.expect_same("at " + std::to_string(t));
  }
}

}  // namespace
}  // namespace wallsim::memory
