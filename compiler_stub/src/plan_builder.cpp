// Instruction emission with semaphores derived from cross-engine data dependencies.
#include "wallsim/compiler_stub/plan_builder.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <set>

namespace wallsim::compiler_stub {

namespace {

constexpr int64_t kWhole = std::numeric_limits<int64_t>::max();

// Keeps one whole-range entry per stream (the latest), in stream order: what a merged or
// oversized list becomes. In place, no allocation: a plan's streams (a queue per DMA queue and
// the compute engines) number fewer than 64, so a bit mask orders them; otherwise a sort.
void collapse(std::vector<AccessHistory::Entry>& entries) {
  constexpr int kMask = 64;
  std::array<int64_t, kMask> latest;
  uint64_t seen = 0;
  bool small = true;
  for (const auto& e : entries) {
    if (e.stream < 0 || e.stream >= kMask) {
      small = false;
      break;
    }
    const uint64_t bit = uint64_t{1} << e.stream;
    latest[static_cast<size_t>(e.stream)] =
        seen & bit ? std::max(latest[static_cast<size_t>(e.stream)], e.index) : e.index;
    seen |= bit;
  }
  if (small) {
    entries.clear();
    for (; seen; seen &= seen - 1) {
      const int stream = __builtin_ctzll(seen);
      entries.push_back({0, kWhole, stream, latest[static_cast<size_t>(stream)]});
    }
    return;
  }
  std::sort(entries.begin(), entries.end(),
            [](const AccessHistory::Entry& a, const AccessHistory::Entry& b) {
              return a.stream != b.stream ? a.stream < b.stream : a.index > b.index;
            });
  size_t n = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (n > 0 && entries[n - 1].stream == entries[i].stream) continue;
    entries[n++] = {0, kWhole, entries[i].stream, entries[i].index};
  }
  entries.resize(n);
}

// Lists longer than this are collapsed: bounded work per instruction, conservative order.
constexpr size_t kMaxEntries = 64;

// Instructions per storage chunk while a plan is built: a stream's first chunk, and the most.
constexpr size_t kFirstChunk = 8;
constexpr size_t kChunk = 256;

// The first n elements of an array, for range-for.
template <class T, size_t N>
struct Prefix {
  const T* b;
  const T* e;
  const T* begin() const { return b; }
  const T* end() const { return e; }
};
template <class T, size_t N>
Prefix<T, N> span_of(const std::array<T, N>& a, size_t n) {
  return {a.data(), a.data() + n};
}

}  // namespace

PlanBuilder::PlanBuilder(std::string name) {
  m_plan.name = std::move(name);
  // A plan has a queue per DMA queue the chip allows plus the compute engines: reserved, so
  // adding them does not move the streams (and their names) repeatedly.
  constexpr size_t kStreams = 64;
  m_plan.streams.reserve(kStreams);
  m_waits.reserve(kStreams);
  m_waited.reserve(kStreams);
  m_chunks.reserve(kStreams);
  m_counts.reserve(kStreams);
}

// The bytes an access pattern may touch within its buffer or tensor (all of it when a
// run-time scalar moves it).
std::pair<int64_t, int64_t> PlanBuilder::byte_range(const isa::AccessPattern& ap) {
  const auto span = ap.span();
  if (ap.scalar >= 0 || !span) return {0, kWhole};
  const int64_t eb = isa::dtype_bytes(ap.dtype);
  return {span->lo * eb, (span->hi + 1) * eb};
}

RowBox RowBox::of(const isa::AccessPattern& ap) {
  if (isa::is_on_chip(ap.space) || ap.scalar >= 0 || ap.partitions < 2 ||
      ap.partition_stride <= 0 || !ap.span())
    return {};
  // The free dims' extent within a row (span() has checked the products for overflow).
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < ap.num_free; ++d) {
    const isa::Dim& dim = ap.free[static_cast<size_t>(d)];
    if (dim.size <= 0) return {};
    (dim.stride < 0 ? lo : hi) += dim.stride * (dim.size - 1);
  }
  const int64_t pitch = ap.partition_stride, first = ap.offset + lo;
  if (first < 0) return {};
  const int64_t col = first % pitch, width = hi - lo + 1;
  if (col + width > pitch) return {};  // a row's elements wrap into the next row
  const int64_t eb = isa::dtype_bytes(ap.dtype), row = first / pitch;
  return {pitch * eb, row, row + ap.partitions, col * eb, (col + width) * eb};
}

