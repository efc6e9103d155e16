// program: a captured PyTorch program (a program file, docs/PROGRAM_FORMAT.md) replayed through
// the Tensor API, so every mode sees its op stream as a lazy runtime would: weights uploaded once
// in setup, then the program's set-up section replayed once (a model load: start-up time, in no
// step), inputs uploaded in their step, ops recorded, reads as flushes and device->host copies,
// frees as dropped handles, and the program's steps as the run's steps. Every op carries its
// origin (module path, ATen op), so the report attributes device time per ATen op.
//
// Bounded dims (bound=NAME<=MAX;...): tensors run with each named axis at MAX, the real extent a
// run-time scalar; ops that reduce or contract over such an axis mask what lies past the real
// extent first (an iota compared with the scalar), so one plan serves every length. An op whose
// bounded replay would not be exact is refused with a one-line error when the program is read.
//
// Data parallel (dp=N[,bucket_mb=X][,dp_dim=batch]): each rank runs its share of the captured
// global batch (every axis named dp_dim at extent / N) and all-reduces each step's gradients in
// DDP's buckets (program_dp.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "program_dp.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/compiler_stub/weight_layouts.h"
#include "wallsim/torch/bounded_replay.h"
#include "wallsim/torch/program.h"
#include "workload_params.h"

namespace wallsim::workloads::detail {
namespace {

namespace cs = compiler_stub;
namespace pt = wallsim::torch;
using cs::OpKind;
using pt::EventKind;
using runtime::Tensor;
using Mask = pt::BoundedMask;
using Gather = pt::BoundedGather;

// Per ATen op name, over the run.
struct AtenRow {
  int64_t calls = 0, graph_ops = 0, host_ops = 0;
  int64_t host_ns = 0, transfer_bytes = 0;
};

class ProgramReplay final : public Workload {
 public:
  explicit ProgramReplay(Params& p) : m_file(p.text("file")) {
    const std::string bounds = p.text("bound");
    m_sizes.dp = p.integer_if_given("dp", 1, 1, 65536);
    const double bucket_mb = p.text("bucket_mb").empty() ? 0.0 : p.real("bucket_mb", 0.0, 0.0, 1e6);
    std::string dp_dim = p.text("dp_dim");
    if (dp_dim.empty()) dp_dim = "batch";
    p.finish();
    m_params = p.resolved();
    if (m_file.empty()) p.fail("file", "the program file is required (program:file=P.json)");
    if (m_sizes.dp == 1 && m_params.count("bucket_mb"))
      p.fail("bucket_mb", "applies only to a data-parallel replay (dp=N, N > 1)");
    m_program = pt::read_program_file(m_file);
    std::map<std::string, int64_t> bound = parse_bounds(p, bounds), shards;
    if (m_sizes.dp > 1) {
      if (bound.count(dp_dim)) p.fail("dp", "dim '" + dp_dim + "' is both bounded and split");
      m_dp = std::make_unique<ProgramDp>(m_program, m_sizes.dp, bucket_mb * 1e6, dp_dim,
                                         "--workload program");
      shards[dp_dim] = m_sizes.dp;
    }
    m_bounded = std::make_unique<pt::BoundedReplay>(m_program, bound, shards);
    count_calls();
    m_real_macs.assign(m_program.steps.size(), 0.0);
    for (size_t si = 0; si < m_program.steps.size(); ++si) {
      for (size_t i = m_program.steps[si].first; i < m_program.steps[si].second; ++i) {
        const pt::Event& e = m_program.events[i];
        if (e.kind != EventKind::op || cs::info(e.node.op).kind != cs::OpClass::contraction)
          continue;
        // At the captured shapes.
        m_real_macs[si] += cs::contraction_macs(tensor(e.node.inputs[0]).type(), e.out.type());
      }
    }
  }

