// Measured schedule tuning (issue 35): the model's best candidates of each matmul simulated as
// one-op plans, the fastest kept, the tuning cache reused and keyed by arch, timing and build.
// One simulated core per process: every tuner here measures on the same trn2 core.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "on_chip_run.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/runtime/schedule_tuner.h"
#include "wallsim/sim/build_id.h"

namespace wallsim::compiler_stub {
namespace {

using runtime::SimulatedTuner;
using runtime::TuningCache;
using test::graph;
using test::load;

// C[M, N] = A . B with A and B given plain or transposed, as the shape benchmark's GEMMs.
std::string gemm(int64_t M, int64_t K, int64_t N, const std::string& dt, bool ta, bool tb) {
  auto dims = [](int64_t r, int64_t c) {
    return "[" + std::to_string(r) + ", " + std::to_string(c) + "]";
  };
  std::string s = R"({"format": "wallsim-graph", "version": 1, "name": "gemm", "nodes": [)";
  s += R"({"id": 0, "op": "input", "name": "a", "dtype": ")" + dt + R"(", "shape": )" +
       (ta ? dims(K, M) : dims(M, K)) + R"(, "role": "input"},)";
  s += R"({"id": 1, "op": "input", "name": "b", "dtype": ")" + dt + R"(", "shape": )" +
       (tb ? dims(N, K) : dims(K, N)) + R"(, "role": "input"},)";
  if (ta) s += R"({"id": 2, "op": "transpose", "inputs": [0], "perm": [1, 0]},)";
  if (tb) s += R"({"id": 3, "op": "transpose", "inputs": [1], "perm": [1, 0]},)";
  s += R"({"id": 4, "op": "matmul", "inputs": [)" + std::string(ta ? "2" : "0") + ", " +
       (tb ? "3" : "1") + R"(]}], "outputs": [4]})";
  return s;
}

// A seeded draw of the shape benchmark's kind (wallsim validate shapes: M, K, N log-uniform,
// half rounded to multiples of 128, bf16 or fp32, an operand transposed), kept small enough to
// simulate every candidate in seconds.
std::vector<std::string> population(size_t count) {
  std::mt19937_64 rng(35);
  auto dim = [&](int64_t lo, int64_t hi) {
    const double e = std::log2(double(lo)) + double(rng() % 1000000) / 1e6 *
                                                 (std::log2(double(hi)) - std::log2(double(lo)));
    int64_t d = std::llround(std::exp2(e));
    if (rng() % 2 == 0 && d >= 128) d = d / 128 * 128;
    return d;
  };
  std::vector<std::string> out;
  while (out.size() < count) {
    const int64_t M = dim(256, 2048), K = dim(256, 4096), N = dim(512, 4096);
    if (double(M) * K * N > 4e9) continue;
    out.push_back(gemm(M, K, N, rng() % 10 < 7 ? "bf16" : "fp32", rng() % 4 == 0, false));
  }
  return out;
}

struct Device {
  runtime::Config cfg = load("trn2");
  std::unique_ptr<sim::System> system;
  Device() {
    sim::init_systemc();
    system = std::make_unique<sim::System>(cfg.chip, sim::CoreOptions{});
  }
  sim::Core& core() { return system->core(); }
};
Device& device() {
  static Device d;
  return d;
}

struct Compiled {
  std::string plans;  // the plan sequence's JSON text
  double simulated_ns = 0;
  int64_t tuned = 0;
};

// Compiles `g` on the device's config (with `tuner`, when given), checks every plan against the
// verifier, and runs it on the device.
Compiled compile_and_run(const Graph& g, ScheduleTuner* tuner, const runtime::Config& cfg) {
  LoweringOptions o = cfg.compiler;
  o.tuner = tuner;
  auto r = compile_graph(g, cfg.chip.arch, GroupPolicy::whole, {}, o);
  Compiled c;
  if (auto* e = std::get_if<CompileError>(&r)) {
    ADD_FAILURE() << e->message();
    return c;
  }
  auto& cg = std::get<CompiledGraph>(r);
  for (const isa::Plan& p : cg.plans.plans) EXPECT_TRUE(isa::verify(p, cfg.chip.arch).empty());
  for (const LowerStats& s : cg.groups) c.tuned += s.matmul_tuned;
  c.plans = isa::to_json(cg.plans).dump();
  c.simulated_ns = test::simulate_plans_ns(device().core(), std::move(cg.plans));
  return c;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("wallsim_tuning_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MatmulTuning, TunedPointIsNeverSlowerThanTheModelsPickOnTrn2) {
  Device& d = device();
  d.cfg.compiler.tune.enabled = 1;
  TuningCache cache;
  SimulatedTuner tuner(d.cfg, cache, true, &d.core());
  int asked = 0, changed = 0;
  for (const std::string& text : population(6)) {
    const Graph g = graph(text);
    const int64_t before = tuner.stats().queries;
    const Compiled model = compile_and_run(g, nullptr, d.cfg);
    const Compiled tuned = compile_and_run(g, &tuner, d.cfg);
    if (tuner.stats().queries == before) continue;  // no space searched (nothing to tune)
    ++asked;
    changed += model.plans != tuned.plans;
    std::printf("%s: model's pick %.1f us, tuned %.1f us\n", to_string(g.find(4)->type).c_str(),
                model.simulated_ns / 1e3, tuned.simulated_ns / 1e3);
    EXPECT_LE(tuned.simulated_ns, model.simulated_ns * (1 + 1e-6)) << text;
  }
  std::printf("%d of 6 shapes tuned, %d off the model's pick\n", asked, changed);
  EXPECT_GE(asked, 4);
  EXPECT_EQ(cache.size(), size_t(asked));
}

TEST(MatmulTuning, SecondCompileWithTheCacheHitsAndSimulatesNothing) {
  Device& d = device();
  d.cfg.compiler.tune.enabled = 1;
  const std::string path = temp_file("second.json");
  const Graph g = graph(gemm(1024, 2048, 3072, "bf16", false, false));
  std::string first_plans;
  {
    TuningCache cache;
    SimulatedTuner tuner(d.cfg, cache, true, &d.core());
    first_plans = compile_and_run(g, &tuner, d.cfg).plans;
    ASSERT_EQ(tuner.stats().tuned, 1);
    EXPECT_GE(tuner.stats().simulations, 2);
    cache.save(path);
  }
  TuningCache cache = TuningCache::load(path);
  SimulatedTuner tuner(d.cfg, cache, true, &d.core());
  EXPECT_EQ(compile_and_run(g, &tuner, d.cfg).plans, first_plans);
  EXPECT_EQ(tuner.stats().simulations, 0);
  EXPECT_EQ(tuner.stats().hits, tuner.stats().queries);
  EXPECT_GE(tuner.stats().hits, 1);

  // Another chip's arch (trn1) or other timing figures: misses.
  runtime::Config trn1 = load("trn1");
  trn1.compiler.tune = d.cfg.compiler.tune;
  SimulatedTuner other_arch(trn1, cache, false);
  LoweringOptions o = trn1.compiler;
  o.tuner = &other_arch;
  ASSERT_TRUE(std::holds_alternative<CompiledGraph>(
      compile_graph(g, trn1.chip.arch, GroupPolicy::whole, {}, o)));
  EXPECT_GE(other_arch.stats().queries, 1);
  EXPECT_EQ(other_arch.stats().hits, 0);
  EXPECT_EQ(other_arch.stats().misses, other_arch.stats().queries);

  runtime::Config slower = d.cfg;
  slower.chip.timing.hbm.bandwidth_gb_per_s *= 0.5;
  SimulatedTuner other_timing(slower, cache, false);
  compile_and_run(g, &other_timing, slower);
  EXPECT_EQ(other_timing.stats().hits, 0);

  // Entries made by another compiler, or timed by another simulator, miss.
  const std::string text = read(path);
  for (const std::string id : {compiler_stub::build_id(), sim::build_id()}) {
    std::string other = text;
    ASSERT_NE(other.find(id), std::string::npos) << id;
    for (size_t at = other.find(id); at != std::string::npos; at = other.find(id, at))
      other.replace(at, id.size(), std::string(id.size(), '0'));
    std::ofstream(path, std::ios::binary | std::ios::trunc) << other;
    TuningCache stale = TuningCache::load(path);
    SimulatedTuner other_build(d.cfg, stale, false);
    compile_and_run(g, &other_build, d.cfg);
    EXPECT_EQ(other_build.stats().hits, 0) << id;
    EXPECT_GE(other_build.stats().misses, 1) << id;
  }
  std::filesystem::remove(path);
}

TEST(MatmulTuning, SameInputTwiceGivesByteIdenticalCacheAndPlans) {
  Device& d = device();
  d.cfg.compiler.tune.enabled = 1;
  std::string plans[2], files[2];
  for (int i = 0; i < 2; ++i) {
    TuningCache cache;
    SimulatedTuner tuner(d.cfg, cache, true, &d.core());
    for (const std::string& text : population(3))
      plans[i] += compile_and_run(graph(text), &tuner, d.cfg).plans;
    const std::string path = temp_file("twice" + std::to_string(i) + ".json");
    cache.save(path);
    files[i] = read(path);
    std::filesystem::remove(path);
  }
  EXPECT_EQ(plans[0], plans[1]);
  EXPECT_EQ(files[0], files[1]);
  EXPECT_NE(files[0].find("\"model_simulated_ns\""), std::string::npos);
}

TEST(MatmulTuning, CorruptCacheNamesTheFileAndTheProblem) {
  const std::string path = temp_file("corrupt.json");
  std::ofstream(path) << R"({"format": "wallsim-tuning-cache", "version": 1, "entries": [{}]})";
  try {
    TuningCache::load(path);
    ADD_FAILURE() << "loaded";
  } catch (const base::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("entries[0].family is missing"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace wallsim::compiler_stub
