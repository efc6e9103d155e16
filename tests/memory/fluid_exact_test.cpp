// Tests that the fluid model's arithmetic does not depend on resource order or grouping.
#include "wallsim/memory/fluid_share.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace wallsim::memory {
namespace {

using Ps = FluidShare::Ps;
constexpr double kGBps = 1e9;  // bytes/second per GB/s

// Four HBMs in a ring, each flow reading one HBM and writing the next through its own engine
// (non-dyadic weights and capacities); a short local flow per HBM finishes first. Every HBM
// ties at the minimum share, and every flow crosses two tied HBMs: under a lowest-index-first
// filling the later HBMs' shares are recomputed from decremented sums and drift by ulps.
struct Ring {
  static constexpr int kChips = 4;
  FluidShare fs;
  std::vector<int> hbm, engine;
  std::vector<uint64_t> flow, local;
};

void start_ring(Ring& ring, double hbm_gbps, double read_w, double write_w, double engine_w) {
  for (int c = 0; c < Ring::kChips; ++c) {
    ring.hbm.push_back(ring.fs.add_resource("hbm" + std::to_string(c), hbm_gbps * kGBps));
  }
  for (int c = 0; c < Ring::kChips; ++c) {
    ring.engine.push_back(ring.fs.add_resource("dma" + std::to_string(c), 997.3 * kGBps));
  }
  for (int c = 0; c < Ring::kChips; ++c) {
    const int next = (c + 1) % Ring::kChips;
    ring.flow.push_back(ring.fs.start_weighted(
        0, 3.0e6, {{ring.hbm[c], read_w}, {ring.hbm[next], write_w}, {ring.engine[c], engine_w}}));
  }
  for (int c = 0; c < Ring::kChips; ++c) {
    ring.local.push_back(ring.fs.start_weighted(0, 7.0e4, {{ring.hbm[c], 0.37}}));
  }
}

void expect_symmetric(const Ring& ring, const char* when, bool locals) {
  for (int c = 1; c < Ring::kChips; ++c) {
    SCOPED_TRACE(std::string(when) + ", chip " + std::to_string(c));
    // Bit-equal, not near: folding copies one chip's figures to its images.
    EXPECT_EQ(ring.fs.rate(ring.flow[c]), ring.fs.rate(ring.flow[0]));
    if (locals) {
      EXPECT_EQ(ring.fs.rate(ring.local[c]), ring.fs.rate(ring.local[0]));
    }
    EXPECT_EQ(ring.fs.resource_rate(ring.hbm[c]), ring.fs.resource_rate(ring.hbm[0]));
    EXPECT_EQ(ring.fs.resource_rate(ring.engine[c]), ring.fs.resource_rate(ring.engine[0]));
  }
}

TEST(FluidShare, SymmetricResourcesGetBitEqualRates) {
  const double hbm_gbps[] = {2900.0, 362.5, 819.1};
  const double weights[][3] = {{1.0, 1.0, 1.1}, {1.3, 0.7, 1.03}, {0.1, 1.9, 1.2}, {1.7, 0.3, 1.6}};
  for (double gbps : hbm_gbps) {
    for (const auto& w : weights) {
      SCOPED_TRACE("hbm " + std::to_string(gbps) + " GB/s, weights " + std::to_string(w[0]) + " " +
                   std::to_string(w[1]));
      Ring ring;
      start_ring(ring, gbps, w[0], w[1], w[2]);
      expect_symmetric(ring, "at the start", true);
      // The local flows finish together, at one picosecond, and leave the ring flows alone.
      const Ps first = ring.fs.next_finish();
      const std::vector<uint64_t> done = ring.fs.advance(first);
      EXPECT_EQ(done, ring.local);
      expect_symmetric(ring, "after the local flows", false);
      EXPECT_EQ(ring.fs.advance(ring.fs.next_finish()), ring.flow);
      EXPECT_EQ(ring.fs.active(), 0u);
    }
  }
}

// Runs the same traffic twice: `copies` identical transfers, or one of that multiplicity.
// Other transfers with their own sizes start and finish in between, so the aggregate is
// recomputed in several components' fillings.
struct Outcome {
  std::vector<double> rates;      // the copies' (or the aggregate's) rate at each event
  std::vector<double> resources;  // every resource's rate at each event
  std::vector<Ps> finishes;       // per transfer of interest, in the order checked
};

Outcome run_copies(int copies, bool aggregate, double link_weight) {
  FluidShare fs;
  const int hbm = fs.add_resource("hbm", 362.5 * kGBps);
  const int link = fs.add_resource("link", 46.77 * kGBps);
  const int e0 = fs.add_resource("dma0", 28.99 * kGBps);
  const int e1 = fs.add_resource("dma1", 27.13 * kGBps);
  Outcome out;
  std::vector<uint64_t> group;  // the copies, or the aggregate alone
  std::vector<uint64_t> others;
  std::vector<uint64_t> live;  // the group's transfers not finished yet
  const auto sample = [&] {
    for (uint64_t id : live) out.rates.push_back(fs.rate(id));
    for (int r = 0; r < static_cast<int>(fs.resources()); ++r) {
      out.resources.push_back(fs.resource_rate(r));
    }
  };
  others.push_back(fs.start_weighted(0, 2.1e5, {{hbm, 1.0}, {e1, 1.0 + 64.0 / 3072}}));
  const std::vector<ResourceUse> uses = {
      {hbm, 2.0}, {link, link_weight}, {e0, 1.0 + 64.0 / 1000}, {link, 0.1}};
  if (aggregate) {
    group.push_back(fs.start_weighted(1000, 5.5e5, uses, copies));
  } else {
    for (int i = 0; i < copies; ++i) group.push_back(fs.start_weighted(1000, 5.5e5, uses));
  }
  live = group;
  sample();
  others.push_back(fs.start_weighted(2'000'000, 9.9e4, {{link, 0.3}, {e1, 1.01}}));
  sample();
  std::vector<Ps> group_finish;
  while (fs.active() > 0) {
    const Ps t = fs.next_finish();
    for (uint64_t id : fs.advance(t)) {
      if (std::find(group.begin(), group.end(), id) != group.end()) {
        group_finish.push_back(t);
        live.erase(std::find(live.begin(), live.end(), id));
      } else {
        out.finishes.push_back(t);
      }
    }
    if (fs.active() > 0) sample();
  }
  // The copies finish together; the aggregate stands for all of them.
  if (aggregate) group_finish.assign(static_cast<size_t>(copies), group_finish.at(0));
  out.finishes.insert(out.finishes.end(), group_finish.begin(), group_finish.end());
  if (!aggregate) {
    // Keep one rate per event: the copies are equal among themselves (checked here).
    std::vector<double> one;
    for (size_t i = 0; i < out.rates.size(); i += static_cast<size_t>(copies)) {
      for (int k = 1; k < copies; ++k) EXPECT_EQ(out.rates[i + k], out.rates[i]);
      one.push_back(out.rates[i]);
    }
    out.rates = one;
  }
  return out;
}

TEST(FluidShare, MultiplicityEqualsCopies) {
  for (int copies : {1, 3, 5, 8}) {
    for (double link_weight : {1.1, 0.7, 1.3}) {
      SCOPED_TRACE(std::to_string(copies) + " copies, link weight " + std::to_string(link_weight));
      const Outcome apart = run_copies(copies, false, link_weight);
      const Outcome together = run_copies(copies, true, link_weight);
      EXPECT_EQ(together.rates, apart.rates);
      EXPECT_EQ(together.resources, apart.resources);
      EXPECT_EQ(together.finishes, apart.finishes);
      EXPECT_GT(apart.finishes.size(), 2u);
    }
  }
}

// SPMD folding: `copies` transfers, each on an engine of its own (equal capacities) and on
// the shared HBM and link, or the first one alone with count `copies` on the shared ones. Other
// transfers start and finish in between. Returns the first copy's rate at each event, the rates
// of HBM, link and the first engine at each event, and every finish (the first copy's for all).
Outcome run_counted(int copies, bool counted, double link_weight) {
  FluidShare fs;
  const int hbm = fs.add_resource("hbm", 362.5 * kGBps);
  const int link = fs.add_resource("link", 46.77 * kGBps);
  const int other = fs.add_resource("other_dma", 27.13 * kGBps);
  std::vector<int> engines;
  for (int i = 0; i < copies; ++i) engines.push_back(fs.add_resource("dma", 28.99 * kGBps));
  Outcome out;
  uint64_t first = 0;
  bool first_live = true;
  const auto sample = [&] {
    if (first_live) out.rates.push_back(fs.rate(first));
    for (int r : {hbm, link, other, engines[0]}) out.resources.push_back(fs.resource_rate(r));
  };
  fs.start_weighted(0, 2.1e5, {{hbm, 1.0}, {other, 1.0 + 64.0 / 3072}});
  std::vector<uint64_t> group;
  for (int i = 0; i < (counted ? 1 : copies); ++i) {
    const int64_t c = counted ? copies : 1;
    group.push_back(fs.start_weighted(
        1000, 5.5e5,
        {{hbm, 2.0, c}, {link, link_weight, c}, {engines[i], 1.0 + 64.0 / 1000}, {link, 0.1, c}}));
  }
  first = group[0];
  sample();
  fs.start_weighted(2'000'000, 9.9e4, {{link, 0.3}, {other, 1.01}});
  sample();
  while (fs.active() > 0) {
    const Ps t = fs.next_finish();
    for (uint64_t id : fs.advance(t)) {
      if (id == first) first_live = false;
      const bool copy = std::find(group.begin(), group.end(), id) != group.end();
      if (!copy) out.finishes.push_back(t);
      if (id == first) out.finishes.insert(out.finishes.end(), static_cast<size_t>(copies), t);
    }
    if (fs.active() > 0) sample();
  }
  return out;
}

TEST(FluidShare, CountOnSharedResourcesEqualsCopiesOnPrivateEngines) {
  for (int copies : {2, 3, 8}) {
    for (double link_weight : {1.1, 0.7, 1.3}) {
      SCOPED_TRACE(std::to_string(copies) + " copies, link weight " + std::to_string(link_weight));
      const Outcome apart = run_counted(copies, false, link_weight);
      const Outcome counted = run_counted(copies, true, link_weight);
      EXPECT_EQ(counted.rates, apart.rates);
      EXPECT_EQ(counted.resources, apart.resources);
      EXPECT_EQ(counted.finishes, apart.finishes);
      EXPECT_GT(apart.finishes.size(), 2u);
      // The copies contend: with count 1 the first one alone would be faster.
      const Outcome alone = run_counted(1, false, link_weight);
      EXPECT_NE(alone.finishes,
                std::vector<Ps>(
                    counted.finishes.begin(),
                    counted.finishes.begin() + static_cast<std::ptrdiff_t>(alone.finishes.size())));
    }
  }
}

TEST(FluidShare, RejectsWeightsAndMultiplicitiesOutOfRange) {
  FluidShare fs;
  const int hbm = fs.add_resource("hbm", 1 * kGBps);
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 1e-13}}), std::invalid_argument);
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 3.0e7}}), std::invalid_argument);
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 1.0}}, 0), std::invalid_argument);
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 1.0}}, int64_t{1} << 25), std::invalid_argument);
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 1.0, 0}}), std::invalid_argument);
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 1.0, int64_t{1} << 25}}), std::invalid_argument);
  // weight x count x multiplicity past 2^127 units: 2^24 x 2^80 x 2^24 x 2^24.
  EXPECT_THROW(fs.start_weighted(0, 10, {{hbm, 1 << 24, 1 << 24}}, 1 << 24), std::overflow_error);
  fs.start_weighted(0, 10, {{hbm, 1e-12}}, 1 << 24);  // both ends of the ranges are fine
  fs.start_weighted(0, 10, {{hbm, 1.0, 1 << 24}});
  fs.start_weighted(0, 10, {{hbm, 1 << 24}});
}

