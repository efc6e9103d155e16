// The studies at small sizes on the tiny chip: each writes its table, CSV, study.json and plots,
// and its numbers show what the study is about (from the runs, not from the code).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include "../support/trace_overlap.h"
#include "cli_test_util.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace wallsim {
namespace {

using test::slurp;
using Json = nlohmann::json;
namespace fs = std::filesystem;

// Every run directory's trace under `runs_dir` (the study's runs/): no slice passes the next
// one's start on its track under any viewer's arithmetic (tests/support/trace_overlap.h).
// Returns the traces checked.
int expect_run_traces_have_no_overlap(const std::string& runs_dir) {
  int traces = 0;
  for (const auto& entry : fs::directory_iterator(runs_dir)) {
    const std::string trace = entry.path().string() + "/trace.json";
    if (!entry.is_directory() || !fs::exists(trace)) continue;
    ++traces;
    std::size_t checked = 0;
    const auto overlaps = test::trace_overlaps(Json::parse(slurp(trace)), &checked);
    EXPECT_GT(checked, 0u) << trace;
    EXPECT_TRUE(overlaps.empty()) << trace << ": " << test::describe(overlaps);
  }
  return traces;
}

// Runs `wallsim study NAME` on tiny with `spec` (JSON text); returns study.json's runs by label.
// The runs' traces (when the spec writes them) are checked for overlaps.
std::map<std::string, Json> study(const std::string& name, const std::string& spec,
                                  std::string* dir_out = nullptr) {
  const std::string tag = name + "_" + std::to_string(::getpid());
  const std::string spec_file = ::testing::TempDir() + "/study_" + tag + ".json";
  const std::string dir = ::testing::TempDir() + "/study_" + tag;
  fs::remove_all(dir);
  std::ofstream(spec_file) << spec;
  const std::string log = dir + ".log";
  const std::string cmd = "cd " + std::string(WALLSIM_SOURCE_DIR) + " && " + WALLSIM_BIN +
                          " study " + name + " -c configs/tiny.json --spec " + spec_file +
                          " --out " + dir + " >" + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(log);
  EXPECT_TRUE(fs::exists(dir + "/" + name + ".md"));
  EXPECT_TRUE(fs::exists(dir + "/" + name + ".csv"));
  const std::string png = dir + "/" + name + "_time.png";
  EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 1000) << slurp(dir + "/plots.log");
  std::map<std::string, Json> runs;
  const Json j = Json::parse(slurp(dir + "/study.json"));
  for (const Json& r : j["runs"]) runs[r["label"].get<std::string>()] = r;
  if (fs::exists(dir + "/runs")) expect_run_traces_have_no_overlap(dir + "/runs");
  if (dir_out) *dir_out = dir;
  return runs;
}

double fig(const Json& run, const char* key) { return run["figures"][key].get<double>(); }

const char* kDecode = "decode:layers=1,d_model=64,heads=4,d_ff=128,prompt=8,new_tokens=6";

