// `wallsim exec` end to end: the run directory, determinism, functional vs timing-only, traces.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "cli_test_util.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace wallsim {
namespace {

using test::slurp;
using Json = nlohmann::json;
namespace fs = std::filesystem;

int run(const std::string& args, std::string* err = nullptr) {
  return test::run_wallsim(args, err);
}
std::string out_dir(const std::string& name) { return test::fresh_dir("exec", name); }

TEST(Exec, WritesACompleteRunDirectory) {
  std::string d = out_dir("dir"), err;
  ASSERT_EQ(run("exec examples/plans/matmul.json -c configs/trn2.json --out " + d, &err), 0) << err;
  for (const char* f : {"config.resolved.json", "stats.json", "stats.txt", "trace.json"}) {
    EXPECT_TRUE(fs::exists(d + "/" + f)) << f;
  }
  Json s = Json::parse(slurp(d + "/stats.json"));
  EXPECT_EQ(s["schema"], "wallsim-stats/1");
  EXPECT_EQ(s["device"]["clock"], "tensor");
  EXPECT_GT(s["device"]["cycles"].get<double>(), 0);
  EXPECT_GT(s["device"]["time_ns"].get<double>(), 0);
  for (const char* e : {"tensor", "vector", "scalar"}) {
    for (const char* k : {"busy_cycles", "instructions", "utilization"}) {
      EXPECT_TRUE(s["device"]["engines"][e].contains(k)) << e << "." << k;
    }
  }
  EXPECT_EQ(s["device"]["engines"]["tensor"]["instructions"], 4);
  EXPECT_EQ(s["device"]["hbm"]["write_bytes"], 256 * 512 * 4);
  EXPECT_TRUE(s["measured"].contains("sim_wall_seconds"));
  EXPECT_EQ(s["nodes"].size(), 2u);
  Json cfg = Json::parse(slurp(d + "/config.resolved.json"));
  EXPECT_EQ(cfg["name"], "trn2");
  // No staging directories are left beside it.
  for (const auto& e : fs::directory_iterator(fs::path(d).parent_path())) {
    EXPECT_EQ(e.path().filename().string().find(".exec_dir_"), std::string::npos) << e.path();
  }
}

TEST(Exec, IdenticalRunsGiveIdenticalStatsAndTraces) {
  std::string a = out_dir("det_a"), b = out_dir("det_b");
  ASSERT_EQ(run("exec examples/plans/softmax.json -c configs/trn2.json --functional --out " + a),
            0);
  ASSERT_EQ(run("exec examples/plans/softmax.json -c configs/trn2.json --functional --out " + b),
            0);
  Json sa = Json::parse(slurp(a + "/stats.json")), sb = Json::parse(slurp(b + "/stats.json"));
  sa.erase("measured");
  sb.erase("measured");
  EXPECT_EQ(sa, sb);
  EXPECT_EQ(slurp(a + "/trace.json"), slurp(b + "/trace.json"));
  EXPECT_EQ(slurp(a + "/outputs/y.npy"), slurp(b + "/outputs/y.npy"));
}

// An imported model's output keeps its ONNX name through import, compile and exec: its file is
// outputs/y.npy, not outputs/v<id>.npy.
TEST(Exec, ImportedModelOutputsKeepTheirNames) {
  const std::string d = out_dir("onnx_names");
  fs::create_directories(d);
  std::string err;
  ASSERT_EQ(run("import onnx tests/bad_input/files/onnx_relu.onnx --out " + d + "/g.json", &err), 0)
      << err;
  ASSERT_EQ(run("compile " + d + "/g.json -c configs/trn2.json -o " + d + "/p.json", &err), 0)
      << err;
  EXPECT_NE(slurp(d + "/p.json").find("\"y\""), std::string::npos);
  ASSERT_EQ(
      run("exec " + d + "/p.json -c configs/trn2.json --functional --out " + d + "/run", &err), 0)
      << err;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(d + "/run/outputs")) {
    files.push_back(e.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{"y.npy"});
}

TEST(Exec, FunctionalAndTimingOnlyTakeTheSameCycles) {
  for (const char* plan : {"matmul", "gather", "softmax"}) {
    std::string t = out_dir(std::string("t_") + plan), f = out_dir(std::string("f_") + plan);
    std::string p = std::string("examples/plans/") + plan + ".json -c configs/trn2.json --out ";
    ASSERT_EQ(run("exec " + p + t), 0);
    ASSERT_EQ(run("exec " + p + f + " --functional"), 0);
    Json st = Json::parse(slurp(t + "/stats.json")), sf = Json::parse(slurp(f + "/stats.json"));
    EXPECT_EQ(st["device"], sf["device"]) << plan;
    EXPECT_FALSE(fs::exists(t + "/outputs")) << plan;
    EXPECT_TRUE(fs::exists(f + "/outputs")) << plan;
  }
}

TEST(Exec, TraceIsChromeJsonWithNamedThreadsAndNoOverlaps) {
  std::string d = out_dir("trace");
  ASSERT_EQ(run("exec examples/plans/matmul.json -c configs/trn2.json --out " + d), 0);
  Json t = Json::parse(slurp(d + "/trace.json"));
  ASSERT_TRUE(t["traceEvents"].is_array());
  std::map<std::pair<int, int>, std::string> names;
  std::map<std::pair<int, int>, double> last_end;
  int slices = 0;
  for (const Json& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
    if (e["ph"] == "X") {
      auto key = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
      double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
      EXPECT_GE(ts + 1e-9, last_end[key]) << "overlap on " << names[key];
      last_end[key] = ts + dur;
      ++slices;
    }
  }
  EXPECT_EQ(slices, 12 + 1 + 1);  // instructions, one launch, one plan span
  bool tensor = false;
  for (auto& [k, n] : names) tensor |= n == "tensor engine";
  EXPECT_TRUE(tensor);
  EXPECT_EQ(t["metadata"]["config"], "trn2");
}

TEST(Exec, InstructionCsvHasOneRowPerInstruction) {
  std::string d = out_dir("csv");
  ASSERT_EQ(run("exec examples/plans/matmul.json -c configs/trn2.json --instruction-csv "
                "--trace-level none --out " +
                d),
            0);
  std::string csv = slurp(d + "/instructions.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 13);
  EXPECT_EQ(
      csv.rfind("plan,stream,index,opcode,node,start_ps,end_ps,ready_ps,busy_cycles,bytes\n", 0),
      0u);
  EXPECT_FALSE(fs::exists(d + "/trace.json"));
}

TEST(Exec, BadInputExits2AndLeavesNoDirectory) {
  std::string d = out_dir("bad"), err;
  EXPECT_EQ(
      run("exec examples/plans/softmax.json -c configs/trn2.json --scalar n=1 --out " + d, &err),
      2);
  EXPECT_NE(err.find("--scalar n: no plan declares this run-time scalar"), std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(d));
  EXPECT_EQ(run("exec examples/plans/softmax.json -c configs/tiny.json --out " + d, &err), 2);
  EXPECT_FALSE(fs::exists(d));
  EXPECT_EQ(run("exec examples/plans/softmax.json -c configs/trn2.json --functional --inputs "
                "/nonexistent --out " +
                    d,
                &err),
            2);
  EXPECT_NE(err.find("/nonexistent/x.npy"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(d));
}

TEST(Exec, InputsFromNpyFiles) {
  // Run once to get outputs, feed them back as inputs of a plan whose input has that name.
  std::string a = out_dir("npy_a"), in = out_dir("npy_in"), b = out_dir("npy_b");
  ASSERT_EQ(run("exec examples/plans/softmax.json -c configs/trn2.json --functional --out " + a),
            0);
  fs::create_directories(in);
  fs::copy_file(a + "/outputs/y.npy", in + "/x.npy");
  ASSERT_EQ(run("exec examples/plans/softmax.json -c configs/trn2.json --functional --inputs " +
                in + " --out " + b),
            0);
  EXPECT_NE(slurp(b + "/outputs/y.npy"), slurp(a + "/outputs/y.npy"));  // softmax of a softmax
}

}  // namespace

namespace {

TEST(Compile, GraphToPlanToRun) {
  std::string plan = ::testing::TempDir() + "/mlp_" + std::to_string(::getpid()) + ".plan.json";
  std::string d = out_dir("compiled"), err;
  ASSERT_EQ(run("compile examples/graphs/mlp.json -c configs/trn2.json --out " + plan, &err), 0)
      << err;
  ASSERT_EQ(run("plan check " + plan + " -c configs/trn2.json", &err), 0) << err;
  ASSERT_EQ(run("exec " + plan + " -c configs/trn2.json --trace-level none --out " + d, &err), 0)
      << err;
  Json s = Json::parse(slurp(d + "/stats.json"));
  EXPECT_GT(s["device"]["engines"]["tensor"]["instructions"].get<int>(), 0);
}

TEST(Compile, BadGraphsExit2WithOneLine) {
  std::string bad = ::testing::TempDir() + "/bad_graph_" + std::to_string(::getpid()) + ".json";
  std::ofstream(bad) << R"({"format": "wallsim-graph", "version": 1, "name": "g", "nodes": [)";
  std::string err;
  const std::string never = ::testing::TempDir() + "/never_" + std::to_string(::getpid()) + ".json";
  fs::remove(never);
  EXPECT_EQ(run("compile " + bad + " -c configs/trn2.json --out " + never, &err), 2);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  std::ofstream(bad, std::ios::trunc) << R"({"format": "wallsim-graph", "version": 1, "name": "g",
    "nodes": [{"id": 0, "op": "input", "name": "a", "dtype": "fp32", "shape": [64, 8192], "role": "input"},
              {"id": 1, "op": "softmax", "inputs": [0]}], "outputs": [1]})";
  // One row of 8192 fp32 is 32 KiB per partition, more than tiny's whole SBUF, and a softmax
  // needs its whole row at once.
  EXPECT_EQ(run("compile " + bad + " -c configs/tiny.json --out " + never, &err), 2);
  EXPECT_NE(err.find("cannot compile: node 1 (softmax): the op's working set does not fit in SBUF"),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(never));
}

// Fusion is real: the transformer block as one plan moves fewer HBM bytes and takes less device
// time than one plan per op (docs/COMPILER.md gives the numbers).
TEST(Compile, TransformerBlockFusedBeatsPerOp) {
  std::map<std::string, Json> stats;
  for (const std::string group : {"all", "per-op"}) {
    std::string plan =
        ::testing::TempDir() + "/tb_" + group + "_" + std::to_string(::getpid()) + ".json";
    std::string d = out_dir("tb_" + group), err;
    ASSERT_EQ(run("compile examples/graphs/transformer_block.json -c configs/trn2.json --group " +
                      group + " --out " + plan,
                  &err),
              0)
        << err;
    ASSERT_EQ(run("exec " + plan + " -c configs/trn2.json --trace-level none --out " + d, &err), 0)
        << err;
    stats[group] = Json::parse(slurp(d + "/stats.json"));
  }
  auto bytes = [](const Json& s) {
    return s["device"]["hbm"]["read_bytes"].get<double>() +
           s["device"]["hbm"]["write_bytes"].get<double>();
  };
  EXPECT_LT(bytes(stats["all"]), bytes(stats["per-op"]));
  EXPECT_LT(stats["all"]["device"]["cycles"].get<double>(),
            stats["per-op"]["device"]["cycles"].get<double>());
}

// The issue-4 GEMM target: a 4096^3 bf16 GEMM on trn2, operands in HBM, streams A and B from HBM
// and keeps the array busy. Simulated time only (deterministic), not wall-clock. Since DMA is
// costed by access pattern (issue 16: 512 B of engine time per contiguous chunk), the
// compiler's 1 KiB-per-partition operand loads take 1.5x the engine time they took and the
// GEMM reached 83.5% of peak and 86.4% of its bound (88.2% and 92.7% before). Issue 17's
// target is 92% of peak: trn2's hardware DMA transpose (arch.dma.hardware_transpose) loads
// A^T straight from HBM, off the array, and the plan reaches 93.8%.
TEST(Compile, Gemm4096ReachesTheTensorPeakTarget) {
  std::string plan = ::testing::TempDir() + "/gemm_" + std::to_string(::getpid()) + ".json";
  std::string d = out_dir("gemm"), err;
  ASSERT_EQ(run("compile examples/graphs/gemm_4096.json -c configs/trn2.json --out " + plan, &err),
            0)
      << err;
  ASSERT_EQ(run("exec " + plan + " -c configs/trn2.json --trace-level none --out " + d, &err), 0)
      << err;
  const Json s = Json::parse(slurp(d + "/stats.json"))["device"];
  EXPECT_EQ(s["engines"]["tensor"]["macs"].get<double>(), 4096.0 * 4096.0 * 4096.0);
  EXPECT_GE(s["engines"]["tensor"]["peak_fraction"].get<double>(), 0.92);
  EXPECT_LE(s["engines"]["tensor"]["peak_fraction"].get<double>(), 1.0);
  EXPECT_EQ(s["bound"]["resource"].get<std::string>(), "tensor");
  EXPECT_GE(s["bound"]["fraction"].get<double>(), 0.92);
}

}  // namespace

