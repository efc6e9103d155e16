// Timing parameters of device memory, read from a config's `timing.hbm` section.
#pragma once

#include <cstdint>

#include "wallsim/base/params.h"

namespace wallsim::memory {

// HBM as seen by one core: its share of the chip's bandwidth, shared fairly by the transfers
// in flight, plus a fixed access latency per transfer.
struct HbmTiming {
  double bandwidth_gb_per_s = 362.5;
  int64_t latency_ns = 500;
};

template <class V>
void describe(V& v, HbmTiming& t) {
  v.field("bandwidth_gb_per_s", t.bandwidth_gb_per_s, {0.001, 1e6}, "GB/s (1e9 bytes/s)",
          "HBM bandwidth available to this device (a core's share of the chip's)");
  v.field("latency_ns", t.latency_ns, {0, 1000000}, "ns", "latency of one HBM transfer");
}

}  // namespace wallsim::memory
