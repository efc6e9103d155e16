// The shape rules of the composite ops, pad and reduce (shape_rules.h; expanded by
// composites.cpp).
#include "shape_rules.h"
#include "wallsim/compiler_stub/composites.h"

namespace wallsim::compiler_stub::shape_rules {

TensorType NodeChecker::pad() const {
  const auto& begin = required_ints("begin");
  const auto& end = required_ints("end");
  if (static_cast<int64_t>(begin.size()) != rank(0) ||
      static_cast<int64_t>(end.size()) != rank(0)) {
    fail("begin " + ints_string(begin) + " and end " + ints_string(end) + " must have one entry" +
         " per axis of " + to_string(dims(0)));
  }
  Dims out = dims(0);
  for (size_t k = 0; k < out.size(); ++k) {
    if (begin[k] < 0 || end[k] < 0)
      fail("negative padding " + std::to_string(begin[k]) + ", " + std::to_string(end[k]) +
           " of axis " + std::to_string(k));
    if (!begin[k] && !end[k]) continue;
    if (out[k].kind != Dim::Kind::fixed) {
      fail("padding along the " +
           std::string(out[k].kind == Dim::Kind::bounded ? "bounded" : "unknown") + " dim " +
           to_string(out[k]) + " is not supported");
    }
    out[k] = Dim::of(out[k].size + begin[k] + end[k]);
  }
  return like(0, out);
}

TensorType NodeChecker::reduce() const {
  const std::string& r = required_text("reduction");
  if (r != "sum" && r != "max" && r != "mean") {
    fail("reduction '" + r + "' is not one of sum, max, mean");
  }
  const int64_t* keep = m_n.int_attr("keepdim");
  if (keep && *keep != 0 && *keep != 1) fail("keepdim must be 0 or 1");
  need_rank_at_least(0, 1);
  std::vector<bool> seen(static_cast<size_t>(rank(0)), false);
  if (const auto* axes = m_n.ints_attr("axes")) {
    for (int64_t a : *axes) {
      const int64_t k = a < 0 ? a + rank(0) : a;
      if (k < 0 || k >= rank(0)) {
        fail("axis " + std::to_string(a) + " is out of range for " + to_string(dims(0)));
      }
      if (seen[k]) fail("axis " + std::to_string(a) + " is given twice in " + ints_string(*axes));
      seen[k] = true;
    }
  }
  const std::vector<bool> reduced = reduced_axes(m_n, rank(0));
  Dims out;
  for (int64_t k = 0; k < rank(0); ++k) {
    if (!reduced[k]) {
      out.push_back(dims(0)[k]);
    } else if (keep && *keep) {
      out.push_back(Dim::of(1));
    }
  }
  if (out.empty()) out.push_back(Dim::of(1));
  return like(0, out);
}

}  // namespace wallsim::compiler_stub::shape_rules
