// The distributed tests' harness: a sharded workload on ranks of one System and the same workload
// unsharded on a core of its own, in one simulation, functional.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "wallsim/runtime/ops.h"
#include "wallsim/runtime/process_group.h"
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/system.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::runtime {

// The worst difference relative to the largest magnitude of `want`.
inline double relative_error(const compiler_stub::HostTensor& got,
                             const compiler_stub::HostTensor& want) {
  EXPECT_EQ(got.data.size(), want.data.size());
  double worst = 0, scale = 1e-6;
  for (size_t k = 0; k < got.data.size() && k < want.data.size(); ++k) {
    worst = std::max(worst, double(std::fabs(got.data[k] - want.data[k])));
    scale = std::max(scale, double(std::fabs(want.data[k])));
  }
  return worst / scale;
}

// `sharded` on its world's ranks (chip 0's cores, then chip 1's), `whole` on the last core of
// chip 1, both `steps` steps under `mode`, functional (steps 0: each runs its own loop, as
// serve; -1: each runs its default steps by its own loop, as a program replay). Returns, per rank
// and for the unsharded run (last), each step's output and then the workload's state, read back,
// and the workload's report.
struct Outcome {
  std::vector<std::vector<compiler_stub::HostTensor>> values;  // by rank: output, then state
  std::vector<nlohmann::ordered_json> reports;                 // by rank
  nlohmann::ordered_json replicas;  // dp > 1: the whole run's report (replicas_report)
};
inline Outcome run_both(const std::string& sharded, const std::string& whole, const char* mode,
                        int64_t steps = 1) {
  Config config = load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json",
                              {"topology.torus_x=2", "topology.torus_y=1"});
  sim::init_systemc();
  sim::CoreOptions o;
  o.functional = true;
  sim::System system(config.chip, config.system, o);
  auto ws = workloads::make_workload(workloads::parse_spec(sharded));
  const ProcessGroup group(ws->parallel(), 2, config.system.chip.cores, "test");
  std::vector<std::unique_ptr<workloads::Workload>> workloads;
  std::vector<std::unique_ptr<Session>> sessions;
  auto shared = std::make_shared<SharedPlans>();
  for (int64_t r = 0; r <= group.world(); ++r) {
    SessionOptions so;
    so.mode = &mode_named(mode);
    so.functional = true;
    so.name_prefix = "r" + std::to_string(r) + "_";
    sim::Core* core = &system.core(1, config.system.chip.cores - 1);
    if (r < group.world()) {
      so.rank = group.context(r);
      so.collectives = system.collectives();
      so.shared_plans = shared;
      core = &system.core(static_cast<size_t>(so.rank.chip), static_cast<size_t>(so.rank.core));
      workloads.push_back(workloads::make_workload(workloads::parse_spec(sharded)));
    } else {
      workloads.push_back(workloads::make_workload(workloads::parse_spec(whole)));
    }
    sessions.push_back(std::make_unique<Session>(config, *core, so));
  }
  std::vector<workloads::Workload*> ranks;  // as the run driver joins them
  for (int64_t r = 0; r < group.world(); ++r) ranks.push_back(workloads[size_t(r)].get());
  for (workloads::Workload* w : ranks) w->join(ranks);
  Outcome out;
  out.values.resize(sessions.size());
  std::vector<HostRank> hosts;
  for (size_t r = 0; r < sessions.size(); ++r) {
    Session& s = *sessions[r];
    workloads::Workload& w = *workloads[r];
    auto& values = out.values[r];
    hosts.push_back({&s.device_core(), [&s, &w, &values, steps] {
                       w.setup(s);
                       s.startup(w.buckets(s), [&](int64_t b) { w.trace(s, b); });
                       if (steps <= 0) w.run(s, steps < 0 ? w.default_steps() : 0);
                       for (int64_t i = 0; i < steps; ++i) {
                         s.begin_step(i);
                         values.push_back(s.to_host(w.step(s, i)));
                         s.end_step();
                       }
                       for (const Tensor& t : w.state()) values.push_back(s.to_host(t));
                     }});
  }
  run_hosts(hosts);
  for (const auto& w : workloads) {
    const auto report = w->report();
    out.reports.push_back(report ? report->second : nlohmann::ordered_json());
  }
  const ParallelSizes sizes = ws->parallel();
  if (sizes.dp > 1) {  // each replica's last rank, as the run driver picks them
    std::vector<const workloads::Workload*> replicas;
    for (int64_t d = 0; d < sizes.dp; ++d) {
      replicas.push_back(workloads[size_t(sizes.rank_of(0, sizes.pp - 1, d))].get());
    }
    if (auto whole = workloads[0]->replicas_report(replicas)) out.replicas = whole->second;
  }
  return out;
}

}  // namespace wallsim::runtime
