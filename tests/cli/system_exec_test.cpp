// `wallsim exec` of a plan file whose plans name their core: a 16-chip trn2 system of 8 cores
// each copies a tile to its torus neighbour; per-link bytes and busy time; determinism.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace wallsim {
namespace {

using Json = nlohmann::json;
using test::slurp;

constexpr int kX = 4, kY = 4, kCores = 8, kRows = 128, kCols = 512;  // trn2.json's system
constexpr int64_t kTileBytes = int64_t{kRows} * kCols * 4;           // fp32

// One plan per core: load its tile from its chip's HBM, store it to the x+ neighbour's HBM.
std::string write_neighbour_copy_plans() {
  Json plans = Json::array();
  for (int c = 0; c < kX * kY; ++c) {
    const int nb = c / kX * kX + (c % kX + 1) % kX;
    for (int k = 0; k < kCores; ++k) {
      const std::string t = "t_c" + std::to_string(c) + "_k" + std::to_string(k);
      const std::string remote = "chip" + std::to_string(nb) + ":" + t;
      const Json tile = {
          {"buf", "tile"}, {"dtype", "fp32"}, {"partitions", {0, kRows}}, {"free", {{kCols, 1}}}};
      plans.push_back({{"name", "copy_c" + std::to_string(c) + "_k" + std::to_string(k)},
                       {"core", {c, k}},
                       {"semaphores", {"in"}},
                       {"tensors",
                        {{{"name", t},
                          {"space", "hbm"},
                          {"dtype", "fp32"},
                          {"shape", {kRows, kCols}},
                          {"role", "input"}},
                         {{"name", remote},
                          {"space", "hbm"},
                          {"dtype", "fp32"},
                          {"shape", {kRows, kCols}},
                          {"role", "output"}}}},
                       {"buffers",
                        {{{"name", "tile"},
                          {"space", "sbuf"},
                          {"partitions", {0, kRows}},
                          {"bytes", kCols * 4}}}},
                       {"nodes", {{{"id", 0}, {"name", "neighbour copy"}, {"op", "copy"}}}},
                       {"streams",
                        {{{"engine", "dma"},
                          {"name", "load"},
                          {"dma_engine", 0},
                          {"instructions",
                           {{{"op", "dma_copy"},
                             {"dst", tile},
                             {"src",
                              {{"buf", t},
                               {"dtype", "fp32"},
                               {"rows", {kRows, kCols}},
                               {"free", {{kCols, 1}}}}},
                             {"signal", Json::array({Json::array({"in", 1})})},
                             {"node", 0}}}}},
                         {{"engine", "dma"},
                          {"name", "store"},
                          {"dma_engine", 1},
                          {"instructions",
                           {{{"op", "dma_copy"},
                             {"wait", Json::array({Json::array({"in", 1})})},
                             {"src", tile},
                             {"dst",
                              {{"buf", remote},
                               {"dtype", "fp32"},
                               {"rows", {kRows, kCols}},
                               {"free", {{kCols, 1}}}}},
                             {"node", 0}}}}}}}});
    }
  }
  const std::string path =
      ::testing::TempDir() + "/neighbour_copy_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << Json{{"format", "wallsim-plan"}, {"version", 1}, {"plans", plans}}.dump();
  return path;
}

Json stats_without_measured(const std::string& dir) {
  Json j = Json::parse(slurp(dir + "/stats.json"));
  j.erase("measured");
  return j;
}

TEST(SystemExec, SixteenTrn2ChipsCopyATileToTheirTorusNeighbour) {
  const std::string plans = write_neighbour_copy_plans();
  const std::string a = test::fresh_dir("system", "a"), b = test::fresh_dir("system", "b"),
                    r = test::fresh_dir("system", "rev");
  std::string err;
  ASSERT_EQ(test::run_wallsim("exec " + plans + " -c configs/trn2.json --out " + a, &err), 0)
      << err;
  const Json s = stats_without_measured(a);
  // Every chip's x+ link carries its 8 cores' tiles and nothing else moves between chips: at
  // the link's 128 GB/s per direction the busy time is bytes / bandwidth (the 8 stores start
  // in the same picosecond and share it).
  const Json& links = s.at("system").at("links");
  EXPECT_EQ(links.size(), size_t(kX * kY));
  for (int c = 0; c < kX * kY; ++c) {
    const Json& l = links.at("chip" + std::to_string(c)).at("x+");
    EXPECT_EQ(l.at("bytes").get<int64_t>(), kCores * kTileBytes) << c;
    EXPECT_DOUBLE_EQ(l.at("busy_ns").get<double>(), double(kCores * kTileBytes) / 128.0) << c;
  }
  // Each chip's HBM carried the tiles read by its cores, those written by its neighbour's, and
  // its plans' instruction fetch (2 instructions of 64 B each).
  EXPECT_EQ(s.at("system").at("chips").at("chip5").at("hbm").at("bytes").get<int64_t>(),
            2 * kCores * kTileBytes + kCores * 2 * 64);
  EXPECT_TRUE(s.at("chip15").at("core7").contains("dma"));

  // The same run again, and with the cores elaborated last to first: the same bytes.
  ASSERT_EQ(test::run_wallsim("exec " + plans + " -c configs/trn2.json --out " + b, &err), 0)
      << err;
  ASSERT_EQ(test::run_wallsim(
                "exec " + plans + " -c configs/trn2.json --reverse-elaboration --out " + r, &err),
            0)
      << err;
  for (const std::string& d : {b, r}) {
    EXPECT_EQ(stats_without_measured(d), s) << d;
    EXPECT_EQ(slurp(d + "/trace.json"), slurp(a + "/trace.json")) << d;
  }
  // A process per core and one per chip.
  const std::string trace = slurp(a + "/trace.json");
  EXPECT_NE(trace.find("\"name\":\"chip15.core7\""), std::string::npos);
  EXPECT_NE(trace.find("\"name\":\"chip15\""), std::string::npos);
  EXPECT_NE(trace.find("link bandwidth (GB/s)"), std::string::npos);
}

TEST(SystemExec, APlanOnACoreTheSystemLacksIsBadInput) {
  std::ofstream(::testing::TempDir() + "/bad_core.json")
      << slurp(std::string(WALLSIM_SOURCE_DIR) + "/examples/plans/vector_add.json");
  Json j = Json::parse(slurp(::testing::TempDir() + "/bad_core.json"));
  j["plans"][0]["core"] = {99, 0};
  std::ofstream(::testing::TempDir() + "/bad_core.json") << j.dump();
  std::string err;
  EXPECT_EQ(test::run_wallsim("exec " + ::testing::TempDir() +
                                  "/bad_core.json -c configs/trn2.json --out " +
                                  test::fresh_dir("system", "bad"),
                              &err),
            2);
  EXPECT_NE(err.find("[99, 0] is not a core of the system"), std::string::npos) << err;
}

}  // namespace
}  // namespace wallsim
