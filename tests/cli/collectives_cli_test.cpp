// Collectives from the command line: `exec` of a placed plan file whose ranks all-reduce and
// all-gather (stats, determinism), and `wallsim collectives`, the nccl-tests table.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace wallsim {
namespace {

using Json = nlohmann::json;
using test::slurp;

// tiny.json's system: 2 instances x 2 chips x 2 cores = 8 cores. One SPMD plan per core:
// all_reduce x into y, then all_gather y into z, over "world" of every core.
std::string write_spmd_plans(int ranks) {
  auto row = [](const char* t, int rows) {
    return Json{{"buf", t}, {"dtype", "fp32"}, {"rows", {rows, 256}}, {"free", {{256, 1}}}};
  };
  Json plans = Json::array();
  for (int r = 0; r < ranks; ++r) {
    plans.push_back({{"name", "rank" + std::to_string(r)},
                     {"core", {r / 2, r % 2}},
                     {"comms", {{{"name", "world"}, {"size", ranks}}}},
                     {"tensors",
                      {{{"name", "x"},
                        {"space", "hbm"},
                        {"dtype", "fp32"},
                        {"shape", {16, 256}},
                        {"role", "input"}},
                       {{"name", "y"},
                        {"space", "hbm"},
                        {"dtype", "fp32"},
                        {"shape", {16, 256}},
                        {"role", "output"}},
                       {{"name", "z"},
                        {"space", "hbm"},
                        {"dtype", "fp32"},
                        {"shape", {16 * ranks, 256}},
                        {"role", "output"}}}},
                     {"streams",
                      {{{"engine", "dma"},
                        {"name", "q0"},
                        {"dma_engine", 0},
                        {"instructions",
                         {{{"op", "all_reduce"},
                           {"alu", "add"},
                           {"comm", "world"},
                           {"dst", row("y", 16)},
                           {"src", row("x", 16)}},
                          {{"op", "all_gather"},
                           {"comm", "world"},
                           {"dst", row("z", 16 * ranks)},
                           {"src", row("y", 16)}}}}}}}});
  }
  const std::string path = ::testing::TempDir() + "/spmd_" + std::to_string(ranks) + "_" +
                           std::to_string(::getpid()) + ".json";
  std::ofstream(path) << Json{{"format", "wallsim-plan"}, {"version", 1}, {"plans", plans}}.dump();
  return path;
}

Json stats_without_measured(const std::string& dir) {
  Json s = Json::parse(slurp(dir + "/stats.json"));
  s.erase("measured");
  return s;
}

TEST(CollectivesCli, EightRanksOfTinyReduceThenGatherDeterministically) {
  const std::string plans = write_spmd_plans(8);
  const std::string a = test::fresh_dir("coll", "a"), r = test::fresh_dir("coll", "rev");
  std::string err;
  ASSERT_EQ(test::run_wallsim("exec " + plans + " -c configs/tiny.json --out " + a, &err), 0)
      << err;
  const Json s = stats_without_measured(a);
  const Json& world = s.at("system").at("collectives").at("world");
  EXPECT_EQ(world.at("all_reduce").at("count").get<double>(), 1);
  EXPECT_EQ(world.at("all_reduce").at("bytes").get<double>(), 16 * 256 * 4);
  EXPECT_EQ(world.at("all_gather").at("bytes").get<double>(), 8 * 16 * 256 * 4);
  EXPECT_GT(world.at("all_gather").at("time_ns").get<double>(), 0);
  EXPECT_TRUE(s.at("system").at("links").contains("chip0"));
  ASSERT_EQ(test::run_wallsim(
                "exec " + plans + " -c configs/tiny.json --reverse-elaboration --out " + r, &err),
            0)
      << err;
  EXPECT_EQ(stats_without_measured(r), s);
  EXPECT_EQ(slurp(r + "/trace.json"), slurp(a + "/trace.json"));
}

TEST(CollectivesCli, ACommunicatorDeclaredOnTooFewCoresIsBadInput) {
  std::string plans = write_spmd_plans(8);
  Json j = Json::parse(slurp(plans));
  j["plans"].erase(7);
  std::ofstream(plans) << j.dump();
  std::string err;
  EXPECT_EQ(
      test::run_wallsim(
          "exec " + plans + " -c configs/tiny.json --out " + test::fresh_dir("coll", "bad"), &err),
      2);
  EXPECT_NE(err.find("communicator 'world' of size 8 is declared by plans on 7 cores"),
            std::string::npos)
      << err;
}

// The table nccl-tests prints, as CSV: sizes 8 B .. 1 MiB by 2, a latency floor at small sizes
// and busbw rising with size. tiny's 8 cores sit 4 to an instance in 2 instances: hierarchical
// (reduce-scatter inside, all-reduce across on 1/4, all-gather inside), each stage by its size:
// mesh below 1 MiB, recursive halving/doubling from it.
TEST(CollectivesCli, CollectivesCommandWritesTheNcclTestsTable) {
  const std::string csv = ::testing::TempDir() + "/coll_" + std::to_string(::getpid()) + ".csv";
  std::string err;
  ASSERT_EQ(test::run_wallsim("collectives -c configs/tiny.json --op all_reduce --ranks cores "
                              "-b 8 -e 1M --csv " +
                                  csv,
                              &err),
            0)
      << err;
  std::istringstream in(slurp(csv));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "size_bytes,count,type,redop,algorithm,time_us,algbw_gb_per_s,busbw_gb_per_s,"
            "bound_by");
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string c;
    while (std::getline(ls, c, ',')) cells.push_back(c);
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 18u);  // 8 B, 16 B, ..., 1 MiB
  EXPECT_EQ(rows.front()[0], "8");
  EXPECT_EQ(rows.front()[2], "fp32");
  EXPECT_EQ(rows.front()[4], "hier:mesh/mesh/mesh");
  EXPECT_EQ(rows.back()[0], "1048576");
  EXPECT_EQ(rows.back()[4], "hier:rhd/mesh/rhd");
  EXPECT_EQ(rows.back()[8].substr(0, 4), "chip");  // a link, NIC or HBM of some chip
  // Latency floor: the smallest sizes take about the same time (one EFA route, 10 us in tiny).
  EXPECT_GT(std::stod(rows[0][5]), 10.0);
  EXPECT_NEAR(std::stod(rows[1][5]) / std::stod(rows[0][5]), 1.0, 0.01);
  // busbw = algbw x 2(n-1)/n, and it rises with size.
  for (const auto& r : rows) EXPECT_NEAR(std::stod(r[7]), std::stod(r[6]) * 2 * 7 / 8, 1e-3);
  EXPECT_GT(std::stod(rows.back()[7]), 100 * std::stod(rows.front()[7]));
}

TEST(CollectivesCli, AnUnknownCollectiveIsOneLine) {
  std::string err;
  EXPECT_EQ(test::run_wallsim("collectives -c configs/tiny.json --op all_sum", &err), 2);
  EXPECT_EQ(err, "wallsim: --op all_sum: unknown collective\n");
}

}  // namespace
}  // namespace wallsim
