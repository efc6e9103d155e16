// `wallsim exec`: plan files in, a run directory out.
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "wallsim/memory/npy.h"
#include "wallsim/sim/system.h"
#include "wallsim/traces/chrome_trace.h"
#include "wallsim/traces/run_directory.h"
#include "wallsim/traces/stats.h"
#include "wallsim/traces/window_sink.h"
#include "wallsim/traces/write_error.h"

namespace wallsim::sim {

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Run-time scalar values for each plan, in Plan::scalars order, from `--scalar name=value`.
std::vector<std::vector<int64_t>> bind_scalars(const isa::PlanSequence& seq,
                                               const ExecOptions& options) {
  std::map<std::string, int64_t> given(options.scalars.begin(), options.scalars.end());
  std::set<std::string> used;
  std::vector<std::vector<int64_t>> out;
  for (const isa::Plan& p : seq.plans) {
    std::vector<int64_t> values;
    for (const isa::ScalarDecl& s : p.scalars) {
      auto it = given.find(s.name);
      const std::string range = "[" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]";
      if (it == given.end()) {
        throw base::InputError("--scalar", "plan '" + p.name + "' needs run-time scalar " + s.name +
                                               " in " + range + " (--scalar " + s.name + "=VALUE)");
      }
      if (it->second < s.min || it->second > s.max) {
        throw base::InputError("--scalar " + s.name, std::to_string(it->second) +
                                                         " is outside the declared range " + range);
      }
      used.insert(s.name);
      values.push_back(it->second);
    }
    out.push_back(std::move(values));
  }
  for (const auto& [name, value] : given) {
    if (!used.count(name))
      throw base::InputError("--scalar " + name, "no plan declares this run-time scalar");
  }
  return out;
}

// Creates every off-chip tensor and fills the external inputs (functional mode).
void place_tensors(const isa::PlanSequence& seq, const ExecOptions& options,
                   memory::TensorStore& store) {
  std::set<std::string> produced;
  for (const isa::Plan& p : seq.plans) {
    for (const isa::TensorDecl& t : p.tensors) {
      const bool existed = store.find(t.name) != nullptr;
      memory::TensorStore::Tensor& tensor = store.put(t.name, t.space, t.dtype, t.shape);
      const bool external_input =
          (t.role == isa::TensorRole::input || t.role == isa::TensorRole::inout) &&
          !produced.count(t.name) && !existed;
      if (external_input) {
        if (options.inputs_dir.empty()) {
          memory::fill_random(tensor, options.seed ^ fnv1a(t.name));
        } else {
          const std::string path = options.inputs_dir + "/" + t.name + ".npy";
          memory::load_npy_into(memory::read_npy(path), tensor, path);
        }
      }
      if (t.role == isa::TensorRole::output || t.role == isa::TensorRole::inout)
        produced.insert(t.name);
    }
  }
}

// Writes `text` to `path`, or throws traces::WriteError naming why (a full disk, a size limit).
void write_text(const std::string& path, const std::string& text) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw traces::WriteError(path, traces::errno_reason(errno));
}

}  // namespace

nlohmann::ordered_json busy_ns_json(const sc_core::sc_time (&busy)[isa::kNumEngines]) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (int e = 0; e < isa::kNumEngines; ++e)
    out[std::string(isa::name_of(static_cast<isa::Engine>(e)))] = busy[e].to_seconds() * 1e9;
  return out;
}

namespace {

nlohmann::ordered_json node_report(const Core& device) {
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const engines::Launch& l : device.launches()) {
    for (size_t i = 0; i < l.plan->nodes.size(); ++i) {
      const isa::NodeInfo& n = l.plan->nodes[i];
      const engines::NodeTotals& t = l.nodes[i];
      nodes.push_back({{"plan", l.plan->name},
                       {"launch", l.index},
                       {"node", n.id},
                       {"name", n.name},
                       {"op", n.op},
                       {"instructions", t.instructions},
                       {"busy_ns", busy_ns_json(t.busy)},
                       {"dma_bytes", t.dma_bytes}});
    }
  }
  return nodes;
}

