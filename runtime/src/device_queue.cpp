// One core's allocations, launches (immediate or held for the background compiler) and copies.
// sc_spawn (the launcher of held launches) needs SystemC's dynamic processes.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "wallsim/runtime/device_queue.h"

#include <algorithm>

#include "session_util.h"
#include "wallsim/isa/copy_plan.h"
#include "wallsim/runtime/runtime_error.h"

namespace wallsim::runtime {

using namespace session_detail;

DeviceQueue::DeviceQueue(sim::Core& core, int64_t hbm_bytes, bool functional, bool in_order,
                         bool async_collectives)
    : m_core(core),
      m_functional(functional),
      m_in_order(in_order),
      m_async(async_collectives),
      m_memory(hbm_bytes) {}

void DeviceQueue::start_launcher() {
  sc_core::sc_spawn_options o;
  o.dont_initialize();
  o.set_sensitivity(&m_held_added);
  sc_core::sc_spawn([this] { launcher(); }, "background_compiler", &o);
}

std::string DeviceQueue::allocate(const TensorType& type, const std::string& hint) {
  if (m_async) settle_async();
  std::string name = m_memory.allocate(bytes_of(type), m_prefix + hint);
  if (m_functional) m_core.tensors().put(name, isa::MemSpace::hbm, type.dtype, dims_of(type));
  return name;
}

void DeviceQueue::settle_async() {
  const auto drained = [this](const Running& r) { return launch_at(r.index).drained(); };
  m_async_running.erase(std::remove_if(m_async_running.begin(), m_async_running.end(), drained),
                        m_async_running.end());
  const auto freed = [this](std::pair<size_t, std::string>& f) {
    if (!launch_at(f.first).drained()) return false;
    m_memory.release(std::move(f.second), true);
    return true;
  };
  m_async_frees.erase(std::remove_if(m_async_frees.begin(), m_async_frees.end(), freed),
                      m_async_frees.end());
}

void DeviceQueue::release(std::string name, bool now) {
  if (now && m_async) {
    settle_async();
    for (const Running& r : m_async_running) {
      const auto has = [&](const std::vector<std::string>& v) {
        return std::find(v.begin(), v.end(), name) != v.end();
      };
      if (has(r.reads) || has(r.writes)) {
        m_async_frees.emplace_back(r.index, std::move(name));
        return;
      }
    }
  }
  m_memory.release(std::move(name), now);
}

void DeviceQueue::free_deferred() {
  // Those still held by a running asynchronous launch go with the rest (their contents stay
  // until every launch queued so far has drained, as for any deferred free).
  for (auto& [index, name] : m_async_frees) m_memory.release(std::move(name), false);
  m_async_frees.clear();
  for (const std::string& name : m_memory.free_deferred()) {
    if (m_functional) m_core.tensors().erase(name);
  }
}

sim::LaunchHandle DeviceQueue::issue(Launch& l, const std::shared_ptr<const isa::Plan>& plan) {
  engines::Launch& launch = m_core.launch(*plan, std::move(l.scalars), std::move(l.names), plan);
  launch.origins = std::move(l.origins);
  for (const isa::CommDecl& c : plan->comms) {
    auto it = m_comms.find(c.name);
    if (it == m_comms.end() || static_cast<int64_t>(it->second.size()) != c.size) {
      throw RuntimeError("plan " + plan->name + " uses communicator '" + c.name + "' of " +
                         std::to_string(c.size) + " ranks, which this rank's process group " +
                         (it == m_comms.end() ? std::string("does not have")
                                              : "has with " + std::to_string(it->second.size())));
    }
    launch.comm_ranks.push_back(it->second);
  }
  if (m_async) order(launch, *plan);
  const sim::LaunchHandle h(m_core, launch);
  l.record->counts.plans_launched++;
  l.record->padded_macs += l.compiled->macs;
  return h;
}

namespace {

// A plan with instructions, each a collective, a send or a recv.
bool communication_only(const isa::Plan& plan) {
  bool any = false;
  for (const isa::Stream& s : plan.streams) {
    for (const isa::Instruction& in : s.instructions) {
      if (!isa::is_collective(in.op)) return false;
      any = true;
    }
  }
  return any;
}

bool shares(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const std::string& x : a) {
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  }
  return false;
}

}  // namespace

