// ASTRA-sim configurations derived from a wallsim system: the network dimensions of the ranks
// and the network, system and remote-memory files its analytical backend reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/sim/chip_config.h"
#include "wallsim/sim/system_config.h"

namespace wallsim::chakra {

// One network dimension: `npus` ranks, fastest-varying first (rank = mixed radix of them).
struct NetworkDim {
  std::string topology;  // Ring, FullyConnected or Switch
  int64_t npus = 1;
  double bandwidth_gb_per_s = 0;
  double latency_ns = 0;
  std::string what;  // cores, torus x, torus y, instances or all ranks
};
using NetworkDims = std::vector<NetworkDim>;

// [cores, torus x, torus y, instances] without the dimensions of one; one Switch over every rank
// at the slowest link when `world` is not a prefix product of them.
NetworkDims network_dims(const sim::SystemConfig& system, const sim::ChipConfig& core,
                         int64_t world);

// Writes network.yml, system.json, remote_memory.json and README.md (the command line) into
// `dir`; `name` is the traces' prefix.
void write_astra_configs(const std::string& dir, const std::string& name,
                         const sim::SystemConfig& system, const sim::ChipConfig& core,
                         const NetworkDims& dims, int64_t world);

}  // namespace wallsim::chakra
