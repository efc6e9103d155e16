// `wallsim collectives`: the simulator's nccl-tests — one collective per size on a communicator
// of cores, printed as nccl-tests prints its table (and written as CSV).
#include <iomanip>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "wallsim/base/file_write.h"
#include "wallsim/collectives/schedule.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/collective_sweep.h"

namespace wallsim::cli {
namespace {

struct CollectivesArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string op = "all_reduce";
  std::string ranks = "chips";
  std::string min_bytes = "8";
  std::string max_bytes = "128M";
  double factor = 2.0;
  std::string dtype = "fp32";
  std::string csv;
};

// "8", "64K", "128M", "1G" (powers of 1024, as nccl-tests reads -b and -e).
int64_t parse_size(const std::string& s, const std::string& option) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  int64_t scale = 1;
  if (used > 0 && used + 1 == s.size()) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
    scale = u == 'K' ? 1024 : u == 'M' ? 1024 * 1024 : u == 'G' ? 1024 * 1024 * 1024 : 0;
    if (scale != 0) ++used;
  }
  if (used == 0 || used != s.size() || v < 1 || scale == 0 || v > (int64_t{1} << 40) / scale)
    throw base::InputError(option + " " + s, "expected a size in bytes (K, M, G: x 1024)");
  return v * scale;
}

// "chips": core 0 of every chip; "cores": every core; else "c.k,c.k,...".
std::vector<std::pair<int, int>> parse_ranks(const std::string& s, const sim::SystemConfig& sys) {
  std::vector<std::pair<int, int>> out;
  if (s == "chips" || s == "cores") {
    for (int c = 0; c < sys.chips(); ++c) {
      for (int k = 0; k < (s == "cores" ? sys.chip.cores : 1); ++k) out.emplace_back(c, k);
    }
    return out;
  }
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t dot = item.find('.');
    try {
      size_t a = 0, b = 0;
      const int c = std::stoi(item.substr(0, dot), &a);
      const int k = dot == std::string::npos ? -1 : std::stoi(item.substr(dot + 1), &b);
      if (dot != std::string::npos && a == dot && b == item.size() - dot - 1) {
        out.emplace_back(c, k);
        continue;
      }
    } catch (const std::exception&) {
    }
    throw base::InputError("--ranks " + s, "expected chips, cores or chip.core,chip.core,...");
  }
  return out;
}

}  // namespace