namespace {

// `wallsim run`: same input, same seed -> byte-identical stats outside `measured`.
TEST(Run, TwoRunsGiveIdenticalStats) {
  std::string a = out_dir("run_a"), b = out_dir("run_b"), err;
  const std::string cmd =
      "run -c configs/trn2.json -w mlp:batch=128,d_model=128,d_ff=256,layers=2"
      " --mode fused --steps 3 --out ";
  ASSERT_EQ(run(cmd + a, &err), 0) << err;
  ASSERT_EQ(run(cmd + b, &err), 0) << err;
  Json sa = Json::parse(slurp(a + "/stats.json")), sb = Json::parse(slurp(b + "/stats.json"));
  sa.erase("measured");
  sb.erase("measured");
  EXPECT_EQ(sa.dump(), sb.dump());
  EXPECT_EQ(slurp(a + "/trace.json"), slurp(b + "/trace.json"));
  // The report's shape: steps with the host-state breakdown summing to wall_ns.
  ASSERT_EQ(sa["steps"].size(), 3u);
  for (const auto& st : sa["steps"]) {
    EXPECT_EQ(st["host_dispatch_ns"].get<int64_t>() + st["compile_ns"].get<int64_t>() +
                  st["transfer_ns"].get<int64_t>() + st["sync_wait_ns"].get<int64_t>() +
                  st["host_other_ns"].get<int64_t>(),
              st["wall_ns"].get<int64_t>());
  }
  EXPECT_EQ(sa["mode"], "fused");
  EXPECT_EQ(sa["totals"]["compiles"], 1);
  EXPECT_EQ(sa["totals"]["cache_hits"], 2);
  const std::string trace = slurp(a + "/trace.json");
  EXPECT_NE(trace.find("host thread"), std::string::npos);
  // One flow per launch, from the host's dispatch to the plan's launch on the device.
  int64_t flows = 0;
  for (size_t at = trace.find("\"ph\":\"s\""); at != std::string::npos;
       at = trace.find("\"ph\":\"s\"", at + 1)) {
    ++flows;
  }
  EXPECT_EQ(flows, sa["totals"]["plans_launched"].get<int64_t>());
}

TEST(Run, BadArgumentsExit2WithOneLine) {
  std::string err;
  const std::string never = out_dir("run_never");
  for (const std::string args :
       {"-w mlp:batsh=4", "-w resnet", "-w decode:prompt=8,new_tokens=2 --steps 5",
        "-w mlp --mode lazy", "-w mlp --set runtime.lazy.fallback=\"retry\"", "-w mlp --steps 0",
        "-w gemm:m=4096,k=4096,n=4096 --mode aot --set runtime.aot.bucket_max=1000"}) {
    EXPECT_EQ(run("run -c configs/trn2.json " + args + " --out " + never, &err), 2) << args;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << ": " << err;
    EXPECT_FALSE(fs::exists(never)) << args;
  }
}

// AOT's on-disk cache: the second run loads the plan its first run compiled (a hit, at the
// modelled load cost) and compiles nothing.
TEST(Run, AotDiskCacheLoadsOnTheSecondRun) {
  const std::string cache = out_dir("disk_cache"), a = out_dir("disk_a"), b = out_dir("disk_b");
  std::string err;
  const std::string cmd =
      "run -c configs/trn2.json -w mlp:batch=128,d_model=128,d_ff=256 --mode aot"
      " --set runtime.aot.disk_cache=" +
      cache + " --out ";
  ASSERT_EQ(run(cmd + a, &err), 0) << err;
  ASSERT_EQ(run(cmd + b, &err), 0) << err;
  Json first = Json::parse(slurp(a + "/stats.json"))["startup"];
  Json second = Json::parse(slurp(b + "/stats.json"))["startup"];
  EXPECT_EQ(first["compiles"], 1);
  EXPECT_EQ(first["disk_hits"], 0);
  EXPECT_EQ(second["compiles"], 0);
  EXPECT_EQ(second["disk_hits"], 1);
  EXPECT_EQ(second["cache_hits"], 1);
  EXPECT_EQ(second["compile_ns"], 0);
  EXPECT_LT(second["wall_ns"].get<int64_t>(), first["wall_ns"].get<int64_t>());

  // An entry written by another build of the compiler (its key names another build id) is
  // compiled again, not taken for this build's plan.
  int entries = 0;
  for (const auto& f : fs::directory_iterator(cache)) {
    Json entry = Json::parse(slurp(f.path().string()));
    std::string key = entry["key"].get<std::string>();
    const size_t at = key.find("\nbuild ");
    ASSERT_NE(at, std::string::npos) << key;
    key.replace(at + 7, 16, "0000000000000000");
    entry["key"] = key;
    std::ofstream(f.path()) << entry.dump() << "\n";
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  const std::string c = out_dir("disk_c");
  ASSERT_EQ(run(cmd + c, &err), 0) << err;
  Json third = Json::parse(slurp(c + "/stats.json"))["startup"];
  EXPECT_EQ(third["compiles"], 1);
  EXPECT_EQ(third["disk_hits"], 0);

  // Nor is a plan made under other timing figures: the schedule search ranks by them.
  const std::string d = out_dir("disk_d");
  ASSERT_EQ(run(cmd + d + " --set timing.dma.bandwidth_gb_per_s=20", &err), 0) << err;
  Json fourth = Json::parse(slurp(d + "/stats.json"))["startup"];
  EXPECT_EQ(fourth["compiles"], 1);
  EXPECT_EQ(fourth["disk_hits"], 0);
}

// With a tuning cache (compiler.tune.cache), AOT's on-disk plans are keyed by the tuning cache's
// contents, not its name: another file at the same path (tuning again into it) compiles again.
TEST(Run, AotDiskCacheKeysByTheTuningCachesContents) {
  const std::string cache = out_dir("disk_tuned_cache"), tuning = out_dir("disk_tuned") + ".json";
  const auto write_tuning = [&](const std::string& entry) {
    std::ofstream(tuning) << R"({"format": "wallsim-tuning-cache", "version": 1, "entries": [)"
                          << entry << "]}\n";
  };
  const std::string cmd =
      "run -c configs/trn2.json -w mlp:batch=128,d_model=128,d_ff=256 --mode aot"
      " --tuning-cache " +
      tuning + " --set runtime.aot.disk_cache=" + cache + " --out ";
  auto startup = [&](const std::string& tag) {
    std::string err;
    const std::string dir = out_dir("disk_tuned_" + tag);
    EXPECT_EQ(run(cmd + dir, &err), 0) << err;
    return Json::parse(slurp(dir + "/stats.json"))["startup"];
  };
  write_tuning("");
  EXPECT_EQ(startup("a")["disk_hits"], 0);
  EXPECT_EQ(startup("b")["disk_hits"], 1);  // the same contents: the plan on disk
  write_tuning(R"({"family": "matmul", "signature": "s", "arch": "a", "timing": "t",)"
               R"( "build": "b", "candidates": 4, "chosen": "p", "measured": [{"point": "p",)"
               R"( "predicted_ns": 1.0, "simulated_ns": 2.0}]})");
  const Json third = startup("c");
  EXPECT_EQ(third["disk_hits"], 0);
  EXPECT_EQ(third["compiles"], 1);
}

// A run reuses a tuning cache and says what it answered: `compile --tune` measures a GEMM's
// candidates into the cache; the gemm workload of the same shape then hits it, and its report
// counts the hit (compiler.tuning); a run naming no cache has no such section.
TEST(Run, ReportsWhatTheTuningCacheAnswered) {
  const std::string graph = out_dir("tuned_graph") + ".json", tuning = out_dir("tuned") + ".json";
  std::ofstream(graph)
      << R"({"format": "wallsim-graph", "version": 1, "name": "gemm", "nodes": [)"
         R"({"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": [384, 384], "role": "input"},)"
         R"({"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [384, 8], "role": "input"},)"
         R"({"id": 2, "op": "matmul", "inputs": [0, 1]}], "outputs": [2]})";
  std::string err;
  ASSERT_EQ(run("compile " + graph + " -c configs/trn2.json --tune --tuning-cache " + tuning +
                    " -o " + out_dir("tuned_plan") + ".json",
                &err),
            0)
      << err;
  const std::string cmd =
      "run -c configs/trn2.json -w gemm:m=384,k=384,n=8 --mode native"
      " --steps 2 --trace-level none --out ";
  const std::string with = out_dir("tuned_run"), without = out_dir("untuned_run");
  ASSERT_EQ(run(cmd + with + " --tuning-cache " + tuning, &err), 0) << err;
  ASSERT_EQ(run(cmd + without, &err), 0) << err;
  const Json t = Json::parse(slurp(with + "/stats.json"))["compiler"]["tuning"];
  ASSERT_TRUE(t.is_object()) << slurp(with + "/stats.json").substr(0, 400);
  EXPECT_GE(t["queries"].get<int64_t>(), 1);
  EXPECT_EQ(t["hits"], t["queries"]);
  EXPECT_EQ(t["misses"], 0);
  EXPECT_NE(slurp(with + "/stats.txt").find("compiler.tuning.hits"), std::string::npos);
  EXPECT_FALSE(Json::parse(slurp(without + "/stats.json")).contains("compiler"));
}

