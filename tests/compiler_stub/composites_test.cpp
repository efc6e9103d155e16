// The composite ops pad and reduce (composites.h): shape rules and their errors, the expansion
// (ids kept, the last-axis pad of a 4-D value made on its 2-D view), and the reference's values
// against loops over the elements.
#include "wallsim/compiler_stub/composites.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "graph_test_util.h"
#include "wallsim/compiler_stub/reference.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

using test::error_of;
using test::make_graph;

// x [2, 3, 4, 5] (values 0 ..), the node under test id 1.
Graph with(const std::string& node) {
  Graph g = make_graph(std::string(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32",
                                     "shape": [2, 3, 4, 5]}, )") +
                           node + "]",
                       "[1]");
  infer_types(g);
  return g;
}

HostTensor x_values() {
  HostTensor t{{2, 3, 4, 5}, std::vector<float>(120)};
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(i) - 40.0f;
  return t;
}

std::vector<Dim> dims(std::initializer_list<int64_t> s) {
  std::vector<Dim> d;
  for (int64_t v : s) d.push_back(Dim::of(v));
  return d;
}

TEST(Composites, ShapeRules) {
  EXPECT_EQ(with(R"({"id": 1, "op": "pad", "inputs": [0], "begin": [0, 0, 1, 2],
                     "end": [0, 1, 1, 0], "value": -1.5})")
                .nodes[1]
                .type.dims,
            dims({2, 4, 6, 7}));
  EXPECT_EQ(with(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "sum",
                     "axes": [1, -1], "keepdim": 1})")
                .nodes[1]
                .type.dims,
            dims({2, 1, 4, 1}));
  EXPECT_EQ(with(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "max",
                     "axes": [0, 2]})")
                .nodes[1]
                .type.dims,
            dims({3, 5}));
  EXPECT_EQ(
      with(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "mean"})").nodes[1].type.dims,
      dims({1}));
}

TEST(Composites, ShapeErrors) {
  auto err = [](const std::string& node) { return error_of([&] { with(node); }); };
  EXPECT_NE(err(R"({"id": 1, "op": "pad", "inputs": [0], "begin": [1, 1], "end": [1, 1]})")
                .find("one entry per axis"),
            std::string::npos);
  EXPECT_NE(err(R"({"id": 1, "op": "pad", "inputs": [0], "begin": [0, 0, -1, 0],
                    "end": [0, 0, 0, 0]})")
                .find("negative padding"),
            std::string::npos);
  EXPECT_NE(err(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "min"})")
                .find("not one of sum, max, mean"),
            std::string::npos);
  EXPECT_NE(err(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "sum", "axes": [4]})")
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(err(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "sum",
                    "axes": [1, -3]})")
                .find("given twice"),
            std::string::npos);
}

// The expansion keeps the composite's id on its result and builds from primitive ops alone; a
// pad along the last axis of a 4-D value concatenates [rows, W] views (one row per N C H).
TEST(Composites, ExpansionKeepsIdsAndPadsTheLastAxisOnRows) {
  const Graph g = with(R"({"id": 1, "op": "pad", "inputs": [0], "begin": [0, 0, 0, 1],
                           "end": [0, 0, 0, 2]})");
  std::vector<std::pair<int32_t, std::vector<int32_t>>> ids;
  const Graph e = expand_composites(g, &ids);
  EXPECT_FALSE(has_composites(e));
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0].first, 1);
  EXPECT_EQ(ids[0].second.back(), 1);
  EXPECT_EQ(e.nodes.back().id, 1);
  EXPECT_EQ(e.nodes.back().type, g.nodes[1].type);
  const Node* cat = nullptr;
  for (const Node& n : e.nodes) {
    if (n.op == OpKind::concat) cat = &n;
  }
  ASSERT_NE(cat, nullptr);
  EXPECT_EQ(cat->type.dims, dims({24, 8}));
  EXPECT_EQ(*cat->int_attr("axis"), 1);
}

// Element (n, c, h, w) of a padded [2, 3, 4, 5].
float padded(const HostTensor& x, const std::vector<int64_t>& b, int64_t n, int64_t c, int64_t h,
             int64_t w, float value) {
  n -= b[0], c -= b[1], h -= b[2], w -= b[3];
  if (n < 0 || n >= 2 || c < 0 || c >= 3 || h < 0 || h >= 4 || w < 0 || w >= 5) return value;
  return x.data[((n * 3 + c) * 4 + h) * 5 + w];
}

TEST(Composites, ReferencePadsEveryAxis) {
  const Graph g = with(R"({"id": 1, "op": "pad", "inputs": [0], "begin": [1, 0, 2, 1],
                           "end": [0, 1, 1, 2], "value": 7})");
  const HostTensor x = x_values();
  const HostTensor out = evaluate(g, {{"x", x}}, {}).at(1);
  ASSERT_EQ(out.shape, (std::vector<int64_t>{3, 4, 7, 8}));
  size_t i = 0;
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t h = 0; h < 7; ++h)
        for (int64_t w = 0; w < 8; ++w, ++i)
          ASSERT_EQ(out.data[i], padded(x, {1, 0, 2, 1}, n, c, h, w, 7.0f)) << i;
}

TEST(Composites, ReferenceReducesOverAxes) {
  const HostTensor x = x_values();
  const Graph g = with(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "sum",
                           "axes": [1, 3], "keepdim": 1})");
  const HostTensor sum = evaluate(g, {{"x", x}}, {}).at(1);
  ASSERT_EQ(sum.shape, (std::vector<int64_t>{2, 1, 4, 1}));
  const Graph gm = with(R"({"id": 1, "op": "reduce", "inputs": [0], "reduction": "max",
                            "axes": [0, 2]})");
  const HostTensor max = evaluate(gm, {{"x", x}}, {}).at(1);
  ASSERT_EQ(max.shape, (std::vector<int64_t>{3, 5}));
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t h = 0; h < 4; ++h) {
      float want = 0;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t w = 0; w < 5; ++w) want += x.data[((n * 3 + c) * 4 + h) * 5 + w];
      EXPECT_FLOAT_EQ(sum.data[n * 4 + h], want);
    }
  }
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t w = 0; w < 5; ++w) {
      float want = -1e30f;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t h = 0; h < 4; ++h)
          want = std::max(want, x.data[((n * 3 + c) * 4 + h) * 5 + w]);
      EXPECT_FLOAT_EQ(max.data[c * 5 + w], want);
    }
  }
}

}  // namespace
}  // namespace wallsim::compiler_stub
