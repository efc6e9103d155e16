// Running plan files on the device: inputs in, one simulation, a complete output directory out.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/engines/stream_processor.h"
#include "wallsim/isa/params.h"
#include "wallsim/isa/plan.h"
#include "wallsim/sim/chip_config.h"

namespace wallsim::sim {

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
// The directory appears complete or not at all. Bad input throws isa::InputError; a run that
// cannot finish throws SimulationError. Elaborates SystemC: once per process.
ExecSummary exec_plans(const ChipConfig& chip, const isa::Json& resolved_config,
                       const isa::PlanSequence& seq, const ExecOptions& options,
                       const std::string& out_dir);

// Sets the kernel's time resolution to 1 fs and silences its banner; call before anything else
// touches SystemC. Idempotent.
void init_systemc();

}  // namespace wallsim::sim