  std::map<std::string, std::string> params() const override { return m_params; }
  int64_t default_steps() const override { return static_cast<int64_t>(m_program.steps.size()); }
  bool masks_instead_of_padding() const override { return !m_bounded->bounds().empty(); }
  runtime::ParallelSizes parallel() const override { return m_sizes; }
  // Each weight's value after the steps (its last in-place update), in weight-event order.
  std::vector<Tensor> state() const override {
    std::vector<Tensor> out;
    for (int32_t id : m_latest) {
      if (m_live.count(id)) out.push_back(m_live.at(id));
      if (!m_live.count(id) && m_final.count(id)) out.push_back(m_final.at(id));
    }
    return out;
  }

  void setup(Session& s) override {
    m_session = &s;
    m_session_rank = s.rank().dp_rank;
    m_latest = latest_weight_ids(m_program);
    if (!s.config().runtime.host_fallback) {
      // every event, set-up included
      for (const pt::Event& e : m_program.events) {
        if (e.kind != EventKind::host_op) continue;
        fail(e, e.aten + " in module '" + e.module +
                    "' has no device lowering and runtime.host_fallback is off");
      }
    }
    m_values = s.functional() && !m_program.values.empty();
    for (const auto& [name, offsets] : m_bounded->scalar_offsets()) {
      for (int64_t k : offsets)
        s.declare_scalar(m_bounded->scalar_name(name, k), 0, m_bounded->bounds().at(name));
    }
    // Each weight's readers over the whole program (a capture sees them all): the runtime asks
    // the compiler for its device layout from them. A weight the host reads is kept as given.
    std::unordered_map<int32_t, std::vector<const cs::Node*>> readers;
    std::unordered_map<int32_t, bool> host_reads;
    for (const pt::Event& e : m_program.events) {
      if (e.kind == EventKind::op) {
        for (int32_t id : e.node.inputs) readers[id].push_back(&e.node);
      }
      if (e.kind == EventKind::host_op) {
        for (int32_t id : e.inputs) host_reads[id] = true;
      }
      if (e.kind == EventKind::read) host_reads[e.out.id] = true;
    }
    // A value between the weight and its transpose (a conv weight's reshape) is followed only
    // when the host does not read it.
    const cs::ReadersOf readers_of = [&](int32_t id) -> const std::vector<const cs::Node*>* {
      if (host_reads.count(id)) return nullptr;
      auto it = readers.find(id);
      static const std::vector<const cs::Node*> none;
      return it == readers.end() ? &none : &it->second;
    };
    uint64_t k = 1;
    s.clear_origin();
    for (const pt::Event& e : m_program.events) {
      if (e.kind != EventKind::weight) continue;
      const cs::WeightLayout layout =
          host_reads[e.out.id] ? cs::WeightLayout{}
                               : s.weight_layout(e.out.type(), readers[e.out.id], readers_of);
      m_weights[e.out.id] = upload(
          s, e.out, m_values ? pt::value_file(m_program, 'w', e.out.id) : "", seed(s, k++), layout);
    }
    m_live = m_weights;
    if (m_program.setup > 0) {
      // The set-up section, once, drained before the first step: start-up work, like the
      // weights' upload; what it leaves live is live at the start of every pass.
      const int64_t start = s.now_ns();
      const int64_t host_ns = m_host_ns, host_ops = m_host_op_count, bytes = m_host_bytes;
      replay_events(s, 0, m_program.setup, 0, 500000, false);
      s.synchronize();
      for (const auto& [aten, row] : calls_in(0, m_program.setup)) {
        m_rows[aten].calls += row.calls;
        m_rows[aten].graph_ops += row.graph_ops;
      }
      m_setup_ns = s.now_ns() - start;
      m_setup_host = {m_host_op_count - host_ops, m_host_ns - host_ns, m_host_bytes - bytes};
      m_host_op_count = host_ops;  // the host_fallback figures are the steps'
      m_host_ns = host_ns;
      m_host_bytes = bytes;
    }
    m_start = m_live;
  }
  // AOT traces every step of the program once (the capture saw them all): identical steps hit
  // the plan compiled for the first.
  std::vector<int64_t> buckets(const Session&) const override {
    std::vector<int64_t> b;
    for (size_t i = 0; i < m_program.steps.size(); ++i) b.push_back(static_cast<int64_t>(i));
    return b;
  }
  void trace(Session& s, int64_t bucket) override {
    if (bucket == 0) m_live = m_start;
    replay(s, static_cast<size_t>(bucket), /*tracing=*/true);
    if (bucket + 1 == static_cast<int64_t>(m_program.steps.size())) m_live = m_start;
  }
  Tensor step(Session& s, int64_t index) override {
    const size_t n = m_program.steps.size();
    const size_t k = static_cast<size_t>(index) % n;
    if (k == 0 && index > 0) m_live = m_start;  // wrapped: a new pass over the program
    replay(s, k, false);
    ++m_steps_run;
    return {};
  }
  // The program's reads are its syncs: no extra read at a step's end.
  void run(Session& s, int64_t steps) override {
    for (int64_t i = 0; i < steps; ++i) {
      s.begin_step(i);
      step(s, i);
      s.end_step();
    }
  }
  std::optional<std::pair<std::string, nlohmann::ordered_json>> report() const override;

