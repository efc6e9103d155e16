// Elaboration of the system — chips, cores, links and the bandwidth network — every binding in
// one place.
#include "wallsim/sim/system.h"

#include <map>
#include <stdexcept>
#include <string>

namespace wallsim::sim {

System::System(const ChipConfig& chip, CoreOptions options, const std::string& core_name)
    : m_options(options) {
  const TimingConfig& t = chip.timing;
  // One core: its transfers start in the order its processes run, as they always have.
  m_network = std::make_unique<dma::Network>((core_name + "_network").c_str(), t.hbm.sharing,
                                             /*ordered=*/false);
  auto c = std::make_unique<Chip>();
  // Resource order (HBM, host link, then the DMA engines) breaks ties in the sharing policy.
  c->hbm = m_network->add_resource("hbm", t.hbm.bandwidth_gb_per_s * 1e9);
  c->host_link = m_network->add_resource("host_link", t.host_link.bandwidth_gb_per_s * 1e9);
  CoreWiring w;
  w.network = m_network.get();
  w.hbm = c->hbm;
  w.host_link = c->host_link;
  for (int e = 0; e < chip.arch.dma.engines; ++e) {
    w.dma_engines.push_back(
        m_network->add_resource("dma" + std::to_string(e), t.dma.bandwidth_gb_per_s * 1e9));
  }
  w.tensors = &c->tensors;
  m_network->trace_rate(c->hbm, options.trace, w.trace_pid, "HBM bandwidth (GB/s)", "hbm");
  c->cores.push_back(std::make_unique<Core>(core_name.c_str(), chip, options, std::move(w)));
  m_chips.push_back(std::move(c));
}

System::System(const ChipConfig& core, const SystemConfig& sys, CoreOptions options,
               const std::vector<std::pair<int, int>>& order)
    : m_options(options) {
  const TimingConfig& t = core.timing;
  const int n_chips = static_cast<int>(sys.chips());
  const int n_cores = static_cast<int>(sys.chip.cores);
  // Several cores: same-picosecond starts are applied in (chip, core, queue, sequence) order.
  m_network = std::make_unique<dma::Network>("network", t.hbm.sharing, /*ordered=*/true);
  m_topology = std::make_unique<Topology>(sys);
  const bool traced = options.trace && options.trace->enabled();

  // Every resource first, in a fixed order (it breaks ties), whatever order cores elaborate in.
  std::vector<std::vector<CoreWiring>> wiring(static_cast<size_t>(n_chips));
  for (int c = 0; c < n_chips; ++c) {
    auto chip = std::make_unique<Chip>();
    chip->index = c;
    const std::string cn = "chip" + std::to_string(c);
    chip->hbm = m_network->add_resource(cn + ".hbm", sys.chip.hbm_bandwidth_gb_per_s * 1e9);
    chip->host_link =
        m_network->add_resource(cn + ".host_link", t.host_link.bandwidth_gb_per_s * 1e9);
    const int pid_base = 1 + c * (n_cores + 1);
    chip->trace_pid = pid_base + n_cores;
    for (int k = 0; k < n_cores; ++k) {
      CoreWiring w;
      w.network = m_network.get();
      w.chip = c;
      w.core = k;
      w.hbm = chip->hbm;
      w.host_link = chip->host_link;
      const std::string name = cn + ".core" + std::to_string(k);
      for (int e = 0; e < core.arch.dma.engines; ++e) {
        w.dma_engines.push_back(m_network->add_resource(name + ".dma" + std::to_string(e),
                                                        t.dma.bandwidth_gb_per_s * 1e9));
      }
      chip->dma_engines.push_back(w.dma_engines);
      w.tensors = &chip->tensors;
      w.trace_pid = pid_base + k;
      w.trace_process = name;
      w.stats_scope = name;
      wiring[static_cast<size_t>(c)].push_back(std::move(w));
    }
    m_chips.push_back(std::move(chip));
  }
  for (const LinkId& l : m_topology->links()) {
    const int r =
        m_network->add_resource(l.name(), m_topology->timing(l.kind).bandwidth_gb_per_s * 1e9);
    m_links.emplace_back(l, r);
  }
  // Routes to every other chip's HBM.
  std::map<std::string, int> link_index;
  for (const auto& [l, r] : m_links) link_index[l.name()] = r;
  for (int c = 0; c < n_chips; ++c) {
    std::vector<dma::RemoteHbm> remote(static_cast<size_t>(n_chips));
    for (int d = 0; d < n_chips; ++d) {
      if (d == c) continue;
      const std::vector<LinkId> route = m_topology->route(c, d);
      dma::RemoteHbm& r = remote[static_cast<size_t>(d)];
      for (const LinkId& l : route) r.links.push_back(link_index.at(l.name()));
      r.hbm = m_chips[static_cast<size_t>(d)]->hbm;
      r.latency_ns = m_topology->latency_ns(route);
    }
    for (CoreWiring& w : wiring[static_cast<size_t>(c)]) w.remote_hbm = remote;
  }
  // The collective engines move HBM to HBM: the source chip's collective DMA (when modelled:
  // the DMA engines its collective cores drive), the source chip's HBM, the route's links, the
  // destination chip's HBM (one chip: its HBM read and written).
  std::vector<int> hbm, cc_dma;
  for (const auto& chip : m_chips) hbm.push_back(chip->hbm);
  const collectives::CollectivesConfig& cc = sys.collectives;
  if (cc.dma_rings_per_core > 0) {
    const double rate =
        double(cc.cores_per_chip * cc.dma_rings_per_core) * t.dma.bandwidth_gb_per_s * 1e9;
    for (int c = 0; c < n_chips; ++c) {
      cc_dma.push_back(m_network->add_resource("chip" + std::to_string(c) + ".cc_dma", rate));
      m_chips[static_cast<size_t>(c)]->cc_dma = cc_dma.back();
    }
  }
  const Topology* topology = m_topology.get();
  auto route = [hbm, cc_dma, link_index, topology](int a, int b) {
    dma::Route r;
    if (!cc_dma.empty()) r.uses.push_back({cc_dma[static_cast<size_t>(a)], 1.0});
    if (a == b) {
      r.uses.push_back({hbm[static_cast<size_t>(a)], 2.0});
      return r;
    }
    const std::vector<LinkId> links = topology->route(a, b);
    r.uses.push_back({hbm[static_cast<size_t>(a)], 1.0});
    for (const LinkId& l : links) {
      r.uses.push_back({link_index.at(l.name()), 1.0});
      if (l.kind == LinkKind::efa_tx || l.kind == LinkKind::efa_rx) r.proxied = true;
    }
    r.uses.push_back({hbm[static_cast<size_t>(b)], 1.0});
    r.latency_ns = topology->latency_ns(links);
    return r;
  };
  m_collectives = std::make_unique<CollectiveEngine>("collectives", sys.collectives, *m_network,
                                                     *m_topology, route);
  for (auto& chip_wiring : wiring) {
    for (CoreWiring& w : chip_wiring) w.collectives = m_collectives.get();
  }
  if (traced) {
    // Processes and threads appear in the trace in the order they are declared: declared here
    // chip by chip, core by core, they do not follow the order cores elaborate or run in.
    traces::TraceSink& sink = *options.trace;
    const bool instructions = options.trace_level == engines::TraceLevel::instructions;
    const bool plans = options.trace_level != engines::TraceLevel::none;
    for (const auto& chip_wiring : wiring) {
      for (const CoreWiring& w : chip_wiring) {
        const int pid = w.trace_pid;
        if (instructions) {
          for (isa::Engine e : {isa::Engine::tensor, isa::Engine::vector, isa::Engine::scalar}) {
            const std::string engine(isa::name_of(e));
            sink.declare_track(pid, w.trace_process, 1 + static_cast<int>(e), engine + " engine");
          }
        }
        if (plans) sink.declare_track(pid, w.trace_process, 0, "plans");
        if (instructions) {
          for (int q = 0; q < core.arch.dma.queues_max(); ++q) {
            sink.declare_track(pid, w.trace_process, 100 + q, "dma queue " + std::to_string(q));
          }
        }
      }
      sink.declare_track(m_chips[static_cast<size_t>(chip_wiring.front().chip)]->trace_pid,
                         "chip" + std::to_string(chip_wiring.front().chip), 0, "counters");
    }
    for (const auto& chip : m_chips) {
      m_network->trace_rate(chip->hbm, options.trace, chip->trace_pid, "HBM bandwidth (GB/s)",
                            "hbm");
    }
    for (const auto& [l, r] : m_links) {
      m_network->trace_rate(r, options.trace, m_chips[static_cast<size_t>(l.chip)]->trace_pid,
                            "link bandwidth (GB/s)", l.name());
    }
  }

  // The cores, in the order asked for.
  std::vector<std::pair<int, int>> seq = order;
  if (seq.empty()) {
    for (int c = 0; c < n_chips; ++c) {
      for (int k = 0; k < n_cores; ++k) seq.emplace_back(c, k);
    }
  }
  if (seq.size() != static_cast<size_t>(n_chips * n_cores)) {
    throw std::invalid_argument("System: the elaboration order must list every core once");
  }
  for (auto& chip : m_chips) chip->cores.resize(static_cast<size_t>(n_cores));
  for (const auto& [c, k] : seq) {
    auto& slot = m_chips.at(static_cast<size_t>(c))->cores.at(static_cast<size_t>(k));
    if (slot) throw std::invalid_argument("System: a core is listed twice in the order");
    const std::string name = "chip" + std::to_string(c) + "_core" + std::to_string(k);
    slot =
        std::make_unique<Core>(name.c_str(), core, options,
                               std::move(wiring[static_cast<size_t>(c)][static_cast<size_t>(k)]));
  }
}

System::~System() = default;

void System::fold(int ranks, std::vector<CollectiveFold::Communicator> communicators) {
  if (!m_topology) throw std::invalid_argument("System::fold: the one-core view has no ranks");
  const int per_chip = static_cast<int>(cores_per_chip());
  const bool one_chip = ranks >= 1 && ranks <= per_chip;
  const int whole_chips = ranks > per_chip && ranks % per_chip == 0 ? ranks / per_chip : 0;
  if (!one_chip && (whole_chips == 0 || whole_chips > static_cast<int>(chips()))) {
    throw std::invalid_argument("System::fold: " + std::to_string(ranks) +
                                " ranks neither fit one chip of " + std::to_string(per_chip) +
                                " cores nor fill whole chips (the system has " +
                                std::to_string(chips()) + ")");
  }
  // 0: the representative never touches it (other cores' engines, other chips, links).
  dma::Network::FoldMap map;
  map.counts.assign(m_network->resources(), 0);
  const int local = one_chip ? ranks : per_chip;  // the ranks on one chip
  const Chip& c = *m_chips.front();
  for (int r : {c.hbm, c.host_link, c.cc_dma}) {
    if (r >= 0) map.counts[static_cast<size_t>(r)] = local;
  }
  for (int r : c.dma_engines.front()) map.counts[static_cast<size_t>(r)] = 1;
  // Chips 1 .. C-1: each a mirror of chip 0, core (c, 0) of core (0, 0).
  for (int chip = 1; chip < whole_chips; ++chip) {
    const Chip& m = *m_chips[static_cast<size_t>(chip)];
    dma::Network::FoldMap::Mirror mirror;
    mirror.chip = chip;
    mirror.image.assign(m_network->resources(), -1);
    mirror.image[static_cast<size_t>(c.hbm)] = m.hbm;
    mirror.image[static_cast<size_t>(c.host_link)] = m.host_link;
    if (c.cc_dma >= 0) mirror.image[static_cast<size_t>(c.cc_dma)] = m.cc_dma;
    for (size_t e = 0; e < c.dma_engines.front().size(); ++e) {
      mirror.image[static_cast<size_t>(c.dma_engines.front()[e])] = m.dma_engines.front()[e];
    }
    map.mirrors.push_back(std::move(mirror));
  }
  CollectiveFold collectives;
  for (int r = 0; r < ranks; ++r) collectives.ranks.emplace_back(r / per_chip, r % per_chip);
  collectives.communicators = std::move(communicators);
  m_collectives->set_fold(std::move(collectives));
  if (map.mirrors.empty()) {
    m_network->set_fold(std::move(map.counts));
  } else {
    m_network->set_fold(std::move(map));
  }
}

void System::finalize() {
  for (auto& chip : m_chips) {
    for (auto& c : chip->cores) c->finalize();
  }
  if (!m_topology || !m_options.stats) return;
  if (!m_collectives->records().empty()) m_collectives->write_stats(*m_options.stats, "system");
  traces::StatsScope s(*m_options.stats, "system");
  for (const auto& chip : m_chips) {
    traces::StatsScope h = s.scope("chips.chip" + std::to_string(chip->index) + ".hbm");
    h.add_value("bytes", "bytes", "payload bytes carried by the chip's HBM")
        .set(m_network->bytes(chip->hbm));
    h.add_value("busy_ns", "ns", "time with at least one HBM transfer in flight")
        .set(double(m_network->busy_ps(chip->hbm)) / 1e3);
  }
  for (const auto& [l, r] : m_links) {
    if (m_network->bytes(r) == 0) continue;  // idle links stay out of the report
    traces::StatsScope h = s.scope("links." + l.name());
    h.add_value("bytes", "bytes", "bytes carried by this link direction").set(m_network->bytes(r));
    h.add_value("busy_ns", "ns", "time with at least one transfer in flight")
        .set(double(m_network->busy_ps(r)) / 1e3);
  }
}

}  // namespace wallsim::sim
