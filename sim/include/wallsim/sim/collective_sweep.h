// The simulator's nccl-tests: one collective per size, on a communicator of cores, each timed
// from its last rank's arrival to its end (one System, sizes one after another).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/collectives/schedule.h"
#include "wallsim/isa/types.h"
#include "wallsim/sim/chip_config.h"
#include "wallsim/sim/system_config.h"

namespace wallsim::sim {

struct CollectiveSweepRow {
  int64_t bytes = 0;  // the size as nccl-tests counts it (count x dtype bytes)
  int64_t count = 0;  // elements
  collectives::Algorithm algorithm = collectives::Algorithm::ring;
  std::string label;     // the algorithm, or "hier:" and each stage's ("hier:rhd/ring/rhd")
  std::string bound_by;  // the link, NIC or HBM that bound it (CollectiveEngine::Record)
  double time_us = 0;
  double algbw_gb_per_s = 0;  // bytes / time, GB = 1e9 bytes
  double busbw_gb_per_s = 0;  // algbw x collectives::busbw_factor
};

// Runs `op` once per size of `sizes` (bytes; rounded down to whole elements, and to a multiple
// of the rank count where the op splits the data; sizes that round to nothing are left out) on
// the ranks `ranks` ((chip, core) each; send_recv: rank 0 sends to rank 1) of the system
// elaborated from `core` and `system`, timing only. Throws base::InputError for ranks outside
// the system, SimulationError if the run cannot finish. Elaborates SystemC: once per process.
std::vector<CollectiveSweepRow> run_collective_sweep(const ChipConfig& core,
                                                     const SystemConfig& system,
                                                     collectives::CollectiveOp op,
                                                     const std::vector<std::pair<int, int>>& ranks,
                                                     const std::vector<int64_t>& sizes,
                                                     isa::DType dtype);

}  // namespace wallsim::sim