 private:
  [[noreturn]] void fail(const pt::Event& e, const std::string& problem) const {
    throw pt::event_error(m_program, e, problem);
  }

  // "seq<=64;pos<=128"
  std::map<std::string, int64_t> parse_bounds(Params& p, const std::string& text) {
    std::map<std::string, int64_t> bounds;
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find(';', at);
      if (end == std::string::npos) end = text.size();
      const std::string item = text.substr(at, end - at);
      const size_t le = item.find("<=");
      size_t used = 0;
      int64_t max = 0;
      if (le != std::string::npos && le > 0) {
        try {
          max = std::stoll(item.substr(le + 2), &used);
        } catch (const std::exception&) {
          used = 0;
        }
      }
      if (le == std::string::npos || le == 0 || used == 0 || used != item.size() - le - 2 ||
          max < 1)
        p.fail("bound", "expected NAME<=MAX (MAX >= 1), got '" + item + "'");
      const std::string name = item.substr(0, le);
      if (std::find(m_program.dim_names.begin(), m_program.dim_names.end(), name) ==
          m_program.dim_names.end()) {
        std::string known;
        for (const auto& d : m_program.dim_names) known += (known.empty() ? "" : ", ") + d;
        p.fail("bound", "the program names no dim '" + name +
                            "' (named: " + (known.empty() ? "none" : known) + ")");
      }
      if (!bounds.emplace(name, max).second) p.fail("bound", "'" + name + "' bounded twice");
      at = end + 1;
    }
    return bounds;
  }

  const pt::ProgramTensor& tensor(int32_t id) const { return m_bounded->tensor(id); }

  // One ATen call: consecutive graph ops of the same ATen op and module (a decomposition).
  void count_calls() {
    m_calls.assign(m_program.steps.size(), {});
    for (size_t si = 0; si < m_program.steps.size(); ++si)
      m_calls[si] = calls_in(m_program.steps[si].first, m_program.steps[si].second);
  }
  std::map<std::string, AtenRow> calls_in(size_t begin, size_t end) const {
    std::map<std::string, AtenRow> rows;
    std::string last;
    for (size_t i = begin; i < end; ++i) {
      const pt::Event& e = m_program.events[i];
      if (e.kind != EventKind::op && e.kind != EventKind::host_op) continue;
      const std::string key = e.aten + "\n" + e.module;
      auto& row = rows[source(e)];
      if (e.kind == EventKind::host_op || key != last) ++row.calls;
      if (e.kind == EventKind::op) ++row.graph_ops;
      last = e.kind == EventKind::op ? key : "";
    }
    return rows;
  }

