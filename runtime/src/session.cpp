// The Session: recording, grouping and fallback, launches and steps, over its four parts
// (tensors in session_tensors.cpp).
#include "wallsim/runtime/session.h"

#include <cmath>

#include <algorithm>
#include <set>

#include "session_util.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/signature.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/sim/comm_overlap.h"

namespace wallsim::runtime {

using namespace session_detail;
using sc_core::sc_time;

std::vector<int64_t> Tensor::shape() const { return dims_of(m_p->type); }

TensorImpl::~TensorImpl() {
  if (session && !device.empty() && !alias_of) session->release(*this);
}

Session::Session(const Config& config, sim::Core& device, SessionOptions options,
                 traces::TraceSink* trace)
    : m_config(config),
      m_options(options),
      m_trace(trace),
      m_log(options.on_step_end, options.keep_steps),
      m_host(m_log),
      m_device(device, config.chip.arch.hbm.bytes, options.functional,
               config.chip.timing.launch.wait_for_previous,
               // Only a rank's core runs collectives, so only there can a plan be asynchronous.
               options.collectives && config.runtime.async_collectives == AsyncCollectives::on),
      m_compiler(m_config, *options.mode, options.plan_memory_bytes, options.memory_check, m_host,
                 m_log, options.shared_plans, options.rank.rank) {
  m_pending.name = "pending";
  m_device.set_rank(m_options.name_prefix, m_options.rank.comms);
  if (m_options.collectives) m_host.keep_sync_waits();
  if (m_trace && m_trace->enabled()) {
    const int pid = m_options.trace_pid;
    const std::string& process = m_options.trace_process;
    m_host.trace_on(m_trace, m_trace->declare_track(pid, process, 0, "host thread"));
    m_log.trace_on(m_trace, m_trace->declare_track(pid, process, 1, "steps"));
    if (m_options.collectives)
      m_comm_track = m_trace->declare_track(pid, process, 2, "comm_wait (exposed communication)");
    m_device.trace_flows();
  }
  if (config.runtime.compile_in_background) m_device.start_launcher();
}

Session::~Session() {
  // Tensors may outlive the session (a workload holding its weights): detach them.
  for (auto& weak : m_tensors) {
    if (auto t = weak.lock()) t->session = nullptr;
  }
}

std::shared_ptr<TensorImpl> Session::new_tensor() {
  auto t = std::make_shared<TensorImpl>();
  t->session = this;
  if (m_tensors.size() >= 2 * m_tensors_pruned + 1024) {  // drop the dead now and then
    m_tensors.erase(std::remove_if(m_tensors.begin(), m_tensors.end(),
                                   [](const std::weak_ptr<TensorImpl>& w) { return w.expired(); }),
                    m_tensors.end());
    m_tensors_pruned = m_tensors.size();
  }
  m_tensors.push_back(t);
  return t;
}

// ---- device memory ----

void Session::release(TensorImpl& t) {
  if (!m_device.holds(t.device)) return;
  // The device may still be reading it. When launches run one after another in the order the
  // host issued them, its bytes can go to the next allocation at once (every reader was issued
  // before, and finishes before, any later writer: what a stream-ordered GPU allocator does);
  // launches held back for a background compile could be overtaken, so then they wait for the
  // step's end. The contents stay on the device until the launches queued so far have drained.
  m_device.release(t.device, m_device.in_order());
  t.device.clear();
}

Tensor Session::iota(const std::vector<int64_t>& shape, isa::DType dtype, int64_t axis) {
  Attrs a;
  a["shape"] = shape;
  a["axis"] = axis;
  return op(OpKind::iota, {}, std::move(a), dtype);
}

Tensor Session::op(OpKind kind, const std::vector<Tensor>& given, Attrs attrs,
                   std::optional<isa::DType> dtype, const std::string& name) {
  if (m_count) return count_op(kind, given, std::move(attrs), dtype);
  const ExecutionMode& mode = *m_options.mode;
  // A pre-laid weight (upload's layout): the transpose it was laid out for is a view of its
  // storage, dispatched by the framework but recorded as no op; any other read goes through
  // the transpose that undoes the layout.
  // With a reshape in the layout, the reshape is a view first, leaving the transpose.
  const compiler_stub::WeightLayout* lay = given.size() == 1 ? &given[0].impl()->layout : nullptr;
  const auto ints = [&](const char* key) -> const std::vector<int64_t>* {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
  };
  const bool step = lay && !lay->as_given() && kind == OpKind::reshape && !lay->reshape.empty() &&
                    ints("shape") && *ints("shape") == lay->reshape;
  const bool view = step || (lay && !lay->as_given() && kind == OpKind::transpose &&
                             lay->reshape.empty() && ints("perm") && *ints("perm") == lay->perm);
  bool laid = false;
  for (const Tensor& t : given) laid = laid || !t.impl()->layout.as_given();
  std::vector<Tensor> undone;
  if (laid && !view) {
    for (const Tensor& t : given)
      undone.push_back(t.impl()->layout.as_given() ? t : undo_layout(t));
  }
  const std::vector<Tensor>& inputs = laid && !view ? undone : given;
  if (!m_tracing) {
    record().counts.ops++;
    const ExecutionMode::OpCost cost = mode.op_cost(m_config.runtime);
    m_host.charge(HostState::dispatch, cost.dispatch_ns);
    if (!view) m_host.charge(HostState::dispatch, cost.record_ns);
    m_host_ns_by_op[std::string(compiler_stub::name_of(kind))] +=
        cost.dispatch_ns + (view ? 0 : cost.record_ns);
  }
  if (view) return step ? reshaped_view(given[0]) : stored_view(given[0]);
  Node n;
  n.id = m_next_node++;
  n.op = kind;
  n.name = name;
  for (const Tensor& t : inputs) {
    const auto& p = t.impl();
    if (p->pending >= 0) {
      n.inputs.push_back(p->pending);
      continue;
    }
    require_value(*p);
    auto it = m_pending_inputs.find(p->storage());
    if (it == m_pending_inputs.end()) {
      Node in;
      in.id = m_next_node++;
      in.op = OpKind::input;
      in.name = p->storage();
      in.type = p->type;
      m_pending.nodes.push_back(in);
      it = m_pending_inputs.emplace(p->storage(), in.id).first;
      m_input_impl[in.id] = p->alias_of ? p->alias_of : p;
    }
    n.inputs.push_back(it->second);
  }
  type_node(m_pending, n, std::move(attrs), dtype);
  auto t = new_tensor();
  t->type = n.type;
  t->pending = n.id;
  if (m_options.keep_reference && !m_tracing) {
    Node r = n;
    r.id = static_cast<int32_t>(m_ref.nodes.size());
    r.name.clear();
    r.inputs.clear();
    for (const Tensor& x : inputs) r.inputs.push_back(x.impl()->ref);
    t->ref = r.id;
    m_ref.nodes.push_back(std::move(r));
  }
  if (m_current_origin >= 0) m_node_origin[n.id] = m_current_origin;
  m_pending.nodes.push_back(std::move(n));
  m_pending_out[t->pending] = t;
  ++m_pending_ops;
  if (const char* reason = mode.flush_after_op(m_pending_ops, m_config.runtime)) {
    flush(reason);
    if (mode.sync_every_op()) {
      wait_launched(t.get());
      m_host.wait_drained(t->producer, HostState::sync_wait);
    }
  }
  return Tensor(t);
}

void Session::set_origin(const Origin& origin) {
  if (m_count) return;
  auto [it, added] = m_origin_index.emplace(origin, static_cast<int32_t>(m_origins.size()));
  if (added) m_origins.push_back(origin);
  m_current_origin = it->second;
}

const std::map<int32_t, sim::Core::OpTotals>& Session::origin_totals() const {
  return m_device.origin_totals();
}

int64_t Session::host_compute(double flops, double bytes) {
  if (m_count) return 0;
  const HostCpuConfig& cpu = m_config.runtime.host_cpu;
  const double ns = std::max(flops / cpu.gflops, bytes / cpu.memory_gb_per_s);  // GFLOP/s = FLOP/ns
  const int64_t charged = cpu.op_overhead_ns + static_cast<int64_t>(std::ceil(ns));
  m_host.charge(HostState::other, charged);
  return charged;
}

void Session::mark_step() {
  if (!m_count) flush("mark_step");
}

void Session::synchronize() {
  if (m_count) return;
  flush("synchronize");
  wait_launched(nullptr);
  for (size_t i = m_step_first_launch; i < m_device.launches(); ++i)
    m_host.wait_drained(m_device.launch_at(i), HostState::sync_wait);
  m_host.enter(HostState::other);
}

void Session::mark_split() {
  if (m_count) return;
  for (auto it = m_pending.nodes.rbegin(); it != m_pending.nodes.rend(); ++it) {
    if (it->op != OpKind::input) {
      m_split_marks.insert(it->id);
      return;
    }
  }
}

void Session::declare_scalar(const std::string& name, int64_t min, int64_t max) {
  if (m_count) return count_scalar(name, min, max);
  if (m_pending.find_scalar(name)) return;
  m_pending.scalars.push_back({name, min, max});
}

compiler_stub::HostTensor Session::reference(const Tensor& t) const {
  if (t.impl()->ref < 0) throw RuntimeError("no reference value: keep_reference is off");
  Graph g = m_ref;
  g.name = "reference";
  g.scalars = m_pending.scalars;
  g.outputs = {t.impl()->ref};
  std::map<std::string, int64_t> scalars = m_scalar_values;
  for (const auto& s : g.scalars) scalars.emplace(s.name, s.min);  // declared, never set
  auto values = compiler_stub::evaluate(g, m_ref_inputs, scalars);
  return values.at(t.impl()->ref);
}

// ---- grouping, compiling, launching ----

void Session::flush(const char* reason) {
  // Why the pending graph was cut, on the trace.
  if (!m_pending.nodes.empty()) m_host.instant(std::string("flush: ") + reason);
  std::vector<int32_t> ops;
  for (const Node& n : m_pending.nodes) {
    if (n.op != OpKind::input) ops.push_back(n.id);
  }
  if (!ops.empty()) {
    const ExecutionMode& mode = *m_options.mode;
    const OpStream stream{ops, m_pending, m_config.runtime.lazy, m_split_marks};
    for (const auto& group : mode.cut(stream)) run_group(group, mode.falls_back());
  }
  m_pending.nodes.clear();
  m_split_marks.clear();
  m_flush_hold.clear();
  m_pending_out.clear();
  m_pending_inputs.clear();
  m_input_impl.clear();
  m_node_origin.clear();
  m_pending_ops = 0;
}

void Session::run_group(const std::vector<int32_t>& nodes, bool allow_fallback) {
  const std::set<int32_t> in_group(nodes.begin(), nodes.end());
  Group g;
  g.sub.name = group_name(m_pending, nodes);
  g.sub.scalars = m_pending.scalars;
  std::map<int32_t, int32_t> canon;  // pending id -> id in sub
  int32_t next = 0;
  // Inputs: values from outside the group, in order of first use.
  for (int32_t id : nodes) {
    for (int32_t in : m_pending.find(id)->inputs) {
      if (in_group.count(in) || canon.count(in)) continue;
      const Node& src = *m_pending.find(in);
      std::string device;
      if (src.op == OpKind::input) {
        device = src.name;
      } else {
        auto t = m_pending_out.at(in).lock();
        if (!t || t->pending >= 0)
          throw RuntimeError("internal: a group input was not materialised");
        device = t->storage();
      }
      Node x;
      x.id = next++;
      x.op = OpKind::input;
      x.name = "in" + std::to_string(g.input_devices.size());
      x.type = src.type;
      canon[in] = x.id;
      g.input_devices.push_back(device);
      g.sub.nodes.push_back(std::move(x));
    }
  }
  for (int32_t id : nodes) {
    Node n = *m_pending.find(id);
    n.id = next++;
    n.name.clear();
    for (int32_t& in : n.inputs) in = canon.at(in);
    canon[id] = n.id;
    if (auto o = m_node_origin.find(id); o != m_node_origin.end()) g.origin_of[n.id] = o->second;
    g.sub.nodes.push_back(std::move(n));
  }
  // Outputs: values someone still holds, or that later pending ops read; every send and recv
  // (a peer waits for it: never dropped as dead).
  for (int32_t id : nodes) {
    const OpKind op = m_pending.find(id)->op;
    bool needed = op == OpKind::send || op == OpKind::recv;
    if (auto it = m_pending_out.find(id); it != m_pending_out.end() && !it->second.expired())
      needed = true;
    for (const Node& later : m_pending.nodes) {
      if (needed) break;
      if (in_group.count(later.id) || later.op == OpKind::input) continue;
      if (std::find(later.inputs.begin(), later.inputs.end(), id) != later.inputs.end())
        needed = true;
    }
    if (needed) {
      g.outputs.push_back(id);
      g.sub.outputs.push_back(canon.at(id));
    }
  }
  if (g.sub.outputs.empty()) return;  // nothing observable: dead code

  const CompileService::Outcome compiled = m_compiler.compile(g.sub, m_tracing);
  if (compiled.plan) {
    if (!m_tracing) {
      launch_group(g, compiled.plan, compiled.background_ns);
      return;
    }
    // Tracing runs nothing, but a value read mid-step (a flush) may be used by later ops: its
    // tensor becomes a placeholder the trace records as an input (no device memory).
    for (int32_t id : g.outputs) {
      if (auto t = m_pending_out.at(id).lock()) {
        t->device = "traced" + std::to_string(id);  // pending ids are never reused
        t->pending = -1;
      }
    }
    return;
  }
  // A failed compile: the fallback policy decides. The error names the op's origin (a captured
  // program's ATen op and module) when the compiler named a node that has one.
  std::string error = compiled.error;
  if (auto o = g.origin_of.find(compiled.node); o != g.origin_of.end()) {
    const Origin& from = m_origins.at(static_cast<size_t>(o->second));
    error += " [from " + (from.source.empty() ? "" : from.source + " in ") + "module '" +
             from.module + "']";
  }
  const Fallback policy = m_config.runtime.lazy.fallback;
  if (!allow_fallback || policy == Fallback::fail) {
    throw RuntimeError("a group of " + std::to_string(nodes.size()) +
                       " op(s) failed to compile: " + error);
  }
  record().counts.fallbacks++;
  m_fallbacks.push_back({m_log.current_index(), static_cast<int64_t>(nodes.size()),
                         std::string(name_of(policy)), error});
  if (policy == Fallback::split && nodes.size() > 1) {
    const size_t half = nodes.size() / 2;
    run_group({nodes.begin(), nodes.begin() + static_cast<long>(half)}, true);
    run_group({nodes.begin() + static_cast<long>(half), nodes.end()}, true);
    return;
  }
  for (int32_t id : nodes) run_group({id}, false);
}

void Session::launch_group(const Group& g, const std::shared_ptr<CompiledPlan>& compiled,
                           int64_t compile_ns) {
  const CompiledPlan& c = *compiled;
  std::vector<std::shared_ptr<TensorImpl>> outs;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const int32_t id = g.outputs[k];
    auto t = m_pending_out.at(id).lock();
    if (!t) {  // only later groups of this flush read it: held until the flush ends
      t = new_tensor();
      t->type = m_pending.find(id)->type;
      t->pending = id;
      m_flush_hold.push_back(t);
      m_pending_out[id] = t;
    }
    outs.push_back(t);
  }
  std::vector<std::string> names(c.plan->tensors.size());
  std::vector<std::string> scratch;
  for (size_t i = 0; i < names.size(); ++i) {
    const PlanBinding& b = c.binding[i];
    if (b.kind == PlanBinding::Kind::input) {
      names[i] = g.input_devices.at(b.index);
    } else if (b.kind == PlanBinding::Kind::scratch) {
      // Scratch (spills, staging) lives while the launch runs.
      const isa::TensorDecl& d = c.plan->tensors[i];
      TensorType tt;
      tt.dtype = d.dtype;
      for (int64_t x : d.shape) tt.dims.push_back(compiler_stub::Dim::of(x));
      names[i] = m_device.allocate(tt, "s");
      scratch.push_back(names[i]);
    } else {
      auto& t = outs[b.index];
      names[i] = t->device = m_device.allocate(t->type, "t");
    }
  }
  // An output that aliases an input (a KV append updates its cache in place).
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    auto& t = outs[k];
    if (!t || !t->device.empty()) continue;
    const std::optional<size_t> in =
        input_position(g.sub, compiler_stub::value_name(g.sub, g.sub.outputs[k]));
    if (!in) throw RuntimeError("internal: an in-place output of no input");
    const std::string& dev = g.input_devices.at(*in);
    for (const auto& [pid, impl] : m_input_impl) {
      if (impl->device == dev) t->alias_of = impl;
    }
    for (const auto& [pid, weak] : m_pending_out) {
      auto impl = weak.lock();
      if (!t->alias_of && impl && impl != t && impl->device == dev) t->alias_of = impl;
    }
    if (!t->alias_of) throw RuntimeError("internal: an in-place output without its tensor");
  }
  std::vector<int64_t> scalars;
  for (const auto& s : c.plan->scalars) {
    auto it = m_scalar_values.find(s.name);
    if (it == m_scalar_values.end())
      throw RuntimeError("run-time scalar '" + s.name + "' is not set");
    scalars.push_back(it->second);
  }
  std::vector<int32_t> origins;  // by plan node index, when any op of the group has one
  if (!g.origin_of.empty()) {
    origins.assign(c.plan->nodes.size(), -1);
    for (size_t i = 0; i < origins.size(); ++i) {
      if (auto o = g.origin_of.find(c.plan->nodes[i].id); o != g.origin_of.end())
        origins[i] = o->second;
    }
  }
  m_host.charge(HostState::dispatch, m_options.mode->launch_ns(m_config.runtime));
  for (auto& t : outs) t->pending = -1;
  const bool held = compile_ns > 0 || m_device.holding();
  // Scratch is reusable by the next launch once this one is issued in order.
  for (std::string& s : scratch) m_device.release(std::move(s), !held && m_device.in_order());
  DeviceQueue::Launch l{compiled, std::move(names), std::move(scalars), std::move(origins),
                        outs,     &record()};
  if (held) {
    // Background compilation: the launch waits for its compile (the compiler runs one job at a
    // time) and for every launch held before it; the host goes on recording.
    const sc_core::sc_time ready =
        compile_ns > 0 ? m_compiler.background_done(compile_ns) : sc_core::sc_time_stamp();
    m_device.hold(std::move(l), ready);
    return;
  }
  m_device.launch(std::move(l), HostTimeline::now_ps() - 1);  // inside the launch slice
}

