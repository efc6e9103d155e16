// Max-min fair bandwidth sharing by progressive filling, recomputed only at starts and finishes.
#include "wallsim/memory/fluid_share.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace wallsim::memory {

namespace {

constexpr double kPsPerSecond = 1e12;
// A duration within this relative distance of a whole picosecond is rounded to it, so that
// floating-point noise (1e-16 relative per operation) never adds a picosecond.
constexpr double kRoundingTolerance = 1e-12;
// Weights are exact integers in units of 2^-kFixedBits (a double >= 2^-27 converts exactly).
constexpr int kFixedBits = 80;
constexpr double kMinWeight = 1e-12, kMaxWeight = 16777216.0;  // 2^24
constexpr int64_t kMaxMultiplicity = int64_t{1} << 24;

constexpr double kFixedUnit = 0x1p-80, kFixedScale = 0x1p80;
static_assert(kFixedScale == static_cast<double>(__int128{1} << kFixedBits), "2^80");

// Scaling by a power of two is exact; the rounding matters only below 2^-27.
__int128 to_fixed(double weight) {
  return static_cast<__int128>(std::nearbyint(weight * kFixedScale));
}

// The same value as static_cast<double>(fixed) * kFixedUnit, without libgcc's 128-bit
// conversion when the low 64 bits are zero (every weight that is a multiple of 2^-16, 1.0
// included): fixed is then hi x 2^64, and rounding hi to a double then scaling by a power of
// two rounds exactly as rounding hi x 2^64 does.
double to_double(__int128 fixed) {
  if (static_cast<uint64_t>(fixed) == 0) {
    return static_cast<double>(static_cast<int64_t>(fixed >> 64)) * 0x1p-16;
  }
  return static_cast<double>(fixed) * kFixedUnit;
}

void add_exact(__int128& sum, __int128 value) {
  if (__builtin_add_overflow(sum, value, &sum)) {
    throw std::overflow_error("FluidShare: a resource's summed weight overflows");
  }
}

}  // namespace

int FluidShare::add_resource(std::string name, double bytes_per_second) {
  if (!(bytes_per_second > 0.0) || !std::isfinite(bytes_per_second)) {
    throw std::invalid_argument("FluidShare: resource '" + name +
                                "' needs a finite bandwidth > 0 bytes/second");
  }
  m_resources.push_back(
      Resource{std::move(name), bytes_per_second, 0.0, 0.0, 0, 0, 0.0, 0, 0, -1.0, {}, 0, false});
  return static_cast<int>(m_resources.size() - 1);
}

void FluidShare::check_resource(int r) const {
  if (r < 0 || static_cast<size_t>(r) >= m_resources.size()) {
    throw std::out_of_range("FluidShare: no resource " + std::to_string(r));
  }
}

uint64_t FluidShare::start(Ps now, double bytes, std::vector<int> resources) {
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  std::vector<ResourceUse> uses;
  for (int r : resources) uses.push_back({r, 1.0});
  return start_weighted(now, bytes, std::move(uses));
}