TEST(Study, DecodeCompilesPerTokenUnlessBoundedOrBucketed) {
  std::string dir;
  auto runs = study("decode",
                    R"({"title": "small decode", "columns": ["total_ns", "compiles"],
    "runs": [
      {"label": "native", "workload": ")" +
                        std::string(kDecode) + R"(", "mode": "native"},
      {"label": "exact", "workload": ")" +
                        std::string(kDecode) + R"(", "mode": "fused"},
      {"label": "bounded", "workload": ")" +
                        std::string(kDecode) + R"(,dynamic=bounded", "mode": "fused"},
      {"label": "bounded longer", "workload":
        "decode:layers=1,d_model=64,heads=4,d_ff=128,prompt=8,new_tokens=12,dynamic=bounded",
        "mode": "fused"},
      {"label": "aot", "workload": ")" +
                        std::string(kDecode) + R"(", "mode": "aot"}]})",
                    &dir);
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(fig(runs["native"], "compiles"), 0);
  EXPECT_GE(fig(runs["exact"], "compiles"), 6);  // a new shape per token
  // Bounded: compiled at the bound once, whatever the number of tokens.
  EXPECT_EQ(fig(runs["bounded"], "compiles"), fig(runs["bounded longer"], "compiles"));
  EXPECT_LT(fig(runs["bounded"], "compiles"), fig(runs["exact"], "compiles"));
  EXPECT_GT(fig(runs["bounded"], "wasted_flop_fraction"), 0);
  EXPECT_EQ(fig(runs["aot"], "compiles"), 0);  // all at start-up
  EXPECT_GT(fig(runs["aot"], "startup_compiles"), 0);
  EXPECT_GT(fig(runs["exact"], "total_ns"), fig(runs["native"], "total_ns"));
  EXPECT_TRUE(fs::exists(dir + "/decode_steps.png"));
  EXPECT_TRUE(fs::exists(dir + "/runs/1/trace.json"));
  // Exact shapes compile every step: no warm step, shown as "-"; every token step still counts.
  EXPECT_TRUE(runs["exact"]["figures"]["p50_step_ns"].is_null());
  EXPECT_GT(fig(runs["exact"], "token_p50_ns"), 0);
  // The findings under the table come from the same runs: each run is listed as faster or slower
  // than native by its token steps' p50.
  const std::string md = slurp(dir + "/decode.md");
  const size_t at = md.find("- Per token");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  const size_t f = line.find("faster: "), sl = line.find("; slower: ");
  ASSERT_TRUE(f != std::string::npos && sl != std::string::npos) << line;
  const std::string faster = line.substr(f, sl - f), slower = line.substr(sl);
  for (const char* label : {"exact", "bounded", "aot"}) {
    const bool beats = fig(runs[label], "token_p50_ns") < fig(runs["native"], "token_p50_ns");
    EXPECT_EQ(faster.find(std::string(label) + " ") != std::string::npos, beats) << line;
    EXPECT_EQ(slower.find(std::string(label) + " ") != std::string::npos, !beats) << line;
  }
}

// A small serve workload: a 1-layer model, 6 short requests arriving at once, batches of 4.
const char* kServe =
    "serve:requests=6,layers=1,d_model=64,heads=4,d_ff=128,vocab=100,context=64,max_prompt=32,"
    "prompt_mean=12,output_mean=10,max_batch=4,block=4,rate=5000";

TEST(Study, ServingReportsLatencyAndKv) {
  const std::string w = kServe;
  std::string dir;
  auto runs = study("serving",
                    R"({"title": "small serving", "trace_level": "none",
    "columns": ["throughput_tokens_per_s", "ttft_p50_ns"], "runs": [
      {"label": "static aot", "workload": ")" +
                        w + R"(,scheduler=static", "mode": "aot"},
      {"label": "continuous native", "workload": ")" +
                        w + R"(", "mode": "native"},
      {"label": "continuous bounded", "workload": ")" +
                        w + R"(,dynamic=bounded", "mode": "fused"}]})",
                    &dir);
  ASSERT_EQ(runs.size(), 3u);
  for (auto& [label, r] : runs) {
    EXPECT_EQ(r["status"], "ok") << label;
    EXPECT_GT(fig(r, "throughput_tokens_per_s"), 0) << label;
    EXPECT_GE(fig(r, "ttft_p99_ns"), fig(r, "ttft_p50_ns")) << label;
  }
  EXPECT_GT(fig(runs["static aot"], "padding_flop_fraction"),
            fig(runs["continuous native"], "padding_flop_fraction"));
  EXPECT_TRUE(fs::exists(dir + "/serving_latency.png"));
  // Padding by source adds up to the run's measured padded (or masked) fraction.
  for (const char* label : {"static aot", "continuous bounded"}) {
    const Json& r = runs[label];
    const double sum = fig(r, "padding_batch_fraction") + fig(r, "padding_prompt_fraction") +
                       fig(r, "padding_keys_fraction");
    EXPECT_NEAR(sum, fig(r, "wasted_flop_fraction"), 1e-9) << label;
    EXPECT_GT(sum, 0) << label;
  }
  // Static reserves a padded context per sequence; continuous pages by actual length.
  EXPECT_GT(fig(runs["static aot"], "padding_prompt_fraction"), 0);
  EXPECT_EQ(fig(runs["continuous native"], "padding_batch_fraction"), 0);
}

