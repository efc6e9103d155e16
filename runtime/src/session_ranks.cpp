// A rank's exposed communication: the part of each step's sync waits during which its core
// was blocked in a collective (from its arrival to the collective's end) becomes comm_wait.
#include <algorithm>

#include "wallsim/runtime/session.h"

namespace wallsim::runtime {

namespace {

// The union of `spans` ([lo, hi) each), sorted and merged.
std::vector<std::pair<int64_t, int64_t>> merged(std::vector<std::pair<int64_t, int64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace

void Session::split_comm_wait() {
  // This core's blocked intervals among the collectives that ended since the last step.
  const auto& records = m_options.collectives->records();
  const std::pair<int, int> me{m_options.rank.chip, m_options.rank.core};
  std::vector<std::pair<int64_t, int64_t>> blocked;
  for (; m_collectives_seen < records.size(); ++m_collectives_seen) {
    const auto& r = records[m_collectives_seen];
    for (size_t k = 0; k < r.members.size(); ++k) {
      if (r.members[k] == me) blocked.emplace_back(r.arrived_ps.at(k), r.end_ps);
    }
  }
  blocked = merged(std::move(blocked));
  for (const auto& [lo, hi] : blocked) m_collective_ns += (hi - lo) / 1000;
  const auto waits = merged(m_host.take_sync_waits());
  int64_t overlap_ps = 0;
  size_t b = 0;
  for (const auto& [wlo, whi] : waits) {
    while (b < blocked.size() && blocked[b].second <= wlo) ++b;
    for (size_t k = b; k < blocked.size() && blocked[k].first < whi; ++k) {
      const int64_t lo = std::max(wlo, blocked[k].first), hi = std::min(whi, blocked[k].second);
      if (hi <= lo) continue;
      overlap_ps += hi - lo;
      if (m_host.traced()) {
        m_host.sink()->slice(*m_comm_track, static_cast<traces::TimePs>(lo),
                             static_cast<traces::TimePs>(hi - lo), "comm_wait", "host", {});
      }
    }
  }
  // Whole nanoseconds, never more than the step's sync wait: the states still sum to wall.
  HostTimes& host = record().host_ns;
  const auto sync = static_cast<size_t>(HostState::sync_wait);
  const auto comm = static_cast<size_t>(HostState::comm_wait);
  const int64_t ns = std::min(overlap_ps / 1000, host[sync]);
  host[sync] -= ns;
  host[comm] += ns;
}

}  // namespace wallsim::runtime
