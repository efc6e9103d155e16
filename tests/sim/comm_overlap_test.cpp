// CommOverlap: exposed and overlapped communication on cases whose answer is known by
// construction (plain C++, no simulation).
#include "wallsim/sim/comm_overlap.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace wallsim::sim {
namespace {

using A = CommOverlap::Activity;
using Spans = std::vector<std::pair<int64_t, int64_t>>;

// A meter that records the exposed intervals it reports.
struct Recorded {
  CommOverlap meter;
  Spans exposed;
  Recorded() {
    meter.on_exposed([this](int64_t lo, int64_t hi) { exposed.emplace_back(lo, hi); });
  }
};

TEST(CommOverlap, ACollectiveAloneIsExposedInFull) {
  Recorded r;
  r.meter.begin(A::collective, 100);
  r.meter.end(A::collective, 350);
  r.meter.finish();
  EXPECT_EQ(r.meter.collective_ps(), 250);
  EXPECT_EQ(r.meter.exposed_ps(), 250);
  EXPECT_EQ(r.meter.overlapped_ps(), 0);
  EXPECT_EQ(r.exposed, (Spans{{100, 350}}));
}

TEST(CommOverlap, ComputeOutsideTheCollectiveChangesNothing) {
  CommOverlap m;
  m.begin(A::compute, 0);
  m.end(A::compute, 100);
  m.begin(A::collective, 100);
  m.end(A::collective, 200);
  m.begin(A::compute, 200);
  m.end(A::compute, 500);
  EXPECT_EQ(m.collective_ps(), 100);
  EXPECT_EQ(m.exposed_ps(), 100);
}

TEST(CommOverlap, ComputeUnderTheCollectiveHidesItsPart) {
  // Collective [100, 1000); the tensor engine busy [0, 400), the vector engine [300, 600) and
  // [900, 1200): compute covers [100, 600) and [900, 1000) of it, so 300 ps are exposed.
  Recorded r;
  r.meter.begin(A::compute, 0);
  r.meter.begin(A::collective, 100);
  r.meter.begin(A::compute, 300);
  r.meter.end(A::compute, 400);
  r.meter.end(A::compute, 600);
  r.meter.begin(A::compute, 900);
  r.meter.end(A::collective, 1000);
  r.meter.end(A::compute, 1200);
  r.meter.finish();
  EXPECT_EQ(r.meter.collective_ps(), 900);
  EXPECT_EQ(r.meter.exposed_ps(), 300);
  EXPECT_EQ(r.meter.overlapped_ps(), 600);
  EXPECT_EQ(r.exposed, (Spans{{600, 900}}));
}

TEST(CommOverlap, OverlappingCollectivesCountOnce) {
  // [0, 300) and [200, 500): their union is 500 ps.
  CommOverlap m;
  m.begin(A::collective, 0);
  m.begin(A::collective, 200);
  m.end(A::collective, 300);
  m.end(A::collective, 500);
  EXPECT_EQ(m.collective_ps(), 500);
  EXPECT_EQ(m.exposed_ps(), 500);
}

TEST(CommOverlap, EventsAtOneInstantGiveTheSameIntervalsInAnyOrder) {
  // At 200 one compute instruction ends and another begins: whichever comes first, the exposed
  // interval [100, 300) is reported once, unsplit, or not at all.
  for (bool end_first : {true, false}) {
    Recorded r;
    r.meter.begin(A::collective, 100);
    r.meter.end(A::collective, 300);
    r.meter.finish();
    Recorded s;
    s.meter.begin(A::collective, 100);
    s.meter.begin(A::compute, 150);
    if (end_first) {
      s.meter.end(A::compute, 200);
      s.meter.begin(A::compute, 200);
    } else {
      s.meter.begin(A::compute, 200);
      s.meter.end(A::compute, 200);
    }
    s.meter.end(A::compute, 250);
    s.meter.end(A::collective, 300);
    s.meter.finish();
    EXPECT_EQ(s.meter.exposed_ps(), 100) << end_first;
    EXPECT_EQ(s.exposed, (Spans{{100, 150}, {250, 300}})) << end_first;
    EXPECT_EQ(r.exposed, (Spans{{100, 300}}));
  }
  // Two collectives back to back at 200: one exposed interval.
  Recorded r;
  r.meter.begin(A::collective, 0);
  r.meter.end(A::collective, 200);
  r.meter.begin(A::collective, 200);
  r.meter.end(A::collective, 400);
  r.meter.finish();
  EXPECT_EQ(r.exposed, (Spans{{0, 400}}));
}

}  // namespace
}  // namespace wallsim::sim
