// The typed run report: its JSON mapping round-trips, and the key figures come from the steps.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "wallsim/driver/run.h"
#include "wallsim/driver/run_report.h"

namespace wallsim::driver {
namespace {

RunReport report_with(std::vector<int64_t> step_ns, int64_t startup_ns) {
  RunReport r;
  r.workload_name = "mlp";
  r.workload_spec = "mlp:layers=1";
  r.mode = "fused";
  r.compile_profile = "neuron";
  r.startup.wall_ns = startup_ns;
  r.startup.counts.compiles = 3;
  int64_t t = startup_ns;
  for (size_t i = 0; i < step_ns.size(); ++i) {
    runtime::StepRecord s;
    s.index = static_cast<int64_t>(i);
    s.start_ns = t;
    s.wall_ns = step_ns[i];
    s.host_ns[static_cast<int>(runtime::HostState::dispatch)] = step_ns[i];
    s.counts.ops = 7;
    s.counts.compiles = i == 0 ? 1 : 0;
    t += step_ns[i];
    r.totals.wall_ns += step_ns[i];
    r.steps.push_back(s);
  }
  r.totals.hbm_read_bytes = 1234;
  r.totals.padding_flop_fraction = 0.25;
  r.ops = base::Json::array({{{"op", "matmul"}, {"macs", 10.0}}, {{"op", "add"}, {"macs", 0.0}}});
  return r;
}

TEST(RunReport, RoundTripsThroughItsJson) {
  RunReport a = report_with({100, 40, 60}, 5);
  a.workload_section = "serving";
  a.workload_report = {{"throughput_tokens_per_s", 1.5}};
  base::Json j = a.to_json();
  EXPECT_EQ(j.begin().key(), "workload");  // the sections in stats.json's order
  j["device"] = {{"bound", {{"resource", "hbm"}}}};
  const RunReport b = RunReport::from_json(j);
  EXPECT_EQ(b.to_json().dump(), a.to_json().dump());
  EXPECT_EQ(b.device["bound"]["resource"], "hbm");
  EXPECT_EQ(b.steps.at(2).counts.ops, 7);
}

// A figure shown only when nonzero (comm_wait) is absent at 0, so a run without
// communication reports as before, and present (and read back) otherwise.
TEST(RunReport, CommWaitIsListedOnlyWhenNonzero) {
  RunReport a = report_with({100, 40}, 5);
  base::Json quiet = a.to_json();
  quiet["device"] = base::Json::object();
  EXPECT_FALSE(quiet["steps"][0].contains("comm_wait_ns"));
  EXPECT_FALSE(quiet["totals"].contains("comm_wait_ns"));
  EXPECT_TRUE(quiet["steps"][0].contains("sync_wait_ns"));  // zero, but always listed
  EXPECT_EQ(
      RunReport::from_json(quiet).steps[1].host_ns[static_cast<int>(runtime::HostState::comm_wait)],
      0);
  a.steps[1].host_ns[static_cast<int>(runtime::HostState::comm_wait)] = 30;
  a.totals.host_ns[static_cast<int>(runtime::HostState::comm_wait)] = 30;
  base::Json j = a.to_json();
  j["device"] = base::Json::object();
  EXPECT_EQ(j["steps"][1]["comm_wait_ns"], 30);
  EXPECT_FALSE(j["steps"][0].contains("comm_wait_ns"));
  EXPECT_EQ(j["totals"]["comm_wait_ns"], 30);
  const RunReport b = RunReport::from_json(j);
  EXPECT_EQ(b.steps[1].host_ns[static_cast<int>(runtime::HostState::comm_wait)], 30);
  EXPECT_EQ(b.totals.host_ns[static_cast<int>(runtime::HostState::comm_wait)], 30);
}

// Counts::add adds every count (each described once, in step_log.h).
TEST(RunReport, CountsAddEveryDescribedFigure) {
  runtime::Counts a, b;
  int64_t k = 1;
  runtime::for_each_figure(b, [&](std::string_view, int64_t& v, runtime::Shown) { v = k++; });
  a.add(b);
  a.add(b);
  k = 1;
  runtime::for_each_figure(
      a, [&](std::string_view key, int64_t& v, runtime::Shown) { EXPECT_EQ(v, 2 * k++) << key; });
  EXPECT_EQ(k, 12);  // the eleven counts
  EXPECT_EQ(a.disk_hits, 22);
}

TEST(RunReport, AMissingSectionNamesItsPath) {
  base::Json j = report_with({1, 2}, 0).to_json();
  j.erase("totals");
  j["device"] = base::Json::object();
  try {
    RunReport::from_json(j, "run/stats.json");
    FAIL() << "no error";
  } catch (const base::InputError& e) {
    EXPECT_EQ(e.path(), "run/stats.json");
    EXPECT_NE(std::string(e.what()).find("totals"), std::string::npos);
  }
}

TEST(RunReport, KeyFiguresComeFromTheSteps) {
  const RunReport r = report_with({100, 40, 60}, 5);
  EXPECT_EQ(r.cold_ns(), 100);
  EXPECT_DOUBLE_EQ(r.warm_ns(), 40.0);  // the median of the steps after the compile
  EXPECT_DOUBLE_EQ(r.warm_host_ns(runtime::HostState::dispatch), 40.0);
  EXPECT_EQ(r.total_ns(), 205);
  EXPECT_DOUBLE_EQ(r.warm_percentile_ns(50), 40.0);
  EXPECT_DOUBLE_EQ(r.warm_percentile_ns(99), 60.0);
  EXPECT_DOUBLE_EQ(r.macs(), 10.0);
}

// Warm: the steps after the last step that compiled, whatever its index; medians, not means, so
// one slow step does not move it; p50/p99 per step kind.
TEST(RunReport, WarmIsTheMedianOfTheStepsAfterTheLastCompile) {
  RunReport r = report_with({100, 40, 334, 30, 50, 1000}, 0);
  r.steps[2].counts.compiles = 1;  // a bounded decode's compile in step 2
  r.step_kinds = {"prefill", "token", "token", "prefill", "token", "token"};
  EXPECT_EQ(r.warm_steps(), (std::vector<size_t>{3, 4, 5}));
  EXPECT_DOUBLE_EQ(r.warm_ns(), 50.0);
  EXPECT_DOUBLE_EQ(r.warm_percentile_ns(99), 1000.0);
  EXPECT_DOUBLE_EQ(r.warm_percentile_ns(50, "token"), 50.0);
  EXPECT_DOUBLE_EQ(r.warm_percentile_ns(50, "prefill"), 30.0);
  const base::Json w = r.to_json()["warm"];
  EXPECT_EQ(w["first_step"], 3);
  EXPECT_EQ(w["by_kind"]["token"]["warm_steps"], 2);
  EXPECT_EQ(w["by_kind"]["token"]["steps"], 4);
  EXPECT_EQ(w["by_kind"]["prefill"]["warm_p99_ns"], 30.0);
  EXPECT_EQ(w["by_kind"]["prefill"]["p99_ns"], 100.0);  // every prefill, the compiling one too
  EXPECT_DOUBLE_EQ(r.kind_percentile_ns(50, "token"), 50.0);  // of 40, 50, 334, 1000
  EXPECT_EQ(r.to_json()["steps"][3]["kind"], "prefill");
  r.steps[5].counts.compiles = 1;  // nothing follows the last compile: no warm step
  EXPECT_TRUE(r.warm_steps().empty());
  EXPECT_DOUBLE_EQ(r.warm_ns(), 0.0);
  EXPECT_TRUE(r.to_json()["warm"]["first_step"].is_null());
  // Issue 40: no warm step (--steps 1) is absent, not a warm step of 0 ns.
  EXPECT_TRUE(r.to_json()["warm"]["p50_ns"].is_null());
  EXPECT_TRUE(r.to_json()["warm"]["p99_ns"].is_null());
  EXPECT_TRUE(r.to_json()["warm"]["by_kind"]["token"]["warm_p50_ns"].is_null());
  EXPECT_EQ(r.to_json()["warm"]["by_kind"]["token"]["p50_ns"], 50.0);  // every step: present
}

TEST(RunReport, OvertakesAfterTheStepsItsWarmSavingNeedsToRepayItsStart) {
  const RunReport slow_start = report_with({1000, 10, 10}, 0);   // fixed 990, warm 10
  const RunReport fast_start = report_with({100, 100, 100}, 0);  // fixed 0, warm 100
  EXPECT_EQ(slow_start.overtakes(fast_start), "11");             // ceil(990 / 90)
  EXPECT_EQ(fast_start.overtakes(slow_start), "never");
  EXPECT_EQ(fast_start.overtakes(report_with({200, 200, 200}, 0)), "always");
}

// The large-trace warning: none at 100 MiB, one line naming the size and the ways out past it.
// Sparse files: no disk space is used.
TEST(LargeTrace, WarnsPastOneHundredMiB) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("wallsim_large_trace_" + std::to_string(::getpid()) + ".json"))
                               .string();
  EXPECT_FALSE(large_trace_warning(path, engines::TraceLevel::plans));  // absent
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  std::filesystem::resize_file(path, kLargeTraceBytes);
  EXPECT_FALSE(large_trace_warning(path, engines::TraceLevel::plans));
  std::filesystem::resize_file(path, kLargeTraceBytes + (std::uintmax_t{79} << 20));
  const auto w = large_trace_warning(path, engines::TraceLevel::plans);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->find('\n'), std::string::npos);
  EXPECT_EQ(w->rfind("wallsim: warning: trace.json is 179 MiB", 0), 0u) << *w;
  EXPECT_NE(w->find("--trace-window"), std::string::npos);
  // Review F17: only levels below the one in use are suggested.
  EXPECT_EQ(w->find("--trace-level plans"), std::string::npos) << *w;
  EXPECT_NE(w->find("--trace-level none"), std::string::npos) << *w;
  std::filesystem::resize_file(path, kLargeTraceBytes + 1);
  const auto wi = large_trace_warning(path, engines::TraceLevel::instructions);
  std::filesystem::remove(path);
  ASSERT_TRUE(wi);
  EXPECT_NE(wi->find("--trace-level plans"), std::string::npos) << *wi;
}

TEST(RunReport, PeakTensorFlopsIsTwoFlopPerMacPerCycle) {
  EXPECT_DOUBLE_EQ(sim::peak_tensor_flops(128, 128, 1000), 2.0 * 128 * 128 * 1e9);
}

}  // namespace
}  // namespace wallsim::driver
