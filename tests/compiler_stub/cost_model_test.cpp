// The compile-cost model: one curve per profile, growing with nodes, instructions and spills.
#include "wallsim/compiler_stub/cost_model.h"

#include <gtest/gtest.h>

namespace wallsim::compiler_stub {
namespace {

TEST(CostModel, GrowsWithNodesInstructionsAndSpills) {
  CompileCostCurve c{100, 2, 1, 500, 10};
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, {0, 0, 0}), 100);
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, {10, 0, 0}), 120);
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, {10, 1000, 0}), 620);
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, {10, 1000, 3 << 20}), 650);
}

TEST(CostModel, NodeExponentAboveOneIsSuperlinear) {
  CompileCostCurve c{0, 1, 1.5, 0, 0};
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, {100, 0, 0}), 1000);
  EXPECT_GT(compile_latency_ms(c, {400, 0, 0}), 4 * compile_latency_ms(c, {100, 0, 0}));
}

TEST(CostModel, ProfilesAreOneCurveEach) {
  CompileCostConfig cfg;
  EXPECT_EQ(&cfg.active(), &cfg.neuron);
  cfg.profile = CompileProfile::xla;
  EXPECT_EQ(&cfg.active(), &cfg.xla);
  // The fitted figures (docs/CALIBRATION.md): the 9-node Neuron graph (wallsim's build: 5 ops,
  // 660 instructions) is about 10 s, and 136,843 XLA IR nodes take about 4 minutes.
  EXPECT_NEAR(compile_latency_ms(cfg.neuron, {5, 660, 0}), 9969, 100);
  EXPECT_NEAR(compile_latency_ms(cfg.xla, {136843, 0, 0}) / 60000, 4.0, 0.5);
}

TEST(CostModel, ConfigRoundTripsThroughTheParamReader) {
  base::Json j = base::Json::parse(R"({"profile": "xla", "xla": {"fixed_ms": 3}})");
  CompileCostConfig c;
  base::read_params(j, c, "runtime.compile_cost");
  EXPECT_EQ(c.profile, CompileProfile::xla);
  EXPECT_EQ(c.xla.fixed_ms, 3);
  EXPECT_EQ(base::write_params(c)["profile"], "xla");
  base::Json bad = base::Json::parse(R"({"profile": "gcc"})");
  try {
    base::read_params(bad, c, "runtime.compile_cost");
    FAIL();
  } catch (const base::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "runtime.compile_cost.profile: expected one of neuron, xla, got \"gcc\"");
  }
  // The old per-mode curves are gone: a config naming one is rejected, not ignored.
  base::Json old = base::Json::parse(R"({"neuron": {"per_op": {"fixed_ms": 3}}})");
  EXPECT_THROW(base::read_params(old, c, "runtime.compile_cost"), base::InputError);
}

}  // namespace
}  // namespace wallsim::compiler_stub
