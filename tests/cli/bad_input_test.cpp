// Issue 20 regressions that need more than one command: disk cache entries that lie about their
// key, staging directories left by killed runs, a sweep directory of another spec.
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_test_util.h"

namespace wallsim::test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

Json stats_without_measured(const std::string& dir) {
  Json j = Json::parse(slurp(dir + "/stats.json"));
  j.erase("measured");
  return j;
}

// Defect 6: a cached 256^3 GEMM plan copied over the 128^3 GEMM's entry ran with 3x the HBM
// bytes and exit 0. Entries carry their full key and a checksum: the copy is not used.
TEST(BadInput, DiskCacheEntryOfAnotherGroupIsNotUsed) {
  const std::string small = fresh_dir("bi", "cache_small"), big = fresh_dir("bi", "cache_big");
  const std::string a = fresh_dir("bi", "run_a"), b = fresh_dir("bi", "run_b"),
                    c = fresh_dir("bi", "run_c");
  auto cmd = [](int n, const std::string& cache, const std::string& out) {
    const std::string s = std::to_string(n);
    return "run -c configs/tiny.json -w gemm:m=" + s + ",k=" + s + ",n=" + s +
           " --mode aot --steps 1 --trace-level none --set runtime.aot.disk_cache=" + cache +
           " --out " + out;
  };
  std::string err;
  ASSERT_EQ(run_wallsim(cmd(128, small, a), &err), 0) << err;
  ASSERT_EQ(run_wallsim(cmd(256, big, b), &err), 0) << err;
  std::vector<fs::path> small_entries, big_entries;
  for (const auto& e : fs::directory_iterator(small)) small_entries.push_back(e.path());
  for (const auto& e : fs::directory_iterator(big)) big_entries.push_back(e.path());
  ASSERT_EQ(small_entries.size(), 1u);
  ASSERT_EQ(big_entries.size(), 1u);
  fs::copy_file(big_entries[0], small_entries[0], fs::copy_options::overwrite_existing);
  ASSERT_EQ(run_wallsim(cmd(128, small, c), &err), 0) << err;
  const Json first = stats_without_measured(a), again = stats_without_measured(c);
  EXPECT_EQ(again["startup"]["disk_hits"], 0);
  EXPECT_EQ(again, first);  // compiled afresh: the same run as the first
  // A truncated entry (checksum, or JSON) is recompiled too, and a FIFO is not opened.
  std::ofstream(small_entries[0], std::ios::trunc) << "{\"format\":";
  ASSERT_EQ(run_wallsim(cmd(128, small, c), &err), 0) << err;
  EXPECT_EQ(stats_without_measured(c), first);
  // Defect 5: the cache directory naming a regular file was an internal error.
  EXPECT_EQ(run_wallsim(cmd(128, "configs/tiny.json", c), &err), 2);
  EXPECT_NE(err.find("runtime.aot.disk_cache"), std::string::npos) << err;
}

// Defect 27: `.NAME.partial-PID` staging directories of killed runs were never cleaned.
TEST(BadInput, StaleStagingDirectoriesOfDeadRunsAreRemoved) {
  const std::string parent = fresh_dir("bi", "staging");
  fs::create_directories(parent);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // a pid that no longer runs, as after kill -9
  const std::string dead = parent + "/.o.partial-" + std::to_string(child);
  const std::string alive = parent + "/.o.partial-" + std::to_string(getpid());
  const std::string other = parent + "/.p.partial-" + std::to_string(child);
  for (const auto& d : {dead, alive, other}) fs::create_directories(d + "/x");
  std::string err;
  ASSERT_EQ(run_wallsim("run -c configs/tiny.json -w gemm:m=64,k=64,n=64 --steps 1 "
                        "--trace-level none --out " +
                            parent + "/o",
                        &err),
            0)
      << err;
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));  // a live process's: not ours to remove
  EXPECT_TRUE(fs::exists(other));  // another output's
  EXPECT_TRUE(fs::exists(parent + "/o/stats.json"));
}

// Defect 10: another spec run into an existing sweep directory was merged without a word.
TEST(BadInput, SweepDirectoryOfAnotherSpecIsRefused) {
  const std::string out = fresh_dir("bi", "sweep"), spec = out + ".spec.json";
  std::string err;
  ASSERT_EQ(run_wallsim("sweep configs/sweeps/smoke.json --index 0 --out " + out, &err), 0) << err;
  Json s = Json::parse(slurp(std::string(WALLSIM_SOURCE_DIR) + "/configs/sweeps/smoke.json"));
  s["steps"] = 3;
  std::ofstream(spec) << s.dump();
  EXPECT_EQ(run_wallsim("sweep " + spec + " --index 1 --out " + out, &err), 2);
  EXPECT_NE(err.find("holds a sweep of a different spec"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out + "/points/" + std::string("x")));
  // The same spec goes on.
  EXPECT_EQ(run_wallsim("sweep configs/sweeps/smoke.json --index 1 --out " + out, &err), 0) << err;
  fs::remove(spec);
}