void DeviceQueue::order(engines::Launch& launch, const isa::Plan& plan) {
  settle_async();
  const bool async = communication_only(plan);
  if (!async && m_async_running.empty()) return;  // nothing to order against, nothing to mark
  std::vector<std::string> reads, writes;
  for (size_t k = 0; k < plan.tensors.size(); ++k) {
    const isa::TensorDecl& t = plan.tensors[k];
    const std::string& name = launch.tensor_names.empty() ? t.name : launch.tensor_names[k];
    if (t.role == isa::TensorRole::input || t.role == isa::TensorRole::inout) reads.push_back(name);
    if (t.role != isa::TensorRole::input) writes.push_back(name);
  }
  for (const Running& r : m_async_running) {
    if (shares(reads, r.writes) || shares(writes, r.reads) || shares(writes, r.writes))
      launch.after.push_back(r.index);
  }
  // An asynchronous launch waits for the launches before it anyway (the core's rule); those
  // after it wait only through the dependencies above.
  if (async) {
    launch.async = true;
    m_async_running.push_back(
        {static_cast<size_t>(launch.index), std::move(reads), std::move(writes)});
  }
}

void DeviceQueue::launch(Launch l, int64_t host_ps) {
  const sim::LaunchHandle h = issue(l, l.compiled->plan);
  if (m_flows_on) m_flows.emplace_back(host_ps, h);
  for (auto& t : l.outs) t->producer = h;
}

void DeviceQueue::hold(Launch l, sc_core::sc_time ready) {
  for (auto& t : l.outs) t->queued = true;
  std::shared_ptr<const isa::Plan> plan = l.compiled->plan;
  m_held.push_back({std::move(l), std::move(plan), ready});
  m_held_added.notify(sc_core::SC_ZERO_TIME);
}

// The launcher of held launches: issues them in order, each when its compile is done.
void DeviceQueue::launcher() {
  for (;;) {
    while (m_held.empty()) sc_core::wait(m_held_added);
    Held& q = m_held.front();
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    if (q.ready > now) sc_core::wait(q.ready - now);
    // The body may have been dropped from the cache since: launch the one held.
    const sim::LaunchHandle h = issue(q.launch, q.plan);
    if (m_flows_on) m_flows.emplace_back(now_ps(), h);
    for (auto& t : q.launch.outs) {
      t->producer = h;
      t->queued = false;
    }
    m_held.pop_front();
    m_launched.notify(sc_core::SC_ZERO_TIME);
  }
}

sim::LaunchHandle DeviceQueue::transfer(const std::string& src, isa::MemSpace src_space,
                                        const std::string& dst, isa::MemSpace dst_space,
                                        const TensorType& type, Counts& counts) {
  auto shape = dims_of(type);
  const int64_t cols = shape.empty() ? 1 : shape.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  const std::string key = std::string(isa::name_of(type.dtype)) + "_" + std::to_string(rows) + "x" +
                          std::to_string(cols) + "_" + std::string(isa::name_of(src_space));
  auto it = m_transfer_index.find(key);
  if (it == m_transfer_index.end()) {
    auto body = std::make_shared<isa::Plan>(
        isa::copy_plan("copy_" + key, src_space, dst_space, type.dtype, rows, cols));
    it = m_transfer_index.emplace(key, m_transfer_plans.size()).first;
    m_transfer_plans.push_back(body);
  }
  counts.transfers++;
  const isa::Plan& plan = *m_transfer_plans[it->second];
  engines::Launch& launch = m_core.launch(plan, {}, {src, dst});
  if (m_async) order(launch, plan);
  return {m_core, launch};
}

int64_t DeviceQueue::busy_ns_since(size_t first) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t i = first; i < launches(); ++i) {
    const sim::LaunchHandle l = launch_at(i);
    if (!l.started()) continue;
    spans.emplace_back(l.start_ps(), l.end_ps());
  }
  m_core.retire_drained();  // the step's launches are folded into the op totals and freed
  std::sort(spans.begin(), spans.end());
  int64_t busy = 0, cur_lo = -1, cur_hi = -1;
  for (auto [lo, hi] : spans) {
    if (lo > cur_hi) {
      if (cur_hi > cur_lo) busy += cur_hi - cur_lo;
      cur_lo = lo;
      cur_hi = hi;
    } else {
      cur_hi = std::max(cur_hi, hi);
    }
  }
  if (cur_hi > cur_lo) busy += cur_hi - cur_lo;
  return busy / 1000;
}

const std::map<int32_t, sim::Core::OpTotals>& DeviceQueue::origin_totals() const {
  m_core.retire_drained();
  return m_core.origin_totals();
}

void DeviceQueue::finish_trace(traces::TraceSink& sink, traces::Track host_track) {
  if (!m_core.plan_track()) return;
  const traces::Track device = *m_core.plan_track();
  uint64_t id = 1;
  for (const auto& [host_ps, l] : m_flows) {
    if (!l.started()) continue;
    sink.flow_begin(host_track, static_cast<traces::TimePs>(host_ps), id, "launch");
    sink.flow_end(device, static_cast<traces::TimePs>(l.launch_begin_ps()), id, "launch");
    ++id;
  }
  m_flows.clear();
}

}  // namespace wallsim::runtime
