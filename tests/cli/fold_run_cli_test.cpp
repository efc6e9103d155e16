// SPMD folding from the command line (issue 39, step 8): `run --fold auto` simulates only rank 0
// of an eligible run (its ranks on one chip or filling every chip of the system), and its
// stats.json and stats.txt equal the unfolded run's but for distributed.fold,
// system.collectives.<comm>.<op>.twins (written only by a folded run) and the measured.*
// host-speed figures; its trace holds only rank 0's host. Ineligible runs are simulated whole and
// say why; a folded run whose chips fall out of step stops with one line. Each run is a child
// process.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace wallsim {
namespace {

using Json = nlohmann::ordered_json;  // key order is compared too

struct Output {
  Json stats;
  std::string text;   // stats.txt
  std::string trace;  // trace.json
};

Output run(const std::string& args, const std::string& tag) {
  const std::string dir = test::fresh_dir("fold_run", tag);
  std::string err;
  EXPECT_EQ(test::run_wallsim("run -c configs/trn2.json --trace-level plans --progress 0 " + args +
                                  " --out " + dir,
                              &err),
            0)
      << args << "\n"
      << err;
  return {Json::parse(test::slurp(dir + "/stats.json")), test::slurp(dir + "/stats.txt"),
          test::slurp(dir + "/trace.json")};
}

// stats.json without what a folded run reports differently: the fold section, the collectives'
// twins, the real time measured.
std::string comparable(Json stats) {
  stats.erase("measured");
  if (stats.contains("distributed")) stats["distributed"].erase("fold");
  if (stats.contains("system") && stats["system"].contains("collectives")) {
    for (auto& [comm, ops] : stats["system"]["collectives"].items()) {
      for (auto& [op, figures] : ops.items()) figures.erase("twins");
    }
  }
  return stats.dump(1);
}

// stats.txt without those lines.
std::string comparable_text(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("measured.", 0) == 0 || line.rfind("distributed.fold.", 0) == 0) continue;
    if (line.rfind("system.collectives.", 0) == 0 && line.find(".twins ") != std::string::npos)
      continue;
    out += line + "\n";
  }
  return out;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Folded and unfolded: equal figures, the fold section saying which ran, every rank's row.
// `cores`: the chip's cores (rank r on chip r / cores, core r % cores).
void expect_folds(const std::string& workload, const std::string& mode, int64_t world,
                  const std::string& extra = "", int64_t cores = 8) {
  const std::string what = workload + " " + mode + " " + extra;
  const std::string args = "-w " + workload + " -m " + mode + " " + extra;
  const Output off = run(args + " --fold off", "off");
  const Output folded = run(args + " --fold auto", "auto");
  EXPECT_EQ(comparable(folded.stats), comparable(off.stats)) << what;
  EXPECT_EQ(comparable_text(folded.text), comparable_text(off.text)) << what;
  const Json& f = folded.stats.at("distributed").at("fold");
  EXPECT_TRUE(f.at("eligible").get<bool>()) << what << f.dump();
  EXPECT_TRUE(f.at("folded").get<bool>()) << what;
  EXPECT_FALSE(f.contains("why_unfolded")) << what;
  EXPECT_EQ(f.at("simulated_ranks"), 1) << what;
  const Json& o = off.stats.at("distributed").at("fold");
  EXPECT_FALSE(o.at("folded").get<bool>()) << what;
  EXPECT_EQ(o.at("why_unfolded"), "--fold off") << what;
  EXPECT_EQ(o.at("simulated_ranks"), world) << what;
  const Json& ranks = folded.stats.at("distributed").at("ranks");
  ASSERT_EQ(ranks.size(), static_cast<size_t>(world)) << what;
  for (int64_t r = 0; r < world; ++r) {
    EXPECT_EQ(ranks[static_cast<size_t>(r)].at("chip"), r / cores) << what;
    EXPECT_EQ(ranks[static_cast<size_t>(r)].at("core"), r % cores) << what;
  }
  // Every rank's host in the unfolded trace, only rank 0's in the folded one.
  EXPECT_EQ(count(off.trace, ".host (chip"), world) << what;
  EXPECT_EQ(count(folded.trace, ".host (chip"), 1) << what;
  EXPECT_EQ(count(folded.trace, ".host (chip0.core0)"), 1) << what;
  // Every chip reports its HBM and every rank's core its figures, in both runs alike (above).
  const int64_t chips = (world + cores - 1) / cores;
  const Json& system_chips = folded.stats.at("system").at("chips");
  for (int64_t c = 0; c < chips; ++c) {
    EXPECT_GT(system_chips.at("chip" + std::to_string(c)).at("hbm").at("bytes").get<int64_t>(), 0)
        << what << " chip " << c;
  }
  for (int64_t r = 0; r < world; ++r) {
    EXPECT_TRUE(folded.stats.at("chip" + std::to_string(r / cores))
                    .contains("core" + std::to_string(r % cores)))
        << what << " rank " << r;
  }
}

TEST(FoldRunCli, TensorAndDataParallelTransformerFoldsUnderAotAndNative) {
  expect_folds("transformer:tp=2,dp=2,batch=2", "aot", 4);
  expect_folds("transformer:tp=2,dp=2,batch=2", "native", 4);
}

