// BoundedReplay: how each op of a program runs at its dims' bounds (bounded_replay.h).
#include "wallsim/torch/bounded_replay.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/composites.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::torch {

namespace {

namespace cs = compiler_stub;
using cs::OpKind;

// An op whose bounded axes follow its operands' positions: element-wise ops (ops.def's kinds)
// and transpose.
bool elementwise(OpKind k) { return cs::info(k).elementwise() || k == OpKind::transpose; }

}  // namespace

BoundedReplay::BoundedReplay(const Program& program, std::map<std::string, int64_t> bounds,
                             std::map<std::string, int64_t> shards)
    : m_program(program), m_bounds(std::move(bounds)), m_shards(std::move(shards)) {
  const bool resized = !m_bounds.empty() || !m_shards.empty();
  if (resized) check_extents();
  for (const Event& e : m_program.events) {
    if (e.kind == EventKind::weight || e.kind == EventKind::input) m_defs[e.out.id] = e.out;
    for (const auto& o : e.outputs) m_defs[o.id] = o;
    if (e.kind == EventKind::op) m_ops[e.index] = plan_op(e);
  }
  if (resized) check_bounded_types();
}

void BoundedReplay::fail(const Event& e, const std::string& problem) const {
  throw event_error(m_program, e, problem);
}

int64_t BoundedReplay::bound_of(const ProgramTensor& t, size_t axis) const {
  if (axis >= t.dim_names.size() || t.dim_names[axis].empty() || t.shape[axis] == 1) return -1;
  const auto [name, factor] = split_composite(t.dim_names[axis]);
  auto it = m_bounds.find(name);
  return it == m_bounds.end() ? -1 : it->second * factor;
}
int64_t BoundedReplay::shards_of(const ProgramTensor& t, size_t axis) const {
  if (axis >= t.dim_names.size() || t.dim_names[axis].empty() || t.shape[axis] == 1) return 1;
  auto it = m_shards.find(split_composite(t.dim_names[axis]).first);
  return it == m_shards.end() ? 1 : it->second;
}
int64_t BoundedReplay::run_extent(const ProgramTensor& t, size_t axis) const {
  const int64_t b = bound_of(t, axis);
  return b > 0 ? b : t.shape[axis] / shards_of(t, axis);
}
std::pair<std::string, int64_t> BoundedReplay::split_composite(const std::string& n) {
  const size_t star = n.find('*');
  if (star == std::string::npos) return {n, 1};
  const bool lead = std::isdigit(static_cast<unsigned char>(n[0])) != 0;
  const std::string f = lead ? n.substr(0, star) : n.substr(star + 1);
  return {lead ? n.substr(star + 1) : n.substr(0, star), std::stoll(f)};
}
bool BoundedReplay::composite_bounded(const ProgramTensor& t, size_t axis) const {
  return bound_of(t, axis) > 0 && t.dim_names[axis].find('*') != std::string::npos;
}
std::vector<int64_t> BoundedReplay::run_shape(const ProgramTensor& t) const {
  std::vector<int64_t> s = t.shape;
  for (size_t a = 0; a < s.size(); ++a) s[a] = run_extent(t, a);
  return s;
}
bool BoundedReplay::any_sharded(const ProgramTensor& t) const {
  for (size_t a = 0; a < t.shape.size(); ++a) {
    if (shards_of(t, a) > 1) return true;
  }
  return false;
}
bool BoundedReplay::any_bounded(const ProgramTensor& t) const {
  for (size_t a = 0; a < t.shape.size(); ++a) {
    if (bound_of(t, a) > 0) return true;
  }
  return false;
}

