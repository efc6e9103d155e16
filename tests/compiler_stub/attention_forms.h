// Attention spelt out in graph ops, in the forms front ends emit (fuse_attention.cpp
// recognises them): the compiler tests' shared builder of such graphs.
#pragma once

#include <string>
#include <vector>

#include "graph_test_util.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub::test {

struct AttentionForm {
  // "rows": q, k, v [B L, D] (a hand-written graph: reshape [L, H, dh] and transpose when B is
  // 1, else [B, L, H, dh] and 3-D batches); "onnx": q, k, v [B, L, D], 4-D heads reshaped to
  // [B H, ..] around each batch_matmul, as ONNX import emits MatMul.
  std::string layout = "rows";
  int64_t B = 1, L = 256, D = 128, H = 2;
  std::string dtype = "fp32";
  // "none"; "causal_add": + (-1e9) x (key > query) from iota and compare; "causal_select":
  // select(key <= query, S, affine(iota, 0, -1e30)); "bias": + a data input [1, 1, L, L];
  // negative forms: "bias_then_scale" (a scale after the bias), "weak" (+ -1e4 x mask),
  // "shifted" (key >= query masked: not causal).
  std::string mask = "causal_add";
  bool scale_query = false;  // the scale on q before the scores, not on the scores
  bool transpose_b = false;  // scores by batch_matmul transpose_b, K not transposed
  bool scores_out = false;   // the probabilities are a graph output too
};

inline Graph attention_graph(const AttentionForm& f) {
  const int64_t dh = f.D / f.H, B = f.B, L = f.L, H = f.H, D = f.D;
  std::string nodes = "[";
  int next = 0;
  auto list = [](std::vector<int64_t> v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  auto add = [&](const std::string& body) {
    const int id = next++;
    nodes += std::string(id ? ", " : "") + "{\"id\": " + std::to_string(id) + ", " + body + "}";
    return id;
  };
  auto op = [&](const std::string& name, std::vector<int64_t> in, const std::string& attrs = "") {
    return add("\"op\": \"" + name + "\", \"inputs\": " + list(in) + attrs);
  };
  auto reshape = [&](int x, std::vector<int64_t> s) {
    return op("reshape", {x}, ", \"shape\": " + list(s));
  };
  auto transpose = [&](int x, std::vector<int64_t> p) {
    return op("transpose", {x}, ", \"perm\": " + list(p));
  };
  const bool rows = f.layout == "rows";
  const std::vector<int64_t> shape =
      rows ? std::vector<int64_t>{B * L, D} : std::vector<int64_t>{B, L, D};
  auto input = [&](const std::string& name, const std::string& dt, std::vector<int64_t> s) {
    return add("\"op\": \"input\", \"name\": \"" + name + "\", \"dtype\": \"" + dt +
               "\", \"shape\": " + list(s));
  };
  const int xq = input("q", f.dtype, shape), k = input("k", f.dtype, shape),
            v = input("v", f.dtype, shape);
  const int bias =
      f.mask == "bias" || f.mask == "bias_then_scale"
          ? input("bias", f.dtype,
                  rows ? std::vector<int64_t>{1, L, L} : std::vector<int64_t>{1, 1, L, L})
          : -1;
  const int q = op("relu", {xq});  // on chip
  // Heads: [B H, L, dh], or [B H, dh, L] when transposed.
  auto heads = [&](int x, bool transposed) {
    if (rows && B == 1) {
      const int r = reshape(x, {L, H, dh});
      return transpose(r,
                       transposed ? std::vector<int64_t>{1, 2, 0} : std::vector<int64_t>{1, 0, 2});
    }
    const int r = reshape(x, {B, L, H, dh});
    const int t = transpose(
        r, transposed ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3});
    return reshape(
        t, transposed ? std::vector<int64_t>{B * H, dh, L} : std::vector<int64_t>{B * H, L, dh});
  };
  const double scale = 1.0 / std::sqrt(double(dh));
  int qh = heads(q, false);
  if (f.scale_query) qh = op("scale", {qh}, ", \"value\": " + std::to_string(scale));
  const int kh = heads(k, !f.transpose_b);
  int s = op("batch_matmul", {qh, kh}, f.transpose_b ? ", \"transpose_b\": 1" : "");
  if (!rows) s = reshape(s, {B, H, L, L});
  if (!f.scale_query && f.mask != "bias_then_scale") {
    s = op("scale", {s}, ", \"value\": " + std::to_string(scale));
  }
  auto iota = [&](int axis) {
    return add("\"op\": \"iota\", \"dtype\": \"int32\", \"shape\": " + list({L, L}) +
               ", \"axis\": " + std::to_string(axis));
  };
  if (f.mask == "causal_add" || f.mask == "weak" || f.mask == "shifted") {
    const int row = iota(0), col = iota(1);
    const int fut =
        op("compare", {col, row}, f.mask == "shifted" ? ", \"cmp\": \"ge\"" : ", \"cmp\": \"gt\"");
    const int m =
        op("scale", {fut}, f.mask == "weak" ? ", \"value\": -10000.0" : ", \"value\": -1e9");
    s = op("add", {s, m});
  } else if (f.mask == "causal_select") {
    const int row = iota(0), col = iota(1);
    const int keep = op("compare", {row, col}, ", \"cmp\": \"ge\"");
    const int fill = op("affine", {row}, ", \"value\": 0.0, \"offset\": -1e30");
    s = op("select", {keep, s, fill});
  } else if (bias >= 0) {
    s = op("add", {s, bias});
    if (f.mask == "bias_then_scale") s = op("scale", {s}, ", \"value\": " + std::to_string(scale));
  }
  int p = op("softmax", {s});
  const int probs = p;
  if (!rows) p = reshape(p, {B * H, L, L});
  const int vh = heads(v, false);
  int o = op("batch_matmul", {p, vh});
  if (rows && B == 1) {
    o = reshape(transpose(o, {1, 0, 2}), {L, D});
  } else {
    o = reshape(transpose(reshape(o, {B, H, L, dh}), {0, 2, 1, 3}), shape);
  }
  nodes += "]";
  std::string outs =
      "[" + std::to_string(o) + (f.scores_out ? ", " + std::to_string(probs) : "") + "]";
  Graph g = make_graph(nodes, outs);
  infer_types(g);
  return g;
}

}  // namespace wallsim::compiler_stub::test