void Session::wait_launched(const TensorImpl* t) {
  m_host.wait_while(
      HostState::compile, [&] { return t ? t->queued : m_device.holding(); },
      [&]() -> const sc_core::sc_event& { return m_device.launched_event(); });
}

void Session::finish_trace() {
  if (m_host.track()) m_device.finish_trace(*m_trace, *m_host.track());
}

// ---- steps ----

void Session::startup(const std::vector<int64_t>& buckets,
                      const std::function<void(int64_t)>& trace) {
  refuse_counting("startup");
  if (!m_options.mode->compiles_ahead()) return;
  m_aot_buckets = buckets;
  std::sort(m_aot_buckets.begin(), m_aot_buckets.end());
  for (int64_t b : m_aot_buckets) {
    m_tracing = true;
    trace(b);
    flush("trace");
    m_tracing = false;
  }
  m_device.free_deferred();
}

int64_t Session::shape_for(int64_t real) {
  if (!m_options.mode->pads_shapes() || m_tracing || m_count) return real;
  for (int64_t b : m_aot_buckets) {
    if (b >= real) return b;
  }
  if (m_config.runtime.aot.beyond == BeyondBuckets::error || m_aot_buckets.empty()) {
    throw RuntimeError(
        "shape " + std::to_string(real) + " is beyond the largest AOT bucket (" +
        (m_aot_buckets.empty() ? std::string("none") : std::to_string(m_aot_buckets.back())) + ")");
  }
  int64_t b = m_aot_buckets.back();
  while (b < real) b *= 2;
  m_aot_buckets.push_back(b);  // compiled on first use, counted as a recompile
  return b;
}

