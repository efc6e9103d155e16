// Shape rules of the layout ops (transpose, im2col, broadcast_to, reshape,
// slice, concat): NodeChecker (shape_rules.h).
#include <algorithm>

#include "shape_rules.h"

namespace wallsim::compiler_stub::shape_rules {

TensorType NodeChecker::transpose() const {
  const std::vector<int64_t>& perm = required_ints("perm");
  const int64_t r = rank(0);
  std::vector<bool> seen(r, false);
  bool ok = static_cast<int64_t>(perm.size()) == r;
  for (size_t k = 0; ok && k < perm.size(); ++k) {
    ok = perm[k] >= 0 && perm[k] < r && !seen[perm[k]];
    if (ok) seen[perm[k]] = true;
  }
  if (!ok) {
    fail("perm " + ints_string(perm) + " is not a permutation of the " + std::to_string(r) +
         " axes of " + to_string(dims(0)));
  }
  Dims out;
  for (int64_t p : perm) out.push_back(dims(0)[p]);
  return like(0, out);
}

std::vector<int64_t> NodeChecker::pair_attr(const std::string& key, bool required) const {
  const std::vector<int64_t>* v = m_n.ints_attr(key);
  if (!v) {
    if (required) fail("missing attribute '" + key + "'");
    return {1, 1};
  }
  if (v->size() != 2 || (*v)[0] < 1 || (*v)[1] < 1) {
    fail(key + " must be two integers >= 1, got " + ints_string(*v));
  }
  return *v;
}

TensorType NodeChecker::im2col() const {
  need_rank(0, 4, "input [N, C, H, W]");
  for (const Dim& d : dims(0)) {
    if (d.kind != Dim::Kind::fixed) fail("im2col needs static dims, got " + to_string(dims(0)));
  }
  const auto k = pair_attr("kernel", true), s = pair_attr("strides", false),
             d = pair_attr("dilations", false);
  Dims out = {dims(0)[0], dims(0)[1]};
  for (size_t a = 0; a < 2; ++a) {
    const int64_t span = d[a] * (k[a] - 1) + 1, extent = dims(0)[2 + a].size;
    if (span > extent) {
      fail("a window of " + std::to_string(span) + " exceeds the input's " +
           std::to_string(extent) + " along spatial axis " + std::to_string(a));
    }
    out.push_back(Dim::of((extent - span) / s[a] + 1));
  }
  out.push_back(Dim::of(k[0]));
  out.push_back(Dim::of(k[1]));
  return like(0, out);
}

TensorType NodeChecker::broadcast_to() const {
  const std::vector<int64_t>& shape = required_ints("shape");
  const Dims& in = dims(0);
  bool ok = shape.size() >= in.size();
  for (size_t k = 0; ok && k < in.size(); ++k) {
    const Dim& d = in[in.size() - 1 - k];
    const int64_t to = shape[shape.size() - 1 - k];
    ok = d.kind == Dim::Kind::fixed && (d.size == to || d.size == 1);
  }
  for (int64_t v : shape) ok = ok && v >= 1;
  if (!ok) fail("cannot broadcast " + to_string(in) + " to " + ints_string(shape));
  Dims out;
  for (int64_t v : shape) out.push_back(Dim::of(v));
  return like(0, out);
}

TensorType NodeChecker::reshape() const {
  const std::vector<int64_t>& shape = required_ints("shape");
  if (shape.empty()) fail("shape must have at least one dim");
  for (int64_t s : shape) {
    if (s < 1) fail("shape " + ints_string(shape) + " has a dim below 1");
  }
  const Dims& in = dims(0);
  // Bounded dims must lead and stay in place: the dims up to the last bounded one are kept.
  size_t keep = 0;
  bool unknown = false;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k].kind == Dim::Kind::bounded) keep = k + 1;
    if (in[k].kind == Dim::Kind::unknown) unknown = true;
  }
  Dims out;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k < keep) {
      if (in[k].kind == Dim::Kind::unknown || shape[k] != in[k].size) {
        fail("reshape of " + to_string(in) + " to " + ints_string(shape) +
             " must keep the leading dims up to the last bounded one in place");
      }
      out.push_back(in[k]);
    } else {
      out.push_back(Dim::of(shape[k]));
    }
  }
  if (shape.size() < keep) {
    fail("reshape of " + to_string(in) + " to " + ints_string(shape) +
         " must keep the leading dims up to the last bounded one in place");
  }
  int64_t to = 1;
  for (int64_t s : shape) to = to > kMaxElements / s ? kMaxElements + 1 : to * s;
  if (!unknown && TensorType{m_in[0]->dtype, in}.elements() != to) {
    fail("reshape of " + to_string(in) + " (" +
         std::to_string(TensorType{m_in[0]->dtype, in}.elements()) + " elements) to " +
         ints_string(shape) + " (" + std::to_string(to) + " elements)");
  }
  return like(0, out);
}

TensorType NodeChecker::slice() const {
  const int64_t axis = axis_in("axis", rank(0));
  const int64_t start = required_int("start");
  const int64_t limit = required_int("limit");
  const Dim& d = dims(0)[axis];
  if (d.kind == Dim::Kind::bounded) {
    fail("slice along bounded axis " + std::to_string(axis) + " (" + to_string(d) +
         ") is not supported");
  }
  const bool in_range =
      start >= 0 && start < limit && (d.kind == Dim::Kind::unknown || limit <= d.size);
  if (!in_range) {
    fail("slice [" + std::to_string(start) + ", " + std::to_string(limit) + ") of axis " +
         std::to_string(axis) + " (size " + to_string(d) + ") is out of range or empty");
  }
  Dims out = dims(0);
  out[axis] = Dim::of(limit - start);
  return like(0, out);
}

TensorType NodeChecker::concat() const {
  const int64_t axis = axis_in("axis", rank(0));
  Dims out = dims(0);
  for (size_t i = 1; i < m_in.size(); ++i) {
    if (rank(i) != rank(0)) {
      fail("input " + std::to_string(i) + " " + to_string(dims(i)) + " has a different rank from " +
           to_string(dims(0)));
    }
    for (int64_t k = 0; k < rank(0); ++k) {
      const Dim& d = dims(i)[k];
      if (k == axis) continue;
      auto m = merge(out[k], d);
      if (!m) {
        fail("input " + std::to_string(i) + " " + to_string(dims(i)) + " does not match " +
             to_string(dims(0)) + " in dim " + std::to_string(k));
      }
      out[k] = *m;
    }
  }
  int64_t total = 0;
  for (size_t i = 0; i < m_in.size(); ++i) {
    const Dim& d = dims(i)[axis];
    if (d.kind == Dim::Kind::bounded) {
      fail("concat along bounded dim " + to_string(d) + " of input " + std::to_string(i) +
           " is not supported");
    }
    if (d.kind == Dim::Kind::unknown) total = -1;
    if (total >= 0) total += d.size;
  }
  out[axis] = total < 0 ? Dim::unknown() : Dim::of(total);
  return like(0, out);
}

}  // namespace wallsim::compiler_stub::shape_rules
