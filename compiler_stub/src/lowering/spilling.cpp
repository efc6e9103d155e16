// Spilling: when SBUF is full, values the current op does not use are evicted, the one needed
// furthest in the future first (Belady). A value only on chip is stored to an HBM scratch
// tensor, then its tiles are freed; a later use reloads it.
#include <algorithm>
#include <limits>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

std::optional<Slot> LoweringContext::sbuf_alloc(int64_t bytes, const std::string& hint,
                                                bool oldest_first) {
  for (;;) {
    // Row windows cycle through most of SBUF: taking the oldest-freed bytes there makes each
    // window's loads wait for the previous window's stores (unless the caller knows better, or
    // the windows are a ring: small enough that the oldest-freed bytes are two windows back).
    if (auto s = m_sbuf.alloc(bytes, hint, !m_window || oldest_first || m_window->ring)) return s;
    if (prefetching()) return std::nullopt;  // a prefetch never spills
    if (!drop_derived_forms() && !spill_one() && !drop_constants()) return std::nullopt;
  }
}

int LoweringContext::next_use(int32_t id) const {
  auto it = m_uses.find(id);
  if (it == m_uses.end()) return std::numeric_limits<int>::max();
  auto u = std::lower_bound(it->second.begin(), it->second.end(), position());
  return u == it->second.end() ? std::numeric_limits<int>::max() : *u;
}

bool LoweringContext::spill_one() {
  int32_t victim = -1;
  bool replicated = false;
  int furthest = -1;
  auto consider = [&](int32_t id, bool rep) {
    if (m_pinned.count(id)) return;
    const int use = next_use(id);
    if (use > furthest) {
      furthest = use;
      victim = id;
      replicated = rep;
    }
  };
  for (const auto& entry : m_tiles) consider(entry.first, false);
  for (const auto& entry : m_replicated) consider(entry.first, true);
  if (victim < 0) return false;
  if (replicated) {
    release(m_replicated.at(victim));
    m_replicated.erase(victim);
    return true;
  }
  if (!m_in_hbm.count(victim) && !m_views.count(victim) && node(victim).op != OpKind::input) {
    const int64_t before = m_bytes_out;
    store(victim, isa::TensorRole::scratch);
    ++m_spills;
    m_spill_bytes += m_bytes_out - before;
  }
  release(m_tiles.at(victim));
  m_tiles.erase(victim);
  return true;
}

}  // namespace wallsim::compiler_stub::lowering
