// `wallsim compile GRAPH --config C --out PLAN [--group all|per-op]`.
#include <algorithm>
#include <iostream>

#include "commands.h"
#include "wallsim/base/file_write.h"
#include "wallsim/base/host_memory.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/estimate.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/schedule_tuner.h"

namespace wallsim::cli {

void add_compile_command(CLI::App& app) {
  struct Args {
    std::string graph;
    std::string config;
    std::vector<std::string> overrides;
    std::string out;
    std::string group = "all";
    bool no_memory_check = false;
    bool tune = false;
    std::string tuning_cache;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("compile", "lower an op graph (JSON) to a plan file");
  cmd->add_option("graph", a->graph, "graph file (JSON)")->required();
  cmd->add_option("--config,-c", a->config, "chip config (JSON)")->required();
  cmd->add_option("--set", a->overrides, "override a config value: path.to.key=value");
  cmd->add_option("--out,-o", a->out, "plan file to write")->required();
  cmd->add_option("--group", a->group, "all: one plan for the graph; per-op: one plan per op")
      ->check(CLI::IsMember({"all", "per-op"}));
  cmd->add_flag("--no-memory-check", a->no_memory_check,
                "compile even when the estimated host memory exceeds what is available");
  cmd->add_flag("--tune", a->tune,
                "simulate the cost model's best schedule points of each matmul and keep the "
                "fastest (compiler.tune.enabled=1)");
  cmd->add_option("--tuning-cache", a->tuning_cache,
                  "tuning cache file: entries reused; with --tune, new ones written back "
                  "(compiler.tune.cache)");
  cmd->callback([a] {
    std::vector<std::string> overrides = a->overrides;
    if (a->tune) overrides.push_back("compiler.tune.enabled=1");
    if (!a->tuning_cache.empty()) overrides.push_back("compiler.tune.cache=" + a->tuning_cache);
    runtime::Config cfg = runtime::load_config(a->config, overrides);
    compiler_stub::Graph g = compiler_stub::read_graph_file(a->graph);
    base::check_output_file(a->out);  // a folder or a FIFO is refused before the compile
    try {
      compiler_stub::infer_types(g);
    } catch (const base::InputError& e) {
      throw base::InputError(a->graph, e.what());  // validation errors name the file too
    }
    if (!a->no_memory_check) {
      // Before lowering: a lower bound on the plans' instructions, in host bytes.
      std::vector<int32_t> ops;
      for (const compiler_stub::Node& n : g.nodes) {
        if (n.op != compiler_stub::OpKind::input) ops.push_back(n.id);
      }
      // (A graph over HBM is refused by the compiler first, with the HBM figures.)
      const int64_t need = compiler_stub::min_compile_host_bytes(g, ops, cfg.chip.arch);
      if (need >= base::kUncheckedHostBytes &&
          compiler_stub::min_hbm_bytes(g, ops) <= cfg.chip.arch.hbm.bytes) {
        base::check_host_memory(
            need,
            a->graph + " (at least " +
                std::to_string(compiler_stub::min_plan_instructions(g, ops, cfg.chip.arch)) +
                " instructions)",
            "--no-memory-check");
      }
    }
    const auto policy = a->group == "per-op" ? compiler_stub::GroupPolicy::per_op
                                             : compiler_stub::GroupPolicy::whole;
    compiler_stub::LoweringOptions options = cfg.compiler;
    const auto tuning = runtime::setup_tuning(cfg, options, true);
    auto result = compiler_stub::compile_graph(g, cfg.chip.arch, policy, {}, options);
    if (tuning) tuning->save();
    if (auto* err = std::get_if<compiler_stub::CompileError>(&result)) {
      throw base::InputError(a->graph, "cannot compile: " + err->message());
    }
    const auto& compiled = std::get<compiler_stub::CompiledGraph>(result);
    isa::write_plan_file(compiled.plans, a->out);
    int64_t instructions = 0, in = 0, out = 0, spills = 0, spill_bytes = 0, sbuf_peak = 0;
    for (const auto& s : compiled.groups) {
      instructions += s.instructions;
      in += s.hbm_bytes_in;
      out += s.hbm_bytes_out;
      spills += s.spills;
      spill_bytes += s.spill_bytes;
      sbuf_peak = std::max(sbuf_peak, s.sbuf_peak_bytes);
    }
    std::cout << a->out << ": " << compiled.plans.plans.size() << " plan(s), " << instructions
              << " instructions, " << in << " bytes in and " << out
              << " bytes out of HBM; compiler_stub took " << compiled.compile_wall_seconds
              << " s\n";
    std::cout << "  SBUF peak " << sbuf_peak << " bytes per partition; " << spills
              << " value(s) spilled to HBM (" << spill_bytes << " bytes written)\n";
    if (tuning) {
      // The compile latency below models the production compiler alone: tuning's device time
      // is a separate, offline cost (docs/COMPILER.md, Measured tuning).
      std::cout << "  " << tuning->summary() << "; " << tuning->tuner->stats().wall_seconds
                << " s\n";
    }
    // What the emulated production compiler would take, under each profile.
    const auto& costs = cfg.runtime.compile_cost;
    for (const auto* p : {&costs.neuron, &costs.xla}) {
      double ms = 0;
      for (const auto& s : compiled.groups) {
        ms += compiler_stub::compile_latency_ms(*p, {s.nodes, s.instructions, s.spill_bytes});
      }
      std::cout << "  modelled compile latency (" << (p == &costs.neuron ? "neuron" : "xla")
                << " profile): " << ms << " ms\n";
    }
  });
}

}  // namespace wallsim::cli
