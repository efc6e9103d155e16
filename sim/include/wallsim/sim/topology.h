// Topology and routing: where each chip sits (instance, torus x, y) and the links a transfer
// between two chips crosses, by dimension-ordered routing (plain C++).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "wallsim/sim/system_config.h"

namespace wallsim::sim {

enum class LinkKind : uint8_t { torus_x, torus_y, ring, efa_tx, efa_rx };

// One link direction leaving (or, for efa_rx, entering) `chip`; `dir` is +1 or -1 on torus and
// ring links, 0 on a NIC.
struct LinkId {
  int chip = 0;
  LinkKind kind = LinkKind::torus_x;
  int dir = 0;
  std::string name() const;  // "chip3.x+", "chip0.ring-", "chip5.efa.tx"
};

struct ChipCoord {
  int instance = 0, x = 0, y = 0;
};

class Topology {
 public:
  // Throws base::InputError ("links.failed: ...") for a failed link the system does not have.
  explicit Topology(const SystemConfig& config);
  int chips() const { return m_instances * m_nx * m_ny; }
  ChipCoord coord(int chip) const;
  int chip_at(const ChipCoord& c) const;
  // Every link direction of the system, chip by chip, in a fixed order.
  std::vector<LinkId> links() const;
  // The links a transfer from chip `a` to chip `b` crosses, in order: along x the shorter way
  // round the torus (ties go +), then along y, then across instances (the ring the shorter
  // way, else the source NIC out and the destination NIC in). Empty when a == b. When that
  // route crosses a failed link: the route of least latency (then fewest hops) that avoids
  // every failed link (the other way round a torus ring, another dimension first, another
  // chip's NIC); none: base::InputError naming the chips.
  std::vector<LinkId> route(int a, int b) const;
  // The latency of such a route: per NeuronLink and ring hop, or EFA's once.
  int64_t latency_ns(const std::vector<LinkId>& route) const;
  // The timing of one link direction, its kind's factors applied.
  const LinkTiming& timing(LinkKind kind) const;
  bool failed(const LinkId& l) const { return m_failed.count(l.name()) > 0; }
  // Throws base::InputError unless every chip can reach every other around the failed links.
  void check_connected() const;

 private:
  std::vector<LinkId> dimension_ordered(int a, int b) const;
  std::vector<LinkId> around_failures(int a, int b) const;
  // The links leaving `chip` with the chip each reaches (EFA: every chip of other instances).
  std::vector<std::pair<LinkId, int>> neighbours(int chip) const;

  int m_instances, m_nx, m_ny;
  bool m_ring;
  LinksSection m_links;  // effective timings (factors applied)
  std::set<std::string> m_failed;
};

}  // namespace wallsim::sim
