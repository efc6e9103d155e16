// The compile metrics of `wallsim run` (stats.json's compile_metrics) and what they show about
// the fused mode's materialization heuristics and the compile-cost model.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli_test_util.h"

namespace wallsim::test {
namespace {

using Json = nlohmann::json;

// Runs `wallsim run` timing-only and returns stats.json's compile_metrics.
Json metrics(const std::string& name, const std::string& args) {
  const std::string out = fresh_dir("compile_metrics", name);
  std::string err;
  EXPECT_EQ(
      run_wallsim("run -c configs/trn2.json --trace-level none --out " + out + " " + args, &err), 0)
      << err;
  std::ifstream in(out + "/stats.json");
  Json stats = Json::parse(in);
  return stats.at("compile_metrics");
}

// With the default heuristics the repeated layers of a 12-layer GPT-2 step are cut into groups
// of one signature: one compile per distinct group, the other layers hit it, all in step 0.
TEST(CompileMetrics, TwelveLayerGptStepCompilesOneEntryPerLayerPatternAndHitsIt) {
  const Json m = metrics("gpt12", "-w transformer:layers=12 --mode fused --steps 1");
  const Json& entries = m.at("entries");
  std::set<std::string> signatures;
  int64_t layer_hits = 0;
  for (const Json& e : entries) {
    EXPECT_EQ(e.at("step"), 0);
    signatures.insert(e.at("signature").get<std::string>());
    layer_hits = std::max(layer_hits, e.at("num_cache_hits").get<int64_t>());
  }
  EXPECT_EQ(signatures.size(), entries.size());  // every compile is a new entry
  EXPECT_LE(entries.size(), 3u);                 // prologue, layer (and epilogue)
  EXPECT_EQ(layer_hits, 11);                     // layers 1-11 hit layer 0's entry
  EXPECT_EQ(m.at("UncachedCompile"), entries.size());
  EXPECT_EQ(m.at("CachedCompile"), m.at("num_cache_hits"));
  EXPECT_EQ(m.at("num_cache_reqs").get<int64_t>(),
            m.at("UncachedCompile").get<int64_t>() + m.at("CachedCompile").get<int64_t>());
  EXPECT_EQ(m.at("unique_graphs"), entries.size());
}

// Today's rules only (no heuristics but size and not_fusible): the step is one group.
TEST(CompileMetrics, WithoutTheHeuristicsAFlushIsOneGroup) {
  const Json m = metrics("gpt12_old",
                         "-w transformer:layers=12 --mode fused --steps 1 "
                         "--set 'runtime.lazy.heuristics=[\"size\",\"not_fusible\"]'");
  ASSERT_EQ(m.at("entries").size(), 1u);
  // The one group is the whole step: as many nodes as AOT's whole-step compile.
  const Json aot = metrics("gpt12_aot", "-w transformer:layers=12 --mode aot --steps 1");
  ASSERT_EQ(aot.at("entries").size(), 1u);
  EXPECT_GT(m.at("entries")[0].at("nodes").get<int64_t>(), 12 * 10);
  EXPECT_EQ(m.at("entries")[0].at("nodes"), aot.at("entries")[0].at("nodes"));
}

// One curve per profile: the same graph costs the same under fused (one group per step) and
// AOT (the whole step), under both profiles.
TEST(CompileMetrics, TheSameGraphCostsTheSameInFusedAndAot) {
  for (const std::string profile : {"neuron", "xla"}) {
    const std::string set = " --set runtime.compile_cost.profile='\"" + profile + "\"'";
    const Json fused = metrics("same_fused_" + profile,
                               "-w transformer:layers=2 --mode fused --steps 1"
                               " --set 'runtime.lazy.heuristics=[]'" +
                                   set);
    const Json aot =
        metrics("same_aot_" + profile, "-w transformer:layers=2 --mode aot --steps 1" + set);
    ASSERT_EQ(fused.at("entries").size(), 1u);
    ASSERT_EQ(aot.at("entries").size(), 1u);
    EXPECT_EQ(fused["entries"][0]["signature"], aot["entries"][0]["signature"]) << profile;
    EXPECT_EQ(fused["entries"][0]["compilation_duration_ns"],
              aot["entries"][0]["compilation_duration_ns"])
        << profile;
  }
}

// The cost grows with the work: a 12-layer step costs several times one layer.
TEST(CompileMetrics, TwelveLayersCostSeveralTimesOneLayer) {
  for (const std::string profile : {"neuron", "xla"}) {
    const std::string set = " --set runtime.compile_cost.profile='\"" + profile + "\"'";
    auto ns = [&](int layers) {
      const Json m = metrics(
          "layers" + std::to_string(layers) + profile,
          "-w transformer:layers=" + std::to_string(layers) + " --mode aot --steps 1" + set);
      return m.at("CompileTime").at("total_ns").get<double>();
    };
    EXPECT_GT(ns(12), 3 * ns(1)) << profile;
  }
}

// Exact-shape decoding under fused recompiles every token; the log names the dimension.
TEST(CompileMetrics, TheRecompileLogNamesTheDimensionThatChanged) {
  const Json m = metrics("decode",
                         "-w decode:prompt=16,new_tokens=3,d_model=64,heads=2,d_ff=128"
                         " --mode fused");
  const Json& log = m.at("recompiles");
  ASSERT_FALSE(log.empty());
  for (const Json& r : log) {
    const std::string why = r.at("reason");
    EXPECT_NE(why.find(" dim "), std::string::npos) << why;
    EXPECT_NE(why.find(" -> "), std::string::npos) << why;
    EXPECT_NE(r.at("previous"), r.at("signature"));
  }
}

// A group that fails to compile and falls back says so: one stderr line with the first reason,
// and compile_metrics.fallbacks lists each (step, ops, policy, the compiler's error). A run
// without any has no such key and no such line.
TEST(CompileMetrics, FallbacksAreListedWithTheirReasons) {
  const std::string out = fresh_dir("compile_metrics", "fallback");
  std::string err;
  ASSERT_EQ(run_wallsim("run -c configs/trn2.json --trace-level none --out " + out +
                            " -w transformer:layers=1,seq=128 --mode fused --steps 2"
                            " --set 'runtime.inject.fail_ops=[\"attention\"]'"
                            " --set runtime.lazy.fallback=split",
                        &err),
            0)
      << err;
  EXPECT_NE(err.find("group(s) failed to compile and fell back (split); the first: "),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  std::ifstream in(out + "/stats.json");
  const Json m = Json::parse(in).at("compile_metrics");
  ASSERT_TRUE(m.contains("fallbacks"));
  const Json& f = m.at("fallbacks");
  ASSERT_GT(f.size(), 0u);
  for (const Json& r : f) {
    EXPECT_EQ(r.at("policy"), "split");
    EXPECT_GE(r.at("ops").get<int64_t>(), 1);
    EXPECT_NE(r.at("reason").get<std::string>().find("attention"), std::string::npos) << r;
  }
  EXPECT_FALSE(metrics("no_fallback", "-w transformer:layers=1,seq=128 --mode fused --steps 1")
                   .contains("fallbacks"));
}

// A captured program's failed group names the ATen op and the module the compiler's node came
// from, not only the group-local node number.
TEST(CompileMetrics, ProgramFallbacksNameTheAtenOpAndModule) {
  const std::string out = fresh_dir("compile_metrics", "program_fallback");
  std::string err;
  ASSERT_EQ(run_wallsim("run -c configs/trn2.json --trace-level none --out " + out +
                            " -w program:file=tests/frontends/torch/programs/mlp_forward.json"
                            " --mode fused --steps 1"
                            " --set 'runtime.inject.fail_ops=[\"matmul\"]'"
                            " --set runtime.lazy.fallback=split",
                        &err),
            0)
      << err;
  EXPECT_NE(err.find("[from aten.addmm.default in module '0']"), std::string::npos) << err;
  std::ifstream in(out + "/stats.json");
  const Json f = Json::parse(in).at("compile_metrics").at("fallbacks");
  ASSERT_GT(f.size(), 0u);
  for (const Json& r : f) {
    EXPECT_NE(r.at("reason").get<std::string>().find("[from aten.addmm.default in module '"),
              std::string::npos)
        << r;
  }
}

}  // namespace
}  // namespace wallsim::test
