// Ranks: run_hosts runs one host thread per rank, each with its own Session on its own core,
// and ends when every rank has ended. One system per process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/system.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::runtime {
namespace {

constexpr const char* kMlp = "mlp:batch=64,d_model=128,d_ff=256,layers=1,dtype=fp32";

// Two chips of one core each (nothing shared but the simulation), a session per chip.
struct TwoRanks {
  TwoRanks() {
    config =
        load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json", {"topology.torus_x=2"});
    sim::init_systemc();
    sim::CoreOptions o;
    o.functional = true;
    system = std::make_unique<sim::System>(config.chip, config.system, o);
    for (size_t r = 0; r < 2; ++r) {
      SessionOptions so;
      so.mode = &mode_named("fused");
      so.functional = true;
      so.keep_reference = true;
      sessions.push_back(std::make_unique<Session>(config, system->core(r, 0), so));
    }
  }
  Config config;
  std::unique_ptr<sim::System> system;
  std::vector<std::unique_ptr<Session>> sessions;
};

// Rank r runs `steps` steps of kMlp; each step's output must match the reference.
std::function<void()> mlp_rank(Session& s, int steps) {
  return [&s, steps] {
    auto w = workloads::make_workload(workloads::parse_spec(kMlp));
    w->setup(s);
    for (int i = 0; i < steps; ++i) {
      s.begin_step(i);
      Tensor out = w->step(s, i);
      const compiler_stub::HostTensor got = s.to_host(out);
      s.end_step();
      const compiler_stub::HostTensor want = s.reference(out);
      // The worst difference relative to the largest magnitude.
      ASSERT_EQ(got.data.size(), want.data.size());
      double worst = 0, scale = 1e-6;
      for (size_t k = 0; k < got.data.size(); ++k) {
        worst = std::max(worst, double(std::fabs(got.data[k] - want.data[k])));
        scale = std::max(scale, double(std::fabs(want.data[k])));
      }
      EXPECT_LT(worst / scale, 1e-4) << "step " << i;
    }
  };
}

TEST(Ranks, EveryRankRunsToItsEndAndAccountsEveryNanosecond) {
  TwoRanks t;
  // Rank 1 runs three times as many steps: the run must not end with rank 0.
  run_hosts({{&t.system->core(0, 0), mlp_rank(*t.sessions[0], 1)},
             {&t.system->core(1, 0), mlp_rank(*t.sessions[1], 3)}});
  ASSERT_EQ(t.sessions[0]->steps_done(), 1);
  ASSERT_EQ(t.sessions[1]->steps_done(), 3);
  for (const auto& s : t.sessions) {
    for (const StepRecord& r : s->steps()) {
      int64_t sum = 0;
      for (int64_t ns : r.host_ns) sum += ns;
      EXPECT_EQ(sum, r.wall_ns) << "step " << r.index;
      EXPECT_EQ(r.host_ns[static_cast<int>(HostState::comm_wait)], 0);
    }
  }
  // The ranks share nothing: their first steps are the same step, at the same time.
  const StepRecord& a = t.sessions[0]->steps()[0];
  const StepRecord& b = t.sessions[1]->steps()[0];
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.wall_ns, b.wall_ns);
  EXPECT_EQ(a.host_ns, b.host_ns);
  EXPECT_EQ(a.counts.compiles, b.counts.compiles);
  // Rank 1's later steps hit its own cache.
  EXPECT_EQ(t.sessions[1]->steps()[2].counts.compiles, 0);
  EXPECT_GT(t.sessions[1]->steps()[2].counts.cache_hits, 0);
}

TEST(Ranks, AnErrorInOneRankStopsTheRunAndIsRethrown) {
  TwoRanks t;
  // Rank 0 would run for 1 ms; rank 1 gives up after 10 us. (Plain waits: nothing of rank 0's
  // is left on its stack when the run stops.)
  int64_t rank0_waits = 0;
  const auto waiting = [&] {
    for (int i = 0; i < 1000; ++i) {
      sc_core::wait(sc_core::sc_time(1, sc_core::SC_US));
      ++rank0_waits;
    }
  };
  const auto failing = [] {
    sc_core::wait(sc_core::sc_time(10, sc_core::SC_US));
    throw RuntimeError("rank 1 gave up");
  };
  try {
    run_hosts({{&t.system->core(0, 0), waiting}, {&t.system->core(1, 0), failing}});
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_STREQ(e.what(), "rank 1 gave up");
  }
  // Stopped at the error, not waited for.
  EXPECT_GE(rank0_waits, 9);
  EXPECT_LE(rank0_waits, 10);
}

}  // namespace
}  // namespace wallsim::runtime
