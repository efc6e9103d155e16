// Chip coordinates, link names and dimension-ordered routes.
#include "wallsim/sim/topology.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <tuple>

#include "wallsim/base/params.h"

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
      m_links(c.links) {
  for (LinkTiming* t : {&m_links.neuronlink, &m_links.instance_ring, &m_links.efa}) {
    *t = LinkTiming{t->effective_bandwidth_gb_per_s(), t->effective_latency_ns(), 1.0, 1.0};
  }
  if (c.links.failed.empty()) return;
  std::set<std::string> known;
  for (const LinkId& l : links()) known.insert(l.name());
  std::stringstream in(c.links.failed);
  std::string name;
  while (std::getline(in, name, ',')) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!known.count(name)) {
      throw base::InputError("links.failed",
                             "'" + name +
                                 "' is not a link of the system (links are named "
                                 "chip<N>.x+, .x-, .y+, .y-, .ring+, .ring-, .efa.tx, .efa.rx; "
                                 "this system has " +
                                 std::to_string(known.size()) + ")");
    }
    m_failed.insert(name);
  }
}

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
  std::vector<LinkId> out = dimension_ordered(a, b);
  if (m_failed.empty() ||
      std::none_of(out.begin(), out.end(), [&](const LinkId& l) { return failed(l); })) {
    return out;
  }
  return around_failures(a, b);
}

std::vector<std::pair<LinkId, int>> Topology::neighbours(int chip) const {
  std::vector<std::pair<LinkId, int>> out;
  const ChipCoord c = coord(chip);
  const auto step = [](int v, int dir, int n) { return (v + dir + n) % n; };
  for (int dir : {+1, -1}) {
    if (m_nx > 1)
      out.push_back(
          {{chip, LinkKind::torus_x, dir}, chip_at({c.instance, step(c.x, dir, m_nx), c.y})});
  }
  for (int dir : {+1, -1}) {
    if (m_ny > 1)
      out.push_back(
          {{chip, LinkKind::torus_y, dir}, chip_at({c.instance, c.x, step(c.y, dir, m_ny)})});
  }
  if (m_instances > 1 && m_ring) {
    for (int dir : {+1, -1}) {
      out.push_back(
          {{chip, LinkKind::ring, dir}, chip_at({step(c.instance, dir, m_instances), c.x, c.y})});
    }
  }
  if (m_instances > 1 && !m_ring) {
    for (int other = 0; other < chips(); ++other) {
      if (coord(other).instance != c.instance) out.push_back({{chip, LinkKind::efa_tx, 0}, other});
    }
  }
  return out;
}

// Dijkstra on (latency, hops) over the link directions that have not failed; ties keep the
// first route found in neighbours() order, so the answer is fixed.
std::vector<LinkId> Topology::around_failures(int a, int b) const {
  using Dist = std::pair<int64_t, int>;
  const Dist inf{std::numeric_limits<int64_t>::max(), 0};
  std::vector<Dist> dist(static_cast<size_t>(chips()), inf);
  std::vector<std::pair<LinkId, int>> via(static_cast<size_t>(chips()), {LinkId{}, -1});
  std::set<std::tuple<int64_t, int, int>> open;
  dist[static_cast<size_t>(a)] = {0, 0};
  open.insert({0, 0, a});
  while (!open.empty()) {
    const auto [lat, hops, chip] = *open.begin();
    open.erase(open.begin());
    if (chip == b) break;
    for (const auto& [link, next] : neighbours(chip)) {
      if (failed(link)) continue;
      const LinkId rx{next, LinkKind::efa_rx, 0};
      if (link.kind == LinkKind::efa_tx && failed(rx)) continue;
      const Dist d{lat + timing(link.kind).latency_ns, hops + 1};
      Dist& old = dist[static_cast<size_t>(next)];
      if (d < old) {
        if (old != inf) open.erase({old.first, old.second, next});
        old = d;
        via[static_cast<size_t>(next)] = {link, chip};
        open.insert({d.first, d.second, next});
      }
    }
  }
  if (dist[static_cast<size_t>(b)] == inf) {
    throw base::InputError("links.failed", "no route from chip " + std::to_string(a) + " to chip " +
                                               std::to_string(b) + " avoids the failed links");
  }
  std::vector<LinkId> out;
  for (int c = b; c != a; c = via[static_cast<size_t>(c)].second) {
    const LinkId& l = via[static_cast<size_t>(c)].first;
    if (l.kind == LinkKind::efa_tx) out.push_back({c, LinkKind::efa_rx, 0});
    out.push_back(l);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void Topology::check_connected() const {
  for (int a = 0; a < chips(); ++a) {
    for (int b = 0; b < chips(); ++b) {
      if (a != b) route(a, b);
    }
  }
}

std::vector<LinkId> Topology::dimension_ordered(int a, int b) const {
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
