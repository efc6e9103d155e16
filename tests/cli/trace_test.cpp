// Traces that viewers draw as written: every kind of trace wallsim writes (exec at instruction
// level of a hand-written and a compiled plan, run under each mode, decode, serve, a program
// replay; the studies' runs in study_test.cpp) has no slice that passes the next one's start on its
// track, under both viewer arithmetics (tests/support/trace_overlap.h); the host track names its
// plans by their group, compile slices carry their modelled arguments, and steps are marked.
// Also the regression test for bounded decode under the per-op modes (run-time scalar 'kv_len'
// was set after the op that reads it was launched).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/trace_overlap.h"
#include "cli_test_util.h"

namespace wallsim {
namespace {

using Json = nlohmann::json;

using test::kModes;

// Runs `wallsim ARGS --out DIR` (exit 0 expected) and returns DIR's trace.
Json traced(const std::string& args, const std::string& name) {
  const std::string dir = test::fresh_dir("trace", name);
  std::string err;
  EXPECT_EQ(test::run_wallsim(args + " --out " + dir, &err), 0) << args << "\n" << err;
  return Json::parse(test::slurp(dir + "/trace.json"));
}

void expect_no_overlap(const Json& trace, const std::string& what) {
  std::size_t checked = 0;
  const auto overlaps = test::trace_overlaps(trace, &checked);
  EXPECT_GT(checked, 10u) << what;
  EXPECT_TRUE(overlaps.empty()) << what << ": " << test::describe(overlaps);
}

std::vector<Json> slices_named(const Json& trace, const std::string& name) {
  std::vector<Json> out;
  for (const Json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("name", "") == name) out.push_back(e);
  }
  return out;
}

TEST(Traces, ExecAtInstructionLevelHasNoOverlap) {
  const Json t = traced(
      "exec examples/plans/matmul.json -c configs/trn2.json --trace-level instructions", "exec");
  expect_no_overlap(t, "exec matmul");
  EXPECT_FALSE(slices_named(t, "matmul").empty());
}

// A compiled graph's plan (many streams, semaphores, every engine) at instruction level.
TEST(Traces, ExecOfACompiledGraphHasNoOverlap) {
  const std::string plan = test::fresh_dir("trace", "block") + ".plan.json";
  std::string err;
  ASSERT_EQ(test::run_wallsim("compile examples/graphs/transformer_block.json -c configs/trn2.json"
                              " --out " +
                                  plan,
                              &err),
            0)
      << err;
  const Json t = traced("exec " + plan + " -c configs/trn2.json", "exec_block");
  expect_no_overlap(t, "exec transformer_block");
  EXPECT_FALSE(slices_named(t, "matmul").empty());
}

// A captured program replayed (training steps: forward, backward, optimizer).
TEST(Traces, ProgramReplayHasNoOverlap) {
  expect_no_overlap(traced("run -c configs/trn2.json -w "
                           "program:file=tests/frontends/torch/programs/mlp_sgd.json"
                           " --mode fused --trace-level instructions",
                           "program_sgd"),
                    "program mlp_sgd fused");
}

TEST(Traces, RunUnderEveryModeHasNoOverlapAndNamesItsPlans) {
  for (const std::string& mode : kModes) {
    const Json t = traced(
        "run -c configs/trn2.json -w mlp:batch=256,d_model=256,d_ff=1024,layers=2"
        " --steps 2 --trace-level instructions --mode " +
            mode,
        "mlp_" + mode);
    expect_no_overlap(t, "mlp " + mode);
    EXPECT_TRUE(slices_named(t, "launch g").empty()) << mode;
    EXPECT_EQ(slices_named(t, "step 0").size(), 1u) << mode;
    EXPECT_EQ(slices_named(t, "step 1").size(), 1u) << mode;
    // Compile slices (per-op native launches kernels without compiling) say what was compiled.
    const std::vector<Json> compiles = slices_named(t, "compile");
    if (mode == "native") continue;
    ASSERT_FALSE(compiles.empty()) << mode;
    bool matmul = false;
    for (const Json& c : compiles) {
      ASSERT_TRUE(c.contains("args")) << mode << " " << c.dump();
      const std::string ops = c["args"]["ops"].get<std::string>();
      // One "id:op" entry per node of the group.
      EXPECT_EQ(c["args"]["nodes"].get<int64_t>(), std::count(ops.begin(), ops.end(), ':'));
      EXPECT_GT(c["args"]["modelled_ns"].get<int64_t>(), 0);
      EXPECT_EQ(c["args"]["signature"].get<std::string>().size(), 16u) << c.dump();
      matmul |= ops.find(":matmul") != std::string::npos;
      EXPECT_FALSE(slices_named(t, "launch " + c["args"]["plan"].get<std::string>()).empty());
    }
    EXPECT_TRUE(matmul) << mode;
  }
}

TEST(Traces, DecodeAndServeHaveNoOverlap) {
  expect_no_overlap(traced("run -c configs/trn2.json -w "
                           "decode:layers=2,prompt=32,new_tokens=6,d_model=128,heads=4,d_ff=256"
                           " --mode aot --trace-level instructions",
                           "decode_aot"),
                    "decode aot");
  expect_no_overlap(
      traced("run -c configs/trn2.json -w serve:requests=8,layers=2,d_model=64,heads=4,d_ff=128,"
             "vocab=100,context=64,max_prompt=32,prompt_mean=12,max_batch=4,block=4"
             " --mode fused --trace-level instructions",
             "serve_fused"),
      "serve fused");
}

// Bounded decode masks on the chip past the run-time scalar kv_len: a per-op mode launches the
// mask's compare as soon as it is recorded, so the scalar must be set before. All modes run and
// agree on the work done: the same matmuls, except that a fused plan adds a one-row matmul's
// bias by the array (an identity times the bias row: one MAC per output element, counted),
// where an op-by-op plan adds it on the vector engine.
TEST(Traces, BoundedDecodeRunsUnderEveryMode) {
  std::set<int64_t> macs;
  for (const std::string& mode : kModes) {
    const std::string dir = test::fresh_dir("trace", "bounded_" + mode);
    std::string err;
    ASSERT_EQ(test::run_wallsim("run -c configs/trn2.json -w decode:layers=1,prompt=20,"
                                "new_tokens=5,d_model=128,heads=2,d_ff=256,dynamic=bounded,"
                                "kv=paged,block=8 --trace-level instructions --mode " +
                                    mode + " --out " + dir,
                                &err),
              0)
        << mode << ": " << err;
    expect_no_overlap(Json::parse(test::slurp(dir + "/trace.json")), "bounded decode " + mode);
    if (mode == "aot") continue;  // pads the prompt to its bucket: more MACs
    const Json stats = Json::parse(test::slurp(dir + "/stats.json"));
    macs.insert(stats["device"]["engines"]["tensor"]["macs"].get<int64_t>());
  }
  ASSERT_FALSE(macs.empty());
  // The same matmuls in every mode, within the bias rows (d_model and d_ff per layer, a few
  // thousandths of the MACs here).
  EXPECT_LE(*macs.rbegin() - *macs.begin(), *macs.begin() / 1000);
}

}  // namespace
}  // namespace wallsim

