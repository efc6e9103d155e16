// Timing parameters of device memory, read from a config's `timing.hbm` section.
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/base/params.h"

namespace wallsim::memory {

// HBM as seen by one core: its share of the chip's bandwidth, shared fairly by the transfers
// in flight, plus a fixed access latency per transfer.
struct HbmTiming {
  double bandwidth_gb_per_s = 362.5;
  int64_t latency_ns = 500;
  // How transfers share HBM, the host link and the DMA engines (memory/bandwidth_share.h).
  std::string sharing = "max_min_fair";
};

template <class V>
void describe(V& v, HbmTiming& t) {
  v.field("bandwidth_gb_per_s", t.bandwidth_gb_per_s, {0.001, 1e6}, "GB/s (1e9 bytes/s)",
          "HBM bandwidth available to this device (a core's share of the chip's)");
  v.field("latency_ns", t.latency_ns, {0, 1000000}, "ns", "latency of one HBM transfer");
  v.field("sharing", t.sharing,
          "bandwidth-sharing policy of HBM, the host link and the DMA engines: max_min_fair");
}

}  // namespace wallsim::memory