// A series is a controlled comparison: its findings give each run's throughput against the
// first run's, as the table's numbers give it; a pool that binds is said to bind.
TEST(Study, ServingSeriesFindingsAreTheTablesRatios) {
  const std::string w = std::string(kServe) + ",kv_blocks=16";
  std::string dir;
  auto runs = study("serving",
                    R"({"title": "small serving", "trace_level": "none",
    "columns": ["throughput_tokens_per_s", "kv_peak_blocks"], "runs": [
      {"label": "static", "workload": ")" +
                        w + R"(,scheduler=static", "mode": "aot", "series": "sched"},
      {"label": "continuous", "workload": ")" +
                        w + R"(", "mode": "aot", "series": ["sched", "mode"]},
      {"label": "native", "workload": ")" +
                        w + R"(", "mode": "native", "series": "mode"}]})",
                    &dir);
  const std::string md = slurp(dir + "/serving.md");
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx",
                fig(runs["continuous"], "throughput_tokens_per_s") /
                    fig(runs["static"], "throughput_tokens_per_s"));
  const size_t at = md.find("- sched: against static's ");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(line.find(std::string("continuous ")), std::string::npos) << line;
  EXPECT_NE(line.find(ratio), std::string::npos) << line << " / " << ratio;
  EXPECT_NE(md.find("- mode: against continuous's "), std::string::npos) << md;
  // 16 blocks of 4 rows: static reserves a padded 64-row context (16 blocks) per sequence.
  EXPECT_EQ(fig(runs["static"], "kv_peak_blocks"), 16);
  EXPECT_NE(md.find("- static: the KV pool peaks at 16 of 16 blocks (it binds)"), std::string::npos)
      << md;
}

TEST(Study, MaskOnTheChipSendsFarFewerBytes) {
  std::string dir;
  auto runs = study("mask", R"({"title": "small mask", "columns": ["host_link_bytes", "warm_ns"],
    "runs": [
      {"label": "64 host", "workload": "mask:seq=64,segments=4,d_model=64,heads=4,mask=host", "mode": "fused", "steps": 3},
      {"label": "64 chip", "workload": "mask:seq=64,segments=4,d_model=64,heads=4,mask=chip", "mode": "fused", "steps": 3},
      {"label": "256 host", "workload": "mask:seq=256,segments=4,d_model=64,heads=4,mask=host", "mode": "fused", "steps": 3},
      {"label": "256 chip", "workload": "mask:seq=256,segments=4,d_model=64,heads=4,mask=chip", "mode": "fused", "steps": 3}]})",
                    &dir);
  // The dense mask is L^2 bf16 per forward; the ids are L int32.
  const double host_extra =
      fig(runs["256 host"], "host_link_bytes") - fig(runs["256 chip"], "host_link_bytes");
  EXPECT_NEAR(host_extra, 3 * (256.0 * 256 * 2 - 256 * 4), 3 * 256 * 4 + 1);
  EXPECT_GT(fig(runs["256 host"], "transfer_ns"), fig(runs["256 chip"], "transfer_ns"));
  EXPECT_TRUE(fs::exists(dir + "/mask_seq.png"));
}

const char* kBlock = "transformer:layers=1,d_model=64,heads=4,d_ff=128,seq=64";
const char* kLayers = "transformer:layers=2,d_model=64,heads=4,d_ff=128,seq=64";

