// SBUF as one address range per partition, handed out from free blocks that coalesce when
// released, the bytes freed longest ago first. Plain C++ over a PlanBuilder; spilling (what to
// evict when full) is the lowering's business (spilling.cpp), not the allocator's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "wallsim/compiler_stub/plan_builder.h"

namespace wallsim::compiler_stub::lowering {

// Every allocation declares a new buffer over its range that inherits the ordering history
// (AccessHistory) of the dead buffers that used the same bytes, so reuse waits for exactly
// their readers and writers.
class SbufAllocator {
 public:
  SbufAllocator(PlanBuilder& builder, int32_t partitions, int64_t capacity);
  // A buffer of `bytes` per partition, or nothing when no free block is large enough.
  // `oldest_first` false: bytes never used first, then the lowest address (no release order).
  std::optional<Slot> alloc(int64_t bytes, const std::string& hint, bool oldest_first = true);
  // What a buffer of `bytes` per partition takes: allocations are 64-byte aligned, 64 at least.
  static int64_t aligned(int64_t bytes) { return std::max<int64_t>(64, (bytes + 63) / 64 * 64); }
  // Frees `s` (a no-op for a buffer this allocator does not hold).
  void release(Slot s);
  int64_t peak() const { return m_peak; }
  int64_t capacity() const { return m_capacity; }
  int64_t free_bytes() const { return m_capacity - m_used; }

 private:
  struct Segment {
    int64_t end = 0;
    AccessHistory history;
    int64_t released = -1;  // when the range was last freed (count of releases before it)
  };
  // The latest release among the segments over [begin, end): -1 for bytes never used.
  int64_t last_release(int64_t begin, int64_t end);
  // The first history segment that may overlap `offset`.
  std::map<int64_t, Segment>::iterator first_segment(int64_t offset);
  // [begin, end) was last used by a buffer with history `h`: it replaces older segments there.
  void record_history(int64_t begin, int64_t end, const AccessHistory& h);

  PlanBuilder& m_builder;
  int32_t m_partitions;
  int64_t m_capacity;
  int64_t m_used = 0;
  int64_t m_peak = 0;
  int64_t m_releases = 0;
  std::map<int64_t, int64_t> m_free;                      // offset -> bytes
  std::map<int64_t, Segment> m_history;                   // offset -> last users of the range
  std::map<int32_t, std::pair<int64_t, int64_t>> m_live;  // buffer -> (offset, bytes)
};

}  // namespace wallsim::compiler_stub::lowering
