// `wallsim sweep` and `wallsim collect` end to end: every point runs and is recorded once;
// re-running resumes; bad specs fail before any point; --count/--list/--index for job arrays
// and GNU parallel; a killed sweep loses no finished point, tears no line and leaves no
// orphan; timeouts are recorded; the plot script writes PNGs.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli_test_util.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

namespace wallsim {
namespace {

using test::slurp;
using Json = nlohmann::json;
namespace fs = std::filesystem;

int sh(const std::string& cmd, std::string* out = nullptr) {
  const std::string file = ::testing::TempDir() + "/sweep_out_" + std::to_string(::getpid());
  const int status = std::system(
      ("cd " + std::string(WALLSIM_SOURCE_DIR) + " && " + cmd + " >" + file + " 2>&1").c_str());
  if (out) *out = slurp(file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string wallsim() { return WALLSIM_BIN; }

std::string out_dir(const std::string& name) { return test::fresh_dir("sweep", name); }

std::vector<Json> lines(const std::string& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));  // throws on a torn line
  return out;
}

std::string write_spec(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << text;
  return path;
}

TEST(Sweep, SmokeRunsEveryPointOnceAndResumes) {
  const std::string d = out_dir("smoke");
  std::string out;
  ASSERT_EQ(sh(wallsim() + " sweep configs/sweeps/smoke.json --jobs 2 --out " + d, &out), 0) << out;
  const auto rows = lines(d + "/results.jsonl");
  ASSERT_EQ(rows.size(), 12u);
  std::set<std::string> ids;
  for (const Json& r : rows) {
    EXPECT_EQ(r["status"], "ok") << r.dump();
    ids.insert(r["id"].get<std::string>());
    EXPECT_TRUE(fs::exists(d + "/points/" + r["id"].get<std::string>() + "/stats.json"));
    EXPECT_GT(r["figures"]["total_ns"].get<int64_t>(), 0);
    EXPECT_EQ(r["axes"].size(), 3u);
    // Review F8: the fractions are over the device's busy time, not the run's span.
    const Json st = Json::parse(slurp(d + "/points/" + r["id"].get<std::string>() + "/stats.json"));
    EXPECT_EQ(r["figures"]["tensor_peak_fraction"],
              st["device_busy"]["engines"]["tensor"]["peak_fraction"]);
    EXPECT_EQ(r["figures"]["bound_fraction"], st["device_busy"]["bound_fraction"]);
    EXPECT_GT(r["figures"]["bound_fraction"].get<double>(), 0.01) << r.dump();
  }
  EXPECT_EQ(ids.size(), 12u);
  // A larger array is faster for the same GEMM (same mode, same bandwidth).
  auto total = [&](int rows_, double bw, const std::string& mode) {
    for (const Json& r : rows) {
      if (r["axes"]["arch.tensor.rows"] == rows_ &&
          r["axes"]["timing.hbm.bandwidth_gb_per_s"] == bw && r["mode"] == mode)
        return r["figures"]["device_busy_ns"].get<int64_t>();
    }
    return int64_t{-1};
  };
  EXPECT_LT(total(32, 100, "native"), total(16, 100, "native"));
  // The same command again: nothing left to run, nothing appended.
  ASSERT_EQ(sh(wallsim() + " sweep configs/sweeps/smoke.json --jobs 2 --out " + d, &out), 0) << out;
  EXPECT_NE(out.find("12 point(s) already done"), std::string::npos) << out;
  EXPECT_EQ(lines(d + "/results.jsonl").size(), 12u);
  // collect: a header and one row per point, axes and figures as columns.
  ASSERT_EQ(sh(wallsim() + " collect " + d + " --csv " + d + "/results.csv", &out), 0) << out;
  const std::string csv = slurp(d + "/results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 13);
  EXPECT_EQ(csv.rfind("index,id,status,workload,mode,timing.hbm.bandwidth_gb_per_s,", 0), 0u);
  // Plots from the real sweep (matplotlib, Agg).
  ASSERT_EQ(sh("/usr/bin/python3 tools/plot_sweep.py " + d + " --out " + d + "/plots", &out), 0)
      << out;
  // Two axes swept as a product give a heatmap; the zipped pair (rows, cols) does not.
  EXPECT_FALSE(fs::exists(d + "/plots/heatmap_arch_tensor_cols_x_arch_tensor_rows.png"));
  for (const char* png : {"breakdown.png", "roofline.png", "total_ns_vs_arch_tensor_rows.png",
                          "heatmap_arch_tensor_rows_x_timing_hbm_bandwidth_gb_per_s.png"}) {
    const std::string p = d + "/plots/" + png;
    ASSERT_TRUE(fs::exists(p)) << p;
    EXPECT_GT(fs::file_size(p), 1000u) << p;
    EXPECT_EQ(slurp(p).substr(1, 3), "PNG") << p;
  }
}

TEST(Sweep, BadSpecsExit2BeforeAnyPoint) {
  const std::string base = R"("base_config": "configs/tiny.json", "workloads": ["gemm:m=64"], )";
  struct Case {
    std::string spec, message;
  };
  for (
      const Case& c : {
          Case{R"({"base_config": "configs/tiny.json", "workloads": ["gemm"], "modes": ["fast"]})",
               "unknown mode 'fast'"},
          Case{"{" + base + R"("modes": ["native"], "axes": {"arch.tensor.rowz": [1, 2]}})",
               "arch.tensor.rowz"},
          Case{"{" + base + R"("modes": ["native"], "axes": {"arch.tensor.rows": []}})",
               "expected a non-empty list of values for config path 'arch.tensor.rows'"},
          Case{"{" + base + R"("modes": ["native"], "axes": {"arch.tensor.rows": [32, -4]}})",
               "the point arch.tensor.rows=-4 has a bad config"},
          Case{
              "{" + base +
                  R"("modes": ["native"], "zip": [{"arch.tensor.rows": [16, 32], "arch.tensor.cols": [16]}]})",
              "a zipped group's lists must have equal lengths"},
          Case{
              R"({"base_config": "configs/tiny.json", "workloads": ["gemm:q=1"], "modes": ["native"]})",
              "unknown parameter 'q' of gemm"},
          Case{"{" + base + R"("modes": ["native"], "stepz": 3})", "stepz: unknown key"},
      }) {
    const std::string spec = write_spec("bad", c.spec);
    const std::string d = out_dir("bad");
    std::string out;
    EXPECT_EQ(sh(wallsim() + " sweep " + spec + " --out " + d, &out), 2) << c.spec;
    EXPECT_NE(out.find(c.message), std::string::npos) << c.spec << "\n" << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_FALSE(fs::exists(d)) << "a point ran: " << c.spec;
  }
}

TEST(Sweep, CountListAndOnePointByIndex) {
  std::string out;
  ASSERT_EQ(sh(wallsim() + " sweep configs/sweeps/smoke.json --count", &out), 0);
  EXPECT_EQ(out, "12\n");
  ASSERT_EQ(sh(wallsim() + " sweep configs/sweeps/smoke.json --list", &out), 0);
  std::vector<std::string> ids;
  std::istringstream in(out);
  for (std::string id; std::getline(in, id);) ids.push_back(id);
  ASSERT_EQ(ids.size(), 12u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 12u);
  // One point, as a job array task would run it (the index from SLURM_ARRAY_TASK_ID).
  const std::string d = out_dir("index");
  ASSERT_EQ(sh("SLURM_ARRAY_TASK_ID=5 " + wallsim() + " sweep configs/sweeps/smoke.json --out " + d,
               &out),
            0)
      << out;
  const Json r = Json::parse(slurp(d + "/points/" + ids[5] + "/result.json"));
  EXPECT_EQ(r["index"], 5);
  EXPECT_EQ(r["status"], "ok");
  EXPECT_FALSE(fs::exists(d + "/results.jsonl"));
  ASSERT_EQ(sh(wallsim() + " collect " + d, &out), 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2);
  EXPECT_EQ(sh(wallsim() + " sweep configs/sweeps/smoke.json --index 12 --out " + d, &out), 2);
  EXPECT_NE(out.find("--index: 12 is outside [0, 11]"), std::string::npos) << out;
}

TEST(Sweep, GnuParallelRunsEveryPoint) {
  if (sh("command -v parallel") != 0) GTEST_SKIP() << "GNU parallel is not installed";
  const std::string d = out_dir("parallel");
  std::string out;
  ASSERT_EQ(sh("seq 0 $(( $(" + wallsim() + " sweep configs/sweeps/smoke.json --count) - 1 )) | " +
                   "parallel --will-cite -j 2 " + wallsim() +
                   " sweep configs/sweeps/smoke.json --out " + d + " --index {}",
               &out),
            0)
      << out;
  ASSERT_EQ(sh(wallsim() + " collect " + d, &out), 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 13) << out;
  EXPECT_EQ(out.find(",error,"), std::string::npos);
}

// Points slow enough to kill the sweep between them: MLPs of a few hundred ms on tiny.
const char* kSlow = R"({"base_config": "configs/tiny.json",
  "axes": {"timing.hbm.bandwidth_gb_per_s": [10, 20, 30, 40, 50, 60, 70, 80]},
  "workloads": ["mlp:batch=1024,d_model=256,d_ff=1024,layers=2"], "modes": ["native"], "steps": 20})";

TEST(Sweep, KilledSweepLosesNothingAndLeavesNoOrphan) {
  const std::string spec = write_spec("slow", kSlow);
  const std::string d = out_dir("killed");
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const std::string cmd = "cd " + std::string(WALLSIM_SOURCE_DIR) + " && exec " + wallsim() +
                            " sweep " + spec + " --jobs 2 --out " + d + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  // Wait for at least two finished points, then kill -9 the sweep (a cap of 3 minutes: a point
  // takes well under a second in a release build, several under ASan on a loaded machine).
  for (int i = 0; i < 3600; ++i) {
    if (fs::exists(d + "/results.jsonl") && lines(d + "/results.jsonl").size() >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string out;
  // No child of the killed sweep is still running.
  EXPECT_NE(sh("pgrep -f -- '--out " + d + "/point[s]'", &out), 0) << out;
  const auto before = lines(d + "/results.jsonl");  // every line parses: none torn
  ASSERT_GE(before.size(), 2u);
  ASSERT_LT(before.size(), 8u) << "the sweep finished before it was killed";
  // The same command finishes the rest; finished points are not run again.
  ASSERT_EQ(sh(wallsim() + " sweep " + spec + " --jobs 2 --out " + d, &out), 0) << out;
  const auto after = lines(d + "/results.jsonl");
  EXPECT_EQ(after.size(), 8u);
  std::set<std::string> ids;
  for (const Json& r : after) ids.insert(r["id"].get<std::string>());
  EXPECT_EQ(ids.size(), 8u);
}

TEST(Sweep, TimedOutPointIsAnErrorAndTheSweepGoesOn) {
  const std::string spec = write_spec("timeout", R"({"base_config": "configs/tiny.json",
    "workloads": ["gemm:m=64,k=32,n=32", "mlp:batch=1024,d_model=256,d_ff=1024,layers=8"],
    "modes": ["native"], "steps": 400, "timeout_s": 8})");
  // Real-time limits only, with wide margins either way: the gemm point takes ~0.03 s (release)
  // to ~0.6 s (ASan) of CPU, the mlp point ~28 s even in a release build.
  const std::string d = out_dir("timeout");
  std::string out;
  // Review F14: failed points exit 3, not 1 (an internal error).
  EXPECT_EQ(sh(wallsim() + " sweep " + spec + " --out " + d, &out), 3) << out;
  const auto rows = lines(d + "/results.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["status"], "ok");
  EXPECT_EQ(rows[1]["status"], "error");
  EXPECT_NE(rows[1]["error"].get<std::string>().find("timed out"), std::string::npos);
}

}  // namespace
}  // namespace wallsim