  // A device tensor for `t` at its run shape: its captured values (zero-padded past real
  // extents) when `npy` is given, else seeded random (functional) or none (timing only).
  // Data parallel: an input with the split dim gets this rank's rows of it (the unsharded
  // run's rows: its values, or the same seeded tensor).
  Tensor upload(Session& s, const pt::ProgramTensor& t, const std::string& npy, uint64_t seed,
                const cs::WeightLayout& layout = {}) {
    const std::vector<int64_t> shape = m_bounded->run_shape(t);
    const int64_t split = m_dp ? m_dp->split_axis(t) : -1;
    const size_t ax = static_cast<size_t>(std::max<int64_t>(split, 0));
    const int64_t first = split < 0 ? 0 : s.rank().dp_rank * shape[ax];
    if (npy.empty() && split >= 0) {
      std::vector<int64_t> full = shape;
      full[ax] = t.shape[ax];
      return s.upload_random_slice(full, t.dtype, seed, split, first, first + shape[ax]);
    }
    if (npy.empty()) return s.upload_random(shape, t.dtype, seed, layout);
    return s.upload(shape, t.dtype, values_at(read_values(npy, t), t, shape), layout);
  }
  // Captured values at run shape `shape`: this rank's rows of the split dim, zero-padded past
  // real extents.
  std::vector<float> values_at(std::vector<float> real, const pt::ProgramTensor& t,
                               const std::vector<int64_t>& shape) const {
    std::vector<int64_t> from = t.shape;
    if (const int64_t split = m_dp ? m_dp->split_axis(t) : -1; split >= 0) {
      const size_t ax = static_cast<size_t>(split);
      const int64_t first = m_session_rank * shape[ax];
      real = ProgramDp::rows(real, t.shape, ax, first, first + shape[ax]);
      from[ax] = shape[ax];
    }
    return shape == from ? real : pad(real, from, shape);
  }

  static std::vector<float> pad(const std::vector<float>& v, const std::vector<int64_t>& from,
                                const std::vector<int64_t>& to) {
    std::vector<float> out(static_cast<size_t>(torch::elements(to, 0)), 0.0f);
    copy_region(v, from, out, to, true);
    return out;
  }
  // Copies the region `small` covers between a row-major `small` and `big` array.
  static void copy_region(const std::vector<float>& a, const std::vector<int64_t>& sa,
                          std::vector<float>& b, const std::vector<int64_t>& sb, bool a_small) {
    const std::vector<int64_t>& small = a_small ? sa : sb;
    const int64_t n = torch::elements(small, 0);
    std::vector<int64_t> idx(small.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t ia = 0, ib = 0;
      for (size_t d = 0; d < small.size(); ++d) {
        ia = ia * sa[d] + idx[d];
        ib = ib * sb[d] + idx[d];
      }
      b[static_cast<size_t>(ib)] = a[static_cast<size_t>(ia)];
      for (size_t d = small.size(); d-- > 0;) {
        if (++idx[d] < small[d]) break;
        idx[d] = 0;
      }
    }
  }

  static std::vector<float> read_values(const std::string& npy, const pt::ProgramTensor& t) {
    return pt::read_values(npy, t);
  }

  // `x`'s axis past the real extent of `t` replaced by `fill`: an iota compared with the
  // run-time scalar holding the extent, then select.
  Tensor masked(Session& s, const Tensor& x, const pt::ProgramTensor& t, const Mask& m,
                size_t step) {
    const std::string& dim = t.dim_names[m.axis];
    const std::string scalar =
        m_bounded->scalar_name(dim, t.shape[m.axis] - m_bounded->base_extent(step, dim));
    s.set_scalar(scalar, t.shape[m.axis]);  // before the op that reads it (per-op modes)
    Tensor at = s.iota(x.shape(), isa::DType::int32, static_cast<int64_t>(m.axis));
    Tensor keep = s.op(OpKind::compare, {at}, {{"cmp", std::string("lt")}, {"scalar", scalar}});
    Tensor fill =
        s.op(OpKind::affine, {keep}, {{"value", 0.0}, {"offset", double(m.fill)}}, x.dtype());
    return s.op(OpKind::select, {keep, x, fill});
  }

