// The collective engines: ranks meet, a collective core per chip is taken, the schedule's steps
// run as network transfers and reductions, and the functional results are written at the end.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "wallsim/sim/collective_engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "wallsim/collectives/results.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/memory/tile_io.h"

namespace wallsim::sim {

using collectives::CollectiveOp;
using sc_core::sc_time;

namespace {

// Collective transfers start with queue keys above every DMA queue's and the launcher's:
// kQueueBase + issuing queue x kQueueStride + destination rank, unique among the transfers a
// core has in flight.
constexpr int kQueueBase = 1 << 20;
constexpr int kQueueStride = 1 << 16;

sc_time ps(int64_t v) { return sc_time::from_value(static_cast<sc_dt::uint64>(v)); }
int64_t now_ps() { return static_cast<int64_t>(sc_core::sc_time_stamp().value()); }

std::string core_name(const std::pair<int, int>& c) {
  return "[" + std::to_string(c.first) + ", " + std::to_string(c.second) + "]";
}

// The chips a communicator's ranks ((chip, core) each) are on, ascending.
std::set<int> spanned_chips(const std::vector<std::pair<int, int>>& ranks) {
  std::set<int> chips;
  for (const auto& r : ranks) chips.insert(r.first);
  return chips;
}

// What a rank's instruction says, for the check that every rank issues the same collective.
std::string describe(const isa::Instruction& in) {
  const isa::AccessPattern& ap = in.uses(isa::F_Src0) ? in.src[0] : in.dst;
  std::string s = std::string(isa::info(in.op).name) + " of " + std::to_string(ap.bytes()) +
                  " bytes " + std::string(isa::name_of(ap.dtype));
  if (in.uses(isa::F_Alu)) s += " (" + std::string(isa::name_of(in.alu)) + ")";
  if (in.op == isa::Opcode::permute) s += " peer " + std::to_string(in.peer);
  return s;
}

// The size as nccl-tests counts it: an all_gather's output, everything else's input.
double size_bytes(const isa::Instruction& in) {
  if (in.op == isa::Opcode::all_gather || in.op == isa::Opcode::recv)
    return static_cast<double>(in.dst.bytes());
  return static_cast<double>(in.src[0].bytes());
}

std::vector<float> read_flat(const engines::Launch& l, const isa::AccessPattern& ap) {
  memory::Tile t;
  memory::read_tile(l.memory, ap, t);
  return std::vector<float>(t.data(), t.data() + t.size());
}

void write_flat(const engines::Launch& l, const isa::AccessPattern& ap, std::vector<float> v) {
  memory::Tile t = Eigen::Map<memory::Tile>(v.data(), ap.partitions, ap.free_elements());
  memory::write_tile(l.memory, ap, t);
}

}  // namespace

std::vector<int> hierarchy_levels(const std::vector<std::pair<int, int>>& ranks,
                                  const Topology& topology, collectives::Hierarchy h) {
  using collectives::Hierarchy;
  const int p = static_cast<int>(ranks.size());
  if (h == Hierarchy::flat || p < 4) return {};
  if (h == Hierarchy::dimensions) {
    // Coordinates (core, torus x, torus y, instance); a level per coordinate that varies.
    std::vector<std::array<int, 4>> coords;
    for (const auto& [chip, core] : ranks) {
      const ChipCoord c = topology.coord(chip);
      coords.push_back({core, c.x, c.y, c.instance});
    }
    std::vector<std::vector<int>> values(4);
    for (int d = 0; d < 4; ++d) {
      for (const auto& c : coords) values[d].push_back(c[static_cast<size_t>(d)]);
      std::sort(values[d].begin(), values[d].end());
      values[d].erase(std::unique(values[d].begin(), values[d].end()), values[d].end());
    }
    int64_t product = 1;
    for (const auto& v : values) product *= static_cast<int64_t>(v.size());
    // The ranks must be every combination, in mixed-radix order (core fastest).
    bool fits = product == p;
    for (int r = 0; fits && r < p; ++r) {
      int rest = r;
      for (int d = 0; d < 4 && fits; ++d) {
        const int size = static_cast<int>(values[d].size());
        fits = coords[static_cast<size_t>(r)][static_cast<size_t>(d)] ==
               values[d][static_cast<size_t>(rest % size)];
        rest /= size;
      }
    }
    if (fits) {
      std::vector<int> levels;
      for (const auto& v : values) {
        if (v.size() > 1) levels.push_back(static_cast<int>(v.size()));
      }
      if (levels.size() > 1) return levels;
      return {};
    }
  }
  // Two levels: Y ranks in each of X instances, an instance's ranks one after another.
  const auto instance = [&](int r) {
    return topology.coord(ranks[static_cast<size_t>(r)].first).instance;
  };
  int y = 1;
  while (y < p && instance(y) == instance(0)) ++y;
  if (y < 2 || y == p || p % y != 0) return {};
  std::vector<int> seen;
  for (int b = 0; b < p; b += y) {
    for (int r = b; r < b + y; ++r) {
      if (instance(r) != instance(b)) return {};
    }
    if (std::find(seen.begin(), seen.end(), instance(b)) != seen.end()) return {};
    seen.push_back(instance(b));
  }
  return {y, p / y};
}

struct CollectiveEngine::Arrival {
  const isa::Instruction* in = nullptr;
  engines::Launch* launch = nullptr;
  int queue = 0;
  int64_t at_ps = 0;    // when this rank issued it
  bool absent = false;  // folded: a member the representative's arrival stands for
};

struct CollectiveEngine::Meeting {
  std::string key, comm, label;
  int64_t index = 0;
  bool pair = false;                       // send/recv: slot 0 the sender, 1 the receiver
  std::vector<std::pair<int, int>> ranks;  // (chip, core) by slot
  std::vector<std::optional<Arrival>> arrivals;
  int arrived = 0;
  // The communicators it moves for: its own ranks first, then (folded) its twins' in meeting
  // key order.
  std::vector<std::vector<std::pair<int, int>>> twin_ranks;
  std::map<int, int> cores;  // by chip: collective cores it takes (a twin spanning the chip, 1)
  int64_t ready_ps = 0;
  bool done = false;
  std::string error;
  int waiting = 0;
  sc_core::sc_event done_event;
};

CollectiveEngine::CollectiveEngine(sc_core::sc_module_name name,
                                   const collectives::CollectivesConfig& config,
                                   dma::Network& network, const Topology& topology,
                                   std::function<dma::Route(int, int)> route)
    : sc_module(name),
      m_config(config),
      m_network(network),
      m_topology(topology),
      m_route(std::move(route)),
      m_free_cores(static_cast<size_t>(topology.chips()), static_cast<int>(config.cores_per_chip)) {
  SC_HAS_PROCESS(CollectiveEngine);
  SC_METHOD(schedule);
  sensitive << m_schedule;
  dont_initialize();
}

CollectiveEngine::~CollectiveEngine() = default;

void CollectiveEngine::run(const isa::Instruction& in, engines::Launch& launch, int chip, int core,
                           int queue) {
  const isa::Plan& plan = *launch.plan;
  const std::string& name = plan.comms.at(static_cast<size_t>(in.comm)).name;
  if (static_cast<size_t>(in.comm) >= launch.comm_ranks.size() ||
      launch.comm_ranks[static_cast<size_t>(in.comm)].empty()) {
    throw memory::MemoryError("communicator '" + name + "' is not bound to ranks");
  }
  const auto& ranks = launch.comm_ranks[static_cast<size_t>(in.comm)];
  const auto it = std::find(ranks.begin(), ranks.end(), std::pair<int, int>{chip, core});
  if (it == ranks.end()) {
    throw memory::MemoryError("core " + core_name({chip, core}) +
                              " is not a rank of communicator '" + name + "'");
  }
  const int rank = static_cast<int>(it - ranks.begin());
  std::string comm_id = name + "@";
  for (const auto& r : ranks) comm_id += core_name(r);

  const bool pair = in.op == isa::Opcode::send || in.op == isa::Opcode::recv;
  std::vector<const CollectiveFold::Communicator*> twins;
  if (m_fold) twins = fold_twins(name, ranks, {chip, core}, pair);
  std::string key, label;
  int slot = rank;
  int64_t index = 0;
  if (pair) {
    const bool sends = in.op == isa::Opcode::send;
    const int from = sends ? rank : in.peer, to = sends ? in.peer : rank;
    const std::string route = std::to_string(from) + ">" + std::to_string(to);
    index = m_next_index[comm_id + (sends ? "#s" : "#r") + route]++;
    key = comm_id + "#p" + route + "#" + std::to_string(index);
    label = "communicator '" + name + "' send " + std::to_string(index) + " from rank " +
            std::to_string(from) + " to rank " + std::to_string(to);
    slot = sends ? 0 : 1;
  } else {
    index = m_next_index[comm_id + "#" + std::to_string(rank)]++;
    key = comm_id + "#c" + std::to_string(index);
    label = "communicator '" + name + "' collective " + std::to_string(index);
  }
  auto& owned = m_meetings[key];
  if (!owned) {
    owned = std::make_unique<Meeting>();
    Meeting& m = *owned;
    m.key = key;
    m.comm = name;
    m.label = label;
    m.index = index;
    m.pair = pair;
    if (pair) {
      const int from = slot == 0 ? rank : in.peer, to = slot == 0 ? in.peer : rank;
      m.ranks = {ranks.at(static_cast<size_t>(from)), ranks.at(static_cast<size_t>(to))};
    } else {
      m.ranks = ranks;
    }
    m.arrivals.resize(m.ranks.size());
    m.twin_ranks.push_back(m.ranks);
    for (size_t t = 1; t < twins.size(); ++t) m.twin_ranks.push_back(twins[t]->members);
    for (const auto& tr : m.twin_ranks)
      for (int c : spanned_chips(tr)) ++m.cores[c];
  }
  Meeting& m = *owned;
  // Every rank must issue the same collective (send and recv: the same bytes and dtype).
  for (size_t s = 0; s < m.arrivals.size(); ++s) {
    if (!m.arrivals[s]) continue;
    const isa::Instruction& other = *m.arrivals[s]->in;
    const bool same = pair ? size_bytes(other) == size_bytes(in) &&
                                 (other.uses(isa::F_Src0) ? other.src[0] : other.dst).dtype ==
                                     (in.uses(isa::F_Src0) ? in.src[0] : in.dst).dtype
                           : describe(other) == describe(in);
    if (!same) {
      const std::string who =
          pair ? (s == 0 ? "the send" : "the recv") : "rank " + std::to_string(s);
      throw memory::MemoryError(label + ": rank " + std::to_string(rank) + " issues " +
                                describe(in) + ", " + who + " " + describe(other));
    }
    break;
  }
  m.arrivals[static_cast<size_t>(slot)] = Arrival{&in, &launch, queue, now_ps()};
  ++m.arrived;
  if (m_fold) {
    // The absent members issue the same instruction from the same queue in this picosecond.
    for (auto& a : m.arrivals) {
      if (a) continue;
      a = Arrival{&in, &launch, queue, now_ps(), /*absent=*/true};
      ++m.arrived;
    }
  }
  if (m.arrived == static_cast<int>(m.arrivals.size())) {
    m.ready_ps = now_ps();
    m_ready.push_back(&m);
    m_schedule.notify(sc_core::SC_ZERO_TIME);
  }
  ++m.waiting;
  while (!m.done) sc_core::wait(m.done_event);
  const std::string error = m.error;
  if (--m.waiting == 0) m_meetings.erase(key);
  if (!error.empty()) throw memory::MemoryError(error);
}

void CollectiveEngine::set_fold(CollectiveFold fold) {
  const auto stands_for = [&fold](const std::pair<int, int>& r) {
    return std::find(fold.ranks.begin(), fold.ranks.end(), r) != fold.ranks.end();
  };
  if (!stands_for(fold.representative)) {
    throw std::invalid_argument("CollectiveEngine::set_fold: the representative " +
                                core_name(fold.representative) +
                                " is not among the ranks it stands for");
  }
  std::map<std::string, std::vector<const CollectiveFold::Communicator*>> by_name;
  for (const CollectiveFold::Communicator& c : fold.communicators) {
    if (c.members.empty()) {
      throw std::invalid_argument("CollectiveEngine::set_fold: communicator '" + c.name +
                                  "' has no members");
    }
    for (const auto& r : c.members) {
      if (!stands_for(r)) {
        throw std::invalid_argument("CollectiveEngine::set_fold: communicator '" + c.name +
                                    "' has rank " + core_name(r) +
                                    ", which the representative does not stand for");
      }
    }
    by_name[c.name].push_back(&c);
  }
  for (const auto& [name, twins] : by_name) {
    std::set<std::pair<int, int>> seen;
    for (const CollectiveFold::Communicator* c : twins) {
      if (c->members.size() != twins.front()->members.size()) {
        throw std::invalid_argument("CollectiveEngine::set_fold: '" + name + "' communicators of " +
                                    std::to_string(twins.front()->members.size()) + " and " +
                                    std::to_string(c->members.size()) + " ranks are not twins");
      }
      for (const auto& r : c->members) {
        if (!seen.insert(r).second) {
          throw std::invalid_argument("CollectiveEngine::set_fold: rank " + core_name(r) +
                                      " is twice in the '" + name + "' communicators");
        }
      }
    }
    // Twins meet together, each on a collective core of its own on every chip it spans.
    std::map<int, int64_t> demand;  // by chip
    for (const CollectiveFold::Communicator* c : twins)
      for (int chip : spanned_chips(c->members)) ++demand[chip];
    for (const auto& [chip, n] : demand) {
      if (n > m_config.cores_per_chip) {
        throw std::invalid_argument("CollectiveEngine::set_fold: " + std::to_string(n) + " '" +
                                    name + "' communicators span chip " + std::to_string(chip) +
                                    " and would wait for its " +
                                    std::to_string(m_config.cores_per_chip) +
                                    " collective cores in turn (collectives.cores_per_chip)");
      }
    }
    // Twins must run the same schedule: a hierarchical one needs the same levels for each.
    const std::vector<int> levels =
        hierarchy_levels(twins.front()->members, m_topology, m_config.hierarchy);
    for (const CollectiveFold::Communicator* c : twins) {
      if (hierarchy_levels(c->members, m_topology, m_config.hierarchy) != levels) {
        std::string a, b;
        for (const auto& r : twins.front()->members) a += core_name(r);
        for (const auto& r : c->members) b += core_name(r);
        throw std::invalid_argument("CollectiveEngine::set_fold: '" + name + "' communicators " +
                                    a + " and " + b +
                                    " form different hierarchy levels (collectives.hierarchy)");
      }
    }
  }
  m_fold = std::move(fold);
}

std::vector<const CollectiveFold::Communicator*> CollectiveEngine::fold_twins(
    const std::string& name, const std::vector<std::pair<int, int>>& ranks,
    std::pair<int, int> core, bool pair) const {
  const CollectiveFold& f = *m_fold;
  if (core != f.representative) {
    throw memory::MemoryError("core " + core_name(core) + " issues a collective on '" + name +
                              "' in a run folded onto core " + core_name(f.representative) +
                              ", the only one that runs");
  }
  if (pair) {
    throw memory::MemoryError("communicator '" + name +
                              "': send and recv do not fold (their two ranks run different "
                              "instructions)");
  }
  const CollectiveFold::Communicator* own = nullptr;
  std::vector<std::pair<std::string, const CollectiveFold::Communicator*>> others;
  for (const CollectiveFold::Communicator& c : f.communicators) {
    if (c.name != name) continue;
    if (!own && c.members == ranks) {
      own = &c;
      continue;
    }
    std::string key = name + "@";
    for (const auto& r : c.members) key += core_name(r);
    others.emplace_back(std::move(key), &c);
  }
  if (!own) {
    std::string members;
    for (const auto& r : ranks) members += core_name(r);
    throw memory::MemoryError("communicator '" + name + "' of ranks " + members +
                              " is not one of the folded run's communicators");
  }
  std::stable_sort(others.begin(), others.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const CollectiveFold::Communicator*> twins{own};
  for (const auto& o : others) twins.push_back(o.second);
  return twins;
}

namespace {

std::string twin_name(const std::vector<std::pair<int, int>>& ranks) {
  const std::set<int> chips = spanned_chips(ranks);
  std::string s;
  for (const auto& r : ranks) s += core_name(r);
  s += chips.size() == 1 ? " (chip" : " (chips";
  for (int c : chips) s += (c == *chips.begin() ? " " : ", ") + std::to_string(c);
  return s + ")";
}

std::string not_exact(const std::string& what) {
  return "SPMD folding is not exact for this run: " + what +
         " (the chips see different traffic; run with --fold off)";
}

}  // namespace

std::string CollectiveEngine::partial_start(const Meeting& m) const {
  if (m.twin_ranks.size() < 2) return "";
  for (const auto& twin : m.twin_ranks) {
    const bool fits = std::all_of(twin.begin(), twin.end(), [&](const std::pair<int, int>& r) {
      return m_free_cores[static_cast<size_t>(r.first)] >= 1;
    });
    if (!fits) continue;
    return not_exact(m.label + ": twin communicator " + twin_name(twin) +
                     " finds its collective cores at " + std::to_string(m.ready_ps) +
                     " ps while others wait for theirs (collectives.cores_per_chip)");
  }
  // Every twin waits: unfolded, they would take their cores as they free up, in key order with
  // the other meetings ready, and a meeting keyed between two twins could start before the
  // second; the folded meeting, which takes them together, cannot follow that.
  return not_exact(m.label + ": its " + std::to_string(m.twin_ranks.size()) +
                   " twin communicators wait for collective cores from " +
                   std::to_string(m.ready_ps) +
                   " ps, and unfolded another meeting could take them between two twins "
                   "(collectives.cores_per_chip)");
}

// Starts every ready collective that finds a free collective core on each chip it spans (folded:
// one per twin), in (ready time, key) order: never in the order SystemC happened to run the
// ranks.
void CollectiveEngine::schedule() {
  std::sort(m_ready.begin(), m_ready.end(), [](const Meeting* a, const Meeting* b) {
    return std::tie(a->ready_ps, a->key) < std::tie(b->ready_ps, b->key);
  });
  std::vector<Meeting*> waiting;
  for (Meeting* m : m_ready) {
    const bool fits = std::all_of(m->cores.begin(), m->cores.end(), [&](const auto& c) {
      return m_free_cores[static_cast<size_t>(c.first)] >= c.second;
    });
    if (!fits) {
      // Folded: unfolded, the twins that find their cores would start now and the others
      // wait, or another meeting could take them between two twins; the folded run cannot
      // follow that (the twins must move together).
      if (const std::string e = partial_start(*m); !e.empty()) {
        m->error = e;
        m->done = true;
        m->done_event.notify();
        continue;
      }
      waiting.push_back(m);
      continue;
    }
    for (const auto& [c, n] : m->cores) m_free_cores[static_cast<size_t>(c)] -= n;
    sc_core::sc_spawn([this, m] { execute(m); });
  }
  m_ready.swap(waiting);
}

void CollectiveEngine::execute(Meeting* mp) {
  Meeting& m = *mp;
  const isa::Instruction& first = *m.arrivals[0]->in;
  const CollectiveOp op = *collectives::collective_op_of(first.op);
  const int p = static_cast<int>(m.ranks.size());
  const double bytes = size_bytes(first);
  const bool composable = op == CollectiveOp::all_reduce || op == CollectiveOp::all_gather ||
                          op == CollectiveOp::reduce_scatter;
  const std::vector<int> levels =
      composable ? hierarchy_levels(m.ranks, m_topology, m_config.hierarchy) : std::vector<int>{};
  collectives::Schedule schedule;
  if (!levels.empty()) {
    schedule = collectives::make_hierarchical_schedule(
        op, levels, bytes,
        [this](const collectives::Stage& st) {
          return collectives::choose_algorithm(st.op, st.group_size, st.bytes, m_config);
        },
        static_cast<int>(m_config.ring_directions));
  } else {
    schedule =
        collectives::make_schedule(op, collectives::choose_algorithm(op, p, bytes, m_config), p,
                                   bytes, first.peer, static_cast<int>(m_config.ring_directions));
  }
  const size_t n_twins = m.twin_ranks.size();
  // By twin (0: its own) and resource: capacity the twin's transfers took.
  std::vector<std::map<int, double>> load(n_twins);
  const int64_t start = now_ps();
  const auto route_of = [this](int a, int b) -> const dma::Route& {
    auto cached = m_routes.find({a, b});
    if (cached == m_routes.end())
      cached = m_routes.emplace(std::make_pair(a, b), m_route(a, b)).first;
    return cached->second;
  };
  if (m_config.launch_ns > 0) sc_core::wait(ps(m_config.launch_ns * 1000));
  for (size_t step_index = 0; step_index < schedule.steps.size(); ++step_index) {
    const collectives::Step& step = schedule.steps[step_index];
    const std::string step_name = m.label + ", step " + std::to_string(step_index);
    // The step's fixed costs: its overhead, a handshake per peer of the busiest rank, and the
    // network proxy's round when a transfer crosses EFA (folded: every twin's the same).
    const int64_t base_ns =
        m_config.step_overhead_ns + m_config.handshake_ns * collectives::peers_per_step(step);
    std::vector<int64_t> fixed_ns(n_twins, base_ns);
    for (size_t t = 0; t < n_twins; ++t) {
      const auto& ranks = m.twin_ranks[t];
      for (const collectives::Send& s : step.sends) {
        if (route_of(ranks[static_cast<size_t>(s.from)].first,
                     ranks[static_cast<size_t>(s.to)].first)
                .proxied) {
          fixed_ns[t] += m_config.network_proxy_ns;
          break;
        }
      }
      if (fixed_ns[t] != fixed_ns[0]) {
        m.error = not_exact(step_name + ": twin communicator " + twin_name(ranks) + " pays " +
                            std::to_string(fixed_ns[t]) + " ns of fixed cost, the simulated " +
                            std::to_string(fixed_ns[0]) + " ns");
        break;
      }
    }
    if (!m.error.empty()) break;
    if (fixed_ns[0] > 0) sc_core::wait(ps(fixed_ns[0] * 1000));
    // The step's transfers move together from this process (a process per transfer, each
    // with a SystemC stack, took tens of GiB of address space and more memory maps than
    // vm.max_map_count allows at 512 ranks); the step ends when the last one has landed.
    // Folded, each send once per twin, from the twin's own member (send-major: a one-chip fold
    // counts its bytes and load in the order a move of multiplicity `twins` did).
    std::vector<dma::Network::Move> moves;
    std::vector<int64_t> latency_ns;
    moves.reserve(step.sends.size() * n_twins);
    for (const collectives::Send& s : step.sends) {
      for (size_t t = 0; t < n_twins; ++t) {
        const auto& ranks = m.twin_ranks[t];
        const auto [chip, core] = ranks[static_cast<size_t>(s.from)];
        const int to_chip = ranks[static_cast<size_t>(s.to)].first;
        const dma::Route& route = route_of(chip, to_chip);
        for (const memory::ResourceUse& u : route.uses) load[t][u.resource] += s.bytes * u.weight;
        const dma::TransferKey key{
            chip, core,
            kQueueBase + m.arrivals[static_cast<size_t>(s.from)]->queue * kQueueStride + s.to};
        moves.push_back({key, s.bytes, route.uses, 1});
        latency_ns.push_back(route.latency_ns);
      }
    }
    const std::vector<int64_t> landed = m_network.transfer_all(std::move(moves));
    // Each twin's step ends when its last send has landed and crossed its route.
    std::vector<int64_t> end_ps(n_twins, now_ps());
    for (size_t i = 0; i < landed.size(); ++i) {
      int64_t& e = end_ps[i % n_twins];
      e = std::max(e, landed[i] + latency_ns[i] * 1000);
    }
    for (size_t t = 1; t < n_twins; ++t) {
      if (end_ps[t] == end_ps[0]) continue;
      m.error = not_exact(step_name + ": twin communicator " + twin_name(m.twin_ranks[t]) +
                          " ended at " + std::to_string(end_ps[t]) + " ps, the simulated one at " +
                          std::to_string(end_ps[0]) + " ps");
      break;
    }
    if (!m.error.empty()) break;
    if (end_ps[0] > now_ps()) sc_core::wait(ps(end_ps[0] - now_ps()));
    if (step.reduce_bytes > 0) {
      const double seconds = step.reduce_bytes / (m_config.reduce_gb_per_s * 1e9);
      sc_core::wait(ps(static_cast<int64_t>(std::llround(seconds * 1e12))));
    }
  }
  try {
    if (m.error.empty() && m.arrivals[0]->launch->functional) write_results(m, op);
  } catch (const std::exception& e) {
    m.error = m.label + ": " + e.what();
  }
  std::vector<int64_t> arrived_ps;
  for (const auto& a : m.arrivals) arrived_ps.push_back(a ? a->at_ps : m.ready_ps);
  Record rec{m.comm,
             m.index,
             op,
             schedule.algorithm,
             schedule.label(),
             levels,
             p,
             bytes,
             m.ready_ps,
             start,
             now_ps(),
             "",
             0.0,
             m.ranks,
             std::move(arrived_ps),
             static_cast<int>(n_twins),
             {},
             {}};
  for (const auto& twin_load : load) {
    std::string bound_by;
    double bound_ns = 0;
    for (const auto& [resource, used] : twin_load) {
      const double ns = used / m_network.resource_capacity(resource) * 1e9;
      if (ns > bound_ns) {
        bound_ns = ns;
        bound_by = m_network.resource_name(resource);
      }
    }
    rec.twin_bound_by.push_back(bound_by);
    rec.twin_bound_ns.push_back(bound_ns);
  }
  rec.bound_by = rec.twin_bound_by.front();
  rec.bound_ns = rec.twin_bound_ns.front();
  if (m.error.empty()) m_records.push_back(std::move(rec));
  for (const auto& [c, n] : m.cores) m_free_cores[static_cast<size_t>(c)] += n;
  m.done = true;
  m.done_event.notify();
  m_schedule.notify(sc_core::SC_ZERO_TIME);
}

// Each rank's destination from every rank's source, read now that every transfer has landed
// (folded: the representative's alone is written; the absent members' sources are its own).
void CollectiveEngine::write_results(Meeting& m, CollectiveOp op) {
  const isa::Instruction& first = *m.arrivals[0]->in;
  std::vector<std::vector<float>> inputs;
  if (m.pair) {
    inputs.push_back(read_flat(*m.arrivals[0]->launch, m.arrivals[0]->in->src[0]));
    auto out = collectives::collective_results(op, first.alu, first.peer, inputs);
    write_flat(*m.arrivals[1]->launch, m.arrivals[1]->in->dst, std::move(out[0]));
    return;
  }
  for (const auto& a : m.arrivals) inputs.push_back(read_flat(*a->launch, a->in->src[0]));
  auto out = collectives::collective_results(op, first.alu, first.peer, inputs);
  for (size_t r = 0; r < m.arrivals.size(); ++r) {
    if (m.arrivals[r]->absent) continue;
    write_flat(*m.arrivals[r]->launch, m.arrivals[r]->in->dst, std::move(out[r]));
  }
}

std::vector<std::string> CollectiveEngine::stuck_report() const {
  std::vector<std::string> out;
  for (const auto& [key, m] : m_meetings) {
    if (m->arrived == static_cast<int>(m->arrivals.size())) continue;
    std::string line =
        m->label + " (" +
        std::string(
            isa::info(m->arrivals[0] ? m->arrivals[0]->in->op : m->arrivals[1]->in->op).name) +
        "): ";
    if (m->pair) {
      line += m->arrivals[0] ? "the recv never arrived" : "the send never arrived";
    } else {
      std::string arrived, missing;
      for (size_t r = 0; r < m->arrivals.size(); ++r) {
        std::string& to = m->arrivals[r] ? arrived : missing;
        to += (to.empty() ? "" : ", ") + std::to_string(r) + " " + core_name(m->ranks[r]);
      }
      line += "ranks " + arrived + " of " + std::to_string(m->arrivals.size()) +
              " arrived; never: " + missing;
    }
    out.push_back(line);
  }
  return out;
}

void CollectiveEngine::write_stats(traces::StatsRegistry& stats, const std::string& scope) const {
  struct Sum {
    int64_t count = 0;
    double bytes = 0, ns = 0;
    std::map<std::string, int64_t> bound_by;
    int twins = 1;
  };
  // In (communicator, index) order, whatever order collectives finished in.
  std::vector<const Record*> sorted;
  for (const Record& r : m_records) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(), [](const Record* a, const Record* b) {
    return std::tie(a->comm, a->index, a->ready_ps) < std::tie(b->comm, b->index, b->ready_ps);
  });
  std::map<std::string, Sum> sums;
  for (const Record* rp : sorted) {
    const Record& r = *rp;
    Sum& s = sums[r.comm + "." + std::string(collectives::name_of(r.op))];
    // Folded: its twins ran it too, at the same times; summed one at a time as they would be.
    for (int t = 0; t < r.twins; ++t) {
      ++s.count;
      s.bytes += r.bytes;
      s.ns += double(r.end_ps - r.ready_ps) / 1e3;
      const std::string& bound_by = r.twin_bound_by.at(static_cast<size_t>(t));
      if (!bound_by.empty()) ++s.bound_by[bound_by];
    }
    s.twins = std::max(s.twins, r.twins);
  }
  traces::StatsScope c(stats, scope + ".collectives");
  for (const auto& [name, s] : sums) {
    traces::StatsScope k = c.scope(name);
    k.add_value("count", "", "collectives of this op on this communicator").set(s.count);
    k.add_value("bytes", "bytes", "their sizes (as nccl-tests counts them), summed").set(s.bytes);
    k.add_value("time_ns", "ns", "from each one's last arrival to its end, summed").set(s.ns);
    if (m_fold) {
      k.add_value("twins", "",
                  "communicators of this name running each collective at the same time, the "
                  "simulated one included (SPMD folding: the figures above count them all)")
          .set(s.twins);
    }
    for (const auto& [resource, count] : s.bound_by) {
      k.add_value("bound_by." + resource, "",
                  "collectives this link, NIC or HBM bound (its share of their traffic took the "
                  "longest at its bandwidth)")
          .set(count);
    }
  }
}

}  // namespace wallsim::sim
