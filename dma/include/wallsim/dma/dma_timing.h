// Timing parameters of the DMA engines and the host link, read from a config's `timing.dma`
// and `timing.host_link` sections. docs/TIMING.md describes the fair-share model that uses them.
#pragma once

#include <cstdint>

#include "wallsim/base/params.h"

namespace wallsim::dma {

struct DmaTiming {
  double bandwidth_gb_per_s = 28.99;  // per engine
  int64_t descriptor_issue_ns = 600;  // fixed cost to issue one descriptor
  // The queue generates a descriptor while the one before it moves (a descriptor-generation
  // block apart from the engine), so back-to-back descriptors pay only the part of the issue
  // cost their predecessor's transfer did not hide. false: issue, then transfer, in turn.
  bool issue_overlaps_transfer = false;
  int64_t chunk_overhead_bytes = 512;  // each contiguous chunk costs the engine this much more
  // Hardware 2-byte DMA transpose moves this per chunk; 0 (the default, as
  // arch.dma.hardware_transpose's false): none.
  int64_t transpose_chunk_bytes = 0;
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
  v.field("issue_overlaps_transfer", t.issue_overlaps_transfer,
          "a queue generates its next descriptor while the current one transfers (descriptor "
          "generation is hardware apart from the engine); false: issue, then transfer, in turn");
  v.field("chunk_overhead_bytes", t.chunk_overhead_bytes, {0, 1 << 20}, "bytes",
          "per contiguous chunk of a descriptor, the engine spends the time of this many bytes");
  v.field("transpose_chunk_bytes", t.transpose_chunk_bytes, {0, 1 << 20}, "bytes",
          "hardware DMA transpose of 2-byte elements moves chunks of this size; 0: no hardware "
          "transpose (a transposing copy moves element by element); left out: 0 unless "
          "arch.dma.hardware_transpose is true (given with it, the two must agree)");
}

template <class V>
void describe(V& v, HostLinkTiming& t) {
  v.field("bandwidth_gb_per_s", t.bandwidth_gb_per_s, {0.001, 1e6}, "GB/s (1e9 bytes/s)",
          "host<->device link bandwidth");
  v.field("latency_ns", t.latency_ns, {0, 100000000}, "ns", "latency of one host-link transfer");
}

}  // namespace wallsim::dma