int64_t Session::exposed_comm_ns() { return device_core().comm_overlap().exposed_ps() / 1000; }

void Session::begin_step(int64_t index) {
  refuse_counting("begin_step");
  m_host.enter(HostState::other);
  if (m_log.in_step()) end_step();
  m_log.begin(index, now_ns());
  if (m_options.collectives) m_host.take_sync_waits();  // the start-up's stay there
  m_step_first_launch = m_device.launches();
  m_step_exposed_from_ns = exposed_comm_ns();
}

void Session::idle_until(int64_t ns) {
  refuse_counting("idle_until");
  if (m_log.in_step()) throw RuntimeError("internal: idle_until inside a step");
  m_host.idle_until(ns);
}

void Session::idle_while(const std::function<bool()>& pending, HostSignal& signal) {
  refuse_counting("idle_while");
  if (m_log.in_step()) throw RuntimeError("internal: idle_while inside a step");
  m_host.idle_while(pending, signal);
}

void Session::end_step() {
  refuse_counting("end_step");
  if (!m_log.in_step()) return;
  flush("step end");
  wait_launched(nullptr);
  for (size_t i = m_step_first_launch; i < m_device.launches(); ++i) {
    m_host.wait_drained(m_device.launch_at(i), HostState::sync_wait);
  }
  m_host.enter(HostState::other);
  if (m_options.collectives) split_comm_wait();
  m_device.free_deferred();
  const int64_t now = now_ns();
  // The step's work has drained, so the core's sweep holds all its communication. Whole ns of the
  // running total, so the steps' figures sum to the run's.
  m_log.record().comm_exposed_ns = exposed_comm_ns() - m_step_exposed_from_ns;
  // Device busy: the union of the spans of the plans that ran in the step.
  m_log.end(now, m_device.busy_ns_since(m_step_first_launch));
}

}  // namespace wallsim::runtime
