// The simulation's bandwidth network: resources, ordered transfer starts, finishes, busy time.
#include "wallsim/dma/network.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace wallsim::dma {

using sc_core::sc_time;

namespace {

Network::Ps now_ps() { return static_cast<Network::Ps>(sc_core::sc_time_stamp().value()); }

}  // namespace

Network::Network(sc_core::sc_module_name name, const std::string& sharing, bool ordered)
    : sc_module(name), m_share(memory::make_bandwidth_share(sharing)), m_ordered(ordered) {
  SC_HAS_PROCESS(Network);
  SC_METHOD(wake);
  sensitive << m_wake;
  dont_initialize();
}

Network::~Network() = default;

int Network::add_resource(std::string name, double bytes_per_second) {
  const int r = m_share->add_resource(std::move(name), bytes_per_second);
  m_res.resize(m_share->resources());
  return r;
}

void Network::set_fold(std::vector<int64_t> counts) {
  if (!counts.empty() && counts.size() != m_res.size()) {
    throw std::invalid_argument("Network::set_fold: " + std::to_string(counts.size()) +
                                " counts for " + std::to_string(m_res.size()) + " resources");
  }
  for (int64_t c : counts) {
    if (c < 0 || c > (int64_t{1} << 24)) {
      throw std::invalid_argument("Network::set_fold: counts must be in [0, 2^24]");
    }
  }
  m_fold = std::move(counts);
}

void Network::set_fold(FoldMap map) {
  for (const FoldMap::Mirror& m : map.mirrors) {
    if (m.image.size() != m_res.size()) {
      throw std::invalid_argument("Network::set_fold: chip " + std::to_string(m.chip) +
                                  "'s mirror has " + std::to_string(m.image.size()) +
                                  " images for " + std::to_string(m_res.size()) + " resources");
    }
  }
  if (!map.mirrors.empty() && !m_ordered) {
    throw std::invalid_argument("Network::set_fold: mirrors need ordered starts");
  }
  if (!map.mirrors.empty() && map.counts.empty()) {
    throw std::invalid_argument("Network::set_fold: mirrors need counts");
  }
  set_fold(std::move(map.counts));
  m_mirrors = std::move(map.mirrors);
}

void Network::apply_fold(std::vector<memory::ResourceUse>& uses) const {
  for (memory::ResourceUse& u : uses) {
    const int64_t c = m_fold[static_cast<size_t>(u.resource)];
    if (c == 0) {
      throw std::logic_error("a folded run's transfer uses " + m_share->resource_name(u.resource) +
                             ", which the simulated rank does not stand for (folding has no "
                             "count for it)");
    }
    u.count *= c;
  }
}

int Network::find_resource(const std::string& name) const {
  for (size_t r = 0; r < m_share->resources(); ++r) {
    if (m_share->resource_name(static_cast<int>(r)) == name) return static_cast<int>(r);
  }
  return -1;
}

void Network::trace_rate(int r, traces::TraceSink* trace, int pid, std::string counter,
                         std::string series) {
  if (!trace || !trace->enabled()) return;
  m_traced.push_back({r, trace, pid, std::move(counter), std::move(series)});
}

void Network::count(double bytes, const std::vector<memory::ResourceUse>& uses) {
  // Per resource, the payload and the capacity used (an HBM->HBM copy uses HBM twice).
  // A use of count c adds what c transfers would, one after the other.
  for (const auto& u : uses) {
    Resource& r = m_res[static_cast<size_t>(u.resource)];
    r.bytes += static_cast<int64_t>(bytes) * u.count;
    const double load = bytes * u.weight;
    for (int64_t i = 0; i < u.count; ++i) r.load += load;
  }
}

void Network::enqueue(const TransferKey& key, double bytes, std::vector<memory::ResourceUse> uses,
                      int64_t multiplicity, const Waiter& waiter) {
  uint64_t& sequence = m_sequence[{key.chip, key.core, key.queue}];
  m_pending.push_back({key, sequence++, bytes, std::move(uses), multiplicity, waiter});
  m_wake.notify(sc_core::SC_ZERO_TIME);
}

