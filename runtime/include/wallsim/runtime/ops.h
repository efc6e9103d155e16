// The Tensor API's ops as free functions, one per compiler op (compiler_stub/ops.def), so
// workload code reads like model code: `y = gelu(bias_add(matmul(x, w1), b1))`.
#pragma once

#include <string>
#include <vector>

#include "wallsim/runtime/session.h"

namespace wallsim::runtime {

using compiler_stub::OpKind;

inline Tensor unary(OpKind k, const Tensor& x) { return x.session().op(k, {x}); }
inline Tensor binary(OpKind k, const Tensor& a, const Tensor& b) {
  return a.session().op(k, {a, b});
}

inline Tensor matmul(const Tensor& a, const Tensor& b) { return binary(OpKind::matmul, a, b); }
inline Tensor batch_matmul(const Tensor& a, const Tensor& b, bool transpose_b = false) {
  Attrs attrs;
  if (transpose_b) attrs["transpose_b"] = int64_t{1};
  return a.session().op(OpKind::batch_matmul, {a, b}, attrs);
}
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(OpKind::add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(OpKind::sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpKind::mul, a, b); }
inline Tensor bias_add(const Tensor& a, const Tensor& b) { return binary(OpKind::bias_add, a, b); }
inline Tensor relu(const Tensor& x) { return unary(OpKind::relu, x); }
inline Tensor gelu(const Tensor& x) { return unary(OpKind::gelu, x); }
inline Tensor silu(const Tensor& x) { return unary(OpKind::silu, x); }
inline Tensor exp(const Tensor& x) { return unary(OpKind::exp, x); }
inline Tensor softmax(const Tensor& x) { return unary(OpKind::softmax, x); }
inline Tensor tanh(const Tensor& x) { return unary(OpKind::tanh, x); }
inline Tensor reduce_sum(const Tensor& x) { return unary(OpKind::reduce_sum, x); }
inline Tensor scale(const Tensor& x, double value) {
  return x.session().op(OpKind::scale, {x}, {{"value", value}});
}
inline Tensor layernorm(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  return x.session().op(OpKind::layernorm, {x, gamma, beta});
}
inline Tensor rmsnorm(const Tensor& x, const Tensor& gamma) {
  return x.session().op(OpKind::rmsnorm, {x, gamma});
}
inline Tensor reshape(const Tensor& x, std::vector<int64_t> shape) {
  return x.session().op(OpKind::reshape, {x}, {{"shape", std::move(shape)}});
}
inline Tensor transpose(const Tensor& x, std::vector<int64_t> perm) {
  return x.session().op(OpKind::transpose, {x}, {{"perm", std::move(perm)}});
}
inline Tensor compare(const Tensor& a, const Tensor& b, const std::string& cmp) {
  return a.session().op(OpKind::compare, {a, b}, {{"cmp", cmp}});
}
inline Tensor select(const Tensor& cond, const Tensor& on_true, const Tensor& on_false) {
  return cond.session().op(OpKind::select, {cond, on_true, on_false});
}
inline Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t limit) {
  return x.session().op(OpKind::slice, {x}, {{"axis", axis}, {"start", start}, {"limit", limit}});
}
inline Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  return xs.at(0).session().op(OpKind::concat, xs, {{"axis", axis}});
}
inline Tensor embedding(const Tensor& table, const Tensor& ids) {
  return binary(OpKind::embedding, table, ids);
}
// dst[ids[i], :] = src[i, :], in place (dst's storage is updated; the result aliases it).
inline Tensor index_copy(const Tensor& dst, const Tensor& ids, const Tensor& src) {
  return dst.session().op(OpKind::index_copy, {dst, ids, src});
}

// Single-query attention per sequence (a decode step): q [B, D] against rows ids[b, :] of the
// key and value pools k, v [N, D], `heads` heads, softmax(q.k / sqrt(D / heads) + bias).
inline Tensor decode_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& ids,
                               const Tensor* bias, int64_t heads) {
  std::vector<Tensor> in = {q, k, v, ids};
  if (bias) in.push_back(*bias);
  return q.session().op(OpKind::decode_attention, in, {{"heads", heads}});
}

// Fused multi-head attention (prefill, packed sequences): q [Lq, D], k, v [Lk, D], `heads` heads,
// softmax(q.k / sqrt(D / heads) + mask) . v, rows in sequences of `seq` (0: one sequence),
// `causal`; `mask` (optional): int32 segment ids [L] (block-diagonal) or a float bias [Lq, Lk].
inline Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                        int64_t heads, bool causal, int64_t seq = 0) {
  std::vector<Tensor> in = {q, k, v};
  if (mask) in.push_back(*mask);
  Attrs attrs = {{"heads", heads}, {"causal", int64_t{causal ? 1 : 0}}};
  if (seq > 0) attrs["seq"] = seq;
  return q.session().op(OpKind::attention, in, attrs);
}

// Collectives over this rank's communicator `comm` ("tp", "dp", "pp", "world"; the Session's
// RankContext): in a group of one rank (or none) the value itself, with no op.
inline Tensor collective(OpKind k, const Tensor& x, const std::string& comm) {
  const int64_t ranks = x.session().rank().comm_size(comm);
  if (ranks == 1) return x;
  return x.session().op(k, {x}, {{"comm", comm}, {"ranks", ranks}});
}
// The sum over the ranks.
inline Tensor all_reduce(const Tensor& x, const std::string& comm) {
  return collective(OpKind::all_reduce, x, comm);
}
// Every rank's x joined along axis 0, in rank order.
inline Tensor all_gather(const Tensor& x, const std::string& comm) {
  return collective(OpKind::all_gather, x, comm);
}
// This rank's block (along axis 0) of the sum over the ranks.
inline Tensor reduce_scatter(const Tensor& x, const std::string& comm) {
  return collective(OpKind::reduce_scatter, x, comm);
}

// Point to point over communicator `comm` (pipeline parallel: "pp"), `peer` a rank of it. The
// send blocks until the peer's matching recv (the next one on the same route) arrives; its
// result is a token nothing needs to hold (the runtime keeps every send and recv).
inline Tensor send(const Tensor& x, const std::string& comm, int64_t peer) {
  const int64_t ranks = x.session().rank().comm_size(comm);
  return x.session().op(OpKind::send, {x}, {{"comm", comm}, {"ranks", ranks}, {"peer", peer}});
}
// The value the peer's matching send sent, declared `shape` and `dtype`.
inline Tensor recv(Session& s, std::vector<int64_t> shape, isa::DType dtype,
                   const std::string& comm, int64_t peer) {
  const int64_t ranks = s.rank().comm_size(comm);
  return s.op(OpKind::recv, {},
              {{"shape", std::move(shape)}, {"comm", comm}, {"ranks", ranks}, {"peer", peer}},
              dtype);
}

}  // namespace wallsim::runtime
