// Issue 20 regressions that need more than one command: disk cache entries that lie about their
// key, staging directories left by killed runs, a sweep directory of another spec.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace wallsim::test