void Network::transfer(const TransferKey& key, double bytes,
                       std::vector<memory::ResourceUse> uses) {
  if (m_mismatch) throw std::runtime_error(*m_mismatch);
  if (!m_fold.empty()) apply_fold(uses);
  count(bytes, uses);
  if (!m_mirrors.empty()) {
    // Folded across chips: the copies on chips 1 .. C-1, as their representatives would start.
    std::vector<std::vector<memory::ResourceUse>> copies;
    for (const FoldMap::Mirror& m : m_mirrors) {
      std::vector<memory::ResourceUse> c = uses;
      for (memory::ResourceUse& u : c) {
        const int image = m.image[static_cast<size_t>(u.resource)];
        if (image < 0) {
          throw std::logic_error("a folded run's transfer uses " +
                                 m_share->resource_name(u.resource) +
                                 ", which has no copy on chip " + std::to_string(m.chip));
        }
        u.resource = image;
      }
      count(bytes, c);
      copies.push_back(std::move(c));
    }
    if (bytes == 0.0) return;
    sc_core::sc_event done;
    const uint64_t set = m_next_set++;
    FoldSet& fs = m_sets[set];
    fs.key = key;
    fs.open = static_cast<int>(copies.size()) + 1;
    enqueue(key, bytes, std::move(uses), 1, Waiter{&done, nullptr, nullptr, set, key.chip});
    for (size_t i = 0; i < copies.size(); ++i) {
      const int chip = m_mirrors[i].chip;
      enqueue({chip, key.core, key.queue}, bytes, std::move(copies[i]), 1,
              Waiter{nullptr, nullptr, nullptr, set, chip});
    }
    sc_core::wait(done);
    return;
  }
  sc_core::sc_event done;
  if (!m_ordered) {
    const Ps now = now_ps();
    const bool finished_now = apply(bytes, std::move(uses), 1, Waiter{&done});
    reschedule(now);
    after_change(now);
    if (!finished_now) sc_core::wait(done);
    return;
  }
  // Ordered: nothing moves for an empty transfer; others wait for wake() a delta cycle later.
  if (bytes == 0.0) return;
  enqueue(key, bytes, std::move(uses), 1, Waiter{&done});
  sc_core::wait(done);
}

namespace {

bool same_uses(const std::vector<memory::ResourceUse>& a,
               const std::vector<memory::ResourceUse>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const memory::ResourceUse& x, const memory::ResourceUse& y) {
                      return x.resource == y.resource && x.weight == y.weight && x.count == y.count;
                    });
}

bool uses_less(const std::vector<memory::ResourceUse>& a,
               const std::vector<memory::ResourceUse>& b) {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](const memory::ResourceUse& x, const memory::ResourceUse& y) {
        return std::tie(x.resource, x.weight, x.count) < std::tie(y.resource, y.weight, y.count);
      });
}

bool key_less(const TransferKey& a, const TransferKey& b) {
  return std::tie(a.chip, a.core, a.queue) < std::tie(b.chip, b.core, b.queue);
}

}  // namespace

std::vector<Network::Ps> Network::transfer_all(std::vector<Move> moves) {
  const Ps now = now_ps();
  for (const Move& m : moves) {
    if (m.multiplicity < 1) {
      throw std::invalid_argument("Network::transfer_all: a move's multiplicity must be >= 1");
    }
  }
  // Per move, and m times for a move of multiplicity m: the same sums as transfers.
  for (const Move& m : moves) {
    for (int64_t i = 0; i < m.multiplicity; ++i) count(m.bytes, m.uses);
  }
  // Identical moves (bytes and uses) form a group: one fluid transfer of their multiplicities'
  // sum, led by the member first in key order (ties: the earlier move).
  std::vector<size_t> order(moves.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&moves](size_t a, size_t b) {
    if (moves[a].bytes != moves[b].bytes) return moves[a].bytes < moves[b].bytes;
    return uses_less(moves[a].uses, moves[b].uses);
  });
  struct Group {
    size_t lead;
    int64_t members;
  };
  std::vector<Group> groups;
  std::vector<size_t> group_of(moves.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    if (groups.empty() || moves[groups.back().lead].bytes != moves[i].bytes ||
        !same_uses(moves[groups.back().lead].uses, moves[i].uses)) {
      groups.push_back({i, 0});
    } else if (key_less(moves[i].key, moves[groups.back().lead].key)) {
      groups.back().lead = i;
    }
    groups.back().members += moves[i].multiplicity;
    group_of[i] = groups.size() - 1;
  }
  std::vector<size_t> lead_of(moves.size());
  for (size_t i = 0; i < moves.size(); ++i) {
    lead_of[i] = groups[group_of[i]].lead;
    // A member's own start sequence still advances, as its transfer() would.
    const TransferKey& k = moves[i].key;
    if (m_ordered && lead_of[i] != i && moves[i].bytes != 0.0) {
      ++m_sequence[{k.chip, k.core, k.queue}];
    }
  }
  // Start the groups in the order of their leads' moves.
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.lead < b.lead; });
  std::vector<size_t> group_of_lead(moves.size());
  for (size_t g = 0; g < groups.size(); ++g) group_of_lead[groups[g].lead] = g;

  std::vector<Ps> group_finish(groups.size(), now);
  int remaining = static_cast<int>(groups.size());
  sc_core::sc_event done;
  for (size_t g = 0; g < groups.size(); ++g) {
    Move& m = moves[groups[g].lead];
    const Waiter w{&done, &remaining, &group_finish[g]};
    if (!m_ordered) {
      if (apply(m.bytes, std::move(m.uses), groups[g].members, w)) finish(w, now);
      reschedule(now);
      after_change(now);
    } else if (m.bytes == 0.0) {
      --remaining;  // as transfer(): nothing moves
    } else {
      enqueue(m.key, m.bytes, std::move(m.uses), groups[g].members, w);
    }
  }
  if (remaining > 0) sc_core::wait(done);
  std::vector<Ps> finished(moves.size());
  for (size_t i = 0; i < moves.size(); ++i) finished[i] = group_finish[group_of_lead[lead_of[i]]];
  return finished;
}

