// BandwidthShare: how concurrent transfers divide the bandwidth of shared resources (HBM, the
// host link, DMA engines). Plain C++; the SystemC adapter (dma::DmaSystem) calls it and waits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace wallsim::memory {

// A transfer's use of one resource: `weight` bytes of the resource's capacity per byte moved
// (2 for HBM on an HBM->HBM copy, which reads and writes it; > 1 for a DMA engine moving small
// chunks, whose per-chunk cost takes bandwidth). `count` c >= 1: on this resource alone the
// transfer stands for c identical ones (c times its weight, exactly); its other resources see
// it once. How a folded SPMD run charges the resources its ranks share (dma::Network::set_fold).
struct ResourceUse {
  int resource;
  double weight;
  int64_t count = 1;
};

// Contract: not thread-safe; time is in picoseconds and never goes back (every `now` >= the
// previous one). A transfer's rate may change only when a transfer starts or finishes; finish
// times are whole picoseconds, rounded up. Results are deterministic (transfers reported in id
// order) and do not depend on the order of resources or transfers. Resources are added before
// transfers start.
class BandwidthShare {
 public:
  using Ps = int64_t;
  virtual ~BandwidthShare() = default;
  // Adds a resource with a capacity > 0 bytes/second; returns its index (0, 1, ... in order).
  virtual int add_resource(std::string name, double bytes_per_second) = 0;
  // Starts a transfer of `bytes` >= 0 using `uses` (valid, non-empty; weights > 0; uses of the
  // same resource add up) at `now`. Returns its id (0, 1, 2, ...). `multiplicity` m >= 1: the
  // transfer stands for m identical ones, all at its rate, taking m times its weights (and
  // each use's count times more: weight x count x m).
  virtual uint64_t start_weighted(Ps now, double bytes, std::vector<ResourceUse> uses,
                                  int64_t multiplicity = 1) = 0;
  // Earliest finish time of a transfer not yet returned by advance(); INT64_MAX if none.
  virtual Ps next_finish() const = 0;
  // Progresses every transfer to `now`; removes and returns, in id order, those finished.
  virtual std::vector<uint64_t> advance(Ps now) = 0;
  // Bytes/second of capacity currently taken on resource r (rates times weights).
  virtual double resource_rate(int r) const = 0;
  virtual const std::string& resource_name(int r) const = 0;
  virtual double resource_capacity(int r) const = 0;
  virtual size_t resources() const = 0;
  // Resources whose resource_rate() may have changed since the last call, each once; clears
  // the list. A caller that watches rates (busy time, traces) looks only at these.
  virtual std::vector<int> take_touched() = 0;
};

// The sharing policies by name: "max_min_fair" (progressive filling, memory/fluid_share.h).
// Throws std::invalid_argument naming the known policies for any other name.
std::unique_ptr<BandwidthShare> make_bandwidth_share(const std::string& name);

}  // namespace wallsim::memory
