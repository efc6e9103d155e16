// The fused attention's schedule search (issue 35) against the chip model: a seeded sample of each
// shape's schedule points compiled (compiler.attention_schedule = k), run in timing-only mode,
// and the cost model's predictions ranked against the simulated times; points computed on chip.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "on_chip_run.h"
#include "rank_correlation.h"

namespace wallsim::compiler_stub {
namespace {

using test::graph;
using test::load;
using test::run_on_chip;

// attention(q, k, v [L, D], mask) with H heads; `mask`: "none", "causal" or "seg" (int32 ids).
std::string attention(int64_t L, int64_t D, int64_t H, const std::string& dt,
                      const std::string& mask) {
  const std::string shape = "[" + std::to_string(L) + ", " + std::to_string(D) + "]";
  std::string s = R"({"format": "wallsim-graph", "version": 1, "name": "att", "nodes": [)";
  for (const char* name : {"q", "k", "v"}) {
    const int id = name[0] == 'q' ? 0 : name[0] == 'k' ? 1 : 2;
    s += R"({"id": )" + std::to_string(id) + R"(, "op": "input", "name": ")" + name +
         R"(", "dtype": ")" + dt + R"(", "shape": )" + shape + R"(, "role": "input"},)";
  }
  std::string in = "[0, 1, 2]";
  if (mask == "seg") {
    s += R"({"id": 3, "op": "input", "name": "seg", "dtype": "int32", "shape": [)" +
         std::to_string(L) + R"(], "role": "input"},)";
    in = "[0, 1, 2, 3]";
  }
  s += R"({"id": 4, "op": "attention", "inputs": )" + in + R"(, "heads": )" + std::to_string(H) +
       (mask == "causal" ? R"(, "causal": 1)" : "") + R"(}], "outputs": [4]})";
  return s;
}

struct Run {
  double predicted_ns = 0, simulated_ns = 0;
  int64_t points = 0;
};

// Compiles `g` at schedule point `k` (-1: the model's pick) and runs it in timing-only mode on
// `core`. Every plan compile_graph returns has passed the verifier.
std::optional<Run> run_point(const Graph& g, const runtime::Config& cfg, sim::Core& core,
                             int64_t k) {
  LoweringOptions o = cfg.compiler;
  o.attention_schedule = k;
  auto r = compile_graph(g, cfg.chip.arch, GroupPolicy::whole, {}, o);
  if (auto* e = std::get_if<CompileError>(&r)) {
    ADD_FAILURE() << "point " << k << ": " << e->message();
    return std::nullopt;
  }
  auto& cg = std::get<CompiledGraph>(r);
  Run run;
  for (const LowerStats& s : cg.groups) {
    run.predicted_ns += s.attention_predicted_ns;
    run.points = std::max(run.points, s.attention_points);
  }
  run.simulated_ns = test::simulate_plans_ns(core, std::move(cg.plans));
  return run;
}

struct Shape {
  int64_t L, D, H;
  const char* mask;
};

