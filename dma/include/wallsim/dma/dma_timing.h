// Timing parameters of the DMA engines and the host link, read from a config's `timing.dma`
// and `timing.host_link` sections. docs/TIMING.md describes the fair-share model that uses them.
#pragma once

#include <cstdint>

#include "wallsim/base/params.h"

namespace wallsim::dma {

struct DmaTiming {
  double bandwidth_gb_per_s = 28.99;  // per engine
  int64_t descriptor_issue_ns = 600;  // fixed cost to issue one descriptor
};

// The PCIe-like link between host memory and HBM, shared fairly by its transfers.
struct HostLinkTiming {
  double bandwidth_gb_per_s = 25.2;
  int64_t latency_ns = 1000;
};

template <class V>
void describe(V& v, DmaTiming& t) {
  v.field("bandwidth_gb_per_s", t.bandwidth_gb_per_s, {0.001, 1e6}, "GB/s (1e9 bytes/s)",
          "bandwidth of one DMA engine");
  v.field("descriptor_issue_ns", t.descriptor_issue_ns, {0, 1000000}, "ns",
          "fixed cost of issuing one DMA descriptor");
}

template <class V>
void describe(V& v, HostLinkTiming& t) {
  v.field("bandwidth_gb_per_s", t.bandwidth_gb_per_s, {0.001, 1e6}, "GB/s (1e9 bytes/s)",
          "host<->device link bandwidth");
  v.field("latency_ns", t.latency_ns, {0, 100000000}, "ns", "latency of one host-link transfer");
}

}  // namespace wallsim::dma