TEST(FoldRunCli, LazyModesFoldWithSharedAndPrivateCompileCaches) {
  // The other ranks' lazy compiles are shared-cache hits (shared) or their own (private).
  expect_folds("transformer:tp=2,dp=2,batch=2,layers=2", "fused", 4);
  expect_folds("transformer:tp=2,dp=2,batch=2", "eager", 4,
               "--set runtime.shared_compile_cache=false");
}

TEST(FoldRunCli, TrainingAndDecodeFold) {
  expect_folds("train:dp=4", "fused", 4);
  expect_folds("decode:tp=4,new_tokens=8", "eager", 4);
}

// Ranks filling every chip of a system of 2-core chips: chips 1 .. C-1 mirror chip 0, the twins'
// collectives move from their own chips, every rank's core reports rank 0's figures.
const std::string kTwoChips =
    "--set chip.cores=2 --set topology.torus_x=2 --set topology.torus_y=1";
const std::string kFourChips =
    "--set chip.cores=2 --set topology.torus_x=2 --set topology.torus_y=2";

TEST(FoldRunCli, TwoChipsFoldWithTensorParallelOnEachAndDataParallelAcross) {
  // Forward only (no dp collective), then train's gradients all-reduced over dp across the chips.
  expect_folds("transformer:tp=2,dp=2,batch=2,seq=64", "aot", 4, kTwoChips, 2);
  expect_folds("train:tp=2,dp=2,layers=2", "fused", 4, kTwoChips, 2);
  expect_folds("decode:tp=2,dp=2,batch=2,new_tokens=4", "eager", 4, kTwoChips, 2);
}

TEST(FoldRunCli, TwoChipsFoldWithTensorParallelAcrossThem) {
  // tp=4: each tp all-reduce spans both chips (no twin); train's backward all-reduces too.
  expect_folds("train:tp=4,layers=2", "aot", 4, kTwoChips, 2);
  expect_folds("transformer:tp=4,seq=64", "fused", 4, kTwoChips, 2);
}

TEST(FoldRunCli, FourChipsOfATorusFold) {
  // 2 x 2 torus: tp on each chip and dp over the four; then tp over two chips, dp over two.
  expect_folds("transformer:tp=2,dp=4,batch=4,seq=64", "aot", 8, kFourChips, 2);
  expect_folds("train:tp=2,dp=4,layers=2", "native", 8, kFourChips, 2);
  expect_folds("train:tp=4,dp=2,layers=2", "aot", 8, kFourChips, 2);
}

TEST(FoldRunCli, ChipsOutOfStepStopTheFoldedRunWithOneLine) {
  // A transfer on chip 1's HBM that chip 0 does not see: chip 1's copies of rank 0's transfers
  // end late, and the run stops rather than report inexact figures (an internal error: the
  // eligibility rules are meant to rule it out).
  std::string err;
  const std::string dir = test::fresh_dir("fold_run", "unbalanced");
  EXPECT_EQ(test::run_wallsim("run -c configs/trn2.json --progress 0 -w "
                              "transformer:tp=2,dp=2,batch=2,seq=64 -m aot --fold auto " +
                                  kTwoChips + " --fold-test-unbalance 1 --out " + dir,
                              &err),
            1)
      << err;
  EXPECT_EQ(count(err, "\n"), 1) << err;
  EXPECT_NE(err.find("wallsim: internal error: an invariant of the folded run broke"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("SPMD folding is not exact for this run: chip 1's copy of core (0, 0)'s "
                     "transfer"),
            std::string::npos)
      << err;
  // Unfolded, the option does nothing (only a folded run has mirrors to unbalance).
  EXPECT_EQ(test::run_wallsim("run -c configs/trn2.json --progress 0 -w "
                              "transformer:tp=2,dp=2,batch=2,seq=64 -m aot --fold off " +
                                  kTwoChips + " --fold-test-unbalance 1 --out " + dir,
                              &err),
            0)
      << err;
}

TEST(FoldRunCli, IneligibleRunsAreUnchanged) {
  for (const std::string& args : {std::string("-w decode:pp=2,layers=2,new_tokens=4 -m fused"),
                                  std::string("-w transformer:tp=2,dp=2,batch=2 -m fused --set "
                                              "runtime.compile_in_background=true")}) {
    const Output off = run(args + " --fold off", "off");
    const Output folded = run(args + " --fold auto", "auto");
    Json a = off.stats, b = folded.stats;
    a.erase("measured");
    b.erase("measured");
    EXPECT_EQ(a.dump(1), b.dump(1)) << args;
    EXPECT_EQ(folded.trace, off.trace) << args;
    const Json& f = folded.stats.at("distributed").at("fold");
    EXPECT_FALSE(f.at("eligible").get<bool>()) << args;
    EXPECT_FALSE(f.at("folded").get<bool>()) << args;
    EXPECT_FALSE(f.contains("why_unfolded")) << args;
    EXPECT_EQ(f.at("simulated_ranks"), f.at("classes")) << args;
  }
}

TEST(FoldRunCli, BadFoldValueIsOneLineAndExitTwo) {
  std::string err;
  EXPECT_EQ(
      test::run_wallsim(
          "run -c configs/trn2.json --fold yes --out " + test::fresh_dir("fold_run", "bad"), &err),
      2);
  EXPECT_NE(err.find("--fold"), std::string::npos) << err;
  EXPECT_EQ(count(err, "\n"), 1) << err;
}

}  // namespace
}  // namespace wallsim
