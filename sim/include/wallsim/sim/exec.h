// Running plan files on the device: inputs in, one simulation, a complete output directory out.
#pragma once

#include <systemc>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/engines/stream_processor.h"
#include "wallsim/isa/plan.h"
#include "wallsim/sim/chip_config.h"
#include "wallsim/sim/system_config.h"
#include "wallsim/traces/run_directory.h"
#include "wallsim/traces/stats.h"

namespace wallsim::sim {

// Busy time per engine, {engine name: ns} in engine order: the `busy_ns` of every report's
// rows (nodes, ops, layers).
nlohmann::ordered_json busy_ns_json(const sc_core::sc_time (&busy)[isa::kNumEngines]);

// The simulation could not finish: a deadlock or a run-time invariant violation. The message
// is one line naming cycle, module, instruction and (for deadlocks) each blocked wait.
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ExecOptions {
  bool functional = false;
  std::vector<std::pair<std::string, int64_t>> scalars;  // run-time scalars by name
  std::string inputs_dir;  // <name>.npy per input tensor; empty: seeded random inputs
  uint64_t seed = 1;
  engines::TraceLevel trace_level = engines::TraceLevel::instructions;
  std::optional<std::pair<int64_t, int64_t>> trace_window_ns;
  bool instruction_csv = false;
};

struct ExecSummary {
  double time_ns = 0;
  int64_t instructions = 0;
  double wall_seconds = 0;
};

// Runs every plan of `seq` in order, each paying its launch, on a device elaborated from
// `chip`, and writes `out_dir`: config.resolved.json (= `resolved_config`), stats.json,
// stats.txt, trace.json, and in functional mode outputs/*.npy; instructions.csv on request.
// The directory appears complete or not at all. Bad input throws base::InputError; a run that
// cannot finish throws SimulationError. Elaborates SystemC: once per process.
ExecSummary exec_plans(const ChipConfig& chip, const base::Json& resolved_config,
                       const isa::PlanSequence& seq, const ExecOptions& options,
                       const std::string& out_dir);

// Runs a plan file whose plans name their core ("core": [chip, core]) on the whole system
// elaborated from `core` (one core) and `system`: each core launches its plans in file order.
// Timing only. Stats name each core ("chip<c>.core<k>.") and, under "system.", each chip's HBM
// and each link direction's bytes and busy time; the trace has a process per core and one per
// chip. `order` is the cores' elaboration order (System); results do not depend on it.
// A placed plan file (plans that name their core) against the system: every core one of its
// cores, every "chip<N>:" tensor on one of its chips; else base::InputError naming the plan.
// Nothing for a file that places no plan.
void check_placement(const isa::PlanSequence& seq, const SystemConfig& system);

class System;
class Core;
// After a system's simulation: a core's run-time error, or its deadlock (with every stuck
// collective), as SimulationError; nothing when it finished.
void check_finished(System& sys, Core& core);

ExecSummary exec_system(const ChipConfig& core, const SystemConfig& system,
                        const base::Json& resolved_config, const isa::PlanSequence& seq,
                        const ExecOptions& options, const std::string& out_dir,
                        const std::vector<std::pair<int, int>>& order = {});

// ---- the parts of a run directory every command that runs the device writes ----

// Opens `out_dir` (appears on commit()); one wallsim will not replace is bad input (`--out`).
std::unique_ptr<traces::RunDirectory> open_run_directory(const std::string& out_dir);

// trace.json of a run directory, behind the --trace-window filter when one is given; `sink()` is
// null at trace level none. Metadata common to every run (the version, the chip) is set here.
class RunTrace {
 public:
  RunTrace(const traces::RunDirectory& dir, engines::TraceLevel level,
           const std::optional<std::pair<int64_t, int64_t>>& window_ns,
           const std::string& chip_name);
  traces::TraceSink* sink() const { return m_sink; }

 private:
  std::unique_ptr<traces::TraceSink> m_chrome;
  std::unique_ptr<traces::TraceSink> m_window;
  traces::TraceSink* m_sink = nullptr;
};

// The stats format and the device-time header: device.clock, clock_mhz, cycles, time_ns.
// `set` fills cycles and time_ns once the run has ended at `end`.
class DeviceTimeStats {
 public:
  DeviceTimeStats(traces::StatsRegistry& stats, const ChipConfig& chip);
  void set(sc_core::sc_time end);

 private:
  int64_t m_period_fs;
  traces::Value* m_cycles;
  traces::Value* m_time_ns;
};

// stats.json (the registry plus `extra`), stats.txt and config.resolved.json into `dir`.
void write_run_files(const traces::RunDirectory& dir, const traces::StatsRegistry& stats,
                     const nlohmann::ordered_json& extra, const base::Json& resolved_config);

// Sets the kernel's time resolution to 1 ps and silences its banner; call before anything else
// touches SystemC. Idempotent.
void init_systemc();

}  // namespace wallsim::sim
