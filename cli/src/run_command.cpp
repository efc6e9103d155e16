// `wallsim run --config C --workload SPEC --mode MODE (runtime::all_modes())
//  [--steps N] [--functional] [--out DIR] [--set k=v]`.
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "wallsim/base/host_memory.h"
#include "wallsim/driver/run.h"
#include "wallsim/runtime/config.h"

namespace wallsim::cli {
namespace {

struct RunArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string workload = "transformer";
  std::string mode = std::string(runtime::default_mode().name());
  int64_t steps = 0;  // read only when --steps is given
  bool functional = false;
  std::string out = "out/run";
  std::string trace_level = "plans";
  std::string trace_window;
  bool csv = false;
  int64_t plan_memory_mib = 2048;
  double progress_seconds = 10;
  bool no_memory_check = false;
  std::vector<std::string> bounds;  // --bound NAME<=MAX
  std::string chakra;               // --chakra DIR: Chakra execution traces
  std::string fold = "auto";        // --fold auto|off: SPMD folding
  int fold_test_unbalance = 0;      // --fold-test-unbalance CHIP (tests only; 0: none)
};

// What a run allocates before its first step, from the config alone: a functional run's SBUF
// and PSUM stores (the device holds them whole). The plans' instructions are not known until
// the workload's ops are recorded: the session checks each group before lowering it
// (runtime::SessionOptions::memory_check).
int64_t memory_estimate(const runtime::Config& cfg, bool functional) {
  if (!functional) return 0;
  const auto& arch = cfg.chip.arch;
  int64_t sbuf = 0, psum = 0, need = 0;
  if (__builtin_mul_overflow(arch.sbuf.partitions, arch.sbuf.bytes_per_partition, &sbuf) ||
      __builtin_mul_overflow(arch.psum.partitions, arch.psum.bytes_per_partition, &psum) ||
      __builtin_add_overflow(sbuf, psum, &need))
    return INT64_MAX;
  return need;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  std::string workloads;
  for (const auto& [name, doc] : workloads::workload_list()) workloads += "\n  " + doc;
  CLI::App* cmd = app.add_subcommand(
      "run", "run a workload under one execution mode, host and device in one simulation");
  cmd->add_option("--config,-c", a->config, "chip and runtime config (JSON)")->required();
  cmd->add_option("--set", a->overrides, "override a config value: path.to.key=value");
  cmd->add_option("--workload,-w", a->workload,
                  "NAME or NAME:key=value,... Workloads:" + workloads);
  cmd->add_option("--mode,-m", a->mode, "execution mode:" + runtime::mode_help())
      ->check(CLI::IsMember(runtime::mode_names()));
  CLI::Option* steps =
      cmd->add_option("--steps", a->steps, "steps to run (default: the workload's)");
  cmd->add_flag("--functional", a->functional, "compute real values (default: timing only)");
  add_output_options(cmd, &a->out, &a->trace_level, &a->trace_window, &a->csv);
  cmd->add_option("--plan-memory", a->plan_memory_mib,
                  "MiB of compiled plans the simulator keeps for cache hits; beyond it plans are "
                  "rebuilt on their next hit (results are the same, only run time changes)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--progress", a->progress_seconds,
                  "a progress line on stderr after a step, at most every SECONDS of real time "
                  "(0: none)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--bound", a->bounds,
                  "run the program's named dim NAME bounded: NAME<=MAX (repeatable; the "
                  "program workload's bound= parameter)");
  cmd->add_option("--chakra", a->chakra,
                  "also write each rank's Chakra execution trace (DIR/<workload>.<rank>.et) and "
                  "ASTRA-sim configs into DIR (docs/CHAKRA.md)");
  cmd->add_option("--fold", a->fold,
                  "SPMD folding: auto (the default) simulates only rank 0 of a run whose ranks "
                  "are one class (on one chip or filling every chip) and gives the others its "
                  "figures; off simulates every rank (docs/SPMD_FOLDING.md)")
      ->check(CLI::IsMember({"auto", "off"}));
  // Hidden (no group): tests make a folded run's chips differ to see its exactness check fire.
  cmd->add_option("--fold-test-unbalance", a->fold_test_unbalance,
                  "tests only: load chip CHIP's HBM with a transfer the other chips do not see")
      ->group("");
  cmd->add_flag("--no-memory-check", a->no_memory_check,
                "run even when the estimated host memory exceeds what is available");
  auto tuning_cache = std::make_shared<std::string>();
  cmd->add_option("--tuning-cache", *tuning_cache,
                  "reuse this tuning cache's schedule points (compiler.tune.cache; a run measures "
                  "nothing: tune with `wallsim compile --tune`)");
  cmd->callback([a, steps, tuning_cache] {
    if (!tuning_cache->empty()) a->overrides.push_back("compiler.tune.cache=" + *tuning_cache);
    runtime::Config cfg = runtime::load_config(a->config, a->overrides);
    if (!a->no_memory_check) {
      base::check_host_memory(memory_estimate(cfg, a->functional), "--functional",
                              "--no-memory-check");
    }
    driver::RunOptions o;
    o.mode = &runtime::mode_named(a->mode);
    if (steps->count() > 0) {
      if (a->steps < 1) {
        throw base::InputError("--steps " + std::to_string(a->steps), "must be at least 1");
      }
      o.steps = a->steps;
    }
    o.functional = a->functional;
    o.plan_memory_bytes = a->plan_memory_mib << 20;
    o.progress_seconds = a->progress_seconds;
    o.memory_check = !a->no_memory_check;
    o.trace_level = a->trace_level == "none"    ? engines::TraceLevel::none
                    : a->trace_level == "plans" ? engines::TraceLevel::plans
                                                : engines::TraceLevel::instructions;
    if (!a->trace_window.empty()) o.trace_window_ns = parse_window(a->trace_window);
    o.instruction_csv = a->csv;
    o.chakra_dir = a->chakra;
    o.fold = a->fold == "auto" ? driver::FoldMode::automatic : driver::FoldMode::off;
    if (a->fold_test_unbalance != 0) o.fold_test_unbalance = a->fold_test_unbalance;
    workloads::WorkloadSpec spec = workloads::parse_spec(a->workload);
    if (!a->bounds.empty()) {
      if (spec.params.count("bound"))
        throw base::InputError("--bound", "the workload spec already sets bound=");
      std::string joined;
      for (const std::string& b : a->bounds) joined += (joined.empty() ? "" : ";") + b;
      spec.params["bound"] = joined;
    }
    auto r = driver::run_workload(cfg, runtime::to_json(cfg), spec, o, a->out);
    std::cout << a->out << ": " << a->workload << " under " << a->mode << ", " << r.steps
              << " step(s), " << r.wall_ns / 1e6 << " ms simulated (" << r.totals.compiles
              << " compiles, " << r.totals.cache_hits << " cache hits) in " << r.sim_wall_seconds
              << " s\n";
  });
}

}  // namespace wallsim::cli