// How op event `e` runs: the attributes at the bounds and the masks exactness needs; a
// bounded replay that could not be exact is an error.
BoundedOp BoundedReplay::plan_op(const Event& e) {
  BoundedOp r;
  r.attrs = e.node.attrs;
  m_defs[e.out.id] = e.out;
  const OpKind k = e.node.op;
  std::vector<const ProgramTensor*> in;
  for (int32_t id : e.node.inputs) in.push_back(&tensor(id));
  if (k == OpKind::iota) r.attrs["shape"] = run_shape(e.out);
  if (!m_shards.empty()) plan_sharded(e, r);
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
  const std::optional<float> fill = cs::info(k).bounded_fill();
  switch (k) {
    case OpKind::iota:
    case OpKind::embedding:
      if (k == OpKind::embedding && any_bounded(*in[0])) refuse("the table is bounded");
      break;
    case OpKind::matmul:
      if (last_bounded(0) || bound_of(*in[1], in[1]->shape.size() - 2) > 0) {
        r.masks.push_back({0, in[0]->shape.size() - 1, *fill});
        r.masks.push_back({1, in[1]->shape.size() - 2, *fill});
      }
      break;
    case OpKind::batch_matmul: {
      const bool tb = e.node.int_attr("transpose_b") && *e.node.int_attr("transpose_b");
      const size_t kb = tb ? 2 : 1;
      if (last_bounded(0) || bound_of(*in[1], kb) > 0) {
        r.masks.push_back({0, 2, *fill});
        r.masks.push_back({1, kb, *fill});
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
        ok = elements(in[0]->shape, a[i] + 1) == elements(e.out.shape, b[i] + 1);
      if (!ok) refuse("the reshape moves a bounded axis across others");
      break;
    }
    case OpKind::slice: {
      const int64_t axis = *e.node.int_attr("axis");
      const size_t ax = static_cast<size_t>(axis < 0 ? axis + int64_t(in[0]->shape.size()) : axis);
      const RelativeAttr* limit = nullptr;  // positions relative to a bounded dim
      const RelativeAttr* rel_start = nullptr;
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
        r.gather = BoundedGather{ax, start};
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
    case OpKind::pad:
    case OpKind::reduce: {
      // Composites: exact when the axes they pad or reduce are not bounded (the others pass
      // through their expansion's reshapes whole).
      const std::vector<bool> reduced = k == OpKind::reduce
                                            ? cs::reduced_axes(e.node, int64_t(in[0]->shape.size()))
                                            : std::vector<bool>{};
      for (size_t ax = 0; ax < in[0]->shape.size(); ++ax) {
        const bool touched = k == OpKind::reduce ? bool(reduced[ax])
                                                 : (*e.node.ints_attr("begin"))[ax] ||
                                                       (*e.node.ints_attr("end"))[ax];
        if (touched && bound_of(*in[0], ax) > 0) refuse("it pads or reduces a bounded axis");
      }
      break;
    }
    default: {
      // A reduction or row op over the last axis: exact when its padding holds ops.def's fill.
      const cs::OpClass kind = cs::info(k).kind;
      if (kind == cs::OpClass::reduction || kind == cs::OpClass::row) {
        if (!last_bounded(0)) break;
        if (!fill) refuse("it reduces over a bounded axis by its extent");
        r.masks.push_back({0, in[0]->shape.size() - 1, *fill});
        break;
      }
      if (!elementwise(k)) refuse("the op has no bounded replay");
      break;
    }
  }
  // Masks and positions need the axis' real extent as one run-time scalar: a merged axis'
  // real rows are F runs, one per block.
  for (const BoundedMask& m : r.masks) {
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

// Sharded axes (dp): shapes at this rank's rows; an op that would need another rank's rows or a
// global row index is refused.
void BoundedReplay::plan_sharded(const Event& e, BoundedOp& r) const {
  const OpKind k = e.node.op;
  std::vector<const ProgramTensor*> in;
  for (int32_t id : e.node.inputs) in.push_back(&tensor(id));
  bool touched = any_sharded(e.out);
  for (const auto* t : in) touched = touched || any_sharded(*t);
  const auto refuse = [&](const std::string& why) { fail(e, "cannot run data parallel: " + why); };
  for (const auto& rel : e.relative) {
    if (m_shards.count(rel.dim) && k != OpKind::slice)
      refuse("attribute " + rel.key + " is relative to the sharded dim '" + rel.dim + "'");
  }
  const auto axis_of = [&](const ProgramTensor& t) {
    const int64_t a = *e.node.int_attr("axis");
    return static_cast<size_t>(a < 0 ? a + int64_t(t.shape.size()) : a);
  };
  switch (k) {
    case OpKind::reshape:
    case OpKind::broadcast: {
      if (!touched) break;
      r.attrs["shape"] = run_shape(e.out);
      if (k == OpKind::broadcast) break;
      // The i-th sharded axis of the input and of the result have as many elements outside
      // them (before it), so within each outer block a rank's share is the same element range:
      // [B, T, D] -> [B*T, D] keeps a rank's rows, [T, B] -> [T*B] would not.
      std::vector<size_t> a, b;
      for (size_t i = 0; i < in[0]->shape.size(); ++i)
        if (shards_of(*in[0], i) > 1) a.push_back(i);
      for (size_t i = 0; i < e.out.shape.size(); ++i)
        if (shards_of(e.out, i) > 1) b.push_back(i);
      bool ok = a.size() == b.size();
      const auto outer = [](const std::vector<int64_t>& s, size_t to) {
        int64_t p = 1;
        for (size_t i = 0; i < to; ++i) p *= s[i];
        return p;
      };
      for (size_t i = 0; ok && i < a.size(); ++i)
        ok = outer(in[0]->shape, a[i]) == outer(e.out.shape, b[i]);
      if (!ok) refuse("the reshape moves the sharded axis across others");
      break;
    }
    case OpKind::slice: {
      const size_t ax = axis_of(*in[0]);
      bool rel = false;
      for (const auto& x : e.relative) rel = rel || m_shards.count(x.dim);
      if (shards_of(*in[0], ax) > 1) {
        if (*e.node.int_attr("start") != 0 || *e.node.int_attr("limit") != in[0]->shape[ax])
          refuse("a slice of part of the sharded axis (a row index is global)");
        r.attrs["limit"] = run_extent(*in[0], ax);
      } else if (rel) {
        refuse("a slice at a position relative to the sharded dim (a row index is global)");
      }
      break;
    }
    case OpKind::concat:
      for (const auto* t : in) {
        if (shards_of(*t, axis_of(*t)) > 1) refuse("a concat along the sharded axis");
      }
      break;
    case OpKind::embedding:
      if (any_sharded(*in[0])) refuse("the table is sharded");
      break;
    case OpKind::pad:
      for (size_t ax = 0; ax < in[0]->shape.size(); ++ax) {
        if (((*e.node.ints_attr("begin"))[ax] || (*e.node.ints_attr("end"))[ax]) &&
            shards_of(*in[0], ax) > 1)
          refuse("it pads the sharded axis");
      }
      break;
    default:
      break;
  }
}

std::string BoundedReplay::scalar_name(const std::string& dim, int64_t offset) const {
  if (offset == 0) return dim;
  return dim + (offset > 0 ? "_p" : "_m") + std::to_string(std::abs(offset));
}
size_t BoundedReplay::step_of(size_t event) const {
  for (size_t i = 0; i < m_program.steps.size(); ++i) {
    if (event < m_program.steps[i].second || i + 1 == m_program.steps.size()) return i;
  }
  return 0;
}

// Every bounded axis' extent within its bound; each step's base extent per bounded dim.
void BoundedReplay::check_extents() {
  m_base.assign(m_program.steps.size(), {});
  // Set-up runs once, at its captured shapes: nothing in it may follow a bound.
  for (size_t i = 0; i < m_program.setup; ++i) {
    const Event& e = m_program.events[i];
    std::vector<ProgramTensor> defs = e.outputs;
    if (e.kind == EventKind::weight || e.kind == EventKind::input || e.kind == EventKind::op)
      defs.push_back(e.out);
    for (const auto& t : defs) {
      for (size_t a = 0; a < t.shape.size(); ++a) {
        if (bound_of(t, a) >= 0 || shards_of(t, a) > 1)
          fail(e, std::string("a set-up value with the ") +
                      (shards_of(t, a) > 1 ? "sharded" : "bounded") + " dim '" + t.dim_names[a] +
                      "' (set-up runs once, at its captured shapes)");
      }
    }
  }
  for (size_t si = 0; si < m_program.steps.size(); ++si) {
    for (size_t i = m_program.steps[si].first; i < m_program.steps[si].second; ++i) {
      const Event& e = m_program.events[i];
      std::vector<ProgramTensor> defs;
      if (e.kind == EventKind::weight || e.kind == EventKind::input || e.kind == EventKind::op)
        defs.push_back(e.out);
      for (const auto& o : e.outputs) defs.push_back(o);
      for (const auto& t : defs) {
        for (size_t a = 0; a < t.shape.size(); ++a) {
          const std::string dim =
              a < t.dim_names.size() ? split_composite(t.dim_names[a]).first : "";
          const auto shard = dim.empty() ? m_shards.end() : m_shards.find(dim);
          if (shard != m_shards.end() && t.shape[a] % shard->second) {
            fail(e, "dim '" + t.dim_names[a] + "' has extent " + std::to_string(t.shape[a]) +
                        ", which does not split over " + std::to_string(shard->second) +
                        " data-parallel ranks");
          }
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
void BoundedReplay::check_bounded_types() {
  const auto at_bounds = [&](const ProgramTensor& t) {
    cs::TensorType tt;
    tt.dtype = t.dtype;
    for (int64_t d : run_shape(t)) tt.dims.push_back(cs::Dim::of(d));
    return tt;
  };
  cs::Graph g;
  std::map<int32_t, int32_t> pos;
  const auto add_input = [&](const ProgramTensor& t) {
    cs::Node n;
    n.id = static_cast<int32_t>(g.nodes.size());
    n.type = at_bounds(t);
    pos[t.id] = n.id;
    g.nodes.push_back(n);
  };
  for (const Event& e : m_program.events) {
    if (e.kind == EventKind::weight || e.kind == EventKind::input) add_input(e.out);
    for (const auto& o : e.outputs) add_input(o);
    if (e.kind != EventKind::op) continue;
    cs::Node n = e.node;
    n.id = static_cast<int32_t>(g.nodes.size());
    for (int32_t& x : n.inputs) x = pos.at(x);
    n.attrs = m_ops.at(e.index).attrs;
    const cs::TensorType want = at_bounds(e.out);
    if (n.op == OpKind::iota) {
      n.type = want;
      n.attrs.erase("shape");
    } else {
      try {
        n.type = cs::infer_node(g, n);
      } catch (const base::InputError& x) {
        fail(e,
             std::string(m_shards.empty() ? "at the bounds: " : "at the run shapes: ") + x.what());
      }
    }
    if (!(n.type == want)) {
      fail(e, std::string(m_shards.empty() ? "at the bounds" : "at the run shapes") +
                  " the op's type is " + cs::to_string(n.type) + ", expected " +
                  cs::to_string(want));
    }
    pos[e.out.id] = n.id;
    g.nodes.push_back(std::move(n));
    // The scalars its masks read.
    const size_t si = step_of(e.index);
    for (const BoundedMask& m : m_ops.at(e.index).masks) {
      const ProgramTensor& t = tensor(e.node.inputs[m.input]);
      const std::string& dim = t.dim_names[m.axis];
      m_scalar_offsets[dim].insert(t.shape[m.axis] - m_base[si][dim]);
    }
    if (const auto& g = m_ops.at(e.index).gather) {
      const std::string& dim = gather_dim(e);
      m_scalar_offsets[dim].insert(g->at - m_base[si][dim]);
    }
  }
}

const std::string& BoundedReplay::gather_dim(const Event& e) {
  for (const auto& rel : e.relative) {
    if (rel.key == "start") return rel.dim;
  }
  return e.relative.at(0).dim;
}

}  // namespace wallsim::torch