void add_collectives_command(CLI::App& app) {
  auto a = std::make_shared<CollectivesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "collectives", "time one collective per size on a communicator of cores (nccl-tests)");
  cmd->add_option("--config,-c", a->config, "system config (JSON)")->required();
  cmd->add_option("--set", a->overrides, "override a config value: path.to.key=value");
  cmd->add_option("--op", a->op,
                  "all_reduce, all_gather, reduce_scatter, all_to_all, permute or send_recv");
  cmd->add_option("--ranks", a->ranks,
                  "the communicator: chips (core 0 of each), cores (every core) or "
                  "chip.core,chip.core,... (send_recv: sender, receiver)");
  cmd->add_option("--min-bytes,-b", a->min_bytes, "smallest size (K, M, G: x 1024)");
  cmd->add_option("--max-bytes,-e", a->max_bytes, "largest size");
  cmd->add_option("--step-factor,-f", a->factor, "each size is the last times this")
      ->check(CLI::Range(1.01, 1024.0));
  cmd->add_option("--dtype", a->dtype, "fp32, bf16, fp16 or int32");
  cmd->add_option("--csv", a->csv, "also write the table as CSV to this file");
  cmd->callback([a] {
    const runtime::Config cfg = runtime::load_config(a->config, a->overrides);
    const auto op = collectives::parse_collective_op(a->op);
    if (!op) throw base::InputError("--op " + a->op, "unknown collective");
    const auto dtype = isa::parse_dtype(a->dtype);
    if (!dtype) throw base::InputError("--dtype " + a->dtype, "unknown dtype");
    const int64_t lo = parse_size(a->min_bytes, "--min-bytes");
    const int64_t hi = parse_size(a->max_bytes, "--max-bytes");
    if (hi < lo) throw base::InputError("--max-bytes " + a->max_bytes, "is below --min-bytes");
    std::vector<int64_t> sizes;
    for (double s = double(lo); s <= double(hi) * (1 + 1e-12); s *= a->factor)
      sizes.push_back(static_cast<int64_t>(s));
    const auto ranks = parse_ranks(a->ranks, cfg.system);
    const auto rows = sim::run_collective_sweep(cfg.chip, cfg.system, *op, ranks, sizes, *dtype);

    const std::string type(isa::name_of(*dtype));
    const bool reduces = *op == collectives::CollectiveOp::all_reduce ||
                         *op == collectives::CollectiveOp::reduce_scatter;
    const std::string redop = reduces ? "sum" : "none";
    std::ostringstream t;
    t << "# wallsim collectives: " << a->op << " on " << ranks.size() << " ranks (" << a->ranks
      << "), " << cfg.chip.name << ", algorithm "
      << collectives::name_of(cfg.system.collectives.algorithm)
      << "; time from the last rank's arrival to the end\n";
    // Degraded or failed links, as the run had them.
    const sim::LinksSection& links = cfg.system.links;
    std::string degraded;
    const std::pair<const char*, const sim::LinkTiming*> kinds[] = {
        {"neuronlink", &links.neuronlink},
        {"instance_ring", &links.instance_ring},
        {"efa", &links.efa}};
    for (const auto& [kind, l] : kinds) {
      if (l->bandwidth_factor != 1.0)
        degraded += std::string(degraded.empty() ? "" : "; ") + kind + " bandwidth x" +
                    fmt(l->bandwidth_factor, 4);
      if (l->latency_factor != 1.0)
        degraded += std::string(degraded.empty() ? "" : "; ") + kind + " latency x" +
                    fmt(l->latency_factor, 4);
    }
    if (!links.failed.empty())
      degraded += std::string(degraded.empty() ? "" : "; ") + "failed " + links.failed;
    if (!degraded.empty()) t << "# links: " << degraded << "\n";
    t << "#" << std::setw(13) << "size" << std::setw(14) << "count" << std::setw(7) << "type"
      << std::setw(7) << "redop" << std::setw(24) << "algo" << std::setw(12) << "time"
      << std::setw(9) << "algbw" << std::setw(9) << "busbw"
      << "  bound by\n";
    t << "#" << std::setw(13) << "(B)" << std::setw(14) << "(elements)" << std::setw(38) << ""
      << std::setw(12) << "(us)" << std::setw(9) << "(GB/s)" << std::setw(9) << "(GB/s)"
      << "\n";
    std::string csv =
        "size_bytes,count,type,redop,algorithm,time_us,algbw_gb_per_s,busbw_gb_per_s,bound_by\n";
    for (const auto& r : rows) {
      t << " " << std::setw(13) << r.bytes << std::setw(14) << r.count << std::setw(7) << type
        << std::setw(7) << redop << " " << std::setw(23) << r.label << std::setw(12)
        << fmt(r.time_us, 2) << std::setw(9) << fmt(r.algbw_gb_per_s, 2) << std::setw(9)
        << fmt(r.busbw_gb_per_s, 2) << "  " << r.bound_by << "\n";
      csv += std::to_string(r.bytes) + "," + std::to_string(r.count) + "," + type + "," + redop +
             "," + r.label + "," + fmt(r.time_us, 4) + "," + fmt(r.algbw_gb_per_s, 4) + "," +
             fmt(r.busbw_gb_per_s, 4) + "," + r.bound_by + "\n";
    }
    if (!a->csv.empty()) base::write_file_atomically(a->csv, csv);
    std::cout << t.str();
  });
}

}  // namespace wallsim::cli