  // The row of `x` (axis g.axis) at the captured position, a run-time scalar: moved to the last
  // axis, masked to that position, summed, moved back.
  Tensor gathered(Session& s, const Tensor& x, const pt::Event& e, const Gather& g, size_t step) {
    const std::string& dim = pt::BoundedReplay::gather_dim(e);
    const int64_t at = g.at;
    const std::string scalar = m_bounded->scalar_name(dim, at - m_bounded->base_extent(step, dim));
    s.set_scalar(scalar, at);
    const int64_t rank = static_cast<int64_t>(x.shape().size());
    std::vector<int64_t> perm, back(static_cast<size_t>(rank));
    for (int64_t a = 0; a < rank; ++a) {
      if (a != static_cast<int64_t>(g.axis)) perm.push_back(a);
    }
    perm.push_back(static_cast<int64_t>(g.axis));
    for (int64_t a = 0; a < rank; ++a) back[static_cast<size_t>(perm[static_cast<size_t>(a)])] = a;
    const bool move = g.axis + 1 != static_cast<size_t>(rank);
    Tensor xt = move ? s.op(OpKind::transpose, {x}, {{"perm", perm}}) : x;
    Tensor pos = s.iota(xt.shape(), isa::DType::int32, rank - 1);
    Tensor keep = s.op(OpKind::compare, {pos}, {{"cmp", std::string("eq")}, {"scalar", scalar}});
    Tensor zero = s.op(OpKind::affine, {keep}, {{"value", 0.0}, {"offset", 0.0}}, x.dtype());
    Tensor row = s.op(OpKind::reduce_sum, {s.op(OpKind::select, {keep, xt, zero})});
    return move ? s.op(OpKind::transpose, {row}, {{"perm", back}}) : row;
  }

  void replay(Session& s, size_t step, bool tracing) {
    const auto [begin, end] = m_program.steps[step];
    replay_events(s, begin, end, step, 1000000 + 1000 * static_cast<uint64_t>(step), tracing);
    if (!tracing) {
      s.add_real_macs(m_real_macs[step]);
      for (const auto& [aten, row] : m_calls[step]) {
        AtenRow& r = m_rows[aten];
        r.calls += row.calls;
        r.graph_ops += row.graph_ops;
      }
      if (m_dp) {
        const auto [calls, ops] = m_dp->calls(step);
        m_rows["wallsim.dp_all_reduce"].calls += calls;
        m_rows["wallsim.dp_all_reduce"].graph_ops += ops;
      }
    }
  }

  // Events [begin, end): step `step`'s (the bounded scalars' base extents), or the set-up's.
  void replay_events(Session& s, size_t begin, size_t end, size_t step, uint64_t base_seed,
                     bool tracing) {
    for (size_t i = begin; i < end; ++i) {
      const pt::Event& e = m_program.events[i];
      switch (e.kind) {
        case EventKind::weight:
        case EventKind::step:
        case EventKind::grad:  // data parallel: all-reduced below, once its bucket closes
          break;
        case EventKind::input:
          s.clear_origin();
          m_live[e.out.id] =
              upload(s, e.out, m_values ? pt::value_file(m_program, 'i', e.out.id) : "",
                     seed(s, base_seed + i));
          break;
        case EventKind::op: {
          s.set_origin({e.module, source(e)});
          const pt::BoundedOp& r = m_bounded->op(i);
          std::vector<Tensor> in;
          for (int32_t id : e.node.inputs) in.push_back(m_live.at(id));
          for (const Mask& m : r.masks)
            in[m.input] = masked(s, in[m.input], tensor(e.node.inputs[m.input]), m, step);
          const std::optional<isa::DType> dtype =
              e.node.op == OpKind::iota ? std::nullopt : e.node.dtype;
          if (r.gather) {
            m_live[e.out.id] = gathered(s, in[0], e, *r.gather, step);
          } else if (e.node.op == OpKind::iota) {
            m_live[e.out.id] = s.op(OpKind::iota, {}, r.attrs, e.out.dtype);
          } else {
            m_live[e.out.id] = s.op(e.node.op, in, r.attrs, dtype);
          }
          break;
        }
        case EventKind::host_op:
          host_op(s, e, tracing);
          break;
        case EventKind::read: {
          const cs::HostTensor v = s.to_host(m_live.at(e.out.id));
          if (m_values && !tracing && !m_dp) check_read(v, e);  // dp: a rank reads its share
          break;
        }
        case EventKind::free:
          if (std::count(m_latest.begin(), m_latest.end(), e.out.id))  // a capture's end frees it
            m_final[e.out.id] = m_live.at(e.out.id);
          m_live.erase(e.out.id);
          break;
      }
      if (m_dp && i >= m_program.setup) {
        m_dp->after_event(s, step, i, m_live);
        s.clear_origin();
      }
    }
    s.clear_origin();
  }