TEST(Study, GranularityTradesCompilesForTraffic) {
  std::string dir;
  auto runs = study("granularity",
                    R"({"title": "small granularity", "columns": ["cold_ns"],
    "models": [{"label": "m", "workload": ")" +
                        std::string(kLayers) + R"("}],
    "runs": [
      {"label": "fanout alone", "workload": "{model}", "mode": "fused", "steps": 3, "series": "alone", "set": {"runtime.lazy.heuristics": ["fanout"]}},
      {"label": "default set", "workload": "{model}", "mode": "fused", "steps": 3, "series": "alone"},
      {"label": "size 1 at layers", "workload": "{model}", "mode": "fused", "steps": 3, "series": "at layers", "set": {"runtime.lazy.heuristics": ["repeated", "size"], "runtime.lazy.max_group_ops": 1}},
      {"label": "size 4 at layers", "workload": "{model}", "mode": "fused", "steps": 3, "series": "at layers", "set": {"runtime.lazy.heuristics": ["repeated", "size"], "runtime.lazy.max_group_ops": 4}},
      {"label": "size 8 at layers", "workload": "{model}", "mode": "fused", "steps": 3, "series": "at layers", "set": {"runtime.lazy.heuristics": ["repeated", "size"], "runtime.lazy.max_group_ops": 8}},
      {"label": "whole step", "workload": "{model}", "mode": "fused", "steps": 3, "series": "at layers", "set": {"runtime.lazy.heuristics": ["size"], "runtime.lazy.max_group_ops": 0}},
      {"label": "AOT", "workload": "{model}", "mode": "aot", "steps": 3}]})",
                    &dir);
  ASSERT_EQ(runs.size(), 7u);
  EXPECT_GT(fig(runs["m: size 1 at layers"], "compiles"), fig(runs["m: whole step"], "compiles"));
  EXPECT_GT(fig(runs["m: size 1 at layers"], "hbm_bytes_per_step"),
            fig(runs["m: whole step"], "hbm_bytes_per_step"));
  // Counted from the layer cuts, every layer is cut alike: a larger size never compiles more.
  EXPECT_GE(fig(runs["m: size 1 at layers"], "compiles"),
            fig(runs["m: size 4 at layers"], "compiles"));
  EXPECT_GE(fig(runs["m: size 4 at layers"], "compiles"),
            fig(runs["m: size 8 at layers"], "compiles"));
  // The default set cuts at the layers: one compile serves both.
  EXPECT_EQ(fig(runs["m: default set"], "plans_per_step"), 2);
  EXPECT_TRUE(fs::exists(dir + "/granularity.png"));
  EXPECT_TRUE(fs::exists(dir + "/granularity_cuts.png"));
  // The findings agree with the table.
  const std::string md = slurp(dir + "/granularity.md");
  const bool falls =
      fig(runs["m: whole step"], "warm_ns") <= fig(runs["m: size 8 at layers"], "warm_ns") &&
      fig(runs["m: size 8 at layers"], "warm_ns") <= fig(runs["m: size 4 at layers"], "warm_ns") &&
      fig(runs["m: size 4 at layers"], "warm_ns") <= fig(runs["m: size 1 at layers"], "warm_ns");
  EXPECT_EQ(
      md.find("- m: at layers: the warm step never rises as groups grow.") != std::string::npos,
      falls)
      << md;
  const bool aot_faster = fig(runs["m: AOT"], "warm_ns") < fig(runs["m: whole step"], "warm_ns");
  const size_t at = md.find("- m: AOT's warm step");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(line.find(aot_faster ? " faster than the whole step" : " slower than the whole step"),
            std::string::npos)
      << line;
}

TEST(Study, FallbackPoliciesCompleteOrStop) {
  const std::string b = kBlock;
  const std::string fail_attention = R"("set": {"runtime.inject.fail_ops": ["attention"], )";
  const std::string spec =
      R"({"title": "small fallback", "columns": ["cold_ns"], "runs": [
      {"label": "none", "workload": ")" +
      b + R"(", "mode": "fused", "steps": 3},
      {"label": "split", "workload": ")" +
      b + R"(", "mode": "fused", "steps": 3, )" + fail_attention +
      R"("runtime.lazy.fallback": "split"}},
      {"label": "eager", "workload": ")" +
      b + R"(", "mode": "fused", "steps": 3, )" + fail_attention +
      R"("runtime.lazy.fallback": "eager"}},
      {"label": "fail", "workload": ")" +
      b + R"(", "mode": "fused", "steps": 3, "may_fail": true, )" + fail_attention +
      R"("runtime.lazy.fallback": "fail"}}]})";
  std::string dir;
  auto runs = study("fallback", spec, &dir);
  EXPECT_EQ(runs["split"]["status"], "ok");
  EXPECT_EQ(runs["eager"]["status"], "ok");
  EXPECT_EQ(runs["fail"]["status"], "stopped");
  EXPECT_NE(runs["fail"]["error"].get<std::string>().find("failed to compile"), std::string::npos);
  EXPECT_GT(fig(runs["split"], "compile_failures"), 0);
  EXPECT_GT(fig(runs["split"], "cold_ns"), fig(runs["none"], "cold_ns"));
  EXPECT_TRUE(fs::exists(dir + "/fallback.png"));
  // The same spec and seed again: the same numbers.
  const Json first = Json::parse(slurp(dir + "/study.json"));
  std::string again;
  study("fallback", spec, &again);
  EXPECT_EQ(first["runs"].dump(), Json::parse(slurp(again + "/study.json"))["runs"].dump());
}