void Network::finish(const Waiter& w, Ps now) {
  if (w.set != 0) {
    auto it = m_sets.find(w.set);
    FoldSet& fs = it->second;
    if (w.done) {
      fs.own = now;
    } else {
      fs.copies.emplace_back(w.chip, now);
    }
    if (--fs.open == 0) {
      for (const auto& [chip, at] : fs.copies) {
        if (at == fs.own || m_mismatch) continue;
        m_mismatch = "SPMD folding is not exact for this run: chip " + std::to_string(chip) +
                     "'s copy of core (" + std::to_string(fs.key.chip) + ", " +
                     std::to_string(fs.key.core) + ")'s transfer on queue " +
                     std::to_string(fs.key.queue) + " ended at " + std::to_string(at) +
                     " ps, core (" + std::to_string(fs.key.chip) + ", " +
                     std::to_string(fs.key.core) + ")'s at " + std::to_string(fs.own) +
                     " ps (the chips see different traffic; run with --fold off)";
      }
      m_sets.erase(it);
    }
    if (!w.done) return;
  }
  if (w.finished) *w.finished = now;
  if (!w.remaining || --*w.remaining == 0) w.done->notify();
}

bool Network::apply(double bytes, std::vector<memory::ResourceUse> uses, int64_t multiplicity,
                    const Waiter& waiter) {
  const Ps now = now_ps();
  const uint64_t id = m_share->start_weighted(now, bytes, std::move(uses), multiplicity);
  m_waiting.emplace(id, waiter);
  bool finished_now = false;
  for (uint64_t f : m_share->advance(now)) {
    if (f == id) {
      finished_now = true;
      m_waiting.erase(id);
    } else {
      complete({f}, id);
    }
  }
  return finished_now;
}

void Network::wake() {
  const Ps now = now_ps();
  const std::vector<uint64_t> done = m_share->advance(now);
  complete(done, UINT64_MAX);
  if (!m_pending.empty()) {
    if (!done.empty()) {
      reschedule(now);
      after_change(now);
    }
    std::vector<Pending> starts;
    starts.swap(m_pending);
    std::sort(starts.begin(), starts.end(), [](const Pending& a, const Pending& b) {
      return std::tie(a.key.chip, a.key.core, a.key.queue, a.sequence) <
             std::tie(b.key.chip, b.key.core, b.key.queue, b.sequence);
    });
    for (Pending& p : starts) {
      if (apply(p.bytes, std::move(p.uses), p.multiplicity, p.waiter)) finish(p.waiter, now);
      after_change(now);
    }
  }
  reschedule(now);
  after_change(now);
}

void Network::complete(const std::vector<uint64_t>& done, uint64_t self) {
  for (uint64_t id : done) {
    if (id == self) continue;
    auto it = m_waiting.find(id);
    if (it == m_waiting.end()) continue;
    const Waiter w = it->second;
    m_waiting.erase(it);
    finish(w, now_ps());
  }
}

void Network::reschedule(Ps now) {
  const Ps next = m_share->next_finish();
  if (next != INT64_MAX) m_wake.notify(sc_time::from_value(static_cast<sc_dt::uint64>(next - now)));
}

void Network::after_change(Ps now) {
  for (int r : m_share->take_touched()) {
    Resource& res = m_res[static_cast<size_t>(r)];
    const bool busy = m_share->resource_rate(r) > 0;
    if (busy && res.busy_since < 0) res.busy_since = now;
    if (!busy && res.busy_since >= 0) {
      res.busy_ps += now - res.busy_since;
      res.busy_since = -1;
    }
  }
  for (Traced& t : m_traced) {
    const double rate = m_share->resource_rate(t.resource) / 1e9;
    if (rate == t.last) continue;
    t.last = rate;
    t.trace->counter(t.pid, t.counter, now, t.series, rate);
  }
}

sc_time Network::floor(int r) const {
  return sc_time(load(r) / resource_capacity(r), sc_core::SC_SEC);
}

void Network::finalize() {
  const Ps now = now_ps();
  for (Resource& res : m_res) {
    if (res.busy_since < 0) continue;
    res.busy_ps += now - res.busy_since;
    res.busy_since = now;
  }
}

}  // namespace wallsim::dma