void AccessHistory::append(const AccessHistory& o) {
  writes.insert(writes.end(), o.writes.begin(), o.writes.end());
  reads.insert(reads.end(), o.reads.begin(), o.reads.end());
}

void AccessHistory::collapse() {
  compiler_stub::collapse(writes);
  compiler_stub::collapse(reads);
}

Slot PlanBuilder::add_buffer(isa::MemSpace space, int32_t partition_start, int32_t partitions,
                             int64_t offset_bytes, int64_t bytes, const std::string& name_hint,
                             const AccessHistory& inherit) {
  isa::BufferDecl b;
  b.name = name_hint + "_" + std::to_string(m_plan.buffers.size());
  b.space = space;
  b.partition_start = partition_start;
  b.partitions = partitions;
  b.offset_bytes = offset_bytes;
  b.bytes = bytes;
  m_plan.buffers.push_back(std::move(b));
  const Slot slot{space, static_cast<int32_t>(m_plan.buffers.size() - 1)};
  if (!inherit.empty()) access(true, slot.index) = inherit;
  return slot;
}

AccessHistory& PlanBuilder::access(bool on_chip, int32_t index) {
  auto& all = m_access[on_chip ? 0 : 1];
  if (all.size() <= static_cast<size_t>(index)) all.resize(static_cast<size_t>(index) + 1);
  return all[static_cast<size_t>(index)];
}

const AccessHistory& PlanBuilder::history(Slot slot) {
  return access(isa::is_on_chip(slot.space), slot.index);
}

Slot PlanBuilder::add_tensor(const std::string& name, isa::MemSpace space, isa::DType dtype,
                             std::vector<int64_t> shape, isa::TensorRole role) {
  m_plan.tensors.push_back({name, space, dtype, std::move(shape), role});
  return {space, static_cast<int32_t>(m_plan.tensors.size() - 1)};
}

int PlanBuilder::add_scalar(const std::string& name, int64_t min, int64_t max) {
  m_plan.scalars.push_back({name, min, max});
  return static_cast<int>(m_plan.scalars.size() - 1);
}

int PlanBuilder::add_comm(const std::string& name, int64_t size) {
  for (size_t k = 0; k < m_plan.comms.size(); ++k) {
    if (m_plan.comms[k].name == name) return static_cast<int>(k);
  }
  m_plan.comms.push_back({name, size});
  return static_cast<int>(m_plan.comms.size() - 1);
}

void PlanBuilder::add_node(int32_t id, const std::string& name, const std::string& op) {
  m_plan.nodes.push_back({id, name, op});
}

int PlanBuilder::add_queue(const std::string& name, int32_t dma_engine) {
  m_plan.streams.push_back({isa::Engine::dma, name, dma_engine, {}});
  m_waits.emplace_back();
  m_waited.emplace_back();
  m_chunks.emplace_back();
  m_counts.push_back(0);
  return static_cast<int>(m_plan.streams.size() - 1);
}

int PlanBuilder::stream(isa::Engine engine) {
  auto it = m_compute_streams.find(engine);
  if (it != m_compute_streams.end()) return it->second;
  m_plan.streams.push_back({engine, std::string(isa::name_of(engine)), -1, {}});
  m_waits.emplace_back();
  m_waited.emplace_back();
  m_chunks.emplace_back();
  m_counts.push_back(0);
  const int key = static_cast<int>(m_plan.streams.size() - 1);
  m_compute_streams[engine] = key;
  return key;
}

AccessHistory& PlanBuilder::access(const isa::AccessPattern& ap) {
  return access(isa::is_on_chip(ap.space), ap.buffer);
}

