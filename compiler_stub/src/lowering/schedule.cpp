// List scheduling of a built plan across op boundaries (schedule.h): the dependencies are read
// from the physical bytes every instruction touches, the order from an estimate of every
// engine's time, and the semaphores derived again for the new order.
#include "wallsim/compiler_stub/schedule.h"

#include "wallsim/compiler_stub/plan_builder.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <unordered_map>
#include <vector>

namespace wallsim::compiler_stub {

namespace {

using isa::AccessPattern;
using isa::Instruction;
using isa::Plan;

// Granules the access lists are kept in: bytes per partition on chip, bytes of a tensor off chip.
constexpr int64_t kOnChipGranule = 512;
constexpr int64_t kOffChipGranule = 16 * 1024;

struct Ref {
  int32_t stream;
  int32_t index;
};

// Any order of the plan's instructions its semaphores allow (every producer before its
// consumers, each stream in order); empty when the streams deadlock.
std::vector<Ref> linear_order(const Plan& plan) {
  const size_t streams = plan.streams.size();
  std::vector<int64_t> count(plan.semaphores.size(), 0);
  std::vector<size_t> next(streams, 0);
  std::vector<Ref> order;
  order.reserve(static_cast<size_t>(plan.instruction_count()));
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < streams; ++s) {
      const auto& ins = plan.streams[s].instructions;
      for (; next[s] < ins.size(); ++next[s]) {
        const Instruction& in = ins[next[s]];
        const bool ready =
            std::all_of(in.waits.begin(), in.waits.end(), [&](const isa::SemWait& w) {
              return w.sem >= 0 && static_cast<size_t>(w.sem) < count.size() &&
                     count[w.sem] >= w.value;
            });
        if (!ready) break;
        for (const isa::SemSignal& sig : in.signals) {
          if (sig.sem >= 0 && static_cast<size_t>(sig.sem) < count.size())
            count[sig.sem] += sig.add;
        }
        order.push_back({static_cast<int32_t>(s), static_cast<int32_t>(next[s])});
        progress = true;
      }
    }
  }
  if (order.size() != static_cast<size_t>(plan.instruction_count())) order.clear();
  return order;
}

// The bytes an access touches where they physically are: the space (and, off chip, the
// tensor) as a key, bytes [lo, hi) within a partition or the tensor, partitions [p_lo, p_hi).
struct Place {
  uint64_t key;
  int64_t granule;
  int64_t lo, hi;
  int32_t p_lo, p_hi;
};

Place place_of(const Plan& plan, const AccessPattern& ap) {
  const int64_t eb = isa::dtype_bytes(ap.dtype);
  const auto span = ap.span();
  const bool whole = ap.scalar >= 0 || !span;
  if (isa::is_on_chip(ap.space)) {
    const isa::BufferDecl& b = plan.buffers.at(static_cast<size_t>(ap.buffer));
    Place p{ap.space == isa::MemSpace::psum ? 1u : 0u,
            kOnChipGranule,
            b.offset_bytes,
            b.offset_bytes + b.bytes,
            b.partition_start,
            b.partition_start + b.partitions};
    if (!whole) {
      p.lo = b.offset_bytes + span->lo * eb;
      p.hi = b.offset_bytes + (span->hi + 1) * eb;
      p.p_lo = ap.partition_start;
      p.p_hi = ap.partition_start + ap.partitions;
    }
    return p;
  }
  const isa::TensorDecl& t = plan.tensors.at(static_cast<size_t>(ap.buffer));
  const int64_t elements = t.elements();
  const int64_t size = elements == std::numeric_limits<int64_t>::max()
                           ? std::numeric_limits<int64_t>::max() / 2
                           : elements * isa::dtype_bytes(t.dtype);
  Place p{2u + static_cast<uint64_t>(ap.buffer), kOffChipGranule, 0, size, 0, 1};
  if (!whole) {
    p.lo = span->lo * eb;
    p.hi = std::min(size, (span->hi + 1) * eb);
  }
  return p;
}

// Who touched one granule since its last covering write.
struct Entry {
  int64_t lo, hi;
  int32_t p_lo, p_hi;
  int32_t node;
};
struct Granule {
  std::vector<Entry> writes, reads;
};

bool overlaps(const Entry& e, const Place& x) {
  return e.lo < x.hi && x.lo < e.hi && e.p_lo < x.p_hi && x.p_lo < e.p_hi;
}