uint64_t FluidShare::start_weighted(Ps now, double bytes, std::vector<ResourceUse> uses,
                                    int64_t multiplicity) {
  if (now < m_now) throw std::invalid_argument("FluidShare::start: time goes back");
  if (!(bytes >= 0.0) || !std::isfinite(bytes)) {
    throw std::invalid_argument("FluidShare::start: bytes must be finite and >= 0");
  }
  if (uses.empty()) throw std::invalid_argument("FluidShare::start: no resources");
  if (multiplicity < 1 || multiplicity > kMaxMultiplicity) {
    throw std::invalid_argument("FluidShare::start: multiplicity must be in [1, 2^24]");
  }
  for (const ResourceUse& u : uses) {
    check_resource(u.resource);
    if (!(u.weight >= kMinWeight && u.weight <= kMaxWeight)) {
      throw std::invalid_argument("FluidShare::start: weights must be in [1e-12, 2^24]");
    }
    if (u.count < 1 || u.count > kMaxMultiplicity) {
      throw std::invalid_argument("FluidShare::start: counts must be in [1, 2^24]");
    }
  }
  std::sort(uses.begin(), uses.end(),
            [](const ResourceUse& a, const ResourceUse& b) { return a.resource < b.resource; });
  std::vector<Use> fixed;  // uses of the same resource merged, exactly
  fixed.reserve(uses.size());
  for (const ResourceUse& u : uses) {
    Fixed weight = 0;
    if (__builtin_mul_overflow(to_fixed(u.weight), Fixed{multiplicity}, &weight) ||
        __builtin_mul_overflow(weight, Fixed{u.count}, &weight)) {
      throw std::overflow_error("FluidShare::start: weight x count x multiplicity overflows");
    }
    if (!fixed.empty() && fixed.back().resource == u.resource) {
      add_exact(fixed.back().weight, weight);
    } else {
      fixed.push_back({u.resource, weight});
    }
  }

  run_until(now);
  const uint64_t id = m_next_id++;
  Transfer t{id, bytes, -1.0, now, std::move(fixed), false, 0, 0};
  if (bytes == 0.0) {
    t.rate = 0.0;
    m_finished.push_back(std::move(t));
    return id;
  }
  m_seeds.clear();
  for (const Use& u : t.uses) {
    Resource& res = m_resources[u.resource];
    res.users.push_back(id);  // ids increase: the lists stay ascending
    add_exact(res.load, u.weight);
    m_seeds.push_back(u.resource);
  }
  m_active.push_back(std::move(t));  // ids increase, so m_active stays in id order
  if (!(m_incremental && start_fast(m_active.back()))) recompute_component();
  return id;
}

FluidShare::Ps FluidShare::next_finish() const {
  Ps next = m_finishes.empty() ? INT64_MAX : m_finishes.front().finish;  // current: drop_stale
  for (const Transfer& t : m_finished) next = std::min(next, t.finish);
  return next;
}

std::vector<uint64_t> FluidShare::advance(Ps now) {
  if (now < m_now) throw std::invalid_argument("FluidShare::advance: time goes back");
  run_until(now);
  std::vector<uint64_t> done;
  done.reserve(m_finished.size());
  for (const Transfer& t : m_finished) done.push_back(t.id);
  m_finished.clear();
  std::sort(done.begin(), done.end());
  return done;
}

size_t FluidShare::index_of(uint64_t id) const {
  auto it = std::lower_bound(m_active.begin(), m_active.end(), id,
                             [](const Transfer& t, uint64_t v) { return t.id < v; });
  return static_cast<size_t>(it - m_active.begin());
}

size_t FluidShare::index_from(size_t from, uint64_t id) const {
  // Gallop from `from` (whose id is <= `id`), then search the bracket found.
  const size_t n = m_active.size();
  size_t lo = from, hi = from, step = 1;
  while (true) {
    hi = lo + step;
    if (hi >= n || m_active[hi].id >= id) break;
    lo = hi;
    step *= 2;
  }
  hi = std::min(hi, n);
  auto it = std::lower_bound(m_active.begin() + static_cast<std::ptrdiff_t>(lo),
                             m_active.begin() + static_cast<std::ptrdiff_t>(hi), id,
                             [](const Transfer& t, uint64_t v) { return t.id < v; });
  return static_cast<size_t>(it - m_active.begin());
}

namespace {
// std::push_heap and pop_heap with this order keep the earliest (finish, id) on top.
struct LaterFinish {
  template <class E>
  bool operator()(const E& a, const E& b) const {
    return a.finish != b.finish ? a.finish > b.finish : a.id > b.id;
  }
};
}  // namespace

bool FluidShare::is_current(const FinishEntry& e) const {
  const size_t i = index_of(e.id);
  return i < m_active.size() && m_active[i].id == e.id && m_active[i].queued == e.generation;
}

void FluidShare::queue_finish(Transfer& t) {
  t.queued = 0;  // any entry queued before is stale from now on
  if (t.finish == INT64_MAX) return;
  t.queued = ++m_generation;
  m_finishes.push_back({t.finish, t.id, t.queued});
  std::push_heap(m_finishes.begin(), m_finishes.end(), LaterFinish{});
}

void FluidShare::drop_stale() {
  while (!m_finishes.empty() && !is_current(m_finishes.front())) {
    std::pop_heap(m_finishes.begin(), m_finishes.end(), LaterFinish{});
    m_finishes.pop_back();
  }
}

