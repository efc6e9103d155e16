// The host runtime: recording, grouping, compile caches, launches, transfers and host time.
// sc_spawn (the background compiler's launcher) needs SystemC's dynamic processes.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "wallsim/runtime/session.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "wallsim/compiler_stub/cost_model.h"
#include "wallsim/compiler_stub/signature.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/memory/dtype_convert.h"
#include "wallsim/memory/npy.h"
#include "wallsim/memory/tensor_store.h"
#include "wallsim/sim/exec.h"

namespace wallsim::runtime {

using compiler_stub::CompileKind;
using compiler_stub::Graph;
using compiler_stub::Node;
using compiler_stub::OpKind;
using compiler_stub::TensorType;
using sc_core::sc_time;

namespace {

constexpr int kHostPid = 0;

std::vector<int64_t> dims_of(const TensorType& t) {
  std::vector<int64_t> out;
  for (const auto& d : t.dims) out.push_back(d.size);
  return out;
}

int64_t bytes_of(const TensorType& t) {
  int64_t n = 1;
  for (const auto& d : t.dims) n *= d.size;
  return n * isa::dtype_bytes(t.dtype);
}

int64_t now_ps() { return static_cast<int64_t>(sc_core::sc_time_stamp().value()); }

// MACs of the matmuls in `nodes` of `g`, from their types.
double macs_of(const Graph& g, const std::vector<int32_t>& nodes) {
  double macs = 0;
  for (int32_t id : nodes) {
    const Node& n = *g.find(id);
    if (n.op != OpKind::matmul && n.op != OpKind::batch_matmul) continue;
    const TensorType& a = g.find(n.inputs[0])->type;
    double out = 1;
    for (const auto& d : n.type.dims) out *= double(d.size);
    macs += out * double(a.dims.back().size);
  }
  return macs;
}

}  // namespace

std::string_view name_of(Mode m) {
  switch (m) {
    case Mode::native:
      return "native";
    case Mode::eager:
      return "eager";
    case Mode::fused:
      return "fused";
    case Mode::aot:
      return "aot";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view s) {
  for (Mode m : {Mode::native, Mode::eager, Mode::fused, Mode::aot}) {
    if (name_of(m) == s) return m;
  }
  return std::nullopt;
}

std::string_view name_of(HostState s) {
  static const char* const kNames[] = {"host_dispatch", "compile", "transfer", "sync_wait",
                                       "host_other"};
  return kNames[static_cast<int>(s)];
}

void Counts::add(const Counts& o) {
  ops += o.ops;
  plans_launched += o.plans_launched;
  compiles += o.compiles;
  compile_failures += o.compile_failures;
  cache_hits += o.cache_hits;
  cache_misses += o.cache_misses;
  recompiles += o.recompiles;
  fallbacks += o.fallbacks;
  cache_evictions += o.cache_evictions;
  transfers += o.transfers;
  disk_hits += o.disk_hits;
}

std::vector<int64_t> Tensor::shape() const { return dims_of(m_p->type); }

TensorImpl::~TensorImpl() {
  if (session && !device.empty() && !alias_of) session->release(*this);
}

// A compiled group: its plan, and how the plan's tensors bind to device tensors.
struct Session::Compiled {
  // The plan body: null while dropped to bound the simulator's memory (the modelled cache
  // entry stays; a hit rebuilds the body).
  std::shared_ptr<const isa::Plan> plan;
  int64_t body_bytes = 0;
  std::optional<std::list<std::shared_ptr<Compiled>>::iterator> body_at;  // in m_bodies
  compiler_stub::LowerStats stats;
  int64_t nodes = 0;
  // Per plan tensor: an input index (>= 0), an output index (encoded -2 - k), or scratch (-1).
  std::vector<int32_t> binding;
  double macs = 0;
};

// A group cut from the pending graph, as a standalone graph with canonical names.
struct Session::Group {
  Graph sub;
  std::vector<std::string> input_devices;  // device tensor of input "in<k>"
  std::vector<int32_t> outputs;            // pending node ids produced for outside
};

Session::Session(const Config& config, sim::Device& device, SessionOptions options,
                 traces::TraceSink* trace)
    : m_config(config), m_device(device), m_options(options), m_trace(trace) {
  m_arch_fp = compiler_stub::arch_fingerprint(config.chip.arch);
  m_pending.name = "pending";
  if (m_trace && m_trace->enabled()) {
    m_host_track = m_trace->declare_track(kHostPid, "host", 0, "host thread");
  }
  if (config.runtime.compile_in_background) {
    sc_core::sc_spawn_options o;
    o.dont_initialize();
    o.set_sensitivity(&m_queue_added);
    sc_core::sc_spawn([this] { launch_worker(); }, "background_compiler", &o);
  }
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

// ---- host time ----

int64_t Session::now_ns() const { return now_ps() / 1000; }

void Session::enter(HostState s) {
  const sc_time now = sc_core::sc_time_stamp();
  const int64_t ps = static_cast<int64_t>((now - m_state_since).value());
  if (ps > 0) {
    record().host_ns[static_cast<int>(m_state)] += ps / 1000;
    if (m_host_track && m_state != HostState::other) {
      m_trace->slice(*m_host_track, static_cast<traces::TimePs>(m_state_since.value()),
                     static_cast<traces::TimePs>(ps), name_of(m_state), "host", {});
    }
  }
  m_state = s;
  m_state_since = now;
}

void Session::charge(HostState s, int64_t ns) {
  if (ns <= 0) return;
  enter(s);
  sc_core::wait(sc_time(static_cast<double>(ns), sc_core::SC_NS));
  enter(HostState::other);
}

// The host clock stays on whole nanoseconds, so every state's time is a whole number of them
// and the states sum exactly to the wall time. The wait extends the current state.
void Session::align_to_ns() {
  const int64_t rem = now_ps() % 1000;
  if (rem == 0) return;
  sc_core::wait(sc_time(static_cast<double>(1000 - rem), sc_core::SC_PS));
}

void Session::wait_for(HostState s, const sc_core::sc_event& e) {
  enter(s);
  sc_core::wait(e);
  align_to_ns();
  enter(HostState::other);
}

void Session::wait_drained(const engines::Launch* l, HostState s) {
  if (!l || l->drained) return;
  enter(s);
  while (!l->drained) sc_core::wait(l->drained_event);
  align_to_ns();
  enter(HostState::other);
}

// ---- device memory ----

std::string Session::allocate(const TensorType& type, const std::string& hint) {
  const int64_t bytes = bytes_of(type);
  if (m_hbm_used + bytes > m_config.chip.arch.hbm.bytes) {
    throw RuntimeError("device memory exhausted: " + std::to_string(m_hbm_used) +
                       " bytes in use, " + std::to_string(bytes) +
                       " more needed, arch.hbm.bytes is " +
                       std::to_string(m_config.chip.arch.hbm.bytes));
  }
  std::string name = hint + std::to_string(m_next_tensor++);
  m_hbm_used += bytes;
  m_hbm_bytes[name] = bytes;
  if (m_options.functional)
    m_device.tensors().put(name, isa::MemSpace::hbm, type.dtype, dims_of(type));
  return name;
}

void Session::release(TensorImpl& t) {
  auto it = m_hbm_bytes.find(t.device);
  if (it == m_hbm_bytes.end()) return;
  // The device may still be reading it: freed once the launches queued so far have drained.
  m_deferred_free.push_back(t.device);
  t.device.clear();
}

// ---- tensors ----

engines::Launch& Session::launch_transfer(const std::string& src, isa::MemSpace src_space,
                                          const std::string& dst, isa::MemSpace dst_space,
                                          const TensorType& type) {
  auto shape = dims_of(type);
  const int64_t cols = shape.empty() ? 1 : shape.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  const std::string key = std::string(isa::name_of(type.dtype)) + "_" + std::to_string(rows) + "x" +
                          std::to_string(cols) + "_" + std::string(isa::name_of(src_space));
  auto it = m_transfer_index.find(key);
  if (it == m_transfer_index.end()) {
    auto c = std::make_shared<Compiled>();
    auto body = std::make_shared<isa::Plan>();
    isa::Plan& p = *body;
    c->plan = body;
    p.name = "copy_" + key;
    p.tensors.push_back({"src", src_space, type.dtype, {rows, cols}, isa::TensorRole::input});
    p.tensors.push_back({"dst", dst_space, type.dtype, {rows, cols}, isa::TensorRole::output});
    isa::Stream s{isa::Engine::dma, "copy", 0, {}};
    isa::Instruction in;
    in.op = isa::Opcode::dma_copy;
    for (int k = 0; k < 2; ++k) {
      isa::AccessPattern& ap = k == 0 ? in.src[0] : in.dst;
      ap.space = k == 0 ? src_space : dst_space;
      ap.buffer = k == 0 ? 0 : 1;
      ap.dtype = type.dtype;
      ap.partitions = static_cast<int32_t>(rows);
      ap.partition_stride = cols;
      ap.num_free = 1;
      ap.free[0] = {cols, 1};
    }
    s.instructions.push_back(in);
    p.streams.push_back(std::move(s));
    it = m_transfer_index.emplace(key, m_transfer_plans.size()).first;
    m_transfer_plans.push_back(c);
  }
  record().counts.transfers++;
  return m_device.launch(*m_transfer_plans[it->second]->plan, {}, {src, dst});
}

Tensor Session::upload(const std::vector<int64_t>& shape, isa::DType dtype,
                       const std::vector<float>& values) {
  TensorType type;
  type.dtype = dtype;
  for (int64_t d : shape) type.dims.push_back(compiler_stub::Dim::of(d));
  auto t = new_tensor();
  t->type = type;
  t->device = allocate(type, "t");
  if (m_options.keep_reference) {
    Node in;
    in.id = static_cast<int32_t>(m_ref.nodes.size());
    in.op = OpKind::input;
    in.name = "u" + std::to_string(in.id);
    in.type = type;
    t->ref = in.id;
    compiler_stub::HostTensor v{shape, values};
    for (float& x : v.data) x = compiler_stub::round_to_dtype(dtype, x);
    m_ref_inputs[in.name] = std::move(v);
    m_ref.nodes.push_back(std::move(in));
  }
  if (m_tracing) return Tensor(t);
  const std::string host = "host_" + t->device;
  if (m_options.functional) {
    auto& h = m_device.tensors().put(host, isa::MemSpace::host, dtype, shape);
    if (static_cast<int64_t>(values.size()) != h.elements()) {
      throw RuntimeError("upload: " + std::to_string(values.size()) + " values for " +
                         std::to_string(h.elements()) + " elements");
    }
    const int64_t eb = isa::dtype_bytes(dtype);
    for (size_t i = 0; i < values.size(); ++i) {
      memory::store_element(h.bytes.data() + static_cast<int64_t>(i) * eb, dtype, values[i]);
    }
  }
  engines::Launch& l =
      launch_transfer(host, isa::MemSpace::host, t->device, isa::MemSpace::hbm, type);
  wait_drained(&l, HostState::transfer);
  if (m_options.functional) m_device.tensors().erase(host);
  return Tensor(t);
}

Tensor Session::upload_npy(const std::string& path, isa::DType dtype) {
  const memory::NpyArray a = memory::read_npy(path);
  memory::TensorStore::Tensor tmp;
  tmp.space = isa::MemSpace::host;
  tmp.dtype = dtype;
  tmp.shape = a.shape;
  tmp.bytes.resize(static_cast<size_t>(tmp.elements() * isa::dtype_bytes(dtype)));
  memory::load_npy_into(a, tmp, path);
  return upload(a.shape, dtype, memory::to_floats(tmp));
}

Tensor Session::upload_random(const std::vector<int64_t>& shape, isa::DType dtype, uint64_t seed) {
  // Timing only: the values are never read, so none are drawn (the transfer is the same).
  if (!m_options.functional && !m_options.keep_reference) return upload(shape, dtype, {});
  memory::TensorStore::Tensor tmp;
  tmp.space = isa::MemSpace::host;
  tmp.dtype = dtype;
  tmp.shape = shape;
  tmp.bytes.resize(static_cast<size_t>(tmp.elements() * isa::dtype_bytes(dtype)));
  memory::fill_random(tmp, seed);
  return upload(shape, dtype, memory::to_floats(tmp));
}

Tensor Session::iota(const std::vector<int64_t>& shape, isa::DType dtype, int64_t axis) {
  Attrs a;
  a["shape"] = shape;
  a["axis"] = axis;
  return op(OpKind::iota, {}, std::move(a), dtype);
}

Tensor Session::op(OpKind kind, const std::vector<Tensor>& inputs, Attrs attrs,
                   std::optional<isa::DType> dtype, const std::string& name) {
  const Mode mode = m_options.mode;
  if (!m_tracing) {
    record().counts.ops++;
    if (mode != Mode::aot) charge(HostState::dispatch, m_config.runtime.dispatch_ns_per_op);
    if (mode == Mode::fused) charge(HostState::dispatch, m_config.runtime.lazy.record_ns_per_op);
  }
  Node n;
  n.id = m_next_node++;
  n.op = kind;
  n.name = name;
  n.dtype = kind == OpKind::iota ? std::nullopt : dtype;
  for (const Tensor& t : inputs) {
    const auto& p = t.impl();
    if (p->pending >= 0) {
      n.inputs.push_back(p->pending);
      continue;
    }
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
  if (kind == OpKind::iota) {
    const auto* shape = std::get_if<std::vector<int64_t>>(&attrs.at("shape"));
    n.type.dtype = dtype.value_or(isa::DType::int32);
    for (int64_t d : *shape) n.type.dims.push_back(compiler_stub::Dim::of(d));
    attrs.erase("shape");
  }
  n.attrs = std::move(attrs);
  if (kind != OpKind::iota) n.type = compiler_stub::infer_node(m_pending, n);
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
  m_pending.nodes.push_back(std::move(n));
  m_pending_out[t->pending] = t;
  ++m_pending_ops;
  if (mode == Mode::native || mode == Mode::eager) {
    flush("op");
    if (m_options.sync_every_op) {
      wait_launched(t.get());
      wait_drained(t->producer, HostState::sync_wait);
    }
  } else if (mode == Mode::fused && m_pending_ops >= m_config.runtime.lazy.max_pending_ops) {
    flush("buffer limit");
  }
  return Tensor(t);
}

compiler_stub::HostTensor Session::to_host(const Tensor& t) {
  const auto& p = t.impl();
  compiler_stub::HostTensor out;
  out.shape = dims_of(p->type);
  int64_t n = 1;
  for (int64_t d : out.shape) n *= d;
  if (p->pending >= 0) flush("value read");
  if (m_tracing) {
    out.data.assign(static_cast<size_t>(n), 0.0f);
    return out;
  }
  wait_launched(p.get());
  wait_drained(p->producer, HostState::sync_wait);
  const std::string& dev = p->storage();
  const std::string host = "host_" + dev;
  if (m_options.functional)
    m_device.tensors().put(host, isa::MemSpace::host, p->type.dtype, out.shape);
  engines::Launch& l = launch_transfer(dev, isa::MemSpace::hbm, host, isa::MemSpace::host, p->type);
  wait_drained(&l, HostState::transfer);
  if (m_options.functional) {
    out.data = memory::to_floats(*m_device.tensors().find(host));
    m_device.tensors().erase(host);
  } else {
    out.data.assign(static_cast<size_t>(n), 0.0f);
  }
  return out;
}

void Session::mark_step() { flush("mark_step"); }

void Session::declare_scalar(const std::string& name, int64_t min, int64_t max) {
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
  if (m_host_track && !m_pending.nodes.empty()) {  // why the pending graph was cut, on the trace
    m_trace->instant(*m_host_track, static_cast<traces::TimePs>(now_ps()),
                     std::string("flush: ") + reason, "host", {});
  }
  std::vector<int32_t> ops;
  for (const Node& n : m_pending.nodes) {
    if (n.op != OpKind::input) ops.push_back(n.id);
  }
  if (!ops.empty()) {
    const auto& lazy = m_config.runtime.lazy;
    switch (m_options.mode) {
      case Mode::native:
      case Mode::eager:
        for (int32_t id : ops) run_group({id}, CompileKind::per_op, false);
        break;
      case Mode::aot:
        run_group(ops, CompileKind::whole_graph, false);
        break;
      case Mode::fused: {
        const std::set<OpKind> alone(lazy.not_fusible.begin(), lazy.not_fusible.end());
        std::vector<int32_t> group;
        for (int32_t id : ops) {
          const bool solo = alone.count(m_pending.find(id)->op) > 0;
          if (!group.empty() &&
              (solo || (lazy.max_group_ops > 0 &&
                        static_cast<int64_t>(group.size()) >= lazy.max_group_ops))) {
            run_group(group, CompileKind::micro_graph, true);
            group.clear();
          }
          group.push_back(id);
          if (solo) {
            run_group(group, CompileKind::micro_graph, true);
            group.clear();
          }
        }
        if (!group.empty()) run_group(group, CompileKind::micro_graph, true);
        break;
      }
    }
  }
  m_pending.nodes.clear();
  m_flush_hold.clear();
  m_pending_out.clear();
  m_pending_inputs.clear();
  m_input_impl.clear();
  m_pending_ops = 0;
}

void Session::run_group(const std::vector<int32_t>& nodes, CompileKind kind, bool allow_fallback) {
  const std::set<int32_t> in_group(nodes.begin(), nodes.end());
  Group g;
  g.sub.name = "g";
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
    g.sub.nodes.push_back(std::move(n));
  }
  // Outputs: values someone still holds, or that later pending ops read.
  for (int32_t id : nodes) {
    bool needed = false;
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

  bool failed = false;
  std::string error;
  int64_t compile_ns = 0;
  auto compiled = compile_group(g.sub, kind, &failed, &error, &compile_ns);
  if (compiled) {
    if (!m_tracing) launch_group(g, compiled, compile_ns);
    return;
  }
  // A failed compile: the fallback policy decides.
  const Fallback policy = m_config.runtime.lazy.fallback;
  if (!allow_fallback || policy == Fallback::fail) {
    throw RuntimeError("a group of " + std::to_string(nodes.size()) +
                       " op(s) failed to compile: " + error);
  }
  record().counts.fallbacks++;
  if (policy == Fallback::split && nodes.size() > 1) {
    const size_t half = nodes.size() / 2;
    run_group({nodes.begin(), nodes.begin() + static_cast<long>(half)}, kind, true);
    run_group({nodes.begin() + static_cast<long>(half), nodes.end()}, kind, true);
    return;
  }
  for (int32_t id : nodes) run_group({id}, CompileKind::per_op, false);
}

std::shared_ptr<Session::Compiled> Session::compile_group(const Graph& sub, CompileKind kind,
                                                          bool* failed, std::string* error,
                                                          int64_t* compile_ns) {
  std::vector<int32_t> ids;
  for (const Node& n : sub.nodes) {
    if (n.op != OpKind::input) ids.push_back(n.id);
  }
  const bool counted = m_options.mode != Mode::native;  // library kernels need no compile
  if (counted && !m_tracing) {
    charge(HostState::dispatch,
           m_config.runtime.lazy.hash_ns_per_node * static_cast<int64_t>(ids.size()));
  }
  const auto sig = compiler_stub::group_signature(sub, ids, m_arch_fp);
  if (counted) charge(HostState::dispatch, m_config.runtime.cache_lookup_ns);
  auto hit = m_cache.find(sig.hash);
  if (hit != m_cache.end()) {
    m_lru.splice(m_lru.end(), m_lru, hit->second);
    if (counted) record().counts.cache_hits++;
    const std::shared_ptr<Compiled>& c = hit->second->second;
    if (!c->plan) {  // the body was dropped: rebuilt (the same plan), at no modelled cost
      auto again = compiler_stub::compile_graph(
          sub, m_config.chip.arch, compiler_stub::GroupPolicy::whole, {}, m_config.compiler);
      auto& cg = std::get<compiler_stub::CompiledGraph>(again);
      m_compiler_seconds += cg.compile_wall_seconds;
      c->plan = std::make_shared<const isa::Plan>(std::move(cg.plans.plans.at(0)));
      ++m_bodies_rebuilt;
    }
    hold_body(c);
    return c;
  }
  if (counted) record().counts.cache_misses++;
  // A group that failed before fails again: remembered, not recompiled.
  if (auto f = m_failed.find(sig.hash); f != m_failed.end()) {
    *failed = true;
    *error = f->second;
    return nullptr;
  }

  // AOT: a plan compiled by an earlier run is loaded from disk instead (a hit, at a load cost).
  const std::string& disk = m_config.runtime.aot.disk_cache;
  const std::string disk_file = disk + "/" + sig.hex() + ".plan.json";
  std::variant<compiler_stub::CompiledGraph, compiler_stub::CompileError> result;
  bool loaded = false;
  if (m_options.mode == Mode::aot && !disk.empty() && std::filesystem::exists(disk_file)) {
    compiler_stub::CompiledGraph cg;
    try {
      cg.plans = isa::read_plan_file(disk_file);
      loaded =
          cg.plans.plans.size() == 1 && isa::verify(cg.plans.plans[0], m_config.chip.arch).empty();
    } catch (const isa::InputError&) {
      loaded = false;  // unreadable: compile instead, and overwrite it
    }
    if (loaded) {
      cg.groups.push_back({});
      cg.groups.back().instructions = cg.plans.plans[0].instruction_count();
      result = std::move(cg);
      record().counts.cache_misses--;
      record().counts.cache_hits++;
      record().counts.disk_hits++;
      charge(HostState::other,
             static_cast<int64_t>(std::llround(m_config.runtime.aot.cache_load_ms * 1e6)));
    }
  }
  if (!loaded) {
    if (auto why = injected_failure(sub, ids)) {
      result = *why;
    } else {
      result = compiler_stub::compile_graph(
          sub, m_config.chip.arch, compiler_stub::GroupPolicy::whole, {}, m_config.compiler);
    }
    if (auto* ok = std::get_if<compiler_stub::CompiledGraph>(&result))
      m_compiler_seconds += ok->compile_wall_seconds;
  }
  const auto& curve = m_config.runtime.compile_cost.active().curve(kind);
  if (auto* err = std::get_if<compiler_stub::CompileError>(&result)) {
    if (counted) {
      record().counts.compiles++;
      record().counts.compile_failures++;
      charge(HostState::compile,
             static_cast<int64_t>(std::llround(
                 compiler_stub::compile_latency_ms(curve, static_cast<int64_t>(ids.size()), 0) *
                 1e6)));
    }
    *failed = true;
    *error = err->message();
    m_failed.emplace(sig.hash, *error);
    return nullptr;
  }
  auto& cg = std::get<compiler_stub::CompiledGraph>(result);
  auto c = std::make_shared<Compiled>();
  c->plan = std::make_shared<const isa::Plan>(std::move(cg.plans.plans.at(0)));
  c->stats = cg.groups.at(0);
  c->nodes = static_cast<int64_t>(ids.size());
  c->macs = macs_of(sub, ids);
  // Bind the plan's tensors: group inputs, group outputs, or scratch (allocated per launch).
  std::map<std::string, int32_t> role;
  for (const Node& n : sub.nodes) {
    if (n.op == OpKind::input) role[n.name] = std::stoi(n.name.substr(2));
  }
  for (size_t k = 0; k < sub.outputs.size(); ++k) {
    const std::string name = compiler_stub::value_name(sub, sub.outputs[k]);
    if (!role.count(name)) role[name] = -2 - static_cast<int32_t>(k);
  }
  for (const auto& t : c->plan->tensors) {
    auto it = role.find(t.name);
    if (it != role.end()) {
      c->binding.push_back(it->second);
    } else {
      c->binding.push_back(-1);
    }
  }
  if (!loaded && m_options.mode == Mode::aot && !disk.empty()) {
    std::filesystem::create_directories(disk);
    isa::PlanSequence seq;
    seq.plans.push_back(*c->plan);
    isa::write_plan_file(seq, disk_file);
  }
  if (counted && !loaded) {
    record().counts.compiles++;
    auto [seen, fresh] = m_shape_free_seen.emplace(sig.shape_free, sig.hash);
    if (!fresh && seen->second != sig.hash && m_in_step) record().counts.recompiles++;
    const int64_t ns = static_cast<int64_t>(std::llround(
        compiler_stub::compile_latency_ms(curve, c->nodes, c->stats.instructions) * 1e6));
    if (m_config.runtime.compile_in_background && !m_tracing) {
      *compile_ns = ns;  // the caller queues the launch behind the compiler
    } else {
      charge(HostState::compile, ns);
    }
  }
  // Into the cache; the least recently used plan leaves when it is full.
  m_lru.emplace_back(sig.hash, c);
  m_cache[sig.hash] = std::prev(m_lru.end());
  while (static_cast<int64_t>(m_lru.size()) > m_config.runtime.cache_capacity) {
    auto victim = m_lru.front();
    m_cache.erase(victim.first);
    m_lru.pop_front();
    drop_body(*victim.second);  // a launch still running holds its own reference
    record().counts.cache_evictions++;
  }
  hold_body(c);
  return c;
}

void Session::hold_body(const std::shared_ptr<Compiled>& c) {
  if (c->body_at) {
    m_bodies.splice(m_bodies.end(), m_bodies, *c->body_at);
  } else {
    c->body_bytes = static_cast<int64_t>(sizeof(isa::Plan)) +
                    c->plan->instruction_count() * static_cast<int64_t>(sizeof(isa::Instruction)) +
                    static_cast<int64_t>(c->plan->buffers.size() * sizeof(isa::BufferDecl));
    c->body_at = m_bodies.insert(m_bodies.end(), c);
    m_body_bytes += c->body_bytes;
  }
  while (m_body_bytes > m_options.plan_memory_bytes && m_bodies.size() > 1) {
    drop_body(*m_bodies.front());
  }
}

void Session::drop_body(Compiled& c) {
  if (!c.body_at) return;
  m_bodies.erase(*c.body_at);
  c.body_at.reset();
  m_body_bytes -= c.body_bytes;
  c.plan.reset();
}

std::optional<compiler_stub::CompileError> Session::injected_failure(
    const Graph& sub, const std::vector<int32_t>& ids) const {
  const InjectConfig& inject = m_config.runtime.inject;
  // A fail_ops op is rejected inside a fused group; alone it compiles (a per-op kernel).
  for (int32_t id : ids) {
    const Node& n = *sub.find(id);
    for (OpKind op : inject.fail_ops) {
      if (n.op == op && ids.size() > 1) {
        return compiler_stub::CompileError{
            n.id, std::string(compiler_stub::name_of(op)),
            "injected failure: the op is not supported inside a fused group"};
      }
    }
  }
  if (inject.fail_groups_over > 0 && static_cast<int64_t>(ids.size()) > inject.fail_groups_over) {
    return compiler_stub::CompileError{
        -1, "",
        "injected failure: a group of " + std::to_string(ids.size()) +
            " ops does not fit on chip (runtime.inject.fail_groups_over is " +
            std::to_string(inject.fail_groups_over) + ")"};
  }
  return std::nullopt;
}

void Session::launch_group(const Group& g, const std::shared_ptr<Compiled>& compiled,
                           int64_t compile_ns) {
  const Compiled& c = *compiled;
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
  for (size_t i = 0; i < names.size(); ++i) {
    const int32_t b = c.binding[i];
    if (b >= 0) {
      names[i] = g.input_devices.at(static_cast<size_t>(b));
    } else if (b == -1) {
      // Scratch (spills, staging) lives while the launch runs: freed once the step drains,
      // as a stream-ordered allocator or a shared scratchpad would.
      const isa::TensorDecl& d = c.plan->tensors[i];
      TensorType tt;
      tt.dtype = d.dtype;
      for (int64_t x : d.shape) tt.dims.push_back(compiler_stub::Dim::of(x));
      names[i] = allocate(tt, "s");
      m_deferred_free.push_back(names[i]);
    } else {
      const size_t k = static_cast<size_t>(-2 - b);
      auto& t = outs[k];
      names[i] = t->device = allocate(t->type, "t");
    }
  }
  // An output that aliases an input (a KV append updates its cache in place).
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    auto& t = outs[k];
    if (!t || !t->device.empty()) continue;
    const int32_t in_id = std::stoi(compiler_stub::value_name(g.sub, g.sub.outputs[k]).substr(2));
    const std::string& dev = g.input_devices.at(static_cast<size_t>(in_id));
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
  charge(HostState::dispatch, m_options.mode == Mode::native ? m_config.runtime.kernel_launch_ns
                                                             : m_config.runtime.plan_launch_ns);
  for (auto& t : outs) t->pending = -1;
  if (compile_ns > 0 || !m_queue.empty()) {
    // Background compilation: the launch waits for its compile (the compiler runs one job at a
    // time) and for every launch queued before it; the host goes on recording.
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    sc_core::sc_time ready = now;
    if (compile_ns > 0) {
      ready = std::max(now, m_compiler_free) + sc_core::sc_time(double(compile_ns), sc_core::SC_NS);
      m_compiler_free = ready;
    }
    for (auto& t : outs) t->queued = true;
    m_queue.push_back(
        {compiled, compiled->plan, std::move(names), std::move(scalars), outs, ready, &record()});
    m_queue_added.notify(sc_core::SC_ZERO_TIME);
    return;
  }
  engines::Launch& l = m_device.launch(*c.plan, std::move(scalars), std::move(names), c.plan);
  if (m_host_track) m_flows.emplace_back(now_ps() - 1, &l);  // inside the launch slice
  record().counts.plans_launched++;
  record().padded_macs += c.macs;
  for (auto& t : outs) t->producer = &l;
}

// The background compiler's launcher: launches queued groups in order, each when its compile
// is done.
void Session::launch_worker() {
  for (;;) {
    while (m_queue.empty()) sc_core::wait(m_queue_added);
    Queued& q = m_queue.front();
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    if (q.ready > now) sc_core::wait(q.ready - now);
    engines::Launch& l = m_device.launch(*q.plan, std::move(q.scalars), std::move(q.names), q.plan);
    if (m_host_track) m_flows.emplace_back(now_ps(), &l);
    q.record->counts.plans_launched++;
    q.record->padded_macs += q.compiled->macs;
    for (auto& t : q.outs) {
      t->producer = &l;
      t->queued = false;
    }
    m_queue.pop_front();
    m_launched.notify(sc_core::SC_ZERO_TIME);
  }
}

void Session::wait_launched(const TensorImpl* t) {
  if (!(t ? t->queued : !m_queue.empty())) return;
  enter(HostState::compile);
  while (t ? t->queued : !m_queue.empty()) sc_core::wait(m_launched);
  align_to_ns();
  enter(HostState::other);
}

void Session::finish_trace() {
  if (!m_host_track || !m_device.plan_track()) return;
  const traces::Track device = *m_device.plan_track();
  uint64_t id = 1;
  for (const auto& [host_ps, l] : m_flows) {
    if (!l->started) continue;
    m_trace->flow_begin(*m_host_track, static_cast<traces::TimePs>(host_ps), id, "launch");
    m_trace->flow_end(device, static_cast<traces::TimePs>(l->launch_begin.value()), id, "launch");
    ++id;
  }
  m_flows.clear();
}

// ---- steps ----

void Session::startup(const std::vector<int64_t>& buckets,
                      const std::function<void(int64_t)>& trace) {
  if (m_options.mode != Mode::aot) return;
  m_aot_buckets = buckets;
  std::sort(m_aot_buckets.begin(), m_aot_buckets.end());
  for (int64_t b : m_aot_buckets) {
    m_tracing = true;
    trace(b);
    flush("trace");
    m_tracing = false;
  }
  free_deferred();
}

int64_t Session::shape_for(int64_t real) {
  if (m_options.mode != Mode::aot || m_tracing) return real;
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

void Session::begin_step(int64_t index) {
  enter(HostState::other);
  if (m_in_step) end_step();
  close_startup();
  m_in_step = true;
  m_current = StepRecord{};
  m_current.index = index;
  m_current.start_ns = now_ns();
  m_step_first_launch = m_device.launches().size();
}

void Session::close_startup() {
  if (m_startup_closed) return;
  m_startup_closed = true;
  m_startup.wall_ns = now_ns() - m_startup.start_ns;
}

void Session::idle_until(int64_t ns) {
  if (m_in_step) throw RuntimeError("internal: idle_until inside a step");
  enter(HostState::other);  // closes the accounting up to now
  const int64_t now = now_ns();
  if (ns <= now) return;
  close_startup();
  sc_core::wait(sc_time(static_cast<double>(ns - now), sc_core::SC_NS));
  m_state_since = sc_core::sc_time_stamp();  // the wait belongs to no record
  m_idle_ns += ns - now;
}

void Session::free_deferred() {
  for (const std::string& name : m_deferred_free) {
    auto it = m_hbm_bytes.find(name);
    if (it == m_hbm_bytes.end()) continue;
    m_hbm_used -= it->second;
    m_hbm_bytes.erase(it);
    if (m_options.functional) m_device.tensors().erase(name);
  }
  m_deferred_free.clear();
}

void Session::end_step() {
  if (!m_in_step) return;
  flush("step end");
  wait_launched(nullptr);
  const auto& launches = m_device.launches();
  for (size_t i = m_step_first_launch; i < launches.size(); ++i) {
    wait_drained(&launches[i], HostState::sync_wait);
  }
  enter(HostState::other);
  free_deferred();
  m_device.retire_drained();  // the step's launches are folded into the op totals
  m_current.wall_ns = now_ns() - m_current.start_ns;
  // Device busy: the union of the spans of the plans that ran in the step.
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t i = m_step_first_launch; i < launches.size(); ++i) {
    const auto& l = launches[i];
    if (!l.started) continue;
    spans.emplace_back(static_cast<int64_t>(l.start_time.value()),
                       static_cast<int64_t>(l.end_time.value()));
  }
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
  m_current.device_busy_ns = busy / 1000;
  m_steps.push_back(m_current);
  m_in_step = false;
}

Counts Session::totals() const {
  Counts c = m_startup.counts;
  for (const auto& s : m_steps) c.add(s.counts);
  if (m_in_step) c.add(m_current.counts);
  return c;
}

// ---- the host thread ----

namespace {

class HostThread : public sc_core::sc_module {
 public:
  HostThread(sc_core::sc_module_name name, std::function<void()> body)
      : sc_core::sc_module(name), m_body(std::move(body)) {
    SC_HAS_PROCESS(HostThread);
    SC_THREAD(run);
  }
  std::exception_ptr error;
  bool done = false;

 private:
  void run() {
    try {
      m_body();
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
    sc_core::sc_stop();
  }
  std::function<void()> m_body;
};

}  // namespace

void run_host(sim::Device& device, const std::function<void()>& body) {
  HostThread host("host", body);
  sc_core::sc_start();
  if (host.error) std::rethrow_exception(host.error);
  if (auto e = device.error()) throw sim::SimulationError(*e);
  if (!host.done) {
    std::string msg = "the device deadlocked before the host finished";
    for (const auto& line : device.deadlock_report()) msg += "; " + line;
    throw sim::SimulationError(msg);
  }
}

}  // namespace wallsim::runtime
