// `wallsim config validate|dump|schema|keys|summary`.
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/runtime/config.h"

namespace wallsim::cli {
namespace {

struct ConfigArgs {
  std::string config;
  std::vector<std::string> overrides;
};

void add_config_args(CLI::App* cmd, ConfigArgs& a) {
  cmd->add_option("--config,-c", a.config, "chip config (JSON)")->required();
  cmd->add_option("--set", a.overrides, "override one value: path.to.key=value (repeatable)");
}

runtime::Config load(const ConfigArgs& a) { return runtime::load_config(a.config, a.overrides); }

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string kib(int64_t bytes) {
  if (bytes % (1 << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " B";
}

void print_summary(const runtime::Config& c) {
  const auto& a = c.chip.arch;
  const auto& t = c.chip.timing;
  const double peak = sim::peak_tensor_flops(c.chip);  // FLOP/s
  double dma_total = t.dma.bandwidth_gb_per_s * a.dma.engines;
  std::cout << "chip " << c.chip.name << "\n"
            << "  tensor engine  " << a.tensor.rows << " x " << a.tensor.cols << " array @ "
            << fixed(t.tensor.freq_mhz, 0) << " MHz: peak " << fixed(peak / 1e12, 1)
            << " TFLOP/s bf16, " << fixed(peak / t.tensor.fp32_slowdown / 1e12, 1)
            << " fp32; moving tile up to " << a.tensor.moving_free_max << "\n"
            << "  vector engine  " << a.sbuf.partitions << " lanes @ "
            << fixed(t.vector.freq_mhz, 0) << " MHz; scalar engine " << a.sbuf.partitions
            << " lanes @ " << fixed(t.scalar.freq_mhz, 0) << " MHz\n"
            << "  SBUF           " << a.sbuf.partitions << " partitions x "
            << kib(a.sbuf.bytes_per_partition) << " = "
            << kib(a.sbuf.partitions * a.sbuf.bytes_per_partition) << "\n"
            << "  PSUM           " << a.psum.partitions << " partitions x "
            << kib(a.psum.bytes_per_partition) << " = "
            << kib(a.psum.partitions * a.psum.bytes_per_partition) << " ("
            << a.psum.bytes_per_partition / a.psum.bank_bytes << " banks of "
            << kib(a.psum.bank_bytes) << ")\n"
            << "  HBM            " << kib(a.hbm.bytes) << ", " << fixed(t.hbm.bandwidth_gb_per_s, 1)
            << " GB/s, " << t.hbm.latency_ns << " ns\n"
            << "  DMA            " << a.dma.engines << " engines x "
            << fixed(t.dma.bandwidth_gb_per_s, 2) << " GB/s = " << fixed(dma_total, 1)
            << " GB/s aggregate" << (dma_total > t.hbm.bandwidth_gb_per_s ? " (HBM-bound)" : "")
            << "; " << t.dma.descriptor_issue_ns << " ns per descriptor"
            << (t.dma.issue_overlaps_transfer && t.dma.descriptor_issue_ns > 0
                    ? ", generated during the previous transfer"
                    : "")
            << "\n"
            << "  host link      " << fixed(t.host_link.bandwidth_gb_per_s, 1) << " GB/s, "
            << t.host_link.latency_ns << " ns\n"
            << "  plan launch    " << t.launch.switch_ns << " ns switch + "
            << t.launch.semaphore_reset_ns << " ns semaphore reset + "
            << t.launch.bytes_per_instruction << " B/instruction fetched from HBM (+ "
            << t.hbm.latency_ns << " ns latency)\n";
  const sim::SystemConfig& y = c.system;
  const auto& topo = y.topology;
  const int torus_dims = (topo.torus_x > 1) + (topo.torus_y > 1);
  std::cout << "system " << y.chips() << " chip" << (y.chips() == 1 ? "" : "s") << " ("
            << topo.instances << " instance" << (topo.instances == 1 ? "" : "s") << " of "
            << topo.torus_x << " x " << topo.torus_y << " torus) x " << y.chip.cores << " core"
            << (y.chip.cores == 1 ? "" : "s") << " = " << y.cores() << " cores\n"
            << "  chip HBM       " << kib(y.chip.hbm_bytes) << ", "
            << fixed(y.chip.hbm_bandwidth_gb_per_s, 1) << " GB/s shared by its cores (the "
            << "one-core view above has 1/" << y.chip.cores << ")\n"
            << "  NeuronLink     " << fixed(y.links.neuronlink.bandwidth_gb_per_s, 1)
            << " GB/s per direction, " << y.links.neuronlink.latency_ns << " ns per hop; "
            << 2 * torus_dims << " links per chip\n";
  if (topo.instances > 1) {
    if (topo.instance_ring) {
      std::cout << "  instance ring  " << fixed(y.links.instance_ring.bandwidth_gb_per_s, 1)
                << " GB/s per direction, " << y.links.instance_ring.latency_ns << " ns per hop\n";
    } else {
      std::cout << "  EFA            " << fixed(y.links.efa.bandwidth_gb_per_s, 1)
                << " GB/s per NIC and direction, one NIC per chip, " << y.links.efa.latency_ns
                << " ns per route\n";
    }
  }
}

}  // namespace

void add_config_commands(CLI::App& app) {
  CLI::App* config = app.add_subcommand("config", "check, show and describe chip configs");
  config->require_subcommand(1);

  auto* validate = config->add_subcommand("validate", "check config files; one line per file");
  auto files = std::make_shared<std::vector<std::string>>();
  validate->add_option("files", *files, "config files")->required();
  validate->callback([files] {
    int bad = 0;
    for (const auto& f : *files) {
      try {
        runtime::load_config(f);
        std::cout << f << ": ok\n";
      } catch (const base::InputError& e) {
        std::cerr << "wallsim: " << e.what() << "\n";
        ++bad;
      }
    }
    if (bad) throw Exit{kExitBadInput};
  });

  auto dump_args = std::make_shared<ConfigArgs>();
  auto* dump = config->add_subcommand("dump", "print the resolved config, every default filled in");
  add_config_args(dump, *dump_args);
  dump->callback([dump_args] { std::cout << runtime::to_json(load(*dump_args)).dump(2) << "\n"; });

  auto* schema = config->add_subcommand("schema", "print the JSON Schema of config files");
  schema->callback([] { std::cout << runtime::config_schema().dump(2) << "\n"; });

  auto* keys = config->add_subcommand("keys", "print every config key as a Markdown table");
  keys->callback([] {
    std::cout << "| key | type | unit | default | meaning |\n|---|---|---|---|---|\n";
    for (const auto& r : runtime::config_keys()) {
      std::cout << "| `" << r.path << "` | " << r.type << " | " << r.unit << " | `"
                << r.default_value << "` | " << r.doc << " |\n";
    }
  });

  auto sum_args = std::make_shared<ConfigArgs>();
  auto* summary = config->add_subcommand("summary", "print the chip's headline figures");
  add_config_args(summary, *sum_args);
  summary->callback([sum_args] { print_summary(load(*sum_args)); });
}

}  // namespace wallsim::cli
