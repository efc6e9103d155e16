// Chip coordinates, link names and dimension-ordered routes.
#include "wallsim/sim/topology.h"

namespace wallsim::sim {

std::string LinkId::name() const {
  std::string n = "chip" + std::to_string(chip) + ".";
  const char* sign = dir > 0 ? "+" : "-";
  switch (kind) {
    case LinkKind::torus_x:
      return n + "x" + sign;
    case LinkKind::torus_y:
      return n + "y" + sign;
    case LinkKind::ring:
      return n + "ring" + sign;
    case LinkKind::efa_tx:
      return n + "efa.tx";
    case LinkKind::efa_rx:
      return n + "efa.rx";
  }
  return n + "?";
}

Topology::Topology(const SystemConfig& c)
    : m_instances(static_cast<int>(c.topology.instances)),
      m_nx(static_cast<int>(c.topology.torus_x)),
      m_ny(static_cast<int>(c.topology.torus_y)),
      m_ring(c.topology.instance_ring),
      m_links(c.links) {}

ChipCoord Topology::coord(int chip) const {
  const int per = m_nx * m_ny;
  return {chip / per, chip % per % m_nx, chip % per / m_nx};
}

int Topology::chip_at(const ChipCoord& c) const {
  return c.instance * m_nx * m_ny + c.y * m_nx + c.x;
}

std::vector<LinkId> Topology::links() const {
  std::vector<LinkId> out;
  for (int chip = 0; chip < chips(); ++chip) {
    for (int dir : {+1, -1}) {
      if (m_nx > 1) out.push_back({chip, LinkKind::torus_x, dir});
    }
    for (int dir : {+1, -1}) {
      if (m_ny > 1) out.push_back({chip, LinkKind::torus_y, dir});
    }
    if (m_instances > 1 && m_ring) {
      for (int dir : {+1, -1}) out.push_back({chip, LinkKind::ring, dir});
    }
    if (m_instances > 1 && !m_ring) {
      out.push_back({chip, LinkKind::efa_tx, 0});
      out.push_back({chip, LinkKind::efa_rx, 0});
    }
  }
  return out;
}

namespace {

// Steps (+1 or -1) and their count from `from` to `to` on a ring of `n`, the shorter way.
int ring_dir(int from, int to, int n, int& steps) {
  const int fwd = ((to - from) % n + n) % n;
  if (fwd <= n - fwd) {
    steps = fwd;
    return +1;
  }
  steps = n - fwd;
  return -1;
}

}  // namespace

std::vector<LinkId> Topology::route(int a, int b) const {
  std::vector<LinkId> out;
  ChipCoord at = coord(a);
  const ChipCoord to = coord(b);
  int steps = 0;
  int dir = ring_dir(at.x, to.x, m_nx, steps);
  for (int i = 0; i < steps; ++i) {
    out.push_back({chip_at(at), LinkKind::torus_x, dir});
    at.x = (at.x + dir + m_nx) % m_nx;
  }
  dir = ring_dir(at.y, to.y, m_ny, steps);
  for (int i = 0; i < steps; ++i) {
    out.push_back({chip_at(at), LinkKind::torus_y, dir});
    at.y = (at.y + dir + m_ny) % m_ny;
  }
  if (at.instance != to.instance) {
    if (m_ring) {
      dir = ring_dir(at.instance, to.instance, m_instances, steps);
      for (int i = 0; i < steps; ++i) {
        out.push_back({chip_at(at), LinkKind::ring, dir});
        at.instance = (at.instance + dir + m_instances) % m_instances;
      }
    } else {
      // The NICs of the source (after the torus hops: the chip at the destination's
      // coordinates in the source instance) and of the destination.
      out.push_back({chip_at(at), LinkKind::efa_tx, 0});
      out.push_back({b, LinkKind::efa_rx, 0});
    }
  }
  return out;
}

const LinkTiming& Topology::timing(LinkKind kind) const {
  switch (kind) {
    case LinkKind::torus_x:
    case LinkKind::torus_y:
      return m_links.neuronlink;
    case LinkKind::ring:
      return m_links.instance_ring;
    case LinkKind::efa_tx:
    case LinkKind::efa_rx:
      break;
  }
  return m_links.efa;
}

int64_t Topology::latency_ns(const std::vector<LinkId>& route) const {
  int64_t ns = 0;
  for (const LinkId& l : route) {
    if (l.kind == LinkKind::efa_rx) continue;  // EFA's latency is the whole route's, once
    ns += timing(l.kind).latency_ns;
  }
  return ns;
}

}  // namespace wallsim::sim
