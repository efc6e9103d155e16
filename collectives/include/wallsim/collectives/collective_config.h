// The `collectives` config section: the chips' collective engines and how an algorithm is chosen.
#pragma once

#include <cstdint>
#include <string_view>

#include "wallsim/base/enum_traits.h"
#include "wallsim/base/params.h"

namespace wallsim::collectives {

// How a collective moves its data (docs/COLLECTIVES.md): `automatic` picks by message size as
// Neuron does; the others force one algorithm for every collective of a run.
enum class Algorithm : uint8_t { automatic, ring, mesh, rhd };
inline constexpr int kNumAlgorithms = 4;
std::string_view name_of(Algorithm a);  // "auto", "ring", "mesh", "rhd"

// How a collective over several instances (or topology dimensions) is composed
// (docs/COLLECTIVES.md, "Hierarchical collectives"): `automatic` as Neuron does across instances
// (reduce-scatter inside each instance, the collective across instances on 1/Y of the data,
// all-gather inside) whenever the ranks sit Y > 1 to an instance in X > 1 instances; `flat`
// never; `instances` that same two-level form (flat when the ranks do not fit it);
// `dimensions` ASTRA-sim's multi-dimensional form, one level per dimension the ranks span
// (cores of a chip, torus x, torus y, instances), else as `instances`.
enum class Hierarchy : uint8_t { automatic, flat, instances, dimensions };
inline constexpr int kNumHierarchies = 4;
std::string_view name_of(Hierarchy h);  // "auto", "flat", "instances", "dimensions"

struct CollectivesConfig {
  int64_t cores_per_chip = 20;  // collective-communication cores: collectives in flight per chip
  Algorithm algorithm = Algorithm::automatic;
  Hierarchy hierarchy = Hierarchy::automatic;
  int64_t mesh_below_bytes = 1 << 20;           // automatic: direct mesh below this size
  int64_t rhd_below_bytes = int64_t{56} << 20;  // automatic: recursive halving/doubling below
  double reduce_gb_per_s = 967.0;               // reduction rate, bytes received per second
  int64_t step_overhead_ns = 0;                 // per algorithm step, before its transfers
  // Fixed costs (docs/COLLECTIVES.md, "Fixed costs"): once per collective before its first
  // step; per peer a rank sends to in a step (the collective core's semaphore handshake with
  // it); per step whose transfers cross EFA (the host's network-proxy thread posts them).
  int64_t launch_ns = 0;
  int64_t handshake_ns = 0;
  int64_t network_proxy_ns = 0;
  // The collective cores' DMA: each drives this many DMA engines (0: not modelled), so a chip
  // moves collective data at cores_per_chip x dma_rings_per_core x timing.dma.bandwidth_gb_per_s.
  int64_t dma_rings_per_core = 0;
  // Parallel rings: 2 sends half of each ring step's chunk each way round (rank + 1 and
  // rank - 1: mutually exclusive link directions), when p > 2.
  int64_t ring_directions = 1;
};

template <class V>
void describe(V& v, CollectivesConfig& c) {
  v.field("cores_per_chip", c.cores_per_chip, {1, 1024}, "",
          "collective-communication cores per chip: collectives a chip runs at once (each "
          "takes one on every chip it spans)");
  v.field("algorithm", c.algorithm,
          "auto: by size as Neuron does (mesh, rhd, ring); ring, mesh or rhd: that one for every "
          "collective (rhd needs a power-of-two size, else ring); in a hierarchical collective, "
          "for each stage");
  v.field("hierarchy", c.hierarchy,
          "auto: across instances as Neuron does (reduce-scatter inside each instance, the "
          "collective across instances on 1/Y of the data, all-gather inside); flat: never; "
          "instances: that two-level form; dimensions: one level per dimension the ranks span "
          "(ASTRA-sim)");
  v.field("mesh_below_bytes", c.mesh_below_bytes, {0, int64_t{1} << 50}, "bytes",
          "auto: a collective smaller than this runs as a direct mesh exchange");
  v.field("rhd_below_bytes", c.rhd_below_bytes, {0, int64_t{1} << 50}, "bytes",
          "auto: from mesh_below_bytes up to this, recursive halving/doubling; ring above");
  v.field("reduce_gb_per_s", c.reduce_gb_per_s, {0.001, 1e6}, "GB/s (1e9 bytes/s)",
          "rate at which a collective core reduces received data into its own");
  v.field("step_overhead_ns", c.step_overhead_ns, {0, 1000000000}, "ns",
          "fixed cost of each algorithm step (synchronisation between collective cores)");
  v.field("launch_ns", c.launch_ns, {0, 1000000000}, "ns",
          "fixed cost of each collective, from the last rank's arrival to its first step (the "
          "runtime's launch of the collective and the ranks' synchronisation)");
  v.field("handshake_ns", c.handshake_ns, {0, 1000000000}, "ns",
          "per peer a rank sends to in an algorithm step, before the step's transfers (the "
          "collective core's semaphore handshake with each peer, one after another)");
  v.field("network_proxy_ns", c.network_proxy_ns, {0, 1000000000}, "ns",
          "per algorithm step whose transfers cross EFA (the host's network-proxy thread posts "
          "them and polls their completion)");
  v.field("dma_rings_per_core", c.dma_rings_per_core, {0, 1024}, "",
          "DMA engines each collective core drives: a chip's collective transfers share "
          "cores_per_chip x this x timing.dma.bandwidth_gb_per_s (0: not modelled)");
  v.field("ring_directions", c.ring_directions, {1, 2}, "",
          "rings run at once: 2 sends half of each ring step's chunk to rank + 1 and half to "
          "rank - 1 (two rings on mutually exclusive link directions), when p > 2");
}

}  // namespace wallsim::collectives

namespace wallsim::base {
template <>
struct EnumTraits<collectives::Algorithm> {
  static constexpr int kCount = collectives::kNumAlgorithms;
};
template <>
struct EnumTraits<collectives::Hierarchy> {
  static constexpr int kCount = collectives::kNumHierarchies;
};
}  // namespace wallsim::base
