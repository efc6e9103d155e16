// `wallsim plan check|disasm|format`.
#include <iostream>

#include "commands.h"
#include "wallsim/isa/disasm.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/runtime/config.h"

namespace wallsim::cli {
namespace {

struct PlanArgs {
  std::string plan;
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
};

}  // namespace

void add_plan_commands(CLI::App& app) {
  CLI::App* plan = app.add_subcommand("plan", "check, disassemble and normalise plan files");
  plan->require_subcommand(1);

  auto check_args = std::make_shared<PlanArgs>();
  auto* check = plan->add_subcommand("check", "verify a plan file against a chip config");
  check->add_option("plan", check_args->plan, "plan file (JSON)")->required();
  check->add_option("--config,-c", check_args->config, "chip config (JSON)")->required();
  check->add_option("--set", check_args->overrides, "override a config value: path=value");
  check->callback([check_args] {
    runtime::Config cfg = runtime::load_config(check_args->config, check_args->overrides);
    isa::PlanSequence seq = isa::read_plan_file(check_args->plan);
    auto diags = isa::verify(seq, cfg.chip.arch);
    for (const auto& d : diags)
      std::cerr << "wallsim: " << check_args->plan << ": " << d.to_string() << "\n";
    if (!diags.empty()) throw Exit{kExitBadInput};
    int64_t n = 0;
    for (const auto& p : seq.plans) n += p.instruction_count();
    std::cout << check_args->plan << ": ok (" << seq.plans.size() << " plan"
              << (seq.plans.size() == 1 ? "" : "s") << ", " << n << " instructions, config "
              << cfg.chip.name << ")\n";
  });

  auto disasm_args = std::make_shared<PlanArgs>();
  auto* disasm = plan->add_subcommand("disasm", "print one assembler-like line per instruction");
  disasm->add_option("plan", disasm_args->plan, "plan file (JSON)")->required();
  disasm->callback(
      [disasm_args] { std::cout << isa::disassemble(isa::read_plan_file(disasm_args->plan)); });

  auto format_args = std::make_shared<PlanArgs>();
  auto* format = plan->add_subcommand("format", "rewrite a plan file in canonical form");
  format->add_option("plan", format_args->plan, "plan file (JSON)")->required();
  format->add_option("--out,-o", format_args->out, "output file (default: standard output)");
  format->callback([format_args] {
    isa::PlanSequence seq = isa::read_plan_file(format_args->plan);
    if (format_args->out.empty()) {
      std::cout << isa::format_json(isa::to_json(seq));
    } else {
      isa::write_plan_file(seq, format_args->out);
    }
  });
}

}  // namespace wallsim::cli
