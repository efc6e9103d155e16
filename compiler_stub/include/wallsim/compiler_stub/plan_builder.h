// PlanBuilder: emits instructions into engine streams and DMA queues, and derives every
// semaphore from the data dependencies between engines, so lowering code never writes sync.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "wallsim/isa/plan.h"

namespace wallsim::compiler_stub {

// A storage slot whose accesses the builder orders: an on-chip buffer or an off-chip tensor.
struct Slot {
  isa::MemSpace space = isa::MemSpace::sbuf;
  int32_t index = -1;  // into Plan::buffers or Plan::tensors
  bool valid() const { return index >= 0; }
};

// Who touched a buffer or tensor, as far as ordering goes: the latest writes, and the reads
// since, each with the byte range it touched, so accesses to disjoint parts (two DMA pieces of
// one tile, two row tiles of one output) do not wait for each other. A buffer declared over
// bytes that earlier (now dead) buffers used starts from their merged history, covering the
// whole buffer, so reuse is ordered after the old accesses.
// Off chip, an access of several rows whose free dims stay within a row touches a box of a
// row-major grid: rows [r_lo, r_hi) of `pitch` bytes, byte columns [c_lo, c_hi) of each. Two
// boxes of one pitch meet only where both their rows and their columns do, so column blocks of
// one matrix (a GEMM's output stored by column panels) are disjoint though their byte ranges
// interleave. `pitch` 0: no box (the byte range alone orders the access).
struct RowBox {
  int64_t pitch = 0;
  int64_t r_lo = 0, r_hi = 0, c_lo = 0, c_hi = 0;
  static RowBox of(const isa::AccessPattern& ap);
  bool meets(const RowBox& o) const {
    return r_lo < o.r_hi && o.r_lo < r_hi && c_lo < o.c_hi && o.c_lo < c_hi;
  }
  bool contains(const RowBox& o) const {
    return r_lo <= o.r_lo && o.r_hi <= r_hi && c_lo <= o.c_lo && o.c_hi <= c_hi;
  }
};

struct AccessHistory {
  struct Entry {
    int64_t lo, hi;  // bytes [lo, hi) within the buffer or tensor
    int stream;
    int64_t index;
    // On chip: partitions [p_lo, p_hi) (accesses to disjoint partitions do not conflict).
    int32_t p_lo = 0, p_hi = std::numeric_limits<int32_t>::max();
    RowBox box;  // off chip: the rows and columns it touched, when they form a box
  };
  std::vector<Entry> writes;
  std::vector<Entry> reads;
  bool empty() const { return writes.empty() && reads.empty(); }
  // Adds `o`'s accesses as whole-range ones (its ranges belong to another buffer).
  void merge(const AccessHistory& o) {
    append(o);
    collapse();
  }
  // merge() in two steps, for many histories: append each, then collapse once.
  void append(const AccessHistory& o);
  void collapse();  // one whole-range entry per stream (its latest), in stream order
};

// One stream's semaphore waits before they are semaphores, flat: every entry a SemWait holding
// (producer stream, producer instruction index) rather than (semaphore, count); `end[i]` is the
// end of instruction i's entries. A stream has one entry per instruction it holds.
struct StreamWaits {
  std::vector<isa::SemWait> waits;
  std::vector<int64_t> end;
};

// Derives `plan`'s sync from every stream's waits (`waits[s]` for plan.streams[s]): a semaphore
// `done_<stream>` per stream others wait on, appended to plan.semaphores; a signal on each
// instruction something waits for, whose count is its rank among its stream's waited-for
// instructions; and each wait, in its given order, appended to its instruction as (semaphore,
// that count). Used by PlanBuilder::build and by schedule_plan, which derives the sync again for
// its new order. `waits` is spent (its lists are released).
void derive_semaphores(isa::Plan& plan, std::vector<StreamWaits>& waits);

class PlanBuilder {
 public:
  explicit PlanBuilder(std::string name);

  // `inherit`: the history of the range the buffer reuses (see AccessHistory).
  Slot add_buffer(isa::MemSpace space, int32_t partition_start, int32_t partitions,
                  int64_t offset_bytes, int64_t bytes, const std::string& name_hint,
                  const AccessHistory& inherit = {});
  // The ordering history of `slot` so far: what a later buffer over the same range inherits.
  const AccessHistory& history(Slot slot);
  Slot add_tensor(const std::string& name, isa::MemSpace space, isa::DType dtype,
                  std::vector<int64_t> shape, isa::TensorRole role);
  int add_scalar(const std::string& name, int64_t min, int64_t max);
  // The plan's communicator `name` of `size` ranks (declared once; Plan::comms): its index.
  int add_comm(const std::string& name, int64_t size);
  void set_role(Slot tensor, isa::TensorRole role) { m_plan.tensors.at(tensor.index).role = role; }
  isa::TensorRole role(int32_t tensor) const { return m_plan.tensors.at(tensor).role; }
  int64_t tensor_elements(Slot tensor) const { return m_plan.tensors.at(tensor.index).elements(); }
  // Widens a tensor to `elements` (flat): scratch reused for a larger value.
  void grow_tensor(Slot tensor, int64_t elements) {
    m_plan.tensors.at(tensor.index).shape = {elements};
  }
  void add_node(int32_t id, const std::string& name, const std::string& op);
  // A DMA queue served by `dma_engine`; returns its stream key for emit().
  int add_queue(const std::string& name, int32_t dma_engine);
  int stream(isa::Engine compute_engine);  // the stream key of a compute engine

  // Appends `in` to stream `key`. Its operands' slots are taken from its access patterns: the
  // destination(s) are written, the sources read. Cross-engine read-after-write,
  // write-after-read and write-after-write orders become semaphore waits at build().
  void emit(int key, isa::Instruction in);

  // The plan, with a semaphore per stream that others wait on; only instructions something
  // depends on signal. The builder is spent afterwards.
  isa::Plan build();

 private:
  struct Ref {
    int stream;
    int64_t index;
  };
  void depend(const Ref& consumer, const Ref& producer);
  static std::pair<int64_t, int64_t> byte_range(const isa::AccessPattern& ap);
  AccessHistory& access(const isa::AccessPattern& ap);

  isa::Plan m_plan;
  std::map<isa::Engine, int> m_compute_streams;
  // By buffer (on chip) and by tensor (off chip) index. A deque: growing it keeps the
  // references emit() holds to other entries valid.
  std::deque<AccessHistory> m_access[2];
  AccessHistory& access(bool on_chip, int32_t index);
  // Per stream, every instruction's waits: for each producer stream, the latest producer index
  // it waits for, until build() turns them into semaphores (derive_semaphores). An
  // instruction's list is complete once emit() returns (only the instruction being emitted
  // gains dependencies), so it is gathered in m_need first.
  std::vector<StreamWaits> m_waits;
  // Per stream, by producer stream: the furthest index already waited for.
  std::vector<std::vector<int64_t>> m_waited;
  std::vector<isa::SemWait> m_need;  // the instruction being emitted; one entry per stream
  std::vector<int> m_need_slot;      // by producer stream: its entry in m_need, or -1
  // Per stream, the emitted instructions in fixed-size chunks, moved into the plan once at
  // build(): a growing array of instructions would copy (and page-fault) each one repeatedly.
  std::vector<std::vector<std::vector<isa::Instruction>>> m_chunks;
  std::vector<int64_t> m_counts;
};

}  // namespace wallsim::compiler_stub
