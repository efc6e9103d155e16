// The compile-cost model: a linear curve per profile and kind, read from the config.
#include "wallsim/compiler_stub/cost_model.h"

#include <gtest/gtest.h>

namespace wallsim::compiler_stub {
namespace {

TEST(CostModel, LinearInNodesAndInstructions) {
  CompileCostCurve c{100, 2, 500};
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, 0, 0), 100);
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, 10, 0), 120);
  EXPECT_DOUBLE_EQ(compile_latency_ms(c, 10, 1000), 620);
}

TEST(CostModel, ProfilesSelectCurvesByKind) {
  CompileCostConfig cfg;
  EXPECT_EQ(&cfg.active(), &cfg.neuron);
  cfg.profile = CompileProfile::xla;
  EXPECT_EQ(&cfg.active(), &cfg.xla);
  EXPECT_LT(cfg.xla.curve(CompileKind::micro_graph).fixed_ms,
            cfg.xla.curve(CompileKind::whole_graph).fixed_ms);
  EXPECT_EQ(&cfg.neuron.curve(CompileKind::per_op), &cfg.neuron.per_op);
}

TEST(CostModel, ConfigRoundTripsThroughTheParamReader) {
  base::Json j = base::Json::parse(R"({"profile": "xla", "xla": {"per_op": {"fixed_ms": 3}}})");
  CompileCostConfig c;
  base::read_params(j, c, "runtime.compile_cost");
  EXPECT_EQ(c.profile, CompileProfile::xla);
  EXPECT_EQ(c.xla.per_op.fixed_ms, 3);
  EXPECT_EQ(base::write_params(c)["profile"], "xla");
  base::Json bad = base::Json::parse(R"({"profile": "gcc"})");
  try {
    base::read_params(bad, c, "runtime.compile_cost");
    FAIL();
  } catch (const base::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "runtime.compile_cost.profile: expected one of neuron, xla, got \"gcc\"");
  }
}

}  // namespace
}  // namespace wallsim::compiler_stub