void FluidShare::compact_finishes() {
  // Stale entries are at most twice the current ones (plus a constant): memory and heap depth
  // stay proportional to the transfers in flight.
  if (m_finishes.size() <= 2 * m_active.size() + 64) return;
  size_t kept = 0;
  for (const FinishEntry& e : m_finishes) {
    if (is_current(e)) m_finishes[kept++] = e;
  }
  m_finishes.resize(kept);
  std::make_heap(m_finishes.begin(), m_finishes.end(), LaterFinish{});
}

double FluidShare::rate(uint64_t id) const {
  const size_t i = index_of(id);
  if (i < m_active.size() && m_active[i].id == id) return m_active[i].rate;
  for (const Transfer& t : m_finished) {
    if (t.id == id) return 0.0;
  }
  throw std::out_of_range("FluidShare::rate: no transfer " + std::to_string(id));
}

double FluidShare::resource_rate(int r) const {
  check_resource(r);
  return m_resources[r].allocated;
}

size_t FluidShare::active() const { return m_active.size() + m_finished.size(); }

const std::string& FluidShare::resource_name(int r) const {
  check_resource(r);
  return m_resources[r].name;
}

double FluidShare::resource_capacity(int r) const {
  check_resource(r);
  return m_resources[r].capacity;
}

std::vector<int> FluidShare::take_touched() {
  // A copy, so that m_touched keeps its capacity: refilling it allocates nothing.
  std::vector<int> out(m_touched);
  m_touched.clear();
  for (int r : out) m_resources[r].touched = false;
  return out;
}

