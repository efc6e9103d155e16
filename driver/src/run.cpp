// The `run` driver: elaborate the device, run the workload's steps in a host thread, report.
#include "wallsim/driver/run.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "wallsim/driver/compile_metrics.h"
#include "wallsim/driver/run_report.h"
#include "wallsim/sim/device.h"
#include "wallsim/sim/exec.h"
#include "wallsim/traces/run_directory.h"
#include "wallsim/traces/stats.h"

namespace wallsim::driver {

namespace {

using nlohmann::ordered_json;
using runtime::kNumHostStates;

// Per op kind, over every plan the run launched (the device's op totals, from each
// instruction's provenance): engine time, DMA bytes, MACs, and achieved tensor throughput
// against the roofline min(peak, intensity x HBM bandwidth).
ordered_json op_table(sim::Device& device, const sim::ChipConfig& chip) {
  device.retire_drained();
  const double peak = peak_tensor_flops(chip);  // FLOP/s
  const double hbm = chip.timing.hbm.bandwidth_gb_per_s * 1e9;
  ordered_json out = ordered_json::array();
  for (const auto& [op, r] : device.op_totals()) {
    ordered_json busy = ordered_json::object();
    for (int e = 0; e < isa::kNumEngines; ++e) {
      busy[std::string(isa::name_of(static_cast<isa::Engine>(e)))] = r.busy[e].to_seconds() * 1e9;
    }
    const double tensor_s = r.busy[static_cast<int>(isa::Engine::tensor)].to_seconds();
    const double flops = 2 * r.macs;
    ordered_json row = {
        {"op", op},        {"nodes", r.nodes},         {"instructions", r.instructions},
        {"busy_ns", busy}, {"dma_bytes", r.dma_bytes}, {"macs", r.macs}};
    if (r.macs > 0) {
      row["achieved_tflops"] = tensor_s > 0 ? flops / tensor_s / 1e12 : 0.0;
      row["roofline_tflops"] =
          (r.dma_bytes > 0 ? std::min(peak, flops / double(r.dma_bytes) * hbm) : peak) / 1e12;
    }
    out.push_back(row);
  }
  return out;
}

// stats.txt after the device stats: the run report's sections (host breakdown, steps, per-op
// table, serving figures), and each host state's share of the steps' wall time.
void append_report_text(const std::string& path, const ordered_json& report) {
  ordered_json sections;
  const ordered_json& totals = report.at("totals");
  const double wall = totals.value("wall_ns", 0.0);
  ordered_json share = ordered_json::object();
  for (const auto& [k, v] : totals.items()) {
    const bool host_state =
        k.size() > 3 && k.compare(k.size() - 3, 3, "_ns") == 0 && k != "wall_ns" && k != "idle_ns";
    if (host_state && wall > 0) share[k.substr(0, k.size() - 3)] = v.get<double>() / wall;
  }
  sections["share_of_step_wall"] = share;  // host states sum to 1; device_busy overlaps
  for (const auto& [k, v] : report.items()) sections[k] = v;
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << "\n# run report: the sections of stats.json after `device` (RUNTIME.md)\n";
  traces::write_sections_text(sections, out, {"schema"});
  if (!out.flush()) throw std::runtime_error(path + ": cannot write file");
}

// Viewers load a whole trace into memory: past this size Perfetto UI and speedscope struggle.
constexpr std::uintmax_t kLargeTraceBytes = std::uintmax_t{100} << 20;

void warn_if_large(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec || bytes <= kLargeTraceBytes) return;
  std::cerr << "wallsim: warning: trace.json is " << (bytes >> 20)
            << " MiB, more than a trace viewer opens comfortably; keep it smaller with "
               "--trace-level plans, --trace-window FROM_NS:TO_NS or fewer steps "
               "(--instruction-csv logs every instruction without a trace)\n";
}

}  // namespace

