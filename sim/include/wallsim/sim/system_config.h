// The system's configuration: the chip around the cores (`chip`), how chips are joined
// (`topology`) and the links between them (`links`). The core itself is `arch` and `timing`.
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/base/params.h"
#include "wallsim/collectives/collective_config.h"
#include "wallsim/sim/chip_config.h"

namespace wallsim::sim {

// A chip: N cores sharing one HBM (one resource at the chip's full bandwidth) and a host link.
// A value of 0 is derived from the one-core view: that core's figure times `cores`.
struct ChipSection {
  int64_t cores = 1;
  int64_t hbm_bytes = 0;
  double hbm_bandwidth_gb_per_s = 0.0;
};

// Chips of an instance form a 2D torus (x, y; a dimension of 1 is absent); instances are
// joined either by a ring of NeuronLinks between same-coordinate chips (an UltraServer) or,
// without one, by each chip's EFA NIC.
struct TopologySection {
  int64_t instances = 1;
  int64_t torus_x = 1;
  int64_t torus_y = 1;
  bool instance_ring = false;
};

// One direction of one link: its bandwidth and the latency a transfer pays per hop over it;
// the factors degrade (or improve) every link of the kind for an experiment, the figures
// above them staying the calibrated ones.
struct LinkTiming {
  double bandwidth_gb_per_s = 128.0;
  int64_t latency_ns = 1500;
  double bandwidth_factor = 1.0;
  double latency_factor = 1.0;
  double effective_bandwidth_gb_per_s() const { return bandwidth_gb_per_s * bandwidth_factor; }
  int64_t effective_latency_ns() const;
};

struct LinksSection {
  LinkTiming neuronlink;                       // chip to chip inside an instance (torus)
  LinkTiming instance_ring{64.0, 1500, 1, 1};  // chip to chip between instances (UltraServer)
  LinkTiming efa{25.0, 15000, 1, 1};           // a chip's NIC to another instance's (per route)
  // Failed link directions, comma-separated link names ("chip3.x+,chip5.efa.tx"): routes go
  // around them (sim/topology.h).
  std::string failed;
};

struct SystemConfig {
  ChipSection chip;
  TopologySection topology;
  LinksSection links;
  collectives::CollectivesConfig collectives;  // the chips' collective engines

  int64_t chips_per_instance() const { return topology.torus_x * topology.torus_y; }
  int64_t chips() const { return topology.instances * chips_per_instance(); }
  int64_t cores() const { return chips() * chip.cores; }
};

template <class V>
void describe(V& v, ChipSection& c) {
  v.field("cores", c.cores, {1, 1024}, "", "NeuronCores per chip (each as arch and timing say)");
  v.field("hbm_bytes", c.hbm_bytes, {0, int64_t{1} << 56}, "bytes",
          "HBM capacity of the chip, shared by its cores; 0: arch.hbm.bytes x cores");
  v.field("hbm_bandwidth_gb_per_s", c.hbm_bandwidth_gb_per_s, {0.0, 1e9}, "GB/s (1e9 bytes/s)",
          "HBM bandwidth of the chip, shared by its cores' transfers; 0: "
          "timing.hbm.bandwidth_gb_per_s x cores");
}

template <class V>
void describe(V& v, TopologySection& t) {
  v.field("instances", t.instances, {1, 4096}, "", "instances (servers) in the system");
  v.field("torus_x", t.torus_x, {1, 64}, "chips", "first dimension of an instance's chip torus");
  v.field("torus_y", t.torus_y, {1, 64}, "chips", "second dimension of an instance's chip torus");
  v.field("instance_ring", t.instance_ring,
          "same-coordinate chips of all instances form a NeuronLink ring (an UltraServer); "
          "false: instances talk over EFA");
}

template <class V>
void describe(V& v, LinkTiming& l) {
  v.field("bandwidth_gb_per_s", l.bandwidth_gb_per_s, {0.001, 1e6}, "GB/s (1e9 bytes/s)",
          "bandwidth of one direction of one link");
  v.field("latency_ns", l.latency_ns, {0, 1000000000}, "ns", "latency a transfer pays per hop");
  v.field("bandwidth_factor", l.bandwidth_factor, {1e-6, 1e3}, "",
          "multiplies the bandwidth of every link of this kind (a degraded link: below 1)");
  v.field("latency_factor", l.latency_factor, {0.0, 1e6}, "",
          "multiplies the latency of every link of this kind (a degraded link: above 1)");
}

template <class V>
void describe(V& v, LinksSection& l) {
  v.section("neuronlink", l.neuronlink, "a NeuronLink between neighbours of an instance's torus");
  v.section("instance_ring", l.instance_ring, "a NeuronLink between instances (UltraServer)");
  v.section("efa", l.efa, "a chip's EFA NIC; latency is that of a whole route between instances");
  v.field("failed", l.failed,
          "failed link directions, comma-separated (chip3.x+, chip0.y-, chip1.ring+, "
          "chip5.efa.tx, chip5.efa.rx): routes go around them; empty: none");
}

// Fills the 0 ("derived") chip figures from the one-core view, and the one-core view's share
// from the chip where `core_share_given` says the config left it out. Throws base::InputError.
void resolve(SystemConfig& s, ChipConfig& core, bool hbm_bytes_given, bool hbm_bandwidth_given);

}  // namespace wallsim::sim
