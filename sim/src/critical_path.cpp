// The critical path of a drained launch, walked back from its end over the recorded times.
#include "wallsim/sim/critical_path.h"

#include <algorithm>

namespace wallsim::sim {

using sc_core::sc_time;

namespace {

// One increment of a semaphore: when it fired, the value it brought the semaphore to, and the
// instruction (index into Launch::times) that sent it.
struct Signal {
  sc_time at;
  int64_t value;
  size_t instr;
};

}  // namespace

CriticalPath critical_path(const engines::Launch& l) {
  const isa::Plan& plan = *l.plan;
  const std::vector<engines::InstructionTimes>& times = l.times;
  const size_t n = times.size();
  CriticalPath out;
  out.by_node.assign(plan.nodes.size(), sc_time());
  if (n == 0) {
    if (l.end_time > l.start_time) out.no_node = l.end_time - l.start_time;
    return out;
  }

  // Each instruction's stream and signal time (its own result, or the previous one's when
  // in-order retire held it back); each semaphore's signals in time order.
  std::vector<uint32_t> stream_of(n);
  std::vector<sc_time> signal_at(n);
  std::vector<std::vector<Signal>> signals(plan.semaphores.size());
  for (size_t s = 0; s < plan.streams.size(); ++s) {
    const auto& instrs = plan.streams[s].instructions;
    const size_t base = l.stream_offset[s];
    for (size_t k = 0; k < instrs.size(); ++k) {
      const size_t g = base + k;
      stream_of[g] = static_cast<uint32_t>(s);
      signal_at[g] = k == 0 ? times[g].ready : std::max(times[g].ready, signal_at[g - 1]);
      for (const isa::SemSignal& sig : instrs[k].signals)
        signals[size_t(sig.sem)].push_back({signal_at[g], sig.add, g});
    }
  }
  const auto earlier = [](const Signal& a, const Signal& b) { return a.at < b.at; };
  for (std::vector<Signal>& v : signals) {
    // Pushed stream by stream, in order within each: a stable sort keeps the tie rule.
    if (!std::is_sorted(v.begin(), v.end(), earlier)) std::stable_sort(v.begin(), v.end(), earlier);
    int64_t value = 0;
    for (Signal& sig : v) sig.value = (value += sig.value);
  }
  // The signal that brought `w.sem` to `w.value`; null when none did.
  const auto crossing = [&](const isa::SemWait& w) -> const Signal* {
    const std::vector<Signal>& v = signals[size_t(w.sem)];
    const auto it = std::partition_point(v.begin(), v.end(),
                                         [&](const Signal& sig) { return sig.value < w.value; });
    return it == v.end() ? nullptr : &*it;
  };
  const auto instruction = [&](size_t g) -> const isa::Instruction& {
    const size_t s = stream_of[g];
    return plan.streams[s].instructions[g - l.stream_offset[s]];
  };
  const auto charge = [&](size_t g, sc_time from, sc_time to) {
    if (to <= from) return;
    const int32_t node = instruction(g).node;
    const auto it = node >= 0 ? l.node_index.find(node) : l.node_index.end();
    (it == l.node_index.end() ? out.no_node : out.by_node[it->second]) += to - from;
  };

  // The end: the last signal of the first stream among those that finish last.
  size_t g = n;
  sc_time t;
  for (size_t s = 0; s < plan.streams.size(); ++s) {
    const size_t count = plan.streams[s].instructions.size();
    if (count == 0) continue;
    const size_t last = l.stream_offset[s] + count - 1;
    if (g == n || signal_at[last] > t) {
      g = last;
      t = signal_at[last];
    }
  }
  if (l.end_time > t) out.no_node += l.end_time - t;

  std::vector<char> visited(n, 0);
  for (;;) {
    visited[g] = 1;
    ++out.instructions;
    const size_t s = stream_of[g];
    const size_t k = g - l.stream_offset[s];
    if (t > times[g].ready && k > 0 && !visited[g - 1]) {
      g -= 1;  // in-order retire: the signal waited for the previous instruction's result
      continue;
    }
    const sc_time issue = std::max(times[g].start, l.start_time);
    charge(g, issue, t);
    t = issue;
    if (t <= l.start_time) break;
    size_t next = n;
    for (const isa::SemWait& w : instruction(g).waits) {
      if (w.value <= 0) continue;  // met before any signal
      const Signal* sig = crossing(w);
      if (sig && sig->at == t && !visited[sig->instr]) {
        next = sig->instr;
        break;
      }
    }
    if (next == n && k > 0 && times[g - 1].end == t && !visited[g - 1]) next = g - 1;
    if (next == n && k == 0 && plan.streams[s].engine != isa::Engine::dma) {
      // A compute engine runs a launch's streams for it in plan order (each DMA stream has a
      // queue of its own): the previous non-empty one ending let this one start.
      for (size_t p = s; p-- > 0;) {
        const isa::Stream& prev = plan.streams[p];
        if (prev.engine != plan.streams[s].engine || prev.instructions.empty()) continue;
        const size_t q = l.stream_offset[p] + prev.instructions.size() - 1;
        if (times[q].end == t && !visited[q]) next = q;
        break;
      }
    }
    if (next == n) {
      charge(g, l.start_time, t);  // held by something outside the launch
      break;
    }
    g = next;
  }
  return out;
}

std::vector<sc_time> dma_active_by_group(const engines::Launch& launch,
                                         const std::vector<int32_t>& group, size_t groups) {
  const isa::Plan& plan = *launch.plan;
  std::vector<std::vector<std::pair<sc_time, sc_time>>> spans(groups);
  for (size_t s = 0; s < plan.streams.size(); ++s) {
    const isa::Stream& stream = plan.streams[s];
    if (stream.engine != isa::Engine::dma) continue;
    for (size_t i = 0; i < stream.instructions.size(); ++i) {
      const int32_t node = stream.instructions[i].node;
      if (node < 0) continue;
      auto it = launch.node_index.find(node);
      if (it == launch.node_index.end() || group[it->second] < 0) continue;
      const engines::InstructionTimes& t = launch.times[launch.stream_offset[s] + i];
      if (t.end > t.start)
        spans[static_cast<size_t>(group[it->second])].emplace_back(t.start, t.end);
    }
  }
  std::vector<sc_time> out(groups);
  for (size_t g = 0; g < groups; ++g) {
    std::vector<std::pair<sc_time, sc_time>>& v = spans[g];
    std::sort(v.begin(), v.end());
    sc_time covered_to;
    for (const auto& [start, end] : v) {
      if (end <= covered_to) continue;
      out[g] += end - std::max(start, covered_to);
      covered_to = end;
    }
  }
  return out;
}

}  // namespace wallsim::sim