RunSummary run_workload(const runtime::Config& config, const base::Json& resolved_config,
                        const workloads::WorkloadSpec& spec, const RunOptions& options,
                        const std::string& out_dir) {
  sim::init_systemc();
  std::unique_ptr<workloads::Workload> workload = workloads::make_workload(spec);
  if (options.steps && workload->fixed_steps()) {
    throw base::InputError("--steps", spec.name + " fixes its own steps");
  }
  const int64_t steps = options.steps.value_or(workload->default_steps());
  std::unique_ptr<traces::RunDirectory> dir = sim::open_run_directory(out_dir);
  traces::StatsRegistry stats;
  sim::DeviceTimeStats device_time(stats, config.chip);

  sim::RunTrace run_trace(*dir, options.trace_level, options.trace_window_ns, config.chip.name);
  traces::TraceSink* trace = run_trace.sink();
  if (trace) {
    trace->set_metadata("workload", spec.text);
    trace->set_metadata("mode", std::string(options.mode->family()));
  }
  sim::DeviceOptions dev;
  dev.functional = options.functional;
  dev.stats = &stats;
  std::unique_ptr<traces::CsvLog> csv;
  if (options.instruction_csv) {
    csv = std::make_unique<traces::CsvLog>(dir->file("instructions.csv"),
                                           traces::instruction_csv_columns());
  }
  dev.trace = trace;
  dev.trace_level = options.trace_level;
  dev.instruction_log = csv.get();
  sim::Device device("device", config.chip, dev);

  runtime::SessionOptions so;
  so.mode = options.mode;
  so.functional = options.functional;
  so.plan_memory_bytes = options.plan_memory_bytes;
  runtime::Session session(config, device, so, trace);

  const auto wall_start = std::chrono::steady_clock::now();
  runtime::run_host(device, [&] {
    workload->setup(session);
    session.startup(workload->buckets(session),
                    [&](int64_t bucket) { workload->trace(session, bucket); });
    workload->run(session, steps);
  });
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  device.finalize();
  session.finish_trace();
  device_time.set(device.end_time());

  // The report: the compilation wall per step.
  RunReport report;
  report.workload_name = spec.name;
  report.workload_spec = spec.text;
  for (const auto& [k, v] : workload->params()) report.workload_params[k] = v;
  report.mode = std::string(options.mode->name());
  report.compile_profile = std::string(compiler_stub::name_of(config.runtime.compile_cost.profile));
  report.startup = session.startup_record();
  report.steps = session.steps();
  RunTotals& tot = report.totals;
  double padded = 0, real = 0;
  for (const auto& s : session.steps()) {
    tot.wall_ns += s.wall_ns;
    for (int k = 0; k < kNumHostStates; ++k) tot.host_ns[k] += s.host_ns[k];
    tot.device_busy_ns += s.device_busy_ns;
    tot.counts.add(s.counts);
    padded += s.padded_macs;
    real += s.real_macs;
  }
  tot.idle_ns = session.idle_ns();
  const double waste = padded > 0 ? std::max(0.0, (padded - real) / padded) : 0.0;
  const bool masked = workload->masks_instead_of_padding();
  tot.padding_flop_fraction = masked ? 0.0 : waste;
  tot.masked_flop_fraction = masked ? waste : 0.0;
  tot.hbm_read_bytes = stats.find_as<traces::Counter>("device.hbm.read_bytes")->value();
  tot.hbm_write_bytes = stats.find_as<traces::Counter>("device.hbm.write_bytes")->value();
  report.ops = op_table(device, config.chip);
  report.compile_metrics = compile_metrics_json(session);
  if (auto own = workload->report()) {
    report.workload_section = own->first;
    report.workload_report = own->second;
  }
  const ordered_json extra = report.to_json();
  traces::StatsScope measured(stats, "measured");
  measured.add_value("sim_wall_seconds", "s", "real time the run took (varies run to run)")
      .set(wall);
  measured
      .add_value("compiler_stub_seconds", "s",
                 "real time compiler_stub spent compiling (not the modelled latency)")
      .set(session.compiler_seconds());
  measured.add_counter(
      "plans_rebuilt", "",
      "plan bodies rebuilt after --plan-memory dropped them (simulator, not model)") +=
      static_cast<uint64_t>(session.bodies_rebuilt());
  sim::write_run_files(*dir, stats, extra, resolved_config);
  append_report_text(dir->file("stats.txt"), extra);
  if (trace) {
    trace->finish();
    warn_if_large(dir->file("trace.json"));
  }
  if (csv) csv->finish();
  dir->commit();
  const runtime::Counts totals = session.totals();
  RunSummary r;
  r.wall_ns = session.now_ns();
  r.steps = static_cast<int64_t>(session.steps().size());
  r.totals = totals;
  r.sim_wall_seconds = wall;
  return r;
}

}  // namespace wallsim::driver