// The "measured." stats: the simulation's real time and speed (they vary run to run). Returns
// the instructions simulated.
int64_t add_measured_stats(traces::StatsRegistry& stats, const isa::PlanSequence& seq,
                           double wall) {
  int64_t instructions = 0;
  for (const isa::Plan& p : seq.plans) instructions += p.instruction_count();
  traces::StatsScope measured(stats, "measured");
  measured.add_value("sim_wall_seconds", "s", "real time the simulation took (varies run to run)")
      .set(wall);
  measured.add_value("instructions_simulated", "", "instructions executed").set(instructions);
  measured.add_value("instructions_per_second", "1/s", "simulation speed (varies run to run)")
      .set(wall > 0 ? double(instructions) / wall : 0.0);
  return instructions;
}

}  // namespace

std::unique_ptr<traces::RunDirectory> open_run_directory(const std::string& out_dir) {
  try {
    return std::make_unique<traces::RunDirectory>(out_dir);
  } catch (const std::runtime_error& e) {
    throw base::InputError("--out", e.what());
  }
}

RunTrace::RunTrace(const traces::RunDirectory& dir, engines::TraceLevel level,
                   const std::optional<std::pair<int64_t, int64_t>>& window_ns,
                   const std::string& chip_name) {
  if (level == engines::TraceLevel::none) return;
  m_chrome = std::make_unique<traces::ChromeTraceWriter>(dir.file("trace.json"));
  m_sink = m_chrome.get();
  if (window_ns) {
    m_window = std::make_unique<traces::WindowTraceSink>(*m_chrome, window_ns->first * 1000,
                                                         window_ns->second * 1000);
    m_sink = m_window.get();
  }
  m_sink->set_metadata("wallsim_version", "0.1.0");
  m_sink->set_metadata("config", chip_name);
}

DeviceTimeStats::DeviceTimeStats(traces::StatsRegistry& stats, const ChipConfig& chip)
    : m_period_fs(engines::period_fs(chip.timing.tensor.freq_mhz)) {
  stats.add_text("schema", "", "stats format").set("wallsim-stats/1");
  traces::StatsScope d(stats, "device");
  d.add_text("clock", "", "the clock device.cycles counts").set("tensor");
  d.add_value("clock_mhz", "MHz", "frequency of device.clock").set(chip.timing.tensor.freq_mhz);
  m_cycles = &d.add_value("cycles", "cycles", "device time in device.clock cycles");
  m_time_ns = &d.add_value("time_ns", "ns", "from the first launch to the last result");
}

void DeviceTimeStats::set(sc_core::sc_time end) {
  m_cycles->set(engines::time_to_cycles(end, m_period_fs));
  m_time_ns->set(end.to_seconds() * 1e9);
}

void write_run_files(const traces::RunDirectory& dir, const traces::StatsRegistry& stats,
                     const nlohmann::ordered_json& extra, const base::Json& resolved_config) {
  // Each file is assembled in memory and written checked: a full disk is a one-line error, never
  // a truncated stats file committed with the run.
  std::ostringstream json, text;
  traces::write_stats_json(stats, json, extra);
  traces::write_stats_text(stats, text);
  write_text(dir.file("stats.json"), json.str());
  write_text(dir.file("stats.txt"), text.str());
  write_text(dir.file("config.resolved.json"), resolved_config.dump(2) + "\n");
}

void init_systemc() {
  static bool done = false;
  if (done) return;
  done = true;
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  // 1 ps: a 64-bit time then spans 213 days of simulated time, so long runs whose host compiles
  // take hours still fit; clocks keep their exact period (engines/execution_unit.h).
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  // The kernel's informational reports ("Simulation stopped by user") would break the one-line
  // error contract; wallsim reports what matters itself.
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                          sc_core::SC_DO_NOTHING);
}

