// Compiled plans run functionally on the chip model and compared with the reference evaluator:
// the helpers the on-chip compiler tests share. One device per process.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>

#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/reference.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim::compiler_stub::test {

inline runtime::Config load(const std::string& name) {
  return runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/" + name + ".json");
}

inline Graph graph(const std::string& text) {
  Graph g = graph_from_json(base::Json::parse(text));
  infer_types(g);
  return g;
}

// Puts every graph input in the device's HBM with seeded random values (seeds from `seed`
// up, in node order) and returns the same values for the reference evaluator.
inline std::map<std::string, HostTensor> place_inputs(const Graph& g, sim::Core& device,
                                                      uint64_t seed) {
  std::map<std::string, HostTensor> inputs;
  for (const Node& n : g.nodes) {
    if (n.op != OpKind::input) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : n.type.dims) shape.push_back(d.size);
    auto& t = device.tensors().put(n.name, isa::MemSpace::hbm, n.type.dtype, shape);
    memory::fill_random(t, seed++);
    inputs[n.name] = HostTensor{shape, memory::to_floats(t)};
  }
  return inputs;
}

struct Outcome {
  double max_error = 0;   // worst |chip - reference| / max(1, max |reference|) per output
  sc_core::sc_time time;  // device time
  int64_t hbm_bytes = 0;  // read + written by the plans' DMA
  int64_t plans = 0;
};

// Sets int32 input `name` on the device and for the reference to `values`.
inline void set_ints(sim::Core& device, std::map<std::string, HostTensor>& inputs,
                     const std::string& name, const std::vector<int32_t>& values) {
  auto& t = *device.tensors().find(name);
  ASSERT_EQ(t.bytes.size(), 4 * values.size()) << name;
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  inputs[name].data.assign(values.begin(), values.end());
}
using Adjust = std::function<void(sim::Core&, std::map<std::string, HostTensor>&)>;

// Compiles `g`, runs it functionally on `config`, and compares every output with the reference.
// `adjust` may replace input values (ids that must be in range) before the run; `options` are the
// lowering's (the defaults unless a test sets one).
inline Outcome run_on_chip(const Graph& g, const std::string& config, GroupPolicy policy,
                           const Adjust& adjust = {}, const LoweringOptions& options = {}) {
  Outcome o;
  runtime::Config cfg = load(config);
  auto compiled = compile_graph(g, cfg.chip.arch, policy, {}, options);
  if (auto* err = std::get_if<CompileError>(&compiled)) {
    ADD_FAILURE() << err->message();
    return o;
  }
  const CompiledGraph& cg = std::get<CompiledGraph>(compiled);
  o.plans = static_cast<int64_t>(cg.plans.plans.size());
  sim::init_systemc();
  traces::StatsRegistry stats;
  sim::CoreOptions opts;
  opts.functional = true;
  opts.stats = &stats;
  sim::System system(cfg.chip, opts);
  sim::Core& device = system.core();
  std::map<std::string, HostTensor> inputs = place_inputs(g, device, 7);
  if (adjust) adjust(device, inputs);
  for (const isa::Plan& p : cg.plans.plans) {
    for (const isa::TensorDecl& t : p.tensors)
      device.tensors().put(t.name, t.space, t.dtype, t.shape);
    device.launch(p, {});
  }
  wallsim::sim::simulate();
  EXPECT_FALSE(device.error()) << *device.error();
  EXPECT_TRUE(device.all_drained());
  device.finalize();
  o.time = device.end_time();
  o.hbm_bytes =
      static_cast<int64_t>(stats.find_as<traces::Counter>("device.hbm.read_bytes")->value() +
                           stats.find_as<traces::Counter>("device.hbm.write_bytes")->value());
  auto ref = evaluate(g, inputs, {});
  for (int32_t id : g.outputs) {
    const auto* t = device.tensors().find(value_name(g, id));
    if (!t) {
      ADD_FAILURE() << "no output tensor " << value_name(g, id);
      continue;
    }
    std::vector<float> got = memory::to_floats(*t);
    const HostTensor& want = ref.at(id);
    EXPECT_EQ(got.size(), want.data.size());
    // Error relative to the output's largest magnitude: bf16 chains round differently from the
    // reference wherever sums are taken in another order, and cancellation near zero would make
    // a per-element relative error meaningless.
    double scale = 1, worst = 0;
    for (float w : want.data) scale = std::max(scale, double(std::abs(w)));
    for (size_t i = 0; i < std::min(got.size(), want.data.size()); ++i) {
      worst = std::max(worst, std::abs(double(got[i]) - want.data[i]) / scale);
    }
    if (std::getenv("WALLSIM_DEBUG_OUTPUTS"))
      std::cerr << "output " << id << " error " << worst << "\n";
    o.max_error = std::max(o.max_error, worst);
  }
  return o;
}

// Launches `plans` on `core` in timing-only mode, simulates, and returns the time from the
// first plan's start to the last one's end in ns (the schedule tests' simulated time).
inline double simulate_plans_ns(sim::Core& core, isa::PlanSequence&& sequence) {
  auto plans = std::make_shared<isa::PlanSequence>(std::move(sequence));
  const size_t first = core.launch_count();
  for (const isa::Plan& p : plans->plans) core.launch(p, {}, {}, plans);
  sim::simulate();
  EXPECT_FALSE(core.error());
  EXPECT_TRUE(core.all_drained());
  const auto a = core.launch_times(first), b = core.launch_times(core.launch_count() - 1);
  core.retire_drained();
  return (b.end - a.start).to_seconds() * 1e9;
}

}  // namespace wallsim::compiler_stub::test