void FluidShare::run_until(Ps now) {
  // The top of m_finishes is always current (drop_stale after every change), so its time is
  // the next finish event.
  while (!m_finishes.empty() && m_finishes.front().finish <= now) {
    const Ps t = m_finishes.front().finish;
    progress(t);
    // Every transfer finishing at t leaves, in id order; the transfers that shared a resource
    // with one of them, directly or not, get new rates.
    m_seeds.clear();
    m_done.clear();
    while (!m_finishes.empty() && m_finishes.front().finish == t) {
      const FinishEntry e = m_finishes.front();
      std::pop_heap(m_finishes.begin(), m_finishes.end(), LaterFinish{});
      m_finishes.pop_back();
      if (is_current(e)) m_done.push_back(e.id);
    }
    std::sort(m_done.begin(), m_done.end());
    const bool fast = m_incremental && finish_fast();
    for (uint64_t id : m_done) {
      const size_t i = index_of(id);
      Transfer& x = m_active[i];
      x.queued = 0;
      for (const Use& u : x.uses) {
        Resource& res = m_resources[u.resource];
        res.users.erase(std::lower_bound(res.users.begin(), res.users.end(), id));
        res.load -= u.weight;
        m_seeds.push_back(u.resource);
      }
      x.remaining = 0.0;
      x.rate = 0.0;
      m_finished.push_back(std::move(x));
      m_active.erase(m_active.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (fast) {
      // No rate changed; the left transfers' resources take the rates a refill would give.
      for (int r : m_seeds) {
        Resource& res = m_resources[r];
        res.allocated = res.users.empty() ? 0.0 : res.solo * to_double(res.load);
        touch(r);
      }
      compact_finishes();
      drop_stale();
    } else {
      recompute_component();
    }
  }
  progress(now);
}

void FluidShare::touch(int r) {
  Resource& res = m_resources[r];
  if (res.touched) return;
  res.touched = true;
  m_touched.push_back(r);
}

// Why the fast paths are exact. A component whose filling took one round at share s has every
// transfer at rate s, every resource at allocated s x (its load rounded to a double) and every
// resource's first-round share capacity / load >= s, with each transfer on at least one
// resource whose share is exactly s (a tied one). A start of t keeps that: if t's resources
// that others use all have shares > s after t is added (so none of them was tied: its share
// only falls with t's load), and t's own resources (used by t alone) have shares >= s with one
// exactly s, the merged component's first round is again at s (the old tied resources are
// unchanged) and freezes every transfer, old ones on their tied resources, t on its own: one
// round at s, no old rate changes, and only t's resources change allocation. A finish keeps it
// if every resource of the finishing transfers that keeps users had a share > s before (so no
// remaining transfer was frozen there; shares only rise when load leaves): each remaining
// transfer still has its tied resource, every share is still >= s. The shares are computed
// with the expression of the refill's first round (capacity / the load rounded once), so the
// comparisons with s are those the refill would make; components that took more rounds are
// always refilled. tests/memory/fluid_incremental_test.cpp compares both against refills.
bool FluidShare::start_fast(Transfer& t) {
  double s = -1.0;
  for (const Use& u : t.uses) {
    const Resource& res = m_resources[u.resource];
    if (res.users.size() == 1) continue;  // t's own
    if (!(res.solo > 0.0) || (s > 0.0 && res.solo != s)) return false;
    s = res.solo;
  }
  if (!(s > 0.0)) return false;  // t alone: its refill is small
  bool tied = false;
  for (const Use& u : t.uses) {
    const Resource& res = m_resources[u.resource];
    const double share = res.capacity / to_double(res.load);
    if (res.users.size() == 1) {
      if (share < s) return false;
      tied = tied || share == s;
    } else if (!(share > s)) {
      return false;
    }
  }
  if (!tied) return false;
  ++m_fast_events;
  for (const Use& u : t.uses) {
    Resource& res = m_resources[u.resource];
    res.allocated = s * to_double(res.load);
    res.solo = s;
    touch(u.resource);
  }
  t.rate = s;
  t.finish = finish_time(t);
  queue_finish(t);
  compact_finishes();
  drop_stale();
  return true;
}

bool FluidShare::finish_fast() {
  double s = -1.0;
  for (uint64_t id : m_done) {
    for (const Use& u : m_active[index_of(id)].uses) {
      const Resource& res = m_resources[u.resource];
      if (!(res.solo > 0.0) || (s > 0.0 && res.solo != s)) return false;
      s = res.solo;
      // A tied resource is fine only if every one of its users finishes now.
      if (!(res.capacity / to_double(res.load) > s)) {
        for (uint64_t user : res.users) {
          if (!std::binary_search(m_done.begin(), m_done.end(), user)) return false;
        }
      }
    }
  }
  ++m_fast_events;
  return true;
}

void FluidShare::progress(Ps now) {
  const Ps dt = now - m_now;
  m_now = now;
  if (dt <= 0) return;
  const double seconds = static_cast<double>(dt) / kPsPerSecond;
  for (Transfer& t : m_active) {
    ++m_work;
    t.remaining = std::max(0.0, t.remaining - t.rate * seconds);
  }
}

void FluidShare::recompute_component() {
  // The component: every resource and transfer reachable from the seeds through shared use.
  // Progressive filling over it alone gives its transfers the rates a filling over every
  // transfer would: a resource's share depends only on its own transfers, and the order of
  // bottlenecks within a component does not depend on other components.
  ++m_search;
  m_component.clear();
  m_members.clear();
  std::vector<int32_t>& stack = m_stack;
  stack.clear();
  for (int r : m_seeds) {
    if (m_resources[r].mark == m_search) continue;
    m_resources[r].mark = m_search;
    stack.push_back(r);
  }
  while (!stack.empty()) {
    const int32_t r = stack.back();
    stack.pop_back();
    m_component.push_back(r);
    size_t i = 0;  // the users' ids ascend, and so do their indices
    for (uint64_t id : m_resources[r].users) {
      ++m_work;
      i = index_from(i, id);
      Transfer& t = m_active[i];
      if (t.mark == m_search) continue;
      t.mark = m_search;
      m_members.push_back(static_cast<int32_t>(i));
      for (const Use& u : t.uses) {
        Resource& res = m_resources[u.resource];
        if (res.mark == m_search) continue;
        res.mark = m_search;
        stack.push_back(u.resource);
      }
    }
  }
  std::sort(m_component.begin(), m_component.end());
  std::sort(m_members.begin(), m_members.end());

  // Per resource, its transfers in id order, and the resources that carry any: each round
  // then visits only the most constrained resources' transfers. A round freezes every
  // resource whose share equals the minimum, all at that share, and decrements each resource
  // its freezes touch once, by the round's exact total weight: the result depends neither on
  // the order of resources nor on how equal weights are grouped into transfers.
  if (m_users.size() < m_resources.size()) m_users.resize(m_resources.size());
  for (int32_t r : m_component) {
    ++m_work;
    Resource& res = m_resources[r];
    res.free = res.capacity;
    res.unfrozen = 0;
    res.demand = 0;
    res.round_weight = 0;
    res.allocated = 0.0;
    m_users[r].clear();
    touch(r);
  }
  m_new_rate.assign(m_members.size(), 0.0);
  for (size_t k = 0; k < m_members.size(); ++k) {
    Transfer& t = m_active[m_members[k]];
    t.frozen = false;
    for (const Use& u : t.uses) {
      Resource& res = m_resources[u.resource];
      ++res.unfrozen;
      add_exact(res.demand, u.weight);
      m_users[u.resource].push_back(static_cast<int32_t>(k));
    }
  }
  m_live.clear();
  for (int32_t r : m_component) {
    Resource& res = m_resources[r];
    res.demand_double = to_double(res.demand);
    if (res.unfrozen > 0) m_live.push_back(r);
  }
  size_t left = m_members.size();
  int rounds = 0;
  double first_share = -1.0;
  while (left > 0) {
    // The most constrained resources: the smallest equal share among their unfrozen transfers.
    double best_share = std::numeric_limits<double>::infinity();
    m_tied.clear();
    size_t kept = 0;
    for (int32_t r : m_live) {
      ++m_work;
      const Resource& res = m_resources[r];
      if (res.unfrozen == 0) continue;
      m_live[kept++] = r;
      const double share = std::max(0.0, res.free) / res.demand_double;
      if (share < best_share) {
        best_share = share;
        m_tied.clear();
      }
      if (share == best_share) m_tied.push_back(r);
    }
    m_live.resize(kept);
    if (m_tied.empty()) break;  // unreachable: every unfrozen transfer holds a resource
    if (++rounds == 1) first_share = best_share;
    m_round.clear();
    for (int32_t best : m_tied) {
      for (int32_t k : m_users[best]) {
        ++m_work;
        Transfer& t = m_active[m_members[k]];
        if (t.frozen) continue;
        t.frozen = true;
        m_new_rate[k] = best_share;
        --left;
        for (const Use& u : t.uses) {
          Resource& res = m_resources[u.resource];
          if (res.round_weight == 0) m_round.push_back(u.resource);
          res.round_weight += u.weight;  // <= demand: cannot overflow
          --res.unfrozen;
        }
      }
    }
    for (int32_t r : m_round) {
      Resource& res = m_resources[r];
      const double taken = best_share * to_double(res.round_weight);
      res.free -= taken;
      res.allocated += taken;
      res.demand -= res.round_weight;
      res.demand_double = to_double(res.demand);
      res.round_weight = 0;
    }
  }
  const double solo = rounds == 1 && left == 0 ? first_share : -1.0;
  for (int32_t r : m_component) m_resources[r].solo = solo;
  for (size_t k = 0; k < m_members.size(); ++k) {
    Transfer& t = m_active[m_members[k]];
    // An unchanged rate keeps its finish time, so that other transfers' events never move it.
    if (m_new_rate[k] != t.rate) {
      // A transfer is queued by its finish once it has a rate (-1 before) and a finish time;
      // queueing the new one leaves the old entry stale.
      t.rate = m_new_rate[k];
      t.finish = finish_time(t);
      queue_finish(t);
    }
  }
  compact_finishes();
  drop_stale();
}

FluidShare::Ps FluidShare::finish_time(const Transfer& t) const {
  if (t.remaining <= 0.0) return m_now;
  if (!(t.rate > 0.0)) return INT64_MAX;
  const double ps = t.remaining * kPsPerSecond / t.rate;
  if (!(ps < 9.0e18)) return INT64_MAX;
  const double nearest = std::nearbyint(ps);
  const double rounded =
      std::fabs(ps - nearest) <= kRoundingTolerance * ps ? nearest : std::ceil(ps);
  Ps finish;
  if (__builtin_add_overflow(m_now, static_cast<Ps>(rounded), &finish)) return INT64_MAX;
  return finish;
}

}  // namespace wallsim::memory

namespace wallsim::memory {

std::unique_ptr<BandwidthShare> make_bandwidth_share(const std::string& name) {
  if (name == "max_min_fair") return std::make_unique<FluidShare>();
  throw std::invalid_argument("unknown bandwidth-sharing policy '" + name +
                              "' (known: max_min_fair)");
}

}  // namespace wallsim::memory