// scaleout on tiny (2 chips x 2 cores an instance, 2 instances): a data-parallel step on one
// instance and on two, EFA healthy and at 1/100. EFA carries bytes only across instances and
// slows only that step; the findings say what the table says; the same spec twice is the same
// table, findings and figures, byte for byte.
TEST(Study, ScaleoutDegradedEfaSlowsOnlyTheStepAcrossInstances) {
  const std::string w = "train:d_model=64,d_ff=128,layers=1,batch=64";
  std::string runs_json;
  for (const char* efa : {"healthy", "at 1/100"}) {
    for (int inst : {1, 2}) {
      const std::string set =
          std::string(efa) == "healthy" ? R"({})" : R"({"links.efa.bandwidth_factor": 0.01})";
      runs_json += std::string(runs_json.empty() ? "" : ",") + R"({"label": "aot, EFA )" + efa +
                   ", " + std::to_string(inst) + R"( inst", "workload": ")" + w +
                   ",dp=" + std::to_string(4 * inst) +
                   R"(", "mode": "aot", "steps": 2, "series": "aot, EFA )" + efa + R"(", "set": )" +
                   set + "}";
    }
  }
  const std::string spec =
      R"({"title": "small scaleout", "trace_level": "none", "columns": ["world", "instances",
      "step_wall_ns", "step_comm_exposed_ns", "efa_bytes_per_step"], "runs": [)" +
      runs_json + "]}";
  std::string dir;
  auto runs = study("scaleout", spec, &dir);
  const Json &h1 = runs["aot, EFA healthy, 1 inst"], &h2 = runs["aot, EFA healthy, 2 inst"];
  const Json &d1 = runs["aot, EFA at 1/100, 1 inst"], &d2 = runs["aot, EFA at 1/100, 2 inst"];
  EXPECT_EQ(fig(h1, "world"), 4);
  EXPECT_EQ(fig(h2, "world"), 8);
  EXPECT_EQ(fig(h1, "instances"), 1);
  EXPECT_EQ(fig(d2, "instances"), 2);
  EXPECT_EQ(fig(h1, "efa_bytes_per_step"), 0);
  EXPECT_GT(fig(h2, "efa_bytes_per_step"), 0);
  EXPECT_EQ(fig(d2, "efa_bytes_per_step"), fig(h2, "efa_bytes_per_step"));
  EXPECT_EQ(fig(d1, "step_wall_ns"), fig(h1, "step_wall_ns"));  // no EFA on one instance
  EXPECT_GT(fig(d2, "step_wall_ns"), fig(h2, "step_wall_ns"));
  EXPECT_GT(fig(d2, "step_comm_exposed_ns"), fig(h2, "step_comm_exposed_ns"));
  for (const auto& [label, r] : runs) {
    EXPECT_LE(fig(r, "step_comm_exposed_ns"), fig(r, "step_wall_ns")) << label;
  }
  const std::string md = slurp(dir + "/scaleout.md");
  const std::string degraded = "- aot, EFA at 1/100: one instance ";
  const size_t at = md.find(degraded);
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  const bool slower = fig(d2, "step_wall_ns") > fig(d1, "step_wall_ns");
  EXPECT_NE(line.find(slower ? "two instances are slower than one"
                             : "two instances are not slower than one"),
            std::string::npos)
      << line;
  EXPECT_NE(md.find("- aot, EFA at 1/100 against aot, EFA healthy, the step's time: 2 instances"),
            std::string::npos)
      << md;
  EXPECT_TRUE(fs::exists(dir + "/scaleout.png")) << slurp(dir + "/plots.log");
  const std::string csv = slurp(dir + "/scaleout.csv");
  const Json first = Json::parse(slurp(dir + "/study.json"))["runs"];
  std::string again;
  study("scaleout", spec, &again);
  EXPECT_EQ(md, slurp(again + "/scaleout.md"));
  EXPECT_EQ(csv, slurp(again + "/scaleout.csv"));
  EXPECT_EQ(first.dump(), Json::parse(slurp(again + "/study.json"))["runs"].dump());
}