// Per shape, `sample` of its points (seeded, the rules' point among them) and the model's pick:
// the rank correlation of predicted and simulated times, the worst relative error, and the
// pick's time against the rules' point and the fastest point sampled.
void check_ranking(const std::string& chip, const std::vector<Shape>& shapes, size_t sample) {
  runtime::Config cfg = load(chip);
  sim::init_systemc();
  sim::System system(cfg.chip, sim::CoreOptions{});
  sim::Core& core = system.core();
  std::mt19937 rng(35);
  double worst_error = 0, rho_sum = 0, worst_rho = 1;
  for (const Shape& s : shapes) {
    const Graph g = graph(attention(s.L, s.D, s.H, "bf16", s.mask));
    const auto rules = run_point(g, cfg, core, 0);
    ASSERT_TRUE(rules);
    ASSERT_GE(rules->points, 4) << "too small a space to rank";
    std::vector<int64_t> ks(static_cast<size_t>(rules->points));
    std::iota(ks.begin(), ks.end(), 0);
    std::shuffle(ks.begin() + 1, ks.end(), rng);
    ks.resize(std::min(ks.size(), sample));
    std::vector<double> predicted, simulated;
    double fastest = 0;
    for (int64_t k : ks) {
      const auto r = k == 0 ? rules : run_point(g, cfg, core, k);
      ASSERT_TRUE(r);
      predicted.push_back(r->predicted_ns);
      simulated.push_back(r->simulated_ns);
      worst_error = std::max(worst_error, std::abs(r->predicted_ns / r->simulated_ns - 1));
      fastest = fastest == 0 ? r->simulated_ns : std::min(fastest, r->simulated_ns);
    }
    const auto pick = run_point(g, cfg, core, -1);
    ASSERT_TRUE(pick);
    const double rho = spearman(predicted, simulated);
    rho_sum += rho;
    worst_rho = std::min(worst_rho, rho);
    std::printf(
        "%s attention L=%lld D=%lld H=%lld %s: %zu of %lld points, spearman %.3f; pick %.1f us, "
        "rules %.1f us, fastest sampled %.1f us\n",
        chip.c_str(), (long long)s.L, (long long)s.D, (long long)s.H, s.mask, ks.size(),
        (long long)rules->points, rho, pick->simulated_ns / 1e3, rules->simulated_ns / 1e3,
        fastest / 1e3);
    // The model's pick is never much slower than the rules' point, nor than the best sampled.
    EXPECT_LE(pick->simulated_ns, rules->simulated_ns * 1.05);
    EXPECT_LE(pick->simulated_ns, fastest * 1.25);
  }
  std::printf("%s: mean spearman %.3f, worst %.3f, worst relative error %.3f\n", chip.c_str(),
              rho_sum / double(shapes.size()), worst_rho, worst_error);
  EXPECT_GE(rho_sum / double(shapes.size()), 0.6);
}

// Lengths off the tile, each mask, 64-wide heads.
const std::vector<Shape> kShapes = {
    {1000, 256, 4, "seg"}, {1000, 256, 4, "causal"}, {700, 256, 4, "none"}, {1500, 512, 8, "seg"}};

TEST(AttentionScheduleOnChip, ModelRanksSampledPointsLikeTheSimulatorOnTrn2) {
  check_ranking("trn2", kShapes, 8);
}

// Points computed on the chip against the reference: a point past the last is the last.
class AttentionSchedulePoint
    : public ::testing::TestWithParam<std::tuple<std::string, int64_t, int64_t>> {};

TEST_P(AttentionSchedulePoint, MatchesTheReferenceOnTrn2) {
  const auto [mask, L, k] = GetParam();
  const Graph g = graph(attention(L, 256, 4, "fp32", mask));
  runtime::Config cfg = load("trn2");
  LoweringOptions o = cfg.compiler;
  o.attention_schedule = 0;
  auto r = compile_graph(g, cfg.chip.arch, GroupPolicy::whole, {}, o);
  ASSERT_TRUE(std::holds_alternative<CompiledGraph>(r)) << std::get<CompileError>(r).message();
  ASSERT_GE(std::get<CompiledGraph>(r).groups[0].attention_points, 4);
  o.attention_schedule = k;
  const std::string m = mask;
  const auto adjust = [&](sim::Core& device, std::map<std::string, HostTensor>& inputs) {
    if (m != "seg") return;
    std::vector<int32_t> ids(static_cast<size_t>(L));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(int64_t(i) / 90);
    test::set_ints(device, inputs, "seg", ids);
  };
  EXPECT_LT(run_on_chip(g, "trn2", GroupPolicy::whole, adjust, o).max_error, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Points, AttentionSchedulePoint,
    ::testing::Combine(::testing::Values(std::string("none"), std::string("causal"),
                                         std::string("seg")),
                       ::testing::Values(int64_t{300}, int64_t{420}),
                       // 10 (no mask, causal) and 11 (segment ids): the
                       // first two-pass point with S^T = K Q^T.
                       ::testing::Values(int64_t{-1}, int64_t{1}, int64_t{4}, int64_t{9},
                                         int64_t{10}, int64_t{11}, int64_t{1000})));

}  // namespace
}  // namespace wallsim::compiler_stub
