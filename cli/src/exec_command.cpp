// `wallsim exec PLAN --config C [--functional] [--inputs DIR] [--scalar n=v]... [--out DIR]`.
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "wallsim/base/host_memory.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"

namespace wallsim::cli {
namespace {

// Every (chip, core) of the system, last to first.
std::vector<std::pair<int, int>> reversed_cores(const sim::SystemConfig& s) {
  std::vector<std::pair<int, int>> out;
  for (int c = static_cast<int>(s.chips()) - 1; c >= 0; --c) {
    for (int k = static_cast<int>(s.chip.cores) - 1; k >= 0; --k) out.emplace_back(c, k);
  }
  return out;
}

struct ExecArgs {
  std::string plan;
  std::string config;
  std::vector<std::string> overrides;
  bool functional = false;
  std::string inputs;
  std::vector<std::string> scalars;
  std::string out = "out/exec";
  std::string trace_level = "instructions";
  std::string trace_window;
  bool csv = false;
  bool no_memory_check = false;
  bool reverse_elaboration = false;
};

// Host bytes per simulated instruction (issue 20: ~6.6 KB measured on a 256^3 GEMM's plan,
// instruction records, timing state and trace events).
constexpr int64_t kHostBytesPerInstruction = 6600;

// What the simulation will hold at once, estimated from the plan and the chip before it starts.
int64_t memory_estimate(const isa::PlanSequence& seq, const sim::ChipConfig& chip,
                        bool functional) {
  int64_t need = 0;
  auto add = [&need](int64_t a, int64_t b) {
    int64_t p = 0;
    if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(need, p, &need))
      need = INT64_MAX;
  };
  for (const auto& p : seq.plans) add(p.instruction_count(), kHostBytesPerInstruction);
  if (functional) {
    const auto& arch = chip.arch;
    add(arch.sbuf.partitions, arch.sbuf.bytes_per_partition);
    add(arch.psum.partitions, arch.psum.bytes_per_partition);
    for (const auto& p : seq.plans) add(p.hbm_bytes(), 1);
  }
  return need;
}

std::pair<std::string, int64_t> parse_scalar(const std::string& s) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0)
    throw base::InputError("--scalar " + s, "expected name=value");
  const std::string value = s.substr(eq + 1);
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size())
    throw base::InputError("--scalar " + s, "value is not an integer");
  return {s.substr(0, eq), v};
}

}  // namespace

void add_exec_command(CLI::App& app) {
  auto a = std::make_shared<ExecArgs>();
  CLI::App* cmd = app.add_subcommand("exec", "run a plan file on the simulated chip");
  cmd->add_option("plan", a->plan, "plan file (JSON): one plan or a sequence")->required();
  cmd->add_option("--config,-c", a->config, "chip config (JSON)")->required();
  cmd->add_option("--set", a->overrides, "override a config value: path.to.key=value");
  cmd->add_flag("--functional", a->functional, "compute real values (default: timing only)");
  cmd->add_option("--inputs", a->inputs,
                  "directory of <tensor>.npy inputs (default: seeded random)");
  cmd->add_option("--scalar", a->scalars, "bind a run-time scalar: name=value (repeatable)");
  add_output_options(cmd, &a->out, &a->trace_level, &a->trace_window, &a->csv);
  cmd->add_flag("--reverse-elaboration", a->reverse_elaboration,
                "a plan file that places plans on cores: elaborate the cores last to first (a "
                "determinism check: the outputs must not change)");
  cmd->add_flag("--no-memory-check", a->no_memory_check,
                "run even when the estimated host memory exceeds what is available");
  cmd->callback([a] {
    runtime::Config cfg = runtime::load_config(a->config, a->overrides);
    isa::PlanSequence seq = isa::read_plan_file(a->plan);
    std::vector<std::string> findings;
    for (const auto& d : isa::verify(seq, cfg.chip.arch)) findings.push_back(d.to_string());
    refuse_unverified(a->plan, findings, false);

    if (!a->inputs.empty() && !a->functional) {
      throw base::InputError("--inputs", "input values are only read with --functional");
    }
    if (!a->no_memory_check) {
      base::check_host_memory(memory_estimate(seq, cfg.chip, a->functional), a->plan,
                              "--no-memory-check");
    }
    sim::ExecOptions o;
    o.functional = a->functional;
    o.inputs_dir = a->inputs;
    o.seed = static_cast<uint64_t>(cfg.runtime.seed);
    for (const auto& s : a->scalars) {
      o.scalars.push_back(parse_scalar(s));
      for (size_t k = 0; k + 1 < o.scalars.size(); ++k) {
        if (o.scalars[k].first == o.scalars.back().first)
          throw base::InputError("--scalar " + s,
                                 "the scalar is already bound by an earlier --scalar");
      }
    }
    o.trace_level = a->trace_level == "none"    ? engines::TraceLevel::none
                    : a->trace_level == "plans" ? engines::TraceLevel::plans
                                                : engines::TraceLevel::instructions;
    if (!a->trace_window.empty()) o.trace_window_ns = parse_window(a->trace_window);
    o.instruction_csv = a->csv;
    sim::ExecSummary s =
        seq.cores.empty()
            ? sim::exec_plans(cfg.chip, runtime::to_json(cfg), seq, o, a->out)
            : sim::exec_system(cfg.chip, cfg.system, runtime::to_json(cfg), seq, o, a->out,
                               a->reverse_elaboration ? reversed_cores(cfg.system)
                                                      : std::vector<std::pair<int, int>>{});
    std::cout << a->out << ": " << seq.plans.size() << " plan(s), " << s.instructions
              << " instructions, " << s.time_ns << " ns simulated in " << s.wall_seconds << " s\n";
  });
}

}  // namespace wallsim::cli