// tensor-parallel on tiny (2 cores a chip): decode at TP 1, 2 and 4 (two chips) under AOT. TP 1
// exposes no communication; the exposed share of a token step grows with the degree; tokens/s is
// one token over the token step; the findings name the fastest degree the table shows; the same
// spec twice is the same table and findings.
TEST(Study, TensorParallelExposedCommunicationGrowsWithTheDegree) {
  const std::string w = "decode:layers=1,d_model=64,heads=4,d_ff=128,prompt=32,new_tokens=2";
  std::string runs_json;
  for (int tp : {1, 2, 4}) {
    runs_json += std::string(runs_json.empty() ? "" : ",") + R"({"label": "TP )" +
                 std::to_string(tp) + R"(", "workload": ")" + w + ",tp=" + std::to_string(tp) +
                 R"(", "mode": "aot", "series": "tiny, aot"})";
  }
  const std::string spec = R"({"title": "small tp", "trace_level": "none", "columns": ["world",
      "prefill_ns", "prefill_comm_fraction", "token_ns", "token_comm_fraction", "tokens_per_s"],
      "runs": [)" + runs_json +
                           "]}";
  std::string dir;
  auto runs = study("tensor-parallel", spec, &dir);
  const Json &t1 = runs["TP 1"], &t2 = runs["TP 2"], &t4 = runs["TP 4"];
  EXPECT_EQ(fig(t2, "world"), 2);
  EXPECT_EQ(fig(t4, "world"), 4);
  EXPECT_EQ(fig(t1, "token_comm_fraction"), 0);
  EXPECT_EQ(fig(t1, "prefill_comm_fraction"), 0);
  EXPECT_GT(fig(t2, "token_comm_fraction"), 0);
  EXPECT_GT(fig(t4, "token_comm_fraction"), fig(t2, "token_comm_fraction"));
  EXPECT_GT(fig(t4, "prefill_comm_fraction"), fig(t2, "prefill_comm_fraction"));
  for (const auto& [label, r] : runs) {
    EXPECT_LT(fig(r, "token_comm_fraction"), 1) << label;
    EXPECT_NEAR(fig(r, "tokens_per_s") * fig(r, "token_ns"), 1e9, 1) << label;
  }
  const std::string md = slurp(dir + "/tensor-parallel.md");
  int best = 1;
  for (int tp : {2, 4}) {
    if (fig(runs["TP " + std::to_string(tp)], "token_ns") <
        fig(runs["TP " + std::to_string(best)], "token_ns"))
      best = tp;
  }
  const std::string head = "- tiny, aot, a token step: TP 1 ";
  const size_t at = md.find(head);
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(line.find(best == 1 ? "No larger degree is faster than TP 1"
                                : "The fastest is TP " + std::to_string(best)),
            std::string::npos)
      << line;
  std::string again;
  study("tensor-parallel", spec, &again);
  EXPECT_EQ(md, slurp(again + "/tensor-parallel.md"));
}