// GPT-2-small's 12 layers at seq 4096 compile as one AOT plan and run (issue 17's acceptance).
// By the tenth layer the q, k and v row tiles (96 of 1.5 KB) fragment SBUF so that no 16 KB run
// is left with 76 KB free: the attention keeps V for a head group a buffer per key tile.
TEST(Run, TwelveLayerTransformerAtSeq4096CompilesUnderAot) {
  const std::string d = out_dir("run_seq4096");
  std::string err;
  ASSERT_EQ(run("run -c configs/trn2.json -w transformer:layers=12,seq=4096 --mode aot --steps 1"
                " --trace-level none --out " +
                    d,
                &err),
            0)
      << err;
  const Json s = Json::parse(slurp(d + "/stats.json"));
  EXPECT_EQ(s["startup"]["compiles"], 1);
  EXPECT_EQ(s["startup"]["compile_failures"], 0);
}

// A shape beyond every AOT bucket stops the run with a clear error (beyond = error).
TEST(Run, ShapeBeyondTheLastAotBucketIsAnError) {
  std::string err;
  const std::string never = out_dir("run_beyond");
  EXPECT_EQ(run("run -c configs/trn2.json -w decode:prompt=100,new_tokens=40,d_model=64,heads=2,"
                "d_ff=64 --mode aot --set runtime.aot.bucket_max=128 --out " +
                    never,
                &err),
            2);
  EXPECT_NE(err.find("beyond the largest AOT bucket"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(never));
}

// `wallsim study wall` on a small spec: one run per point, a table with every mode.
TEST(Study, WallWritesItsTable) {
  std::string spec = ::testing::TempDir() + "/wall_spec_" + std::to_string(::getpid()) + ".json";
  std::ofstream(spec) << R"({"workloads": ["mlp:batch=128,d_model=128,d_ff=256"],
    "modes": ["native", "eager", "fused", "aot"], "profiles": ["xla"], "steps": 3})";
  std::string d = out_dir("wall"), err;
  ASSERT_EQ(run("study wall -c configs/tiny.json --spec " + spec + " --out " + d, &err), 0) << err;
  const std::string md = slurp(d + "/wall.md");
  for (const char* mode : {"| native |", "| eager |", "| fused |", "| aot |"}) {
    EXPECT_NE(md.find(mode), std::string::npos) << mode;
  }
  const std::string csv = slurp(d + "/wall.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // header + 4 modes
  EXPECT_TRUE(fs::exists(d + "/runs/mlp_xla_fused/stats.json"));
  EXPECT_TRUE(fs::exists(d + "/runs/mlp_xla_fused/trace.json"));
}

}  // namespace
}  // namespace wallsim
