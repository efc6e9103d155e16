// `wallsim plan check|disasm|format`.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "commands.h"
#include "wallsim/dma/dma_route.h"
#include "wallsim/isa/disasm.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"

namespace wallsim::cli {
namespace {

struct PlanArgs {
  std::string plan;
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
  bool summary = false;
  bool all = false;  // plan check: every verifier finding, not only the first
};

// Plan quality from the instructions and the config's DMA/HBM cost model alone (no
// simulation): per plan, instructions per engine, tensor MACs, HBM bytes, bytes per DMA engine
// with their spread, and the floor each resource puts on the plan's time; the largest bounds it.
std::string plan_summary(const isa::PlanSequence& seq, const runtime::Config& cfg) {
  const auto& t = cfg.chip.timing;
  const auto& arch = cfg.chip.arch;
  std::ostringstream o;
  o << std::fixed << std::setprecision(2);
  for (const auto& p : seq.plans) {
    std::map<std::string, int64_t> per_engine;
    std::vector<int64_t> dma_bytes(static_cast<size_t>(arch.dma.engines), 0);
    std::vector<double> dma_load(dma_bytes.size(), 0.0);
    double hbm_load = 0, macs = 0, tensor_cycles = 0;
    int64_t hbm_read = 0, hbm_write = 0;
    for (const auto& s : p.streams) {
      per_engine[std::string(isa::name_of(s.engine))] +=
          static_cast<int64_t>(s.instructions.size());
      for (const auto& in : s.instructions) {
        if (in.op == isa::Opcode::matmul) {
          const double k = in.src[0].partitions, m = double(in.src[0].free_elements());
          const double n = double(in.src[1].free_elements());
          macs += k * m * n;
          tensor_cycles +=
              n * (isa::dtype_bytes(in.src[1].dtype) == 4 ? t.tensor.fp32_slowdown : 1);
        }
        if (s.engine != isa::Engine::dma || s.dma_engine < 0 ||
            s.dma_engine >= static_cast<int32_t>(dma_bytes.size()))
          continue;
        const auto c = dma::descriptor_cost(in, t.dma, t.hbm, t.host_link);
        dma_bytes[static_cast<size_t>(s.dma_engine)] += c.bytes;
        dma_load[static_cast<size_t>(s.dma_engine)] += double(c.bytes) * c.engine_weight;
        hbm_load += double(c.bytes) * c.hbm_weight;
        hbm_read += c.hbm_read_bytes;
        hbm_write += c.hbm_write_bytes;
      }
    }
    int64_t total = 0, largest = 0;
    for (int64_t b : dma_bytes) total += b, largest = std::max(largest, b);
    const double mean = double(total) / double(dma_bytes.size());
    const double hbm_us = hbm_load / (t.hbm.bandwidth_gb_per_s * 1e3);
    const double dma_us =
        *std::max_element(dma_load.begin(), dma_load.end()) / (t.dma.bandwidth_gb_per_s * 1e3);
    const double tensor_us = tensor_cycles / t.tensor.freq_mhz;
    const double bound = std::max({hbm_us, dma_us, tensor_us});
    const char* by = bound == hbm_us ? "hbm" : bound == dma_us ? "a dma engine" : "tensor";
    o << "plan " << p.name << ": " << p.instruction_count() << " instructions (";
    bool first = true;
    for (const auto& [e, n] : per_engine) o << (first ? "" : ", ") << e << " " << n, first = false;
    o << ")\n  hbm read " << hbm_read << " B, written " << hbm_write << " B; tensor " << macs
      << " MACs\n  bytes per dma engine:";
    for (int64_t b : dma_bytes) o << " " << b;
    o << "\n  dma engines used "
      << std::count_if(dma_bytes.begin(), dma_bytes.end(), [](int64_t b) { return b > 0; })
      << " of " << dma_bytes.size() << ", largest/mean " << (mean > 0 ? largest / mean : 0.0)
      << "\n  floors (us): hbm " << hbm_us << ", busiest dma engine " << dma_us << ", tensor "
      << tensor_us << "; bound by " << by << " (" << bound << " us)";
    if (bound > 0) {
      o << ": at the bound, "
        << 100.0 * (double(hbm_read + hbm_write) / (bound * 1e3)) / t.hbm.bandwidth_gb_per_s
        << " % of hbm bandwidth and " << 100.0 * tensor_us / bound << " % of tensor time";
    }
    o << "\n";
  }
  return o.str();
}

}  // namespace

void refuse_unverified(const std::string& plan, const std::vector<std::string>& findings,
                       bool all) {
  if (findings.empty()) return;
  if (all) {
    for (const std::string& f : findings) std::cerr << "wallsim: " << plan << ": " << f << "\n";
  } else {
    std::cerr << "wallsim: " << plan << ": " << findings.front();
    if (findings.size() > 1) {
      std::cerr << " (and " << findings.size() - 1 << " more finding"
                << (findings.size() == 2 ? "" : "s") << ": wallsim plan check --all lists them)";
    }
    std::cerr << "\n";
  }
  throw Exit{kExitBadInput};
}

void add_plan_commands(CLI::App& app) {
  CLI::App* plan = app.add_subcommand("plan", "check, disassemble and normalise plan files");
  plan->require_subcommand(1);

  auto check_args = std::make_shared<PlanArgs>();
  auto* check = plan->add_subcommand("check", "verify a plan file against a chip config");
  check->add_option("plan", check_args->plan, "plan file (JSON)")->required();
  check->add_option("--config,-c", check_args->config, "chip config (JSON)")->required();
  check->add_option("--set", check_args->overrides, "override a config value: path=value");
  check->add_flag("--all", check_args->all,
                  "list every verifier finding, one line each (default: the first and a count)");
  check->callback([check_args] {
    runtime::Config cfg = runtime::load_config(check_args->config, check_args->overrides);
    isa::PlanSequence seq = isa::read_plan_file(check_args->plan);
    std::vector<std::string> findings;
    for (const auto& d : isa::verify(seq, cfg.chip.arch)) findings.push_back(d.to_string());
    refuse_unverified(check_args->plan, findings, check_args->all);
    sim::check_placement(seq, cfg.system);
    int64_t n = 0;
    for (const auto& p : seq.plans) n += p.instruction_count();
    std::cout << check_args->plan << ": ok (" << seq.plans.size() << " plan"
              << (seq.plans.size() == 1 ? "" : "s") << ", " << n << " instructions, config "
              << cfg.chip.name << ")\n";
  });

  auto disasm_args = std::make_shared<PlanArgs>();
  auto* disasm = plan->add_subcommand("disasm", "print one assembler-like line per instruction");
  disasm->add_option("plan", disasm_args->plan, "plan file (JSON)")->required();
  disasm->add_flag("--summary", disasm_args->summary,
                   "print plan quality instead: instructions per engine, HBM bytes, bytes per "
                   "DMA engine and the resource floor that bounds each plan (needs --config)");
  disasm->add_option("--config,-c", disasm_args->config, "chip config (JSON), for --summary");
  disasm->add_option("--set", disasm_args->overrides, "override a config value: path=value");
  disasm->callback([disasm_args] {
    const isa::PlanSequence seq = isa::read_plan_file(disasm_args->plan);
    if (!disasm_args->summary) {
      std::cout << isa::disassemble(seq);
      return;
    }
    if (disasm_args->config.empty()) throw base::InputError("--summary", "needs --config");
    std::cout << plan_summary(seq,
                              runtime::load_config(disasm_args->config, disasm_args->overrides));
  });

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