// A transfer alone on a resource gets the capacity divided by its summed weight, rounded once
// to a double: with 55 significant bits (weight 2^24 - 2^-16, count 8191, multiplicity 3) the
// rounding is visible; 1/3 has bits below 2^-64 of the fixed-point sum (the conversion's
// general path), 2.5 and 1.0 none (its short path for sums whose low 64 bits are zero).
TEST(FluidShare, SummedWeightRoundsOnceToADouble) {
  struct Case {
    double weight;
    int64_t count, multiplicity;
    double exact_demand;  // weight x count x multiplicity, rounded once
  };
  const double w = 16777216.0 - 0x1p-16;
  const uint64_t units = ((uint64_t{1} << 40) - 1) * 8191 * 3;          // in 2^-16: 55 bits, odd
  ASSERT_NE(static_cast<uint64_t>(static_cast<double>(units)), units);  // not representable
  const Case cases[] = {
      {w, 8191, 3, static_cast<double>(units) * 0x1p-16},
      {1.0 / 3.0, 7, 5,
       static_cast<double>(static_cast<__int128>(std::nearbyint(1.0 / 3.0 * 0x1p80)) * 35) *
           0x1p-80},
      {2.5, 3, 1, 7.5},
      {1.0, 1, 1, 1.0},
  };
  for (const Case& c : cases) {
    FluidShare fs;
    const double capacity = 1234.5 * kGBps;
    const int r = fs.add_resource("hbm", capacity);
    const uint64_t id = fs.start_weighted(0, 1e9, {{r, c.weight, c.count}}, c.multiplicity);
    EXPECT_EQ(fs.rate(id), capacity / c.exact_demand) << c.weight;
    EXPECT_EQ(fs.resource_rate(r), fs.rate(id) * c.exact_demand) << c.weight;
  }
}

}  // namespace
}  // namespace wallsim::memory