// Review F9: `collect --csv` to a path that cannot be written was an internal error (exit 1)
// and left `FILE.tmpPID` behind.
TEST(BadInput, CollectCsvToABadPathIsExit2AndLeavesNoTemporaryFile) {
  const std::string d = fresh_dir("bi", "collect");
  std::string err;
  ASSERT_EQ(run_wallsim("sweep configs/sweeps/smoke.json --index 0 --out " + d, &err), 0) << err;
  fs::create_directories(d + "/full/x");
  std::ofstream(d + "/afile") << "x";
  for (const std::string& csv : {d + "/nodir/x.csv", d + "/afile/x.csv", d + "/full"}) {
    EXPECT_EQ(run_wallsim("collect " + d + " --csv " + csv, &err), 2) << csv;
    // A folder is refused as not a regular file (issue 40), the others cannot be created.
    const std::string problem =
        csv == d + "/full" ? "exists and is a directory" : "cannot write file";
    EXPECT_EQ(err.rfind("wallsim: " + csv + ": " + problem, 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  for (const auto& e : fs::directory_iterator(d)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  ASSERT_EQ(run_wallsim("collect " + d + " --csv " + d + "/ok.csv", &err), 0) << err;
  EXPECT_TRUE(fs::exists(d + "/ok.csv"));
}

// Review F15: an override that fails a cross-key check was blamed on the config file and the
// other key; like `--set arch.psum.bank_bytes=65536`, the override is named.
TEST(BadInput, OverrideFailingACrossKeyCheckIsBlamedOnTheOverride) {
  std::string err;
  for (const std::string& set : {std::string("runtime.aot.bucket_min=2048"),
                                 std::string("runtime.lazy.repeat_min_ops=200")}) {
    EXPECT_EQ(run_wallsim("config summary -c configs/trn2.json --set " + set, &err), 2) << set;
    EXPECT_EQ(err.rfind("wallsim: --set " + set + ": ", 0), 0u) << err;
  }
}

// Review F16: `study wall` ran points before it found a bad workload in its spec.
TEST(BadInput, StudyWallChecksEveryWorkloadBeforeAnyRun) {
  const std::string out = fresh_dir("bi", "wall"), spec = out + ".spec.json";
  std::ofstream(spec) << R"({"workloads": ["gemm:m=64,k=64,n=64", "gemm:m=0"],
    "modes": ["native"], "profiles": ["neuron"], "steps": 2})";
  std::string err;
  EXPECT_EQ(run_wallsim("study wall -c configs/tiny.json --spec " + spec + " --out " + out, &err),
            2);
  EXPECT_EQ(err.rfind("wallsim: " + spec + ": workloads[1] (gemm:m=0): ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(fs::exists(out));
  fs::remove(spec);
}

// Review F13: a run killed by SIGTERM or SIGINT left its `.NAME.partial-PID` staging directory
// (27 MB of spooled steps and trace); it is removed before the process dies of the signal.
TEST(BadInput, RunKilledBySigtermOrSigintRemovesItsStagingDirectory) {
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string parent = fresh_dir("bi", "killed" + std::to_string(sig));
    fs::create_directories(parent);
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string cmd = "cd " + std::string(WALLSIM_SOURCE_DIR) + " && exec " + WALLSIM_BIN +
                              " run -c configs/tiny.json -w mlp:batch=1024,d_model=256,d_ff=1024,"
                              "layers=8 --mode native --steps 400 --out " +
                              parent + "/o >/dev/null 2>&1";
      signal(SIGINT, SIG_DFL);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    ASSERT_GT(pid, 0);
    const std::string staging = parent + "/.o.partial-" + std::to_string(pid);
    // Until the run has written some steps into its staging directory (about 28 s in all).
    for (int i = 0; i < 600 && !fs::exists(staging + "/.steps.jsonl"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(fs::exists(staging)) << staging;
    kill(pid, sig);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
    EXPECT_FALSE(fs::exists(staging));
    EXPECT_TRUE(fs::is_empty(parent));
  }
}

}  // namespace
}  // namespace wallsim::test
