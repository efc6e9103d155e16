// RunReport: the typed run report — what `wallsim run` writes into stats.json beside the
// stats registry's sections, read back by sweeps and studies. One JSON mapping (to_json and
// from_json); the key figures (cold, warm, percentiles, overtake points, peaks) computed here
// once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/runtime/session.h"
#include "wallsim/sim/chip_config.h"

namespace wallsim::driver {

class StepWallTimes;

// The steps' sums ("totals"): startup excluded.
struct RunTotals {
  int64_t wall_ns = 0;
  runtime::HostTimes host_ns{};
  int64_t device_busy_ns = 0;
  int64_t idle_ns = 0;
  runtime::Counts counts;
  double padding_flop_fraction = 0;
  double masked_flop_fraction = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
};

struct RunReport {
  std::string workload_name, workload_spec;
  base::Json workload_params = base::Json::object();
  std::string mode;
  std::string compile_profile;
  runtime::StepRecord startup;
  // Every step's record when read back; empty in the report `run` writes, which streams them
  // (StepStream) and passes their wall times to to_json.
  std::vector<runtime::StepRecord> steps;
  std::vector<std::string> step_kinds;  // by step, from the workload; "kind" in each step's JSON
  RunTotals totals;
  base::Json ops = base::Json::array();  // per op kind: engine time, bytes, MACs, throughput
  // Device figures over the device's busy time, plans launched (compiled, copies).
  base::Json device_busy = base::Json::object();
  // Per layer (the module of each op's origin, Session::set_origin), when the workload set
  // origins: device time and bytes of the nodes that came from it.
  base::Json layers = base::Json::array();
  // A workload's own section (serve: "serving"), if it has one.
  std::string workload_section;
  base::Json workload_report;
  // compile_metrics.h: CompileTime, ExecuteTime, cache entries, the recompile log.
  base::Json compile_metrics = base::Json::object();
  // Read back only: the stats registry's "device" section of stats.json.
  base::Json device = base::Json::object();

  // The report's sections of stats.json, in their order (the registry writes the rest).
  base::Json to_json() const;
  // ... with the "warm" section from `walls` (the steps array from `steps`).
  base::Json to_json(const StepWallTimes& walls) const;
  // Reads a stats.json document; a missing or mistyped section is an base::InputError.
  static RunReport from_json(const base::Json& stats, const std::string& path = "stats.json");
  static RunReport read(const std::string& run_dir);

  // ---- key figures ----
  int64_t startup_ns() const { return startup.wall_ns; }
  int64_t total_ns() const { return startup.wall_ns + totals.wall_ns; }  // start-up and steps
  int64_t cold_ns() const { return steps.empty() ? 0 : steps[0].wall_ns; }
  // "Warm", one definition for every report, study and doc: the steps after the last step that
  // compiled (every step when none did), optionally only those of one kind (step_kind); empty
  // when the last step compiled. The figures are medians (p50, nearest rank) over that set; 0
  // when it is empty.
  std::vector<size_t> warm_steps(const std::string& kind = "") const;
  double warm_ns() const;
  double warm_host_ns(runtime::HostState s) const;
  double warm_device_ns() const;
  // The p-th percentile (0-100, nearest rank) of the warm steps' wall time (of one kind).
  double warm_percentile_ns(double p, const std::string& kind = "") const;
  // ... of every step of one kind, warm or not (a decode's token latency, compiles included).
  double kind_percentile_ns(double p, const std::string& kind) const;
  // Step i's kind: step_kinds[i] ("prefill", "token", "step"); "step" when not recorded.
  std::string step_kind(size_t i) const { return i < step_kinds.size() ? step_kinds[i] : "step"; }
  // The "warm" section: its first step, count, p50/p99 overall and per step kind (every step
  // of the kind, and its warm ones).
  base::Json warm_json() const;
  StepWallTimes wall_times() const;  // of `steps`
  double macs() const;               // over every op kind
  // Total wall time after n steps modelled as fixed + n x per_step: with warm steps, fixed is
  // start-up and the cold step's excess over warm; without (every step compiled), fixed is
  // start-up and per_step the mean step.
  struct CostLine {
    double fixed_ns = 0, per_step_ns = 0;
  };
  CostLine cost_line() const;
  // Steps after which this run has spent less wall time than `other` (start-up and cold step
  // included), from both cost lines: a number, "always" or "never".
  std::string overtakes(const RunReport& other) const;
};

}  // namespace wallsim::driver
