// The `run` driver: one workload under one execution mode on one simulated chip, host and
// device in the same simulation, written to a run directory (what `wallsim run` does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "wallsim/base/params.h"
#include "wallsim/driver/fold_run.h"
#include "wallsim/engines/stream_processor.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/session.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::driver {

struct RunOptions {
  const runtime::ExecutionMode* mode = &runtime::default_mode();
  std::optional<int64_t> steps;  // default: the workload's
  bool functional = false;
  engines::TraceLevel trace_level = engines::TraceLevel::plans;
  std::optional<std::pair<int64_t, int64_t>> trace_window_ns;  // keep [from, to] of the trace
  bool instruction_csv = false;                                // write instructions.csv
  int64_t plan_memory_bytes = int64_t{2} << 30;  // runtime::SessionOptions::plan_memory_bytes
  // A progress line on stderr at the end of a step once this many real seconds passed since the
  // last one (or the start); 0: none. Long runs (`--steps` large, serve, decode) say where they
  // are; short ones print nothing.
  double progress_seconds = 10;
  bool memory_check = true;  // runtime::SessionOptions::memory_check
  // Non-empty: also write each rank's Chakra execution trace and ASTRA-sim's configs into this
  // directory (docs/CHAKRA.md), complete or not at all, like the run directory.
  std::string chakra_dir;
  // SPMD folding (docs/SPMD_FOLDING.md): auto, the default, simulates only rank 0 of an eligible
  // run (its ranks on one chip or filling every chip) and gives every other rank its figures.
  FoldMode fold = FoldMode::automatic;
  // Tests only: a folded run loads this chip's HBM with a transfer the other chips do not see
  // (driver::unbalance_chip_for_test), so that the fold's exactness check fires.
  std::optional<int> fold_test_unbalance;
};

struct RunSummary {
  int64_t wall_ns = 0;  // simulated
  int64_t steps = 0;
  runtime::Counts totals;
  double sim_wall_seconds = 0;  // real
};

// Viewers load a whole trace into memory: past this size Perfetto UI and speedscope struggle.
constexpr std::uintmax_t kLargeTraceBytes = std::uintmax_t{100} << 20;
// The one-line warning `run` prints on stderr when the trace at `path` (written at `level`) is
// larger than kLargeTraceBytes; nothing when it is not (or is absent). It suggests only trace
// levels below `level`.
std::optional<std::string> large_trace_warning(const std::string& path, engines::TraceLevel level);

// Runs `spec` and writes `out_dir` (config.resolved.json, stats.json, stats.txt, trace.json,
// instructions.csv with `instruction_csv`; options.chakra_dir too when set):
// complete, or not at all. Bad input throws base::InputError; a run that cannot go on throws
// runtime::RuntimeError or sim::SimulationError. Elaborates SystemC: once per process.
RunSummary run_workload(const runtime::Config& config, const base::Json& resolved_config,
                        const workloads::WorkloadSpec& spec, const RunOptions& options,
                        const std::string& out_dir);

}  // namespace wallsim::driver