// Runs `wallsim ARGS` in `dir` (not the source tree); stdout into `out`, stderr into `err`.
int run_in(const std::string& dir, const std::string& args, std::string* out, std::string* err) {
  const std::string cmd =
      "cd " + dir + " && " + WALLSIM_BIN + " " + args + " >" + dir + "/stdout 2>" + dir + "/stderr";
  const int status = std::system(cmd.c_str());
  *out = slurp(dir + "/stdout");
  *err = slurp(dir + "/stderr");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Run from another directory, a study finds its default config and spec and its plot script
// next to the binary; its progress is one clean line per finished run, the runs' output in logs.
TEST(Study, RunsFromAnotherDirectoryWithOneProgressLinePerRun) {
  const std::string dir = test::fresh_dir("study", "elsewhere");
  fs::create_directories(dir);
  std::ofstream(dir + "/spec.json") << R"({"title": "t", "columns": ["total_ns"], "runs": [
    {"label": "fused gemm", "workload": "gemm:m=64,k=64,n=64", "mode": "fused", "steps": 2},
    {"label": "native gemm", "workload": "gemm:m=64,k=64,n=64", "mode": "native", "steps": 2}]})";
  std::string out, err;
  ASSERT_EQ(run_in(dir, "study decode --spec spec.json -o o", &out, &err), 0) << out << err;
  EXPECT_TRUE(fs::exists(dir + "/o/decode_time.png")) << slurp(dir + "/o/plots.log");
  std::vector<std::string> lines = lines_of(out);
  ASSERT_GE(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0], "t: 2 runs");
  std::set<std::string> progress = {lines[1], lines[2]};
  const std::set<std::string> in_order = {"  (1/2) fused gemm: ok", "  (2/2) native gemm: ok"};
  const std::set<std::string> reversed = {"  (1/2) native gemm: ok", "  (2/2) fused gemm: ok"};
  EXPECT_TRUE(progress == in_order || progress == reversed) << out;
  EXPECT_EQ(out.find(".partial"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir + "/o/runs/0.log"));

  std::ofstream(dir + "/wall.json")
      << R"({"workloads": ["gemm:m=64,k=64,n=64"], "modes": ["fused", "native"],
             "profiles": ["neuron"], "steps": 2})";
  ASSERT_EQ(run_in(dir, "study wall --spec wall.json -o w", &out, &err), 0) << out << err;
  lines = lines_of(out);
  ASSERT_GE(lines.size(), 2u) << out;
  EXPECT_EQ(lines[0].rfind("  gemm_neuron_fused: ", 0), 0u) << out;
  EXPECT_EQ(lines[0].substr(lines[0].size() - 3), " ms") << out;
  EXPECT_EQ(lines[1].rfind("  gemm_neuron_native: ", 0), 0u) << out;
  EXPECT_EQ(out.find(".partial"), std::string::npos) << out;
  EXPECT_NE(slurp(dir + "/w/runs/gemm_neuron_fused.log").find("under fused"), std::string::npos);
  EXPECT_GE(expect_run_traces_have_no_overlap(dir + "/w/runs"), 1);  // the traced runs

  // The default spec is found: the error is about the config given, not the spec.
  EXPECT_EQ(run_in(dir, "study decode -c /nonexistent.json -o x", &out, &err), 2);
  EXPECT_NE(err.find("/nonexistent.json: cannot open file"), std::string::npos) << err;
  EXPECT_NE(err.find("configs/studies/decode.json"), std::string::npos) << err;
  EXPECT_EQ(err.find("decode.json: cannot open"), std::string::npos) << err;
}

TEST(Study, BadSpecIsOneLineAndExitCode2) {
  const std::string spec_file = ::testing::TempDir() + "/study_bad_" + std::to_string(::getpid());
  std::ofstream(spec_file) << R"({"title": "t", "columns": [], "runs": [
    {"label": "x", "workload": "gemm", "mode": "fused", "set": {"runtime.lazy.fallbak": "eager"}}]})";
  const std::string log = spec_file + ".log";
  const int status = std::system(("cd " + std::string(WALLSIM_SOURCE_DIR) + " && " + WALLSIM_BIN +
                                  " study fallback --spec " + spec_file + " --out " + spec_file +
                                  ".out >" + log + " 2>&1")
                                     .c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const std::string err = slurp(log);
  EXPECT_NE(err.find("runtime.lazy.fallbak"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(spec_file + ".out"));
}

}  // namespace
}  // namespace wallsim