void PlanBuilder::depend(const Ref& consumer, const Ref& producer) {
  if (consumer.stream == producer.stream) return;  // in-order issue within a stream
  // The consumer is always the instruction being emitted; m_need_slot finds its entry for
  // the producer's stream (entries stay in first-dependency order).
  const auto ps = static_cast<size_t>(producer.stream);
  if (m_need_slot.size() <= ps) m_need_slot.resize(ps + 1, -1);
  if (const int slot = m_need_slot[ps]; slot >= 0) {
    isa::SemWait& w = m_need[static_cast<size_t>(slot)];
    w.value = std::max(w.value, producer.index);
    return;
  }
  m_need_slot[ps] = static_cast<int>(m_need.size());
  m_need.push_back({producer.stream, producer.index});
}

void PlanBuilder::emit(int key, isa::Instruction in) {
  const Ref me{key, m_counts[key]++};
  for (const isa::SemWait& w : m_need) m_need_slot[static_cast<size_t>(w.sem)] = -1;
  m_need.clear();
  const isa::OpcodeInfo& oi = isa::info(in.op);
  struct Access {
    const isa::AccessPattern* ap;
    AccessHistory* history;
    std::pair<int64_t, int64_t> range;
    int32_t p_lo, p_hi;  // partitions (on chip), else all
    RowBox box;
  };
  std::array<Access, 4> reads_buf, writes_buf;
  size_t nr = 0, nw = 0;
  auto add = [&](std::array<Access, 4>& to, size_t& n, const isa::AccessPattern& ap) {
    const bool chip = ap.space == isa::MemSpace::sbuf || ap.space == isa::MemSpace::psum;
    to[n++] = {&ap,
               &access(ap),
               byte_range(ap),
               chip ? ap.partition_start : 0,
               chip ? ap.partition_start + ap.partitions : std::numeric_limits<int32_t>::max(),
               RowBox::of(ap)};
  };
  for (int k = 0; k < 3; ++k) {
    if (oi.fields & (isa::F_Src0 << k)) add(reads_buf, nr, in.src[k]);
  }
  if (oi.fields & isa::F_Dst) add(writes_buf, nw, in.dst);
  if (oi.fields & isa::F_Accum) add(writes_buf, nw, in.accum);
  // A matmul that accumulates also reads its destination.
  if (in.op == isa::Opcode::matmul && !in.start) add(reads_buf, nr, in.dst);
  const auto reads = span_of(reads_buf, nr), writes = span_of(writes_buf, nw);
  auto overlaps = [](const AccessHistory::Entry& e, const Access& x) {
    if (!(e.lo < x.range.second && x.range.first < e.hi && e.p_lo < x.p_hi && x.p_lo < e.p_hi))
      return false;
    return e.box.pitch == 0 || e.box.pitch != x.box.pitch || e.box.meets(x.box);
  };
  for (const Access& x : reads) {
    for (const auto& e : x.history->writes) {
      if (overlaps(e, x)) depend(me, {e.stream, e.index});
    }
  }
  for (const Access& x : writes) {
    const AccessHistory& a = *x.history;
    for (const auto& e : a.writes) {
      if (overlaps(e, x)) depend(me, {e.stream, e.index});
    }
    for (const auto& e : a.reads) {
      if (overlaps(e, x)) depend(me, {e.stream, e.index});
    }
  }
  for (const Access& x : reads) {
    const auto r = x.range;
    auto& list = x.history->reads;
    list.push_back({r.first, r.second, key, me.index, x.p_lo, x.p_hi, x.box});
    if (list.size() > kMaxEntries) collapse(list);
  }
  for (const Access& x : writes) {
    const auto r = x.range;
    AccessHistory& a = *x.history;
    // Accesses this write covers are ordered before it: later ones need only wait for it. A
    // later access that meets a covered one must then meet this write by the rule `overlaps`
    // applies between them: a box covers the boxes of its pitch it contains; a write without a
    // box (compared by bytes with everything) covers what its byte range holds.
    auto covered = [&](const AccessHistory::Entry& e) {
      if (!(x.p_lo <= e.p_lo && e.p_hi <= x.p_hi)) return false;
      if (x.box.pitch != 0) return e.box.pitch == x.box.pitch && x.box.contains(e.box);
      return r.first <= e.lo && e.hi <= r.second;
    };
    a.writes.erase(std::remove_if(a.writes.begin(), a.writes.end(), covered), a.writes.end());
    a.reads.erase(std::remove_if(a.reads.begin(), a.reads.end(), covered), a.reads.end());
    a.writes.push_back({r.first, r.second, key, me.index, x.p_lo, x.p_hi, x.box});
    if (a.writes.size() > kMaxEntries) collapse(a.writes);
  }
  // A stream issues in order, so a wait its earlier instruction already made (on the same
  // producer, as far or further) is met before this one can issue: it is dropped, and so is the
  // signal only it needed.
  StreamWaits& deps = m_waits[key];
  std::vector<int64_t>& waited = m_waited[key];
  for (const isa::SemWait& w : m_need) {
    if (waited.size() <= static_cast<size_t>(w.sem))
      waited.resize(static_cast<size_t>(w.sem) + 1, -1);
    if (w.value <= waited[static_cast<size_t>(w.sem)]) continue;
    waited[static_cast<size_t>(w.sem)] = w.value;
    deps.waits.push_back(w);
  }
  deps.end.push_back(static_cast<int64_t>(deps.waits.size()));
  auto& chunks = m_chunks[key];
  if (chunks.empty() || chunks.back().size() == chunks.back().capacity()) {
    // Chunks grow with the stream (kFirstChunk, then as many as it holds, up to kChunk): a
    // stream of a few instructions (most of a small plan's DMA queues) does not take and touch
    // a full chunk.
    const auto held = static_cast<size_t>(m_counts[key] - 1);
    chunks.emplace_back();
    chunks.back().reserve(std::min(kChunk, std::max(kFirstChunk, held)));
  }
  chunks.back().push_back(std::move(in));
}

