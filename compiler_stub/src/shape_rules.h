// The shape rules of validation (validate.h): NodeChecker checks one node and infers its output
// type. Its rules live by what they validate: validate.cpp (attributes, element-wise ops,
// matmuls, norms), validate_layout.cpp (layout ops), validate_indirect.cpp (indirect and
// attention ops).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/graph.h"

namespace wallsim::compiler_stub::shape_rules {

using base::InputError;
using Dims = std::vector<Dim>;

inline constexpr int64_t kMaxElements = int64_t{1} << 40;

inline bool is_one(const Dim& d) { return d.kind == Dim::Kind::fixed && d.size == 1; }

// Two dims that must describe the same extent, merged (a bounded dim wins over a static one at
// its max, any dim over an unknown one); nullopt when they cannot.
inline std::optional<Dim> merge(const Dim& a, const Dim& b) {
  if (a.kind == Dim::Kind::unknown) return b;
  if (b.kind == Dim::Kind::unknown) return a;
  if (a.size != b.size) return std::nullopt;
  if (a.kind == Dim::Kind::bounded && b.kind == Dim::Kind::bounded) {
    return a.scalar == b.scalar ? std::optional<Dim>(a) : std::nullopt;
  }
  return a.kind == Dim::Kind::bounded ? a : b;
}

inline std::optional<Dim> broadcast(const Dim& a, const Dim& b) {
  if (is_one(a)) return b;
  if (is_one(b)) return a;
  return merge(a, b);
}

inline std::string ints_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

inline const char* const kInputNames[] = {"first", "second", "third"};

// Checks and infers one node; `fail` throws with the node's path.
class NodeChecker {
 public:
  NodeChecker(const Graph& g, const Node& n, std::vector<const TensorType*> in, std::string path)
      : m_g(g), m_n(n), m_in(std::move(in)), m_path(std::move(path)) {}

  [[noreturn]] void fail(const std::string& problem) const { throw InputError(m_path, problem); }

  TensorType infer();

 private:
  const Dims& dims(size_t i) const { return m_in[i]->dims; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(m_in[i]->dims.size()); }
  TensorType like(size_t i, Dims d) const { return {m_in[i]->dtype, std::move(d)}; }

  void check_attrs() const;
  int64_t required_int(const std::string& key) const;
  double required_real(const std::string& key) const;
  const std::string& required_text(const std::string& key) const;
  const std::vector<int64_t>& required_ints(const std::string& key) const;
  const ScalarParam& declared_scalar(const std::string& name) const;
  int64_t axis_in(const std::string& key, int64_t r) const;
  void need_rank_at_least(size_t i, int64_t r) const;
  void need_rank(size_t i, int64_t r, const char* what) const;
  Dim same(const Dim& a, const Dim& b, const std::string& what) const;
  TensorType declared() const;
  Dims broadcast_all(std::initializer_list<size_t> which) const;
  TensorType matmul() const;
  TensorType batch_matmul() const;
  TensorType bias_add() const;
  TensorType norm() const;
  TensorType compare() const;
  TensorType transpose() const;
  // Two ints per spatial axis (kernel), or 1s when absent (strides, dilations).
  std::vector<int64_t> pair_attr(const std::string& key, bool required) const;
  TensorType im2col() const;
  TensorType broadcast_to() const;
  TensorType reshape() const;
  TensorType slice() const;
  TensorType concat() const;
  TensorType embedding() const;
  // index_copy(dst [P, D], ids [N] int32, src [N, D]) -> dst's type.
  TensorType index_copy() const;
  // decode_attention(q [B, D], k [N, D], v [N, D], ids [B, L] int32, bias [B, heads, L]?)
  // -> q's type.
  TensorType decode_attention() const;
  // attention(q [Lq, D], k [Lk, D], v [Lk, D], mask?) -> q's type. The mask is int32 segment
  // ids [L] (a token attends only to its own segment; Lq = Lk = L) or a float bias [Lq, Lk].
  TensorType attention() const;
  TensorType dynamic_update_slice() const;
  // all_reduce, all_gather, reduce_scatter (validate_indirect.cpp): a communicator `comm` of
  // `ranks` ranks; the gather and scatter along axis 0, of fixed size.
  TensorType collective() const;
  // send, recv (validate_indirect.cpp): `comm`, `ranks` and a `peer` rank of it; a send's
  // value is its token, int32[1] (a recv declares its type).
  TensorType point_to_point() const;
  // The composites (validate_composite.cpp): pad(x) by `begin`, `end` per axis, a fixed dim
  // wherever it pads; reduce(x) over `axes` (distinct, in range) by `reduction`.
  TensorType pad() const;
  TensorType reduce() const;

  const Graph& m_g;
  const Node& m_n;
  std::vector<const TensorType*> m_in;
  std::string m_path;
};

}  // namespace wallsim::compiler_stub::shape_rules