// For every instruction (by its place in `order`), the earlier ones it must follow: those that
// wrote bytes it reads or writes, and those that read bytes it writes.
std::vector<std::vector<int32_t>> dependencies(const Plan& plan, const std::vector<Ref>& order) {
  std::unordered_map<uint64_t, Granule> granules;
  auto granule = [&](const Place& p, int64_t g) -> Granule& {
    return granules[(p.key << 40) ^ static_cast<uint64_t>(g)];
  };
  std::vector<std::vector<int32_t>> preds(order.size());
  std::vector<Place> reads, writes;
  for (size_t i = 0; i < order.size(); ++i) {
    const Instruction& in = plan.streams[order[i].stream].instructions[order[i].index];
    const isa::OpcodeInfo& oi = isa::info(in.op);
    reads.clear();
    writes.clear();
    for (int k = 0; k < 3; ++k) {
      if (oi.fields & (isa::F_Src0 << k)) reads.push_back(place_of(plan, in.src[k]));
    }
    if (oi.fields & isa::F_Dst) writes.push_back(place_of(plan, in.dst));
    if (oi.fields & isa::F_Accum) writes.push_back(place_of(plan, in.accum));
    if (in.op == isa::Opcode::matmul && !in.start) reads.push_back(place_of(plan, in.dst));
    auto& mine = preds[i];
    for (const Place& x : reads) {
      if (x.hi <= x.lo) continue;
      for (int64_t g = x.lo / x.granule; g <= (x.hi - 1) / x.granule; ++g) {
        for (const Entry& e : granule(x, g).writes) {
          if (overlaps(e, x)) mine.push_back(e.node);
        }
      }
    }
    for (const Place& x : writes) {
      if (x.hi <= x.lo) continue;
      for (int64_t g = x.lo / x.granule; g <= (x.hi - 1) / x.granule; ++g) {
        const Granule& gr = granule(x, g);
        for (const Entry& e : gr.writes) {
          if (overlaps(e, x)) mine.push_back(e.node);
        }
        for (const Entry& e : gr.reads) {
          if (overlaps(e, x)) mine.push_back(e.node);
        }
      }
    }
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    const auto node = static_cast<int32_t>(i);
    for (const Place& x : reads) {
      if (x.hi <= x.lo) continue;
      for (int64_t g = x.lo / x.granule; g <= (x.hi - 1) / x.granule; ++g) {
        granule(x, g).reads.push_back({x.lo, x.hi, x.p_lo, x.p_hi, node});
      }
    }
    for (const Place& x : writes) {
      if (x.hi <= x.lo) continue;
      auto covered = [&](const Entry& e) {
        return x.lo <= e.lo && e.hi <= x.hi && x.p_lo <= e.p_lo && e.p_hi <= x.p_hi;
      };
      for (int64_t g = x.lo / x.granule; g <= (x.hi - 1) / x.granule; ++g) {
        Granule& gr = granule(x, g);
        gr.writes.erase(std::remove_if(gr.writes.begin(), gr.writes.end(), covered),
                        gr.writes.end());
        gr.reads.erase(std::remove_if(gr.reads.begin(), gr.reads.end(), covered), gr.reads.end());
        gr.writes.push_back({x.lo, x.hi, x.p_lo, x.p_hi, node});
      }
    }
  }
  return preds;
}

// Estimated engine time of one instruction (ns): the cost hints' rates; a tensor-engine
// instruction whose stationary tile differs from the previous one's loads it first.
double busy_ns(const Instruction& in, const isa::CostHints& c, const AccessPattern* loaded) {
  switch (isa::info(in.op).engine) {
    case isa::Engine::tensor: {
      const AccessPattern& st = in.src[0];
      const int64_t n = in.op == isa::Opcode::matmul ? in.src[1].free_elements() : st.partitions;
      int64_t cycles = std::max(n, c.moving_min_cycles);
      if (!loaded || !(*loaded == st)) cycles += st.free_elements();
      return static_cast<double>(cycles) * 1000.0 / c.tensor_freq_mhz;
    }
    case isa::Engine::vector:
    case isa::Engine::scalar: {
      int inputs = 0;
      for (int k = 0; k < 3; ++k) inputs += in.uses(static_cast<isa::OpField>(isa::F_Src0 << k));
      const int64_t elements =
          in.op == isa::Opcode::tensor_reduce ? in.src[0].free_elements() : in.dst.free_elements();
      const double rate = isa::info(in.op).engine == isa::Engine::vector ? c.vector_elements_per_ns
                                                                         : c.scalar_elements_per_ns;
      return static_cast<double>(c.vector_fixed_ns) +
             std::max(1, inputs) * static_cast<double>(elements) / rate;
    }
    case isa::Engine::dma:
      return static_cast<double>(in.dst.bytes() + in.dst.partitions * c.dma_chunk_overhead_bytes) /
             c.dma_gb_per_s;
  }
  return 0.0;
}

