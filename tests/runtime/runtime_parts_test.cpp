// The runtime's plain parts, without a SystemC kernel: the mode registry, the compile cache,
// device memory and the host clock.
#include <gtest/gtest.h>

#include <set>

#include "wallsim/base/params.h"
#include "wallsim/runtime/compile_cache.h"
#include "wallsim/runtime/device_memory.h"
#include "wallsim/runtime/execution_mode.h"
#include "wallsim/runtime/host_clock.h"
#include "wallsim/runtime/runtime_error.h"

namespace wallsim::runtime {
namespace {

TEST(ModeRegistry, ListsEveryModeOnceAndFindsThemByName) {
  const auto names = mode_names();
  ASSERT_EQ(names.size(), all_modes().size());
  for (const auto& n : names) {
    ASSERT_NE(find_mode(n), nullptr) << n;
    EXPECT_EQ(find_mode(n)->name(), n);
    EXPECT_EQ(std::count(names.begin(), names.end(), n), 1) << n;
  }
  EXPECT_EQ(find_mode("warp-speed"), nullptr);
  EXPECT_NE(find_mode(default_mode().name()), nullptr);
  EXPECT_FALSE(baseline_modes().empty());
}

TEST(ModeRegistry, AnUnknownNameIsAnInputErrorListingTheModes) {
  try {
    mode_named("warp-speed", "modes[2]");
    FAIL() << "no error";
  } catch (const base::InputError& e) {
    EXPECT_EQ(e.path(), "modes[2]");
    EXPECT_NE(std::string(e.what()).find(mode_list()), std::string::npos) << e.what();
  }
}

TEST(ModeRegistry, EveryModeCutsEveryOpIntoExactlyOneGroupInProgramOrder) {
  compiler_stub::Graph g;
  for (int32_t i = 0; i < 5; ++i) {
    compiler_stub::Node n;
    n.id = i;
    n.op = compiler_stub::OpKind::add;
    g.nodes.push_back(n);
  }
  const RuntimeConfig r;
  const std::vector<int32_t> ops = {0, 1, 2, 3, 4};
  const std::set<int32_t> marked;
  const OpStream s{ops, g, r.lazy, marked};
  for (const ExecutionMode* m : all_modes()) {
    std::vector<int32_t> seen;
    for (const auto& group : m->cut(s)) {
      EXPECT_FALSE(group.empty()) << m->name();
      seen.insert(seen.end(), group.begin(), group.end());
    }
    EXPECT_EQ(seen, (std::vector<int32_t>{0, 1, 2, 3, 4})) << m->name();
  }
}

std::shared_ptr<CompiledPlan> plan_with(int instructions) {
  auto c = std::make_shared<CompiledPlan>();
  auto p = std::make_shared<isa::Plan>();
  isa::Stream s;
  s.instructions.resize(static_cast<size_t>(instructions));
  p->streams.push_back(s);
  c->plan = p;
  return c;
}

TEST(CompileCache, EvictsTheLeastRecentlyUsedPlan) {
  CompileCache cache(2, int64_t{1} << 30);
  EXPECT_EQ(cache.insert(1, plan_with(1)), 0);
  EXPECT_EQ(cache.insert(2, plan_with(1)), 0);
  EXPECT_NE(cache.find(1), nullptr);  // 2 is now the least recent
  EXPECT_EQ(cache.insert(3, plan_with(1)), 1);
  EXPECT_EQ(cache.find(2), nullptr);
  EXPECT_NE(cache.find(1), nullptr);
  EXPECT_NE(cache.find(3), nullptr);
  EXPECT_EQ(cache.size(), 2);
}

TEST(CompileCache, DropsTheOldestBodiesOverTheBudgetButKeepsTheEntries) {
  auto a = plan_with(100), b = plan_with(100);
  CompileCache cache(10, 1);  // any second body is over the budget
  cache.insert(1, a);
  cache.hold_body(a);
  cache.insert(2, b);
  cache.hold_body(b);
  EXPECT_EQ(a->plan, nullptr);  // dropped: rebuilt on its next hit
  EXPECT_NE(b->plan, nullptr);  // the newest body always stays
  EXPECT_EQ(cache.find(1), a);  // the modelled entry is still cached
}

TEST(CompileCache, RemembersFailuresAndDetectsRecompiles) {
  CompileCache cache(4, int64_t{1} << 30);
  EXPECT_EQ(cache.failure(7), nullptr);
  cache.remember_failure(7, {"does not fit", 3});
  ASSERT_NE(cache.failure(7), nullptr);
  EXPECT_EQ(cache.failure(7)->error, "does not fit");
  EXPECT_EQ(cache.failure(7)->node, 3);
  EXPECT_FALSE(cache.note_compile(100, 1));  // first compile of the group
  EXPECT_FALSE(cache.note_compile(100, 1));  // the same shapes again
  EXPECT_TRUE(cache.note_compile(100, 2));   // the same group at new shapes
}

TEST(DeviceMemory, CountsBytesFreesOnlyWhenDeferredFreesRunAndStopsAtCapacity) {
  DeviceMemory m(100);
  const std::string a = m.allocate(60, "t");
  const std::string b = m.allocate(40, "s");
  EXPECT_NE(a, b);
  EXPECT_EQ(m.used_bytes(), 100);
  EXPECT_THROW(m.allocate(1, "t"), RuntimeError);
  m.release(a, false);
  m.release(a, false);  // freed once
  EXPECT_EQ(m.used_bytes(), 100);
  EXPECT_EQ(m.free_deferred(), std::vector<std::string>{a});
  EXPECT_EQ(m.used_bytes(), 40);
  EXPECT_FALSE(m.holds(a));
  EXPECT_TRUE(m.holds(b));
}

TEST(DeviceMemory, StreamOrderedReleaseIsReusableAtOnceAndNamedAtTheNextDeferredFree) {
  DeviceMemory m(100);
  const std::string a = m.allocate(60, "t");
  m.release(a, true);
  EXPECT_EQ(m.used_bytes(), 0);
  const std::string b = m.allocate(100, "t");  // a's bytes, reused before a's contents go
  EXPECT_EQ(m.free_deferred(), std::vector<std::string>{a});
  EXPECT_EQ(m.used_bytes(), 100);
  EXPECT_TRUE(m.holds(b));
}

TEST(HostClock, StatesSumToTheElapsedWholeNanoseconds) {
  HostClock c;
  HostTimes t{};
  c.enter(HostState::dispatch, 0, t);
  c.enter(HostState::compile, 5000, t);
  const auto closed = c.enter(HostState::other, 12000, t);
  EXPECT_EQ(closed.state, HostState::compile);
  EXPECT_EQ(closed.start_ps, 5000);
  EXPECT_EQ(closed.ps, 7000);
  EXPECT_EQ(t[static_cast<int>(HostState::dispatch)], 5);
  EXPECT_EQ(t[static_cast<int>(HostState::compile)], 7);
  EXPECT_EQ(HostClock::to_whole_ns(12000), 0);
  EXPECT_EQ(HostClock::to_whole_ns(12001), 999);
}

}  // namespace
}  // namespace wallsim::runtime