  // An op's ATen origin; set-up work is reported apart from the steps' ("aten.arange.default
  // (set-up)").
  std::string source(const pt::Event& e) const {
    return e.index < m_program.setup ? e.aten + " (set-up)" : e.aten;
  }

  // On the host CPU: inputs copied down, the op's modelled host time, outputs copied up (their
  // captured values in a functional replay with values; zeros otherwise).
  void host_op(Session& s, const pt::Event& e, bool tracing) {
    s.set_origin({e.module, source(e)});
    int64_t bytes = 0;
    for (int32_t id : e.inputs) {
      const Tensor& t = m_live.at(id);
      s.to_host(t);
      bytes += torch::elements(t.shape(), 0) * isa::dtype_bytes(t.dtype());
    }
    const int64_t ns = tracing ? 0 : s.host_compute(e.flops, e.bytes);
    for (const pt::ProgramTensor& o : e.outputs) {
      const std::vector<int64_t> shape = m_bounded->run_shape(o);
      std::vector<float> values;
      if (s.functional()) {
        values = m_values
                     ? read_values(pt::value_file(m_program, 'o', o.id), o)
                     : std::vector<float>(static_cast<size_t>(torch::elements(o.shape, 0)), 0.0f);
        values = values_at(std::move(values), o, shape);
      }
      m_live[o.id] = s.upload(shape, o.dtype, values);
      bytes += torch::elements(shape, 0) * isa::dtype_bytes(o.dtype);
    }
    if (!tracing) {
      AtenRow& r = m_rows[source(e)];
      ++r.host_ops;
      r.host_ns += ns;
      r.transfer_bytes += bytes;
      m_host_ns += ns;
      m_host_bytes += bytes;
      ++m_host_op_count;
    }
  }

  // max |a - b| / max |b| over the read's real region (max |a - b| when b is all zero).
  void check_read(const cs::HostTensor& v, const pt::Event& e) {
    const std::vector<float> want =
        read_values(pt::value_file(m_program, 'r', e.read_index), e.out);
    std::vector<float> got(want.size(), 0.0f);
    copy_region(v.data, v.shape, got, e.out.shape, false);
    double diff = 0, mag = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      diff = std::max(diff, std::abs(double(got[i]) - double(want[i])));
      mag = std::max(mag, std::abs(double(want[i])));
    }
    const double rel = mag > 0 ? diff / mag : diff;
    if (std::isnan(rel) || rel > m_max_rel_error)
      m_max_rel_error = std::isnan(rel) ? INFINITY : rel;
    ++m_reads_checked;
  }

