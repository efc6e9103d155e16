// Derived figures of the system config: the chip's from the core's, or the core's share from
// the chip's.
#include "wallsim/sim/system_config.h"

#include <cmath>

#include "wallsim/sim/topology.h"

namespace wallsim::sim {

int64_t LinkTiming::effective_latency_ns() const {
  return static_cast<int64_t>(std::llround(double(latency_ns) * latency_factor));
}

void resolve(SystemConfig& s, ChipConfig& core, bool hbm_bytes_given, bool hbm_bandwidth_given) {
  const int64_t n = s.chip.cores;
  // Every core is elaborated (SystemC modules and threads, network resources): beyond this a
  // system is for an analytical network model (issue 39's Chakra export), not one process.
  constexpr int64_t kMaxCores = 65536;
  if (s.cores() > kMaxCores) {
    throw base::InputError(
        "topology", std::to_string(s.topology.instances) + " instances x " +
                        std::to_string(s.chips_per_instance()) + " chips x " + std::to_string(n) +
                        " cores = " + std::to_string(s.cores()) + " cores, more than " +
                        std::to_string(kMaxCores) + " one simulation holds");
  }
  // Failed links must name links of the system, and leave every chip able to reach every other.
  if (!s.links.failed.empty()) Topology(s).check_connected();
  if (s.chip.hbm_bytes == 0) {
    s.chip.hbm_bytes = core.arch.hbm.bytes * n;
  } else if (!hbm_bytes_given) {
    core.arch.hbm.bytes = s.chip.hbm_bytes / n;
  }
  if (s.chip.hbm_bandwidth_gb_per_s == 0.0) {
    s.chip.hbm_bandwidth_gb_per_s = core.timing.hbm.bandwidth_gb_per_s * double(n);
  } else if (!hbm_bandwidth_given) {
    core.timing.hbm.bandwidth_gb_per_s = s.chip.hbm_bandwidth_gb_per_s / double(n);
  }
  if (core.arch.hbm.bytes < (int64_t{1} << 20)) {
    throw base::InputError("chip.hbm_bytes", "gives each of the " + std::to_string(n) +
                                                 " cores less than 1 MiB of HBM");
  }
  if (!(core.timing.hbm.bandwidth_gb_per_s >= 0.001)) {
    throw base::InputError("chip.hbm_bandwidth_gb_per_s",
                           "gives each core less than 0.001 GB/s of HBM");
  }
}

}  // namespace wallsim::sim