ExecSummary exec_plans(const ChipConfig& chip, const base::Json& resolved_config,
                       const isa::PlanSequence& seq, const ExecOptions& options,
                       const std::string& out_dir) {
  init_systemc();
  const auto scalars = bind_scalars(seq, options);
  std::unique_ptr<traces::RunDirectory> dir = open_run_directory(out_dir);
  traces::StatsRegistry stats;
  DeviceTimeStats device_time(stats, chip);

  RunTrace run_trace(*dir, options.trace_level, options.trace_window_ns, chip.name);
  traces::TraceSink* trace = run_trace.sink();
  if (trace) trace->set_metadata("mode", options.functional ? "functional" : "timing-only");
  std::unique_ptr<traces::CsvLog> csv;
  if (options.instruction_csv) {
    csv = std::make_unique<traces::CsvLog>(dir->file("instructions.csv"),
                                           traces::instruction_csv_columns());
  }

  CoreOptions dev_options;
  dev_options.functional = options.functional;
  dev_options.stats = &stats;
  dev_options.trace = trace;
  dev_options.trace_level = options.trace_level;
  dev_options.instruction_log = csv.get();
  System system(chip, dev_options);
  Core& device = system.core();
  if (options.functional) place_tensors(seq, options, device.tensors());
  for (size_t i = 0; i < seq.plans.size(); ++i) device.launch(seq.plans[i], scalars[i]);

  const auto wall_start = std::chrono::steady_clock::now();
  wallsim::sim::simulate();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  if (auto err = device.error()) throw SimulationError("run-time error " + *err);
  if (!device.all_drained()) {
    std::string msg = "deadlock at " + sc_core::sc_time_stamp().to_string() + ":";
    for (const auto& line : device.deadlock_report()) msg += " " + line + ";";
    msg.pop_back();
    throw SimulationError(msg);
  }
  device.finalize();
  const sc_core::sc_time end = device.end_time();
  device_time.set(end);

  const int64_t instructions = add_measured_stats(stats, seq, wall);

  write_run_files(*dir, stats, {{"nodes", node_report(device)}}, resolved_config);
  if (options.functional) {
    const std::string outputs = dir->subdir("outputs");
    std::set<std::string> written;
    for (const isa::Plan& p : seq.plans) {
      for (const isa::TensorDecl& t : p.tensors) {
        if (t.role != isa::TensorRole::output && t.role != isa::TensorRole::inout) continue;
        if (!written.insert(t.name).second) continue;
        memory::write_npy(outputs + "/" + t.name + ".npy",
                          memory::npy_from_tensor(*device.tensors().find(t.name)));
      }
    }
  }
  if (trace) trace->finish();
  if (csv) csv->finish();
  dir->commit();
  return {end.to_seconds() * 1e9, instructions, wall};
}

}  // namespace wallsim::sim

namespace wallsim::sim {

namespace {

// Each plan's communicators bound to ranks (by plan, by Plan::comms index): a communicator
// name's ranks are the cores whose plans declare it, in (chip, core) order; their count must be
// its size.
std::vector<std::vector<std::vector<std::pair<int, int>>>> bind_communicators(
    const isa::PlanSequence& seq) {
  std::map<std::string, std::set<std::pair<int, int>>> cores;
  auto core_of = [&](size_t i) {
    return i < seq.cores.size() ? seq.cores[i] : std::pair<int, int>{0, 0};
  };
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    for (const isa::CommDecl& c : seq.plans[i].comms) cores[c.name].insert(core_of(i));
  }
  std::vector<std::vector<std::vector<std::pair<int, int>>>> out(seq.plans.size());
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    for (size_t k = 0; k < seq.plans[i].comms.size(); ++k) {
      const isa::CommDecl& c = seq.plans[i].comms[k];
      const auto& ranks = cores[c.name];
      if (static_cast<int64_t>(ranks.size()) != c.size) {
        throw base::InputError("plans[" + std::to_string(i) + "].comms[" + std::to_string(k) + "]",
                               "communicator '" + c.name + "' of size " + std::to_string(c.size) +
                                   " is declared by plans on " + std::to_string(ranks.size()) +
                                   " cores");
      }
      out[i].emplace_back(ranks.begin(), ranks.end());
    }
  }
  return out;
}

}  // namespace

