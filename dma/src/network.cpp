// The simulation's bandwidth network: resources, ordered transfer starts, finishes, busy time.
#include "wallsim/dma/network.h"

#include <algorithm>

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
  for (const auto& u : uses) {
    Resource& r = m_res[static_cast<size_t>(u.resource)];
    r.bytes += static_cast<int64_t>(bytes);
    r.load += bytes * u.weight;
  }
}

void Network::enqueue(const TransferKey& key, double bytes, std::vector<memory::ResourceUse> uses,
                      const Waiter& waiter) {
  uint64_t& sequence = m_sequence[{key.chip, key.core, key.queue}];
  m_pending.push_back({key, sequence++, bytes, std::move(uses), waiter});
  m_wake.notify(sc_core::SC_ZERO_TIME);
}

void Network::transfer(const TransferKey& key, double bytes,
                       std::vector<memory::ResourceUse> uses) {
  count(bytes, uses);
  sc_core::sc_event done;
  if (!m_ordered) {
    const Ps now = now_ps();
    const bool finished_now = apply(bytes, std::move(uses), Waiter{&done});
    reschedule(now);
    after_change(now);
    if (!finished_now) sc_core::wait(done);
    return;
  }
  // Ordered: nothing moves for an empty transfer; others wait for wake() a delta cycle later.
  if (bytes == 0.0) return;
  enqueue(key, bytes, std::move(uses), Waiter{&done});
  sc_core::wait(done);
}

std::vector<Network::Ps> Network::transfer_all(std::vector<Move> moves) {
  const Ps now = now_ps();
  std::vector<Ps> finished(moves.size(), now);
  int remaining = static_cast<int>(moves.size());
  sc_core::sc_event done;
  for (size_t i = 0; i < moves.size(); ++i) {
    Move& m = moves[i];
    count(m.bytes, m.uses);
    const Waiter w{&done, &remaining, &finished[i]};
    if (!m_ordered) {
      if (apply(m.bytes, std::move(m.uses), w)) finish(w, now);
      reschedule(now);
      after_change(now);
    } else if (m.bytes == 0.0) {
      --remaining;  // as transfer(): nothing moves
    } else {
      enqueue(m.key, m.bytes, std::move(m.uses), w);
    }
  }
  if (remaining > 0) sc_core::wait(done);
  return finished;
}

void Network::finish(const Waiter& w, Ps now) {
  if (w.finished) *w.finished = now;
  if (!w.remaining || --*w.remaining == 0) w.done->notify();
}

bool Network::apply(double bytes, std::vector<memory::ResourceUse> uses, const Waiter& waiter) {
  const Ps now = now_ps();
  const uint64_t id = m_share->start_weighted(now, bytes, std::move(uses));
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
      if (apply(p.bytes, std::move(p.uses), p.waiter)) finish(p.waiter, now);
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
