// The SBUF allocator: next-fit over coalescing free blocks, with reuse ordered by history.
#include "lowering/sbuf_allocator.h"

#include <algorithm>
#include <iterator>

namespace wallsim::compiler_stub::lowering {

SbufAllocator::SbufAllocator(PlanBuilder& builder, int32_t partitions, int64_t capacity)
    : m_builder(builder), m_partitions(partitions), m_capacity(capacity) {
  m_free[0] = capacity;
}

std::optional<Slot> SbufAllocator::alloc(int64_t bytes, const std::string& hint,
                                         bool oldest_first) {
  const int64_t aligned = SbufAllocator::aligned(bytes);
  // Least recently freed fit: of the placements at either end of each free block large
  // enough, the one whose bytes were freed longest ago (never used first, then the lowest
  // address), so memory is reused as late as possible and a new buffer (a weight prefetched
  // ahead of its matmul) rarely has to wait for the readers of the one it replaces.
  auto best = m_free.end();
  int64_t offset = 0, best_release = 0;
  for (auto it = m_free.begin(); it != m_free.end(); ++it) {
    if (it->second < aligned) continue;
    for (const int64_t at : {it->first, it->first + it->second - aligned}) {
      int64_t r = last_release(at, at + aligned);
      if (!oldest_first && r >= 0) r = 0;  // never-used bytes first, then the lowest address
      if (best == m_free.end() || r < best_release) {
        best = it;
        offset = at;
        best_release = r;
      }
    }
  }
  if (best == m_free.end()) return std::nullopt;
  const int64_t start = best->first, size = best->second;
  m_free.erase(best);
  if (offset > start) m_free[start] = offset - start;
  if (start + size > offset + aligned) m_free[offset + aligned] = start + size - offset - aligned;
  AccessHistory inherit;
  for (auto it = first_segment(offset); it != m_history.end() && it->first < offset + aligned;
       ++it) {
    if (it->second.end > offset) inherit.append(it->second.history);
  }
  inherit.collapse();
  Slot s =
      m_builder.add_buffer(isa::MemSpace::sbuf, 0, m_partitions, offset, aligned, hint, inherit);
  m_live[s.index] = {offset, aligned};
  m_used += aligned;
  m_peak = std::max(m_peak, offset + aligned);
  return s;
}

void SbufAllocator::release(Slot s) {
  auto live = m_live.find(s.index);
  if (live == m_live.end()) return;
  const auto [offset, size] = live->second;
  m_live.erase(live);
  m_used -= size;
  record_history(offset, offset + size, m_builder.history(s));
  m_history[offset].released = m_releases++;
  auto it = m_free.emplace(offset, size).first;
  auto next = std::next(it);
  if (next != m_free.end() && offset + it->second == next->first) {
    it->second += next->second;
    m_free.erase(next);
  }
  if (it != m_free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      m_free.erase(it);
    }
  }
}

int64_t SbufAllocator::last_release(int64_t begin, int64_t end) {
  int64_t r = -1;
  for (auto it = first_segment(begin); it != m_history.end() && it->first < end; ++it) {
    if (it->second.end > begin) r = std::max(r, it->second.released);
  }
  return r;
}

std::map<int64_t, SbufAllocator::Segment>::iterator SbufAllocator::first_segment(int64_t offset) {
  auto it = m_history.upper_bound(offset);
  if (it != m_history.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > offset) return prev;
  }
  return it;
}

void SbufAllocator::record_history(int64_t begin, int64_t end, const AccessHistory& h) {
  auto it = first_segment(begin);
  if (it != m_history.end() && it->first < begin) {
    // The segment straddling begin keeps its part before begin, and its part beyond end.
    if (it->second.end > end) m_history.emplace(end, it->second);
    it->second.end = begin;
    ++it;
  }
  while (it != m_history.end() && it->first < end) {
    // Keep the part beyond end (the segment's history moves: it is erased next).
    if (it->second.end > end) m_history.emplace(end, std::move(it->second));
    it = m_history.erase(it);
  }
  m_history.emplace_hint(it, begin, Segment{end, h});
}

}  // namespace wallsim::compiler_stub::lowering