// The list schedule: per stream, the positions (in `order`) of its instructions, in issue order.
std::vector<std::vector<int32_t>> list_schedule(const Plan& plan, const std::vector<Ref>& order,
                                                const std::vector<std::vector<int32_t>>& preds,
                                                const isa::CostHints& costs) {
  const size_t n = order.size(), streams = plan.streams.size();
  std::vector<std::vector<int32_t>> succs(n);
  std::vector<int32_t> waiting(n, 0);
  for (size_t i = 0; i < n; ++i) {
    waiting[i] = static_cast<int32_t>(preds[i].size());
    for (int32_t p : preds[i]) succs[static_cast<size_t>(p)].push_back(static_cast<int32_t>(i));
  }
  using Pending = std::pair<double, int32_t>;  // (ready at, position)
  struct Queue {
    std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending;
    // (-bottom level, position): the longest remaining chain first, then the first emitted.
    std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> ready;
    double now = 0.0;
    const AccessPattern* loaded = nullptr;
  };
  // Bottom levels: an instruction's time plus its longest chain of successors.
  std::vector<double> level(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    double tail = 0.0;
    for (int32_t j : succs[i]) tail = std::max(tail, level[static_cast<size_t>(j)]);
    level[i] =
        tail + busy_ns(plan.streams[order[i].stream].instructions[order[i].index], costs, nullptr);
  }
  std::vector<Queue> q(streams);
  std::vector<double> ready_at(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) q[order[i].stream].pending.push({0.0, static_cast<int32_t>(i)});
  }
  std::vector<std::vector<int32_t>> out(streams);
  constexpr double kNever = std::numeric_limits<double>::infinity();
  for (size_t done = 0; done < n; ++done) {
    // The stream that can issue soonest (ties: the instruction emitted first).
    size_t best = streams;
    double best_at = kNever;
    int32_t best_first = std::numeric_limits<int32_t>::max();
    for (size_t s = 0; s < streams; ++s) {
      Queue& x = q[s];
      double at = kNever;
      int32_t first = std::numeric_limits<int32_t>::max();
      if (!x.ready.empty()) {
        at = x.now;
        first = x.ready.top().second;
      } else if (!x.pending.empty()) {
        at = std::max(x.now, x.pending.top().first);
        first = x.pending.top().second;
      }
      if (at < best_at || (at == best_at && first < best_first)) {
        best = s;
        best_at = at;
        best_first = first;
      }
    }
    Queue& x = q[best];
    x.now = best_at;
    while (!x.pending.empty() && x.pending.top().first <= x.now) {
      const int32_t j = x.pending.top().second;
      x.ready.push({-level[static_cast<size_t>(j)], j});
      x.pending.pop();
    }
    const int32_t i = x.ready.top().second;
    x.ready.pop();
    const Instruction& in = plan.streams[best].instructions[order[i].index];
    const double busy = busy_ns(in, costs, x.loaded);
    if (isa::info(in.op).engine == isa::Engine::tensor) x.loaded = &in.src[0];
    x.now += busy;
    out[best].push_back(i);
    for (int32_t j : succs[static_cast<size_t>(i)]) {
      ready_at[j] = std::max(ready_at[j], x.now);
      if (--waiting[j] == 0) q[order[j].stream].pending.push({ready_at[j], j});
    }
  }
  return out;
}

}  // namespace

isa::Plan schedule_plan(isa::Plan plan, const isa::CostHints& costs) {
  costs.require_priced("compiler_stub::schedule_plan");
  const std::vector<Ref> order = linear_order(plan);
  if (order.empty()) return plan;
  const auto preds = dependencies(plan, order);
  const auto issue = list_schedule(plan, order, preds, costs);

  // Every instruction's new place in its stream.
  const size_t streams = plan.streams.size();
  std::vector<int32_t> pos(order.size());
  for (size_t s = 0; s < streams; ++s) {
    for (size_t k = 0; k < issue[s].size(); ++k) pos[issue[s][k]] = static_cast<int32_t>(k);
  }
  // Waits, per consumer: for each other stream, the furthest producer it needs, unless an
  // earlier instruction of its own stream already waited as far (streams issue in order).
  std::vector<StreamWaits> waits(streams);
  std::vector<isa::SemWait> w;
  for (size_t s = 0; s < streams; ++s) {
    std::vector<int64_t> waited(streams, -1);
    waits[s].end.reserve(issue[s].size());
    for (size_t k = 0; k < issue[s].size(); ++k) {
      w.clear();
      for (int32_t p : preds[issue[s][k]]) {
        const auto ps = static_cast<size_t>(order[p].stream);
        if (ps == s) continue;
        auto it = std::find_if(w.begin(), w.end(), [&](const isa::SemWait& x) {
          return x.sem == static_cast<int32_t>(ps);
        });
        if (it == w.end()) {
          w.push_back({static_cast<int32_t>(ps), pos[p]});
        } else {
          it->value = std::max<int64_t>(it->value, pos[p]);
        }
      }
      w.erase(std::remove_if(w.begin(), w.end(),
                             [&](const isa::SemWait& x) { return x.value <= waited[x.sem]; }),
              w.end());
      std::sort(w.begin(), w.end(),
                [](const isa::SemWait& a, const isa::SemWait& b) { return a.sem < b.sem; });
      for (const isa::SemWait& x : w) waited[x.sem] = x.value;
      waits[s].waits.insert(waits[s].waits.end(), w.begin(), w.end());
      waits[s].end.push_back(static_cast<int64_t>(waits[s].waits.size()));
    }
  }
  // The streams in their new order, without the old semaphores.
  for (size_t s = 0; s < streams; ++s) {
    auto& old = plan.streams[s].instructions;
    std::vector<Instruction> now;
    now.reserve(old.size());
    for (int32_t i : issue[s]) now.push_back(std::move(old[order[i].index]));
    for (Instruction& in : now) {
      in.waits.clear();
      in.signals.clear();
    }
    old = std::move(now);
  }
  plan.semaphores.clear();
  derive_semaphores(plan, waits);
  return plan;
}

}  // namespace wallsim::compiler_stub