namespace wallsim {
namespace {

// `run` keeps a long run's trace small as `exec` does: a window (slices overlapping it, whole)
// and the instruction CSV at any trace level; a bad window is a one-line error with exit 2.
TEST(Traces, RunTakesATraceWindowAndTheInstructionCsv) {
  const std::string base =
      "run -c configs/trn2.json -w mlp:batch=256,d_model=256,d_ff=1024,layers=2 --mode fused"
      " --steps 2 --trace-level instructions";
  const Json full = traced(base, "window_full");
  const std::string dir = test::fresh_dir("trace", "window");
  std::string err;
  // The second step's device work: 20 us into its slice on the steps track (after the first
  // step's compile, whose length is the compile-cost model's).
  int64_t step1_ns = -1;
  for (const Json& e : full["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("name", "") == "step 1")
      step1_ns = static_cast<int64_t>(e["ts"].get<double>() * 1000);
  }
  ASSERT_GT(step1_ns, 0);
  const int64_t from = step1_ns + 20000, to = from + 700000;
  ASSERT_EQ(test::run_wallsim(base + " --instruction-csv --trace-window " + std::to_string(from) +
                                  ":" + std::to_string(to) + " --out " + dir,
                              &err),
            0)
      << err;
  const Json windowed = Json::parse(test::slurp(dir + "/trace.json"));
  std::size_t kept = 0, all = 0;
  for (const Json& e : windowed["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    ++kept;
    EXPECT_LE(e["ts"].get<double>() * 1000, static_cast<double>(to) + 1) << e.dump();
    EXPECT_GE((e["ts"].get<double>() + e["dur"].get<double>()) * 1000,
              static_cast<double>(from) - 1)
        << e.dump();
  }
  for (const Json& e : full["traceEvents"]) all += e.value("ph", "") == "X";
  EXPECT_GT(kept, 10u);
  EXPECT_LT(kept, all);
  const std::string csv = test::slurp(dir + "/instructions.csv");
  EXPECT_EQ(
      csv.rfind("plan,stream,index,opcode,node,start_ps,end_ps,ready_ps,busy_cycles,bytes\n", 0),
      0u);
  EXPECT_GT(std::count(csv.begin(), csv.end(), '\n'), 100);

  EXPECT_EQ(test::run_wallsim(base + " --trace-window 5:1 --out " + dir + "_bad", &err), 2);
  EXPECT_NE(err.find("--trace-window 5:1"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

}  // namespace
}  // namespace wallsim

namespace wallsim {
namespace {

// stats.txt holds the run report after the device stats: host breakdown (totals and shares),
// steps, the per-op table and, for serve, the serving figures.
TEST(Reports, StatsTextHoldsTheRunReport) {
  const std::string dir = test::fresh_dir("report", "serve");
  std::string err;
  ASSERT_EQ(test::run_wallsim("run -c configs/tiny.json -w serve:requests=3,layers=1,d_model=64,"
                              "heads=4,d_ff=128,vocab=100,context=64,max_prompt=32,prompt_mean=12,"
                              "output_mean=4,max_batch=4,block=4 --mode fused --trace-level none"
                              " --out " +
                                  dir,
                              &err),
            0)
      << err;
  const std::string text = test::slurp(dir + "/stats.txt");
  const Json stats = Json::parse(test::slurp(dir + "/stats.json"));
  for (const std::string& want :
       {std::string("device.time_ns"), std::string("totals.compile_ns"),
        std::string("share_of_step_wall.compile"), std::string("serving.output_tokens"),
        "# steps: " + std::to_string(stats["steps"].size()) + " rows",
        "# ops: " + std::to_string(stats["ops"].size()) + " rows",
        std::string("# serving.per_request: 3 rows"), std::string("achieved_tflops")}) {
    EXPECT_NE(text.find(want), std::string::npos) << want;
  }
  // The value on the serving.output_tokens line (names are padded to one column) is stats.json's.
  const std::size_t at = text.find("\nserving.output_tokens ");
  ASSERT_NE(at, std::string::npos);
  const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  EXPECT_EQ(line.substr(line.find_last_of(' ') + 1),
            std::to_string(stats["serving"]["output_tokens"].get<int64_t>()))
      << line;
}

}  // namespace
}  // namespace wallsim

namespace wallsim {
namespace {

Json run_stats(const std::string& args, const std::string& name) {
  const std::string dir = test::fresh_dir("report", name);
  std::string err;
  EXPECT_EQ(test::run_wallsim(args + " --trace-level none --out " + dir, &err), 0) << args << err;
  return Json::parse(test::slurp(dir + "/stats.json"));
}

// Every op row's achieved throughput and its roofline come from the same MACs, DMA bytes and
// time (time_ns: its busiest engine, or its bytes at HBM bandwidth), so achieved never passes
// the roofline and no figure is clamped: the tensor engine's own busy time must already keep
// it under peak. Several workloads and modes, with matmuls, batched matmuls, fp32 and bf16.
TEST(Reports, AchievedIsAtMostTheRooflineForEveryOpRow) {
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"run -c configs/trn2.json -w decode:new_tokens=4 --mode native", "decode_native"},
      {"run -c configs/trn2.json -w decode:new_tokens=4 --mode aot", "decode_aot"},
      {"run -c configs/trn2.json -w transformer:seq=128 --mode aot --steps 2", "gpt2_aot"},
      {"run -c configs/tiny.json -w mlp:batch=64,d_model=128,d_ff=256,dtype=fp32 --mode eager",
       "mlp_fp32_eager"},
      {"run -c configs/trn2.json -w gemm:m=1024,k=1024,n=1024 --mode fused", "gemm_fused"}};
  int rows_with_macs = 0;
  for (const auto& [args, name] : runs) {
    const Json stats = run_stats(args, name);
    // (A const Json's operator[] must not meet a missing key: look the peak up by pointer.)
    const Json::json_pointer peak_key("/device/engines/tensor/bf16/peak_tflops");
    const double peak_tflops = stats.contains(peak_key) ? stats.at(peak_key).get<double>() : 0.0;
    ASSERT_FALSE(stats["ops"].empty()) << name;
    double exposed = 0, host = 0;
    for (const Json& op : stats["ops"]) {
      const std::string what = name + " " + op["op"].get<std::string>();
      exposed += op["exposed_ns"].get<double>();
      host += op["host_ns"].get<double>();
      int64_t engine_bytes = 0;
      for (const auto& [e, b] : op["dma_engine_bytes"].items()) engine_bytes += b.get<int64_t>();
      EXPECT_EQ(engine_bytes, op["dma_bytes"].get<int64_t>()) << what;
      const double time_ns = op["time_ns"];
      for (const auto& [engine, busy] : op["busy_ns"].items()) {
        if (engine != "dma") {
          EXPECT_GE(time_ns, busy.get<double>()) << what << " " << engine;
        }
      }
      EXPECT_LE(op["hbm_bandwidth_fraction"].get<double>(), 1.0 + 1e-12) << what;
      if (!op.contains("achieved_tflops")) continue;
      ++rows_with_macs;
      const double achieved = op["achieved_tflops"], roofline = op["roofline_tflops"];
      EXPECT_GT(achieved, 0.0) << what;
      EXPECT_LE(achieved, roofline * (1 + 1e-12)) << what;  // rounding only
      EXPECT_LE(op["tensor_peak_fraction"].get<double>(), 1.0 + 1e-12) << what;
      if (peak_tflops > 0) {
        EXPECT_LE(roofline, peak_tflops * (1 + 1e-12)) << what;
      }
    }
    // Exposed time is each op's part of its launches' critical paths: with the part on no op
    // (copies) it is the launches' time, which is the device's busy time (launches never
    // overlap: timing.launch.wait_for_previous).
    const Json& busy = stats["device_busy"];
    EXPECT_GT(exposed, 0.0) << name;
    EXPECT_NEAR(exposed + busy["exposed_outside_ops_ns"].get<double>(),
                busy["busy_ns"].get<double>(), busy["busy_ns"].get<double>() * 1e-12)
        << name;
    if (stats.contains("layers")) {
      double layers = 0;
      for (const Json& l : stats["layers"]) layers += l["exposed_ns"].get<double>();
      EXPECT_LE(layers, exposed * (1 + 1e-12)) << name;
    }
    // Host time per op: the ops' own dispatch (none under AOT, which replays whole steps),
    // within the host's dispatch time.
    if (stats.value("mode", std::string()) != "aot") {
      EXPECT_GT(host, 0.0) << name;
    }
    EXPECT_LE(host, stats["totals"]["host_dispatch_ns"].get<double>() +
                        stats["startup"]["host_dispatch_ns"].get<double>())
        << name;
  }
  EXPECT_GE(rows_with_macs, 6);
}

// device_busy divides by the device's busy time (the union of launch spans), device.* by the whole
// run: a fused run's compile stall makes the second tiny, not the first. Plans launched are split
// into those compiled from ops (totals.plans_launched) and copies (the transfers).
TEST(Reports, DeviceFiguresOverBusyTimeAndCopyPlansApart) {
  const Json stats = run_stats("run -c configs/trn2.json -w mlp --mode fused", "mlp_fused");
  const Json& busy = stats["device_busy"];
  const Json& device = stats["device"];
  EXPECT_GT(busy["busy_ns"].get<double>(), 0.0);
  EXPECT_LE(busy["busy_ns"].get<double>(), device["time_ns"].get<double>());
  const double ratio = device["time_ns"].get<double>() / busy["busy_ns"].get<double>();
  EXPECT_GT(ratio, 100.0);  // the compile stall
  EXPECT_NEAR(busy["engines"]["tensor"]["utilization"].get<double>(),
              device["engines"]["tensor"]["utilization"].get<double>() * ratio, 1e-9);
  EXPECT_NEAR(busy["bound_fraction"].get<double>(),
              device["bound"]["fraction"].get<double>() * ratio, 1e-9);
  EXPECT_LE(busy["bound_fraction"].get<double>(), 1.0);
  const Json& plans = busy["plans_launched"];
  EXPECT_EQ(plans["compiled"].get<int64_t>() + plans["copies"].get<int64_t>(),
            device["plans_launched"].get<int64_t>());
  EXPECT_EQ(plans["compiled"], stats["totals"]["plans_launched"]);
  EXPECT_EQ(plans["copies"].get<int64_t>(), stats["totals"]["transfers"].get<int64_t>() +
                                                stats["startup"]["transfers"].get<int64_t>());
}

}  // namespace
}  // namespace wallsim

namespace wallsim {
namespace {

// Long runs say where they are: `--progress S` prints one stderr line after a step at most every
// S real seconds ("step i/N" when --steps sets the count); a short run at the default prints none.
TEST(Run, ProgressLinesOnStderr) {
  std::string err;
  const std::string args =
      "run -c configs/tiny.json -w gemm:m=64,k=64,n=64 --steps 3 "
      "--trace-level none --out " +
      test::fresh_dir("progress", "gemm");
  ASSERT_EQ(test::run_wallsim(args + " --progress 1e-9", &err), 0) << err;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_NE(err.find("wallsim: run: step " + std::to_string(i) + "/3 done, "), std::string::npos)
        << err;
  }
  ASSERT_EQ(test::run_wallsim(args, &err), 0) << err;
  EXPECT_EQ(err.find("wallsim: run: step"), std::string::npos) << err;
}

// The run streams its step records to a spool and splices them into stats.json at the end
// (defect 21): the steps array must be whole, agree with the totals, and the warm section's
// p50/p99 per kind, kept from one wall time per step, must be what the steps give.
TEST(Run, StreamedStepsAgreeWithTotalsAndWarmFigures) {
  const std::string out = test::fresh_dir("stream", "decode");
  std::string err;
  ASSERT_EQ(test::run_wallsim("run -c configs/tiny.json -w decode:dynamic=bounded,new_tokens=12 "
                              "--trace-level none --out " +
                                  out,
                              &err),
            0)
      << err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(test::slurp(out + "/stats.json"));
  const auto& steps = j.at("steps");
  ASSERT_EQ(steps.size(), 13u);
  int64_t wall = 0, compiles = 0;
  size_t first_warm = 0;
  std::map<std::string, std::vector<double>> all, warm;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].at("index").get<size_t>(), i);
    wall += steps[i].at("wall_ns").get<int64_t>();
    compiles += steps[i].at("compiles").get<int64_t>();
    if (steps[i].at("compiles").get<int64_t>() > 0) first_warm = i + 1;
  }
  EXPECT_EQ(wall, j.at("totals").at("wall_ns").get<int64_t>());
  EXPECT_EQ(compiles, j.at("totals").at("compiles").get<int64_t>());
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string kind = steps[i].at("kind");
    all[kind].push_back(steps[i].at("wall_ns").get<double>());
    if (i >= first_warm) warm[kind].push_back(steps[i].at("wall_ns").get<double>());
  }
  const auto nearest_rank = [](std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  const auto& w = j.at("warm");
  EXPECT_EQ(w.at("first_step").get<size_t>(), first_warm);
  ASSERT_EQ(w.at("by_kind").size(), 2u);  // prefill, token
  for (const auto& [kind, v] : all) {
    const auto& k = w.at("by_kind").at(kind);
    EXPECT_EQ(k.at("steps").get<size_t>(), v.size()) << kind;
    EXPECT_EQ(k.at("p50_ns").get<double>(), nearest_rank(v, 50)) << kind;
    EXPECT_EQ(k.at("p99_ns").get<double>(), nearest_rank(v, 99)) << kind;
    EXPECT_EQ(k.at("warm_steps").get<size_t>(), warm[kind].size()) << kind;
    if (warm[kind].empty()) {  // no warm step of the kind: absent, not 0 ns (issue 40)
      EXPECT_TRUE(k.at("warm_p50_ns").is_null()) << kind;
    } else {
      EXPECT_EQ(k.at("warm_p50_ns").get<double>(), nearest_rank(warm[kind], 50)) << kind;
    }
  }
  // The spool is gone and stats.txt holds the whole steps table.
  EXPECT_FALSE(std::ifstream(out + "/.steps.jsonl").good());
  const std::string txt = test::slurp(out + "/stats.txt");
  EXPECT_NE(txt.find("\n# steps: 13 rows\n"), std::string::npos);
  EXPECT_EQ(txt.find("steps  []"), std::string::npos);
}

}  // namespace
}  // namespace wallsim