  std::string m_file;
  std::map<std::string, std::string> m_params;
  pt::Program m_program;
  std::unique_ptr<pt::BoundedReplay> m_bounded;  // how each op runs (at the bounds, if any)
  std::unique_ptr<ProgramDp> m_dp;               // data parallel (dp > 1), or null
  runtime::ParallelSizes m_sizes;
  std::vector<int32_t> m_latest;                        // each weight's id after the program
  std::map<int32_t, Tensor> m_final;                    // those the program frees, as they were
  std::vector<std::map<std::string, AtenRow>> m_calls;  // per step
  std::vector<double> m_real_macs;                      // per step, at the captured shapes
  bool m_values = false;
  std::map<int32_t, Tensor> m_weights, m_live;
  std::map<int32_t, Tensor> m_start;  // live at the start of a pass: weights and set-up values
  struct SetupHost {
    int64_t ops = 0, ns = 0, bytes = 0;
  } m_setup_host;          // the set-up section's host ops
  int64_t m_setup_ns = 0;  // the set-up section's start-up time, drained
  const Session* m_session = nullptr;
  int64_t m_session_rank = 0;  // this rank's dp_rank
  std::map<std::string, AtenRow> m_rows;
  int64_t m_steps_run = 0, m_host_ns = 0, m_host_bytes = 0, m_host_op_count = 0;
  int64_t m_reads_checked = 0;
  double m_max_rel_error = 0;
};

std::optional<std::pair<std::string, nlohmann::ordered_json>> ProgramReplay::report() const {
  using nlohmann::ordered_json;
  // Device figures by ATen op: every origin of that source op, over every module.
  using DeviceRow = sim::Core::OpTotals;
  std::map<std::string, DeviceRow> dev;
  if (m_session) {
    const auto& origins = m_session->origins();
    for (const auto& [id, t] : m_session->origin_totals()) {
      dev[origins.at(static_cast<size_t>(id)).source] += t;
    }
  }
  std::set<std::string> names;
  for (const auto& [n, r] : m_rows) names.insert(n);
  for (const auto& [n, d] : dev) names.insert(n);
  ordered_json rows = ordered_json::array();
  for (const std::string& n : names) {
    const auto r = m_rows.count(n) ? m_rows.at(n) : AtenRow{};
    const auto d = dev.count(n) ? dev.at(n) : DeviceRow{};
    rows.push_back({{"aten", n},
                    {"calls", r.calls},
                    {"graph_ops", r.graph_ops},
                    {"device_nodes", d.nodes},
                    {"device_ns", d.exposed_ns},
                    {"dma_bytes", d.dma_bytes},
                    {"macs", d.macs},
                    {"instructions", d.instructions},
                    {"host_ops", r.host_ops},
                    {"host_fallback_ns", r.host_ns},
                    {"transfer_bytes", r.transfer_bytes}});
  }
  ordered_json bounds = ordered_json::object();
  for (const auto& [n, m] : m_bounded->bounds()) bounds[n] = m;
  ordered_json out = {
      {"name", m_program.name},
      {"file", m_file},
      {"program_steps", m_program.steps.size()},
      {"setup",
       {{"events", m_program.setup},
        {"wall_ns", m_setup_ns},
        {"host_ops", m_setup_host.ops},
        {"host_ns", m_setup_host.ns},
        {"transfer_bytes", m_setup_host.bytes}}},
      {"steps_run", m_steps_run},
      {"bounds", bounds},
      {"host_fallback",
       {{"ops", m_host_op_count}, {"ns", m_host_ns}, {"transfer_bytes", m_host_bytes}}},
      {"reads_checked", m_reads_checked},
      {"max_rel_error",
       m_reads_checked > 0 ? ordered_json(m_max_rel_error) : ordered_json(nullptr)},
      {"aten_ops", rows}};
  if (m_dp) {
    int64_t rows_per_rank = 0;  // of the split dim's largest extent
    for (const pt::Event& e : m_program.events) {
      const int64_t a = e.kind == EventKind::input ? m_dp->split_axis(e.out) : -1;
      if (a >= 0) rows_per_rank = std::max(rows_per_rank, e.out.shape[size_t(a)] / m_dp->dp());
    }
    out["data_parallel"] = m_dp->report(rows_per_rank);
  }
  return std::make_pair(std::string("program"), out);
}

}  // namespace

std::unique_ptr<Workload> make_program_workload(Params& p) {
  return std::make_unique<ProgramReplay>(p);
}

}  // namespace wallsim::workloads::detail