void check_finished(System& sys, Core& core) {
  if (auto err = core.error()) throw SimulationError("run-time error " + *err);
  if (core.all_drained()) return;
  std::string msg = "deadlock at " + sc_core::sc_time_stamp().to_string() + ":";
  for (const auto& line : sys.collectives()->stuck_report()) msg += " " + line + ";";
  for (const auto& line : core.deadlock_report()) msg += " " + line + ";";
  msg.pop_back();
  throw SimulationError(msg);
}

void check_placement(const isa::PlanSequence& seq, const SystemConfig& system) {
  if (seq.cores.empty()) return;
  for (size_t i = 0; i < seq.cores.size(); ++i) {
    const auto [c, k] = seq.cores[i];
    if (c >= system.chips() || k >= system.chip.cores) {
      throw base::InputError("plans[" + std::to_string(i) + "].core",
                             "[" + std::to_string(c) + ", " + std::to_string(k) +
                                 "] is not a core of the system (" +
                                 std::to_string(system.chips()) + " chips x " +
                                 std::to_string(system.chip.cores) + " cores)");
    }
  }
  // A tensor "chip<N>:name" lives on chip N, which must be one of the system's.
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    const auto& tensors = seq.plans[i].tensors;
    for (size_t j = 0; j < tensors.size(); ++j) {
      const std::string& name = tensors[j].name;
      const size_t colon = name.find(':');
      if (name.rfind("chip", 0) != 0 || colon == std::string::npos || colon == 4) continue;
      const std::string digits = name.substr(4, colon - 4);
      if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
      if (digits.size() > 9 || std::stoll(digits) >= system.chips()) {
        throw base::InputError(
            "plans[" + std::to_string(i) + "].tensors[" + std::to_string(j) + "]",
            "'" + name + "' names chip " + digits + "; the system has " +
                std::to_string(system.chips()) + " chips (0 to " +
                std::to_string(system.chips() - 1) + ")");
      }
    }
  }
}

ExecSummary exec_system(const ChipConfig& core, const SystemConfig& system,
                        const base::Json& resolved_config, const isa::PlanSequence& seq,
                        const ExecOptions& options, const std::string& out_dir,
                        const std::vector<std::pair<int, int>>& order) {
  init_systemc();
  if (options.functional) {
    throw base::InputError("--functional",
                           "a plan file that places plans on cores runs timing-only");
  }
  check_placement(seq, system);
  const auto scalars = bind_scalars(seq, options);
  std::unique_ptr<traces::RunDirectory> dir = open_run_directory(out_dir);
  traces::StatsRegistry stats;
  DeviceTimeStats device_time(stats, core);
  RunTrace run_trace(*dir, options.trace_level, options.trace_window_ns, core.name);
  traces::TraceSink* trace = run_trace.sink();
  if (trace) trace->set_metadata("mode", "timing-only");

  CoreOptions core_options;
  core_options.stats = &stats;
  core_options.trace = trace;
  core_options.trace_level = options.trace_level;
  const auto comm_ranks = bind_communicators(seq);
  System sys(core, system, core_options, order);
  // Each core launches its plans in file order.
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    const auto [c, k] = i < seq.cores.size() ? seq.cores[i] : std::pair<int, int>{0, 0};
    sys.core(static_cast<size_t>(c), static_cast<size_t>(k))
        .launch(seq.plans[i], scalars[i])
        .comm_ranks = comm_ranks[i];
  }

  const auto wall_start = std::chrono::steady_clock::now();
  wallsim::sim::simulate();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  sc_core::sc_time end;
  for (size_t c = 0; c < sys.chips(); ++c) {
    for (size_t k = 0; k < sys.cores_per_chip(); ++k) {
      Core& x = sys.core(c, k);
      check_finished(sys, x);
      end = std::max(end, x.end_time());
    }
  }
  sys.finalize();
  device_time.set(end);

  const int64_t instructions = add_measured_stats(stats, seq, wall);
  stats.order_by_name();
  write_run_files(*dir, stats, nlohmann::ordered_json::object(), resolved_config);
  if (trace) trace->finish();
  dir->commit();
  return {end.to_seconds() * 1e9, instructions, wall};
}

}  // namespace wallsim::sim
