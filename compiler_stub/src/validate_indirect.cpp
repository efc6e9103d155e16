// Shape rules of the indirect and attention ops (embedding, index_copy,
// decode_attention, attention, dynamic_update_slice): NodeChecker (shape_rules.h).
#include <algorithm>

#include "shape_rules.h"

namespace wallsim::compiler_stub::shape_rules {

TensorType NodeChecker::embedding() const {
  need_rank(0, 2, "table [V, D]");
  if (m_in[1]->dtype != isa::DType::int32) {
    fail("ids must be int32, got " + std::string(isa::name_of(m_in[1]->dtype)));
  }
  Dims out = dims(1);
  out.push_back(dims(0)[1]);
  return like(0, out);
}

TensorType NodeChecker::index_copy() const {
  need_rank(0, 2, "dst [P, D]");
  need_rank(1, 1, "ids [N]");
  need_rank(2, 2, "src [N, D]");
  if (m_in[1]->dtype != isa::DType::int32) {
    fail("ids must be int32, got " + std::string(isa::name_of(m_in[1]->dtype)));
  }
  if (m_in[2]->dtype != m_in[0]->dtype) fail("src and dst differ in dtype");
  if (!merge(dims(1)[0], dims(2)[0]) || !merge(dims(0)[1], dims(2)[1])) {
    fail("src " + to_string(dims(2)) + " must be " + to_string(Dims{dims(1)[0], dims(0)[1]}) +
         ": a row of dst per id");
  }
  return like(0, dims(0));
}

TensorType NodeChecker::decode_attention() const {
  need_rank(0, 2, "q [B, D]");
  need_rank(1, 2, "k [N, D]");
  need_rank(2, 2, "v [N, D]");
  need_rank(3, 2, "ids [B, L]");
  const int64_t heads = required_int("heads");
  if (const double* s = m_n.real_attr("scale"); s && !(std::isfinite(*s) && *s > 0)) {
    fail("scale must be a positive number");
  }
  if (m_in[3]->dtype != isa::DType::int32) {
    fail("ids must be int32, got " + std::string(isa::name_of(m_in[3]->dtype)));
  }
  if (m_in[1]->dtype != m_in[2]->dtype) fail("k and v differ in dtype");
  const Dim d = same(same(dims(0)[1], dims(1)[1], "q and k differ in width"), dims(2)[1],
                     "q and v differ in width");
  same(dims(1)[0], dims(2)[0], "k and v differ in rows");
  same(dims(0)[0], dims(3)[0], "q and ids differ in sequences");
  if (d.kind == Dim::Kind::unknown) fail("the width D must be known");
  if (heads < 1 || d.size % heads != 0) {
    fail("heads " + std::to_string(heads) + " must divide the width " + std::to_string(d.size));
  }
  if (m_in.size() == 5) {
    need_rank(4, 3, "bias [B, heads, L]");
    if (!isa::is_float(m_in[4]->dtype)) fail("bias must be a float type");
    same(dims(4)[0], dims(0)[0], "bias and q differ in sequences");
    if (dims(4)[1].size != heads) {
      fail("bias " + to_string(dims(4)) + " must have " + std::to_string(heads) +
           " heads in dim 1");
    }
    same(dims(4)[2], dims(3)[1], "bias and ids differ in keys");
  }
  return *m_in[0];
}

TensorType NodeChecker::attention() const {
  // [Lq, D], or [B, Lq, D]: B sequences, each attending to its own keys ([B, Lk, D]).
  const bool batched = rank(0) == 3;
  need_rank(0, batched ? 3 : 2, "q [Lq, D] or [B, Lq, D]");
  need_rank(1, rank(0), batched ? "k [B, Lk, D]" : "k [Lk, D]");
  need_rank(2, rank(0), batched ? "v [B, Lk, D]" : "v [Lk, D]");
  const size_t r = batched ? 1 : 0;  // the rows' dim
  const int64_t heads = required_int("heads");
  if (const double* s = m_n.real_attr("scale"); s && !(std::isfinite(*s) && *s > 0)) {
    fail("scale must be a positive number");
  }
  if (m_in[1]->dtype != m_in[2]->dtype) fail("k and v differ in dtype");
  const Dim d = same(same(dims(0)[r + 1], dims(1)[r + 1], "q and k differ in width"),
                     dims(2)[r + 1], "q and v differ in width");
  same(dims(1)[r], dims(2)[r], "k and v differ in rows");
  for (size_t i = 0; i < m_in.size(); ++i) {
    for (const Dim& x : dims(i)) {
      if (x.kind != Dim::Kind::fixed) fail("attention needs static shapes");
    }
  }
  if (heads < 1 || d.size % heads != 0) {
    fail("heads " + std::to_string(heads) + " must divide the width " + std::to_string(d.size));
  }
  const int64_t lq = dims(0)[r].size, lk = dims(1)[r].size;
  if (batched) {
    same(same(dims(0)[0], dims(1)[0], "q and k differ in sequences"), dims(2)[0],
         "q and v differ in sequences");
    if (dims(0)[0].size > 1 && lq != lk) fail("several sequences need as many queries as keys");
    if (m_n.int_attr("seq")) fail("seq is implied by [B, L, D] operands");
  }
  const int64_t* causal = m_n.int_attr("causal");
  if (causal && *causal != 0 && *causal != 1) fail("causal must be 0 or 1");
  if (causal && *causal && lq != lk) fail("causal attention needs as many queries as keys");
  if (const int64_t* seq = m_n.int_attr("seq")) {
    if (*seq < 1 || lq % *seq != 0 || lk % *seq != 0) {
      fail("seq " + std::to_string(*seq) + " must divide the " + std::to_string(lq) +
           " queries and " + std::to_string(lk) + " keys");
    }
    if (lq != lk) fail("sequences of `seq` rows need as many queries as keys");
  }
  if (m_in.size() == 4) {
    if (m_in[3]->dtype == isa::DType::int32) {
      if (batched) fail("segment ids need [L, D] operands");
      need_rank(3, 1, "segment ids [L]");
      if (lq != lk || dims(3)[0].size != lq) {
        fail("segment ids " + to_string(dims(3)) + " must be [" + std::to_string(lq) +
             "], one per query and key");
      }
    } else {
      need_rank(3, 2, "bias [Lq, Lk] (every sequence's when batched)");
      if (!isa::is_float(m_in[3]->dtype)) fail("bias must be a float type");
      if (dims(3)[0].size != lq || dims(3)[1].size != lk) {
        fail("bias " + to_string(dims(3)) + " must be [" + std::to_string(lq) + ", " +
             std::to_string(lk) + "]");
      }
    }
  }
  return *m_in[0];
}

TensorType NodeChecker::dynamic_update_slice() const {
  int64_t axis = 0;
  if (m_n.int_attr("axis")) axis = axis_in("axis", rank(0));
  const ScalarParam& pos = declared_scalar(required_text("scalar"));
  if (rank(1) != rank(0)) {
    fail("update " + to_string(dims(1)) + " must have the rank of dst " + to_string(dims(0)));
  }
  for (int64_t k = 0; k < rank(0); ++k) {
    if (k != axis && !merge(dims(0)[k], dims(1)[k])) {
      fail("update " + to_string(dims(1)) + " does not match dst " + to_string(dims(0)) +
           " in dim " + std::to_string(k));
    }
  }
  const Dim& rows = dims(1)[axis];
  const Dim& room = dims(0)[axis];
  if (rows.kind != Dim::Kind::fixed || room.kind == Dim::Kind::unknown) {
    fail("update " + to_string(dims(1)) + " and dst " + to_string(dims(0)) +
         " need a static update extent and a known dst extent along axis " + std::to_string(axis));
  }
  if (pos.max + rows.size > room.size) {
    fail("update of " + std::to_string(rows.size) + " rows at position '" + pos.name + "' (up to " +
         std::to_string(pos.max) + ") does not fit dst's " + std::to_string(room.size) +
         " rows along axis " + std::to_string(axis));
  }
  return *m_in[0];
}

TensorType NodeChecker::point_to_point() const {
  const std::string& comm = required_text("comm");
  if (comm.empty()) fail("attribute 'comm' must name a communicator");
  const int64_t ranks = required_int("ranks");
  if (ranks < 2 || ranks > 65536) {
    fail("attribute 'ranks' must be 2 to 65536, not " + std::to_string(ranks));
  }
  const int64_t peer = required_int("peer");
  if (peer < 0 || peer >= ranks) {
    fail("attribute 'peer' must be a rank of the " + std::to_string(ranks) + ", not " +
         std::to_string(peer));
  }
  const Dims& shape = m_n.op == OpKind::recv ? m_n.type.dims : dims(0);
  for (const Dim& d : shape) {
    if (d.kind != Dim::Kind::fixed) {
      fail(std::string(name_of(m_n.op)) + " needs a static shape, not " + to_string(shape));
    }
  }
  if (m_n.op == OpKind::recv) return m_n.type;
  TensorType token;
  token.dtype = isa::DType::int32;
  token.dims = {Dim::of(1)};
  return token;
}

TensorType NodeChecker::collective() const {
  const std::string& comm = required_text("comm");
  if (comm.empty()) fail("attribute 'comm' must name a communicator");
  const int64_t ranks = required_int("ranks");
  if (ranks < 1 || ranks > 65536) {
    fail("attribute 'ranks' must be 1 to 65536, not " + std::to_string(ranks));
  }
  need_rank_at_least(0, 1);
  for (const Dim& d : dims(0)) {
    if (d.kind != Dim::Kind::fixed) {
      fail("a collective needs a static shape, not " + to_string(dims(0)));
    }
  }
  TensorType t = *m_in[0];
  if (m_n.op == OpKind::all_gather) {
    t.dims[0] = Dim::of(t.dims[0].size * ranks);
  } else if (m_n.op == OpKind::reduce_scatter) {
    if (t.dims[0].size % ranks != 0) {
      fail("reduce_scatter of " + std::to_string(t.dims[0].size) + " rows does not split over " +
           std::to_string(ranks) + " ranks");
    }
    t.dims[0] = Dim::of(t.dims[0].size / ranks);
  }
  return t;
}

}  // namespace wallsim::compiler_stub::shape_rules