void derive_semaphores(isa::Plan& plan, std::vector<StreamWaits>& waits) {
  const size_t n = plan.streams.size();
  // Which instructions others wait for, per stream, in order: their signal counts.
  // Sorted and unique: an instruction's signal count is its rank among its stream's producers.
  std::vector<std::vector<int64_t>> producers(n);
  for (size_t s = 0; s < n; ++s) {
    for (const isa::SemWait& w : waits[s].waits) producers[w.sem].push_back(w.value);
  }
  std::vector<int32_t> sem(n, -1);
  for (size_t s = 0; s < n; ++s) {
    auto& p = producers[s];
    if (p.empty()) continue;
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    sem[s] = static_cast<int32_t>(plan.semaphores.size());
    plan.semaphores.push_back("done_" + plan.streams[s].name);
    for (int64_t i : p) plan.streams[s].instructions[i].signals.push_back({sem[s], 1});
  }
  for (size_t s = 0; s < n; ++s) {
    auto& instrs = plan.streams[s].instructions;
    StreamWaits& deps = waits[s];
    for (size_t i = 0; i < instrs.size(); ++i) {
      const auto b = deps.waits.begin() + (i ? deps.end[i - 1] : 0);
      const auto e = deps.waits.begin() + deps.end[i];
      if (b == e) continue;
      for (auto w = b; w != e; ++w) {
        const auto& p = producers[w->sem];
        const int64_t count = std::lower_bound(p.begin(), p.end(), w->value) - p.begin() + 1;
        *w = {sem[w->sem], count};
      }
      // Allocated at its exact size: the plan keeps every list for as long as it is cached.
      auto& dst = instrs[i].waits;
      dst.insert(dst.end(), b, e);
    }
    std::vector<isa::SemWait>().swap(deps.waits);
    std::vector<int64_t>().swap(deps.end);
  }
}

isa::Plan PlanBuilder::build() {
  const size_t n = m_plan.streams.size();
  for (size_t s = 0; s < n; ++s) {
    auto& instrs = m_plan.streams[s].instructions;
    instrs.reserve(static_cast<size_t>(m_counts[s]));
    for (auto& chunk : m_chunks[s]) {
      std::move(chunk.begin(), chunk.end(), std::back_inserter(instrs));
      std::vector<isa::Instruction>().swap(chunk);
    }
  }
  derive_semaphores(m_plan, m_waits);
  for (auto& w : m_waited) std::vector<int64_t>().swap(w);
  return std::move(m_plan);
}

}  // namespace wallsim::compiler_stub
