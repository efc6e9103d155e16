// program: a captured PyTorch program (a program file, docs/PROGRAM_FORMAT.md) replayed through
// the Tensor API, so every mode sees its op stream as a lazy runtime would: weights uploaded once
// in setup, inputs uploaded in their step, ops recorded, reads as flushes and device->host
// copies, frees as dropped handles, and the program's steps as the run's steps. Every op carries
// its origin (module path, ATen op), so the report attributes device time per ATen op.
//
// Bounded dims (bound=NAME<=MAX;...): tensors run with each named axis at MAX, the real extent a
// run-time scalar; ops that reduce or contract over such an axis mask what lies past the real
// extent first (an iota compared with the scalar), so one plan serves every length. An op whose
// bounded replay would not be exact is refused with a one-line error when the program is read.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "wallsim/compiler_stub/validate.h"
#include "wallsim/compiler_stub/weight_layouts.h"
#include "wallsim/torch/program.h"
#include "workload_params.h"

namespace wallsim::workloads::detail {
namespace {

namespace cs = compiler_stub;
namespace pt = wallsim::torch;
using cs::OpKind;
using pt::EventKind;
using runtime::Tensor;

// Input `input`'s axis `axis` is filled with `fill` past its real extent before the op.
struct Mask {
  size_t input = 0;
  size_t axis = 0;
  float fill = 0;
};

// A slice of one position relative to a bounded axis' real extent (x[:, -1]): the row at the
// run-time position, picked by a mask and a sum along the axis (no dynamic slice op).
struct Gather {
  size_t axis = 0;
  int64_t at = 0;  // the captured position (the dim's real extent + the relative offset)
};

// How one op event is recorded: its attributes (bounded: shapes at the bounds) and masks.
struct Recorded {
  runtime::Attrs attrs;
  std::vector<Mask> masks;
  std::optional<Gather> gather;
};

// Per ATen op name, over the run.
struct AtenRow {
  int64_t calls = 0, graph_ops = 0, host_ops = 0;
  int64_t host_ns = 0, transfer_bytes = 0;
};

bool elementwise(OpKind k) {
  switch (k) {
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
    case OpKind::maximum:
    case OpKind::minimum:
    case OpKind::bias_add:
    case OpKind::scale:
    case OpKind::relu:
    case OpKind::gelu:
    case OpKind::silu:
    case OpKind::exp:
    case OpKind::tanh:
    case OpKind::sigmoid:
    case OpKind::rsqrt:
    case OpKind::sqrt:
    case OpKind::log:
    case OpKind::abs:
    case OpKind::reciprocal:
    case OpKind::clip:
    case OpKind::affine:
    case OpKind::compare:
    case OpKind::select:
    case OpKind::transpose:
      return true;
    default:
      return false;
  }
}

int64_t product(const std::vector<int64_t>& s, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

class ProgramReplay final : public Workload {
 public:
  explicit ProgramReplay(Params& p) : m_file(p.text("file")) {
    const std::string bounds = p.text("bound");
    p.finish();
    m_params = p.resolved();
    if (m_file.empty()) p.fail("file", "the program file is required (program:file=P.json)");
    m_program = pt::read_program_file(m_file);
    parse_bounds(p, bounds);
    if (!m_bounds.empty()) check_extents();
    for (const pt::Event& e : m_program.events) {
      if (e.kind == EventKind::weight || e.kind == EventKind::input) m_defs[e.out.id] = e.out;
      for (const auto& o : e.outputs) m_defs[o.id] = o;
      if (e.kind == EventKind::op) m_recorded[e.index] = plan_op(e);
    }
    if (!m_bounds.empty()) check_bounded_types();
    count_calls();
    m_real_macs.assign(m_program.steps.size(), 0.0);
    for (size_t si = 0; si < m_program.steps.size(); ++si) {
      for (size_t i = m_program.steps[si].first; i < m_program.steps[si].second; ++i) {
        const pt::Event& e = m_program.events[i];
        if (e.kind != EventKind::op) continue;
        if (e.node.op != OpKind::matmul && e.node.op != OpKind::batch_matmul) continue;
        // At the captured shapes: the result's elements times the contraction length.
        const pt::ProgramTensor& a = tensor(e.node.inputs[0]);
        m_real_macs[si] += double(product(e.out.shape, 0)) * double(a.shape.back());
      }
    }
  }

  std::map<std::string, std::string> params() const override { return m_params; }
  int64_t default_steps() const override { return static_cast<int64_t>(m_program.steps.size()); }
  bool masks_instead_of_padding() const override { return !m_bounds.empty(); }

  void setup(Session& s) override {
    m_session = &s;
    if (!s.config().runtime.host_fallback) {
      for (const pt::Event& e : m_program.events) {
        if (e.kind != EventKind::host_op) continue;
        fail(e, e.aten + " in module '" + e.module +
                    "' has no device lowering and runtime.host_fallback is off");
      }
    }
    m_values = s.functional() && !m_program.values.empty();
    for (const auto& [name, offsets] : m_scalar_offsets) {
      for (int64_t k : offsets) s.declare_scalar(scalar_name(name, k), 0, m_bounds.at(name));
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
  }
  // AOT traces every step of the program once (the capture saw them all): identical steps hit
  // the plan compiled for the first.
  std::vector<int64_t> buckets(const Session&) const override {
    std::vector<int64_t> b;
    for (size_t i = 0; i < m_program.steps.size(); ++i) b.push_back(static_cast<int64_t>(i));
    return b;
  }
  void trace(Session& s, int64_t bucket) override {
    if (bucket == 0) m_live = m_weights;
    replay(s, static_cast<size_t>(bucket), /*tracing=*/true);
    if (bucket + 1 == static_cast<int64_t>(m_program.steps.size())) m_live = m_weights;
  }
  Tensor step(Session& s, int64_t index) override {
    const size_t n = m_program.steps.size();
    const size_t k = static_cast<size_t>(index) % n;
    if (k == 0 && index > 0) m_live = m_weights;  // wrapped: a new pass over the program
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
    std::string what =
        "events[" + std::to_string(e.index) + "] (" + std::string(pt::name_of(e.kind));
    if (e.kind == EventKind::op) what += " " + std::string(cs::name_of(e.node.op));
    if (!e.aten.empty()) what += ", " + e.aten;
    throw base::InputError(m_file, what + "): " + problem);
  }

  // "seq<=64;pos<=128"
  void parse_bounds(Params& p, const std::string& text) {
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
      if (!m_bounds.emplace(name, max).second) p.fail("bound", "'" + name + "' bounded twice");
      at = end + 1;
    }
  }

  // The axis' bound, or -1 when it runs at its captured extent. A named axis of extent 1 (the
  // position a select picked, a new token) runs at its extent.
  // A composite name, "F*seq" or "seq*F", is an axis a reshape merged from a named axis and
  // others of F elements in all (nn.Linear's [B, T, D] -> [B*T, D]): it runs at F times the
  // bound, the padded rows of each of the F blocks inside it.
  int64_t bound_of(const pt::ProgramTensor& t, size_t axis) const {
    if (axis >= t.dim_names.size() || t.dim_names[axis].empty() || t.shape[axis] == 1) return -1;
    const auto [name, factor] = split_composite(t.dim_names[axis]);
    auto it = m_bounds.find(name);
    return it == m_bounds.end() ? -1 : it->second * factor;
  }
  static std::pair<std::string, int64_t> split_composite(const std::string& n) {
    const size_t star = n.find('*');
    if (star == std::string::npos) return {n, 1};
    const bool lead = std::isdigit(static_cast<unsigned char>(n[0])) != 0;
    const std::string f = lead ? n.substr(0, star) : n.substr(star + 1);
    return {lead ? n.substr(star + 1) : n.substr(0, star), std::stoll(f)};
  }
  bool composite_bounded(const pt::ProgramTensor& t, size_t axis) const {
    return bound_of(t, axis) > 0 && t.dim_names[axis].find('*') != std::string::npos;
  }
  std::vector<int64_t> run_shape(const pt::ProgramTensor& t) const {
    std::vector<int64_t> s = t.shape;
    for (size_t a = 0; a < s.size(); ++a) {
      if (bound_of(t, a) > 0) s[a] = bound_of(t, a);
    }
    return s;
  }
  bool any_bounded(const pt::ProgramTensor& t) const {
    for (size_t a = 0; a < t.shape.size(); ++a) {
      if (bound_of(t, a) > 0) return true;
    }
    return false;
  }

  const pt::ProgramTensor& tensor(int32_t id) const { return m_defs.at(id); }

  // How op event `e` runs: the attributes at the bounds and the masks exactness needs; a
  // bounded replay that could not be exact is an error.
  Recorded plan_op(const pt::Event& e) {
    Recorded r;
    r.attrs = e.node.attrs;
    m_defs[e.out.id] = e.out;
    const OpKind k = e.node.op;
    std::vector<const pt::ProgramTensor*> in;
    for (int32_t id : e.node.inputs) in.push_back(&tensor(id));
    if (k == OpKind::iota) r.attrs["shape"] = run_shape(e.out);
    bool touched = any_bounded(e.out);
    for (const auto* t : in) touched = touched || any_bounded(*t);
    for (const auto& rel : e.relative) touched = touched || m_bounds.count(rel.dim);
    if (!touched) return r;
    const auto refuse = [&](const std::string& why) {
      fail(e, "cannot run with a bounded dim: " + why);
    };
    for (const auto& rel : e.relative) {
      if (m_bounds.count(rel.dim) && k != OpKind::slice)
        refuse("attribute " + rel.key + " is relative to '" + rel.dim + "'");
    }
    const auto last_bounded = [&](size_t i) {
      const auto* t = in.at(i);
      return !t->shape.empty() && bound_of(*t, t->shape.size() - 1) > 0;
    };
    switch (k) {
      case OpKind::iota:
      case OpKind::embedding:
        if (k == OpKind::embedding && any_bounded(*in[0])) refuse("the table is bounded");
        break;
      case OpKind::softmax:
      case OpKind::log_softmax:
        if (last_bounded(0)) r.masks.push_back({0, in[0]->shape.size() - 1, -1e9f});
        break;
      case OpKind::reduce_sum:
        if (last_bounded(0)) r.masks.push_back({0, in[0]->shape.size() - 1, 0.0f});
        break;
      case OpKind::reduce_max:
        if (last_bounded(0)) r.masks.push_back({0, in[0]->shape.size() - 1, -1e9f});
        break;
      case OpKind::reduce_mean:
      case OpKind::layernorm:
      case OpKind::rmsnorm:
        if (last_bounded(0)) refuse("it reduces over a bounded axis by its extent");
        break;
      case OpKind::matmul:
        if (last_bounded(0) || bound_of(*in[1], in[1]->shape.size() - 2) > 0) {
          r.masks.push_back({0, in[0]->shape.size() - 1, 0.0f});
          r.masks.push_back({1, in[1]->shape.size() - 2, 0.0f});
        }
        break;
      case OpKind::batch_matmul: {
        const bool tb = e.node.int_attr("transpose_b") && *e.node.int_attr("transpose_b");
        const size_t kb = tb ? 2 : 1;
        if (last_bounded(0) || bound_of(*in[1], kb) > 0) {
          r.masks.push_back({0, 2, 0.0f});
          r.masks.push_back({1, kb, 0.0f});
        }
        break;
      }
      case OpKind::reshape:
      case OpKind::broadcast: {
        r.attrs["shape"] = run_shape(e.out);
        if (k == OpKind::broadcast) break;
        // Layout-preserving only: the i-th bounded axis of the input and of the result have
        // the same elements inside them, so padded rows stay whole rows.
        std::vector<size_t> a, b;
        for (size_t i = 0; i < in[0]->shape.size(); ++i)
          if (bound_of(*in[0], i) > 0) a.push_back(i);
        for (size_t i = 0; i < e.out.shape.size(); ++i)
          if (bound_of(e.out, i) > 0) b.push_back(i);
        bool ok = a.size() == b.size();
        for (size_t i = 0; ok && i < a.size(); ++i)
          ok = product(in[0]->shape, a[i] + 1) == product(e.out.shape, b[i] + 1);
        if (!ok) refuse("the reshape moves a bounded axis across others");
        break;
      }
      case OpKind::slice: {
        const int64_t axis = *e.node.int_attr("axis");
        const size_t ax =
            static_cast<size_t>(axis < 0 ? axis + int64_t(in[0]->shape.size()) : axis);
        const pt::RelativeAttr* limit = nullptr;  // positions relative to a bounded dim
        const pt::RelativeAttr* rel_start = nullptr;
        for (const auto& rel : e.relative) {
          if (!m_bounds.count(rel.dim)) continue;
          if (rel.key == "limit") limit = &rel;
          if (rel.key == "start") rel_start = &rel;
        }
        const bool in_bounded = bound_of(*in[0], ax) > 0;
        if (!in_bounded && !limit && !rel_start) break;
        const int64_t start = *e.node.int_attr("start");
        if (bound_of(e.out, ax) > 0) {  // from 0 to the bounded extent: to the bound
          if (rel_start || start != 0 || !limit || limit->offset != 0)
            refuse("a slice of a bounded axis must run from 0 to its extent");
          const int64_t max = bound_of(e.out, ax);
          if (!in_bounded && max > in[0]->shape[ax])
            refuse("the bound " + std::to_string(max) + " is past the sliced axis' extent " +
                   std::to_string(in[0]->shape[ax]));
          r.attrs["limit"] = max;
        } else if (rel_start && limit && rel_start->offset + 1 == limit->offset) {
          r.gather = Gather{ax, start};
        } else if (rel_start || limit) {
          refuse("a slice of more than one position relative to the run-time extent");
        }
        break;
      }
      case OpKind::concat: {
        const int64_t axis = *e.node.int_attr("axis");
        for (const auto* t : in) {
          const size_t ax = static_cast<size_t>(axis < 0 ? axis + int64_t(t->shape.size()) : axis);
          if (bound_of(*t, ax) > 0) refuse("a concat along a bounded axis");
        }
        break;
      }
      default:
        if (!elementwise(k)) refuse("the op has no bounded replay");
        break;
    }
    // Masks and positions need the axis' real extent as one run-time scalar: a merged axis'
    // real rows are F runs, one per block.
    for (const Mask& m : r.masks) {
      if (composite_bounded(*in.at(m.input), m.axis))
        refuse("it reduces over an axis that merges a bounded dim with others");
    }
    if (k == OpKind::slice) {
      const int64_t axis = *e.node.int_attr("axis");
      const size_t ax = static_cast<size_t>(axis < 0 ? axis + int64_t(in[0]->shape.size()) : axis);
      if (composite_bounded(*in[0], ax))
        refuse("a slice of an axis that merges a bounded dim with others");
    }
    return r;
  }

  // Scalars are named by the offset of a tensor's real extent from its step's base extent (the
  // largest of that dim defined in the step), so steps of one structure share plans.
  std::string scalar_name(const std::string& dim, int64_t offset) const {
    if (offset == 0) return dim;
    return dim + (offset > 0 ? "_p" : "_m") + std::to_string(std::abs(offset));
  }
  size_t step_of(size_t event) const {
    for (size_t i = 0; i < m_program.steps.size(); ++i) {
      if (event < m_program.steps[i].second || i + 1 == m_program.steps.size()) return i;
    }
    return 0;
  }

  // Every bounded axis' extent within its bound; each step's base extent per bounded dim.
  void check_extents() {
    m_base.assign(m_program.steps.size(), {});
    for (size_t si = 0; si < m_program.steps.size(); ++si) {
      for (size_t i = m_program.steps[si].first; i < m_program.steps[si].second; ++i) {
        const pt::Event& e = m_program.events[i];
        std::vector<pt::ProgramTensor> defs;
        if (e.kind == EventKind::weight || e.kind == EventKind::input || e.kind == EventKind::op)
          defs.push_back(e.out);
        for (const auto& o : e.outputs) defs.push_back(o);
        for (const auto& t : defs) {
          for (size_t a = 0; a < t.shape.size(); ++a) {
            if (bound_of(t, a) < 0) continue;
            if (t.shape[a] > bound_of(t, a)) {
              fail(e, "dim '" + t.dim_names[a] + "' has extent " + std::to_string(t.shape[a]) +
                          ", over its bound " + std::to_string(bound_of(t, a)));
            }
            if (t.dim_names[a].find('*') != std::string::npos) continue;  // no scalar of its own
            int64_t& base = m_base[si][t.dim_names[a]];
            base = std::max(base, t.shape[a]);
          }
        }
      }
    }
  }

  // Bounded: every op typed at the bounds as the runtime will, checked against the bounded
  // captured type; the scalars the masks need, per step.
  void check_bounded_types() {
    const auto at_bounds = [&](const pt::ProgramTensor& t) {
      cs::TensorType tt;
      tt.dtype = t.dtype;
      for (int64_t d : run_shape(t)) tt.dims.push_back(cs::Dim::of(d));
      return tt;
    };
    cs::Graph g;
    std::map<int32_t, int32_t> pos;
    const auto add_input = [&](const pt::ProgramTensor& t) {
      cs::Node n;
      n.id = static_cast<int32_t>(g.nodes.size());
      n.type = at_bounds(t);
      pos[t.id] = n.id;
      g.nodes.push_back(n);
    };
    for (const pt::Event& e : m_program.events) {
      if (e.kind == EventKind::weight || e.kind == EventKind::input) add_input(e.out);
      for (const auto& o : e.outputs) add_input(o);
      if (e.kind != EventKind::op) continue;
      cs::Node n = e.node;
      n.id = static_cast<int32_t>(g.nodes.size());
      for (int32_t& x : n.inputs) x = pos.at(x);
      n.attrs = m_recorded.at(e.index).attrs;
      const cs::TensorType want = at_bounds(e.out);
      if (n.op == OpKind::iota) {
        n.type = want;
        n.attrs.erase("shape");
      } else {
        try {
          n.type = cs::infer_node(g, n);
        } catch (const base::InputError& x) {
          fail(e, std::string("at the bounds: ") + x.what());
        }
      }
      if (!(n.type == want)) {
        fail(e, "at the bounds the op's type is " + cs::to_string(n.type) + ", expected " +
                    cs::to_string(want));
      }
      pos[e.out.id] = n.id;
      g.nodes.push_back(std::move(n));
      // The scalars its masks read.
      const size_t si = step_of(e.index);
      for (const Mask& m : m_recorded.at(e.index).masks) {
        const pt::ProgramTensor& t = tensor(e.node.inputs[m.input]);
        const std::string& dim = t.dim_names[m.axis];
        m_scalar_offsets[dim].insert(t.shape[m.axis] - m_base[si][dim]);
      }
      if (const auto& g = m_recorded.at(e.index).gather) {
        const std::string& dim = gather_dim(e);
        m_scalar_offsets[dim].insert(g->at - m_base[si][dim]);
      }
    }
  }

  // One ATen call: consecutive graph ops of the same ATen op and module (a decomposition).
  void count_calls() {
    m_calls.assign(m_program.steps.size(), {});
    for (size_t si = 0; si < m_program.steps.size(); ++si) {
      std::string last;
      for (size_t i = m_program.steps[si].first; i < m_program.steps[si].second; ++i) {
        const pt::Event& e = m_program.events[i];
        if (e.kind != EventKind::op && e.kind != EventKind::host_op) continue;
        const std::string key = e.aten + "\n" + e.module;
        auto& row = m_calls[si][e.aten];
        if (e.kind == EventKind::host_op || key != last) ++row.calls;
        if (e.kind == EventKind::op) ++row.graph_ops;
        last = e.kind == EventKind::op ? key : "";
      }
    }
  }

  // A device tensor for `t` at its run shape: its captured values (zero-padded past real
  // extents) when `npy` is given, else seeded random (functional) or none (timing only).
  Tensor upload(Session& s, const pt::ProgramTensor& t, const std::string& npy, uint64_t seed,
                const cs::WeightLayout& layout = {}) {
    const std::vector<int64_t> shape = run_shape(t);
    if (npy.empty()) return s.upload_random(shape, t.dtype, seed, layout);
    const std::vector<float> real = read_values(npy, t);
    if (shape == t.shape) return s.upload(shape, t.dtype, real, layout);
    return s.upload(shape, t.dtype, pad(real, t.shape, shape), layout);
  }

  static std::vector<float> pad(const std::vector<float>& v, const std::vector<int64_t>& from,
                                const std::vector<int64_t>& to) {
    std::vector<float> out(static_cast<size_t>(product(to, 0)), 0.0f);
    copy_region(v, from, out, to, true);
    return out;
  }
  // Copies the region `small` covers between a row-major `small` and `big` array.
  static void copy_region(const std::vector<float>& a, const std::vector<int64_t>& sa,
                          std::vector<float>& b, const std::vector<int64_t>& sb, bool a_small) {
    const std::vector<int64_t>& small = a_small ? sa : sb;
    const int64_t n = product(small, 0);
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
    const std::string scalar = scalar_name(dim, t.shape[m.axis] - m_base[step].at(dim));
    s.set_scalar(scalar, t.shape[m.axis]);  // before the op that reads it (per-op modes)
    Tensor at = s.iota(x.shape(), isa::DType::int32, static_cast<int64_t>(m.axis));
    Tensor keep = s.op(OpKind::compare, {at}, {{"cmp", std::string("lt")}, {"scalar", scalar}});
    Tensor fill =
        s.op(OpKind::affine, {keep}, {{"value", 0.0}, {"offset", double(m.fill)}}, x.dtype());
    return s.op(OpKind::select, {keep, x, fill});
  }

  // The bounded dim a one-position slice's start is relative to.
  static const std::string& gather_dim(const pt::Event& e) {
    for (const auto& rel : e.relative) {
      if (rel.key == "start") return rel.dim;
    }
    return e.relative.at(0).dim;
  }

  // The row of `x` (axis g.axis) at the captured position, a run-time scalar: moved to the last
  // axis, masked to that position, summed, moved back.
  Tensor gathered(Session& s, const Tensor& x, const pt::Event& e, const Gather& g, size_t step) {
    const std::string& dim = gather_dim(e);
    const int64_t at = g.at;
    const std::string scalar = scalar_name(dim, at - m_base[step].at(dim));
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
    const uint64_t base_seed = 1000000 + 1000 * static_cast<uint64_t>(step);
    for (size_t i = begin; i < end; ++i) {
      const pt::Event& e = m_program.events[i];
      switch (e.kind) {
        case EventKind::weight:
        case EventKind::step:
          break;
        case EventKind::input:
          s.clear_origin();
          m_live[e.out.id] =
              upload(s, e.out, m_values ? pt::value_file(m_program, 'i', e.out.id) : "",
                     seed(s, base_seed + i));
          break;
        case EventKind::op: {
          s.set_origin({e.module, e.aten});
          const Recorded& r = m_recorded.at(i);
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
          if (m_values && !tracing) check_read(v, e);
          break;
        }
        case EventKind::free:
          m_live.erase(e.out.id);
          break;
      }
    }
    s.clear_origin();
    if (!tracing) {
      s.add_real_macs(m_real_macs[step]);
      for (const auto& [aten, row] : m_calls[step]) {
        AtenRow& r = m_rows[aten];
        r.calls += row.calls;
        r.graph_ops += row.graph_ops;
      }
    }
  }

  // On the host CPU: inputs copied down, the op's modelled host time, outputs copied up (their
  // captured values in a functional replay with values; zeros otherwise).
  void host_op(Session& s, const pt::Event& e, bool tracing) {
    s.set_origin({e.module, e.aten});
    int64_t bytes = 0;
    for (int32_t id : e.inputs) {
      const Tensor& t = m_live.at(id);
      s.to_host(t);
      bytes += product(t.shape(), 0) * isa::dtype_bytes(t.dtype());
    }
    const int64_t ns = tracing ? 0 : s.host_compute(e.flops, e.bytes);
    for (const pt::ProgramTensor& o : e.outputs) {
      const std::vector<int64_t> shape = run_shape(o);
      std::vector<float> values;
      if (s.functional()) {
        values = m_values ? read_values(pt::value_file(m_program, 'o', o.id), o)
                          : std::vector<float>(static_cast<size_t>(product(o.shape, 0)), 0.0f);
        if (shape != o.shape) values = pad(values, o.shape, shape);
      }
      m_live[o.id] = s.upload(shape, o.dtype, values);
      bytes += product(shape, 0) * isa::dtype_bytes(o.dtype);
    }
    if (!tracing) {
      AtenRow& r = m_rows[e.aten];
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
  std::map<std::string, int64_t> m_bounds;
  std::map<size_t, Recorded> m_recorded;                  // by op event index
  std::unordered_map<int32_t, pt::ProgramTensor> m_defs;  // every tensor, by id
  std::vector<std::map<std::string, int64_t>> m_base;     // per step: base extent per bounded dim
  std::map<std::string, std::set<int64_t>> m_scalar_offsets;
  std::vector<std::map<std::string, AtenRow>> m_calls;  // per step
  std::vector<double> m_real_macs;                      // per step, at the captured shapes
  bool m_values = false;
  std::map<int32_t, Tensor> m_weights, m_live;
  const Session* m_session = nullptr;
  std::map<std::string, AtenRow> m_rows;
  int64_t m_steps_run = 0, m_host_ns = 0, m_host_bytes = 0, m_host_op_count = 0;
  int64_t m_reads_checked = 0;
  double m_max_rel_error = 0;
};

std::optional<std::pair<std::string, nlohmann::ordered_json>> ProgramReplay::report() const {
  using nlohmann::ordered_json;
  // Device figures by ATen op: every origin of that source op, over every module.
  struct DeviceRow {
    int64_t nodes = 0, instructions = 0, dma_bytes = 0;
    double macs = 0, exposed_ns = 0;
  };
  std::map<std::string, DeviceRow> dev;
  if (m_session) {
    const auto& origins = m_session->origins();
    for (const auto& [id, t] : m_session->origin_totals()) {
      DeviceRow& d = dev[origins.at(static_cast<size_t>(id)).source];
      d.nodes += t.nodes;
      d.instructions += t.instructions;
      d.dma_bytes += t.dma_bytes;
      d.macs += t.macs;
      d.exposed_ns += t.exposed_ns;
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
  for (const auto& [n, m] : m_bounds) bounds[n] = m;
  ordered_json out = {
      {"name", m_program.name},
      {"file", m_file},
      {"program_steps", m_program.steps.size()},
      {"steps_run", m_steps_run},
      {"bounds", bounds},
      {"host_fallback",
       {{"ops", m_host_op_count}, {"ns", m_host_ns}, {"transfer_bytes", m_host_bytes}}},
      {"reads_checked", m_reads_checked},
      {"max_rel_error",
       m_reads_checked > 0 ? ordered_json(m_max_rel_error) : ordered_json(nullptr)},
      {"aten_ops", rows}};
  return std::make_pair(std::string("program"), out);
}

}  // namespace

std::unique_ptr<Workload> make_program_workload(Params& p) {
  return std::make_unique<ProgramReplay>(p);
}

}  // namespace wallsim::workloads::detail