namespace wallsim {
namespace {

// docs/studies/{decode,mask,granularity,serving,scaleout,tensor-parallel}.md carry the study's own
// table and findings between markers (scripts/update_study_docs.py rewrites them from a fresh run),
// not hand-written ones.
TEST(Study, DocsHoldTheGeneratedTableAndFindings) {
  for (const std::string name :
       {"decode", "mask", "granularity", "serving", "scaleout", "tensor-parallel"}) {
    const std::string doc =
        test::slurp(std::string(WALLSIM_SOURCE_DIR) + "/docs/studies/" + name + ".md");
    const size_t begin = doc.find("<!-- study " + name + ": begin -->\n| run | mode | status |");
    const size_t end = doc.find("<!-- study " + name + ": end -->");
    ASSERT_NE(begin, std::string::npos) << name;
    ASSERT_NE(end, std::string::npos) << name;
    const size_t found = doc.find("\nFindings (generated from the table's runs):\n", begin);
    EXPECT_LT(found, end) << name;
  }
}

// The other generated pages: wall.md holds `study wall`'s own tables, VALIDATION.md each
// shipped config's `validate` output, COMPILER.md its measured transformer-block table and MLP
// compile latency, each between its markers and naming the commit it ran at.
TEST(Study, GeneratedBlocksOfWallValidationAndCompilerDocs) {
  struct Block {
    std::string doc, marker, starts;
  };
  const std::vector<Block> blocks = {
      {"docs/studies/wall.md", "study wall", "Config `configs/trn2.json`, spec "},
      {"docs/VALIDATION.md", "validate trn2", "## wallsim validate: trn2\n"},
      {"docs/VALIDATION.md", "validate trn1", "## wallsim validate: trn1\n"},
      {"docs/VALIDATION.md", "validate tiny", "## wallsim validate: tiny\n"},
      {"docs/COMPILER.md", "measure transformer-block", "| grouping | plans | instructions |"},
      {"docs/COMPILER.md", "measure mlp-compile", "For the MLP example ("}};
  for (const Block& b : blocks) {
    const std::string doc = test::slurp(std::string(WALLSIM_SOURCE_DIR) + "/" + b.doc);
    const size_t begin = doc.find("<!-- " + b.marker + ": begin -->\n" + b.starts);
    const size_t end = doc.find("<!-- " + b.marker + ": end -->");
    ASSERT_NE(begin, std::string::npos) << b.doc << ": " << b.marker;
    ASSERT_NE(end, std::string::npos) << b.doc << ": " << b.marker;
    EXPECT_LT(doc.find("commit ", begin), end) << b.doc << ": " << b.marker;
  }
  // wall.md's tables: every workload and profile of configs/studies/wall.json, and the band.
  const std::string wall = test::slurp(std::string(WALLSIM_SOURCE_DIR) + "/docs/studies/wall.md");
  for (const char* h : {"## transformer:layers=12,seq=512 (neuron compile profile)",
                        "## decode:layers=12,prompt=128,new_tokens=32 (xla compile profile)",
                        "## Overtake points with a sensitivity band"}) {
    EXPECT_NE(wall.find(h), std::string::npos) << h;
  }
}

// docs/studies/open-questions.md answers the five questions, the three case claims and Case D
// inside its generated block, each claim with a verdict (scripts/open_questions.py writes them).
TEST(Study, OpenQuestionsDocAnswersEveryQuestionAndClaimInItsGeneratedBlock) {
  const std::string doc =
      test::slurp(std::string(WALLSIM_SOURCE_DIR) + "/docs/studies/open-questions.md");
  const size_t begin = doc.find("<!-- study open-questions: begin -->\n");
  const size_t end = doc.find("<!-- study open-questions: end -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string block = doc.substr(begin, end - begin);
  for (const char* q : {"### 1. ", "### 2. ", "### 3. ", "### 4. ", "### 5. "}) {
    EXPECT_NE(block.find(q), std::string::npos) << q;
  }
  for (const char* claim :
       {"### Bucketing wastes", "### Continuous batching", "### Rebuilding", "### Case D"}) {
    const size_t at = block.find(claim);
    ASSERT_NE(at, std::string::npos) << claim;
    const size_t next = block.find("\n### ", at + 4);
    const std::string text = block.substr(at, next - at);
    const bool verdict = text.find("**confirmed**") != std::string::npos ||
                         text.find("**refuted**") != std::string::npos ||
                         text.find("**bounded**") != std::string::npos;
    EXPECT_TRUE(verdict) << text;
  }
  // Outside the block the page states no measured figure (the claims' own ranges, 20–30 %,
  // 3–5×, 600 ms and 1 ms, are whole numbers): no decimal time, ratio or percentage, no
  // throughput.
  const std::string outside = doc.substr(0, begin) + doc.substr(end);
  std::smatch m;
  EXPECT_FALSE(std::regex_search(outside, m, std::regex(R"(\d\.\d+ ?(ms|s|%|x|µs))"))) << m.str();
  EXPECT_EQ(outside.find("tokens/s"), std::string::npos);
}

}  // namespace
}  // namespace wallsim
