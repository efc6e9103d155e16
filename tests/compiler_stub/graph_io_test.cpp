// Graph files: strict reading with JSON paths, exact round trips, file errors naming the file.
#include "wallsim/compiler_stub/graph_io.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "graph_test_util.h"
#include "wallsim/compiler_stub/lower.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

using base::Json;
using test::error_of;
using test::make_graph;

// Canonical form: every kind of dim and attribute, an explicit dtype, both roles.
const char* const kCanonical = R"({
  "format": "wallsim-graph", "version": 1, "name": "mlp",
  "scalars": [{"name": "len", "min": 1, "max": 512}],
  "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "bf16", "shape": [{"max": 512, "scalar": "len"}, 768], "role": "input"},
    {"id": 1, "op": "input", "name": "w1", "dtype": "bf16", "shape": [768, 3072], "role": "weight"},
    {"id": 2, "op": "matmul", "inputs": [0, 1], "name": "fc1", "dtype": "fp32"},
    {"id": 3, "op": "gelu", "inputs": [2]},
    {"id": 4, "op": "iota", "dtype": "int32", "shape": [512, 512], "axis": 1},
    {"id": 5, "op": "compare", "inputs": [4], "cmp": "lt", "scalar": "len"},
    {"id": 6, "op": "scale", "inputs": [3], "value": 0.125},
    {"id": 7, "op": "transpose", "inputs": [6], "output_name": "y", "perm": [1, 0]},
    {"id": 8, "op": "input", "name": "u", "dtype": "fp32", "shape": ["?", 4], "role": "input"}
  ],
  "outputs": [7, 5]
})";

TEST(GraphIo, ReadsEveryField) {
  Graph g = graph_from_json(Json::parse(kCanonical));
  EXPECT_EQ(g.name, "mlp");
  ASSERT_EQ(g.scalars.size(), 1u);
  EXPECT_EQ(g.scalars[0].name, "len");
  EXPECT_EQ(g.scalars[0].min, 1);
  EXPECT_EQ(g.scalars[0].max, 512);
  ASSERT_EQ(g.nodes.size(), 9u);
  const Node& x = g.nodes[0];
  EXPECT_EQ(x.op, OpKind::input);
  EXPECT_EQ(x.type.dtype, isa::DType::bf16);
  EXPECT_EQ(x.type.dims[0], Dim::bounded(512, "len"));
  EXPECT_EQ(x.type.dims[1], Dim::of(768));
  EXPECT_EQ(x.role, InputRole::input);
  EXPECT_TRUE(x.attrs.empty());
  EXPECT_EQ(g.nodes[1].role, InputRole::weight);
  EXPECT_EQ(g.nodes[2].inputs, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(g.nodes[2].dtype, isa::DType::fp32);
  EXPECT_FALSE(g.nodes[3].dtype.has_value());
  EXPECT_EQ(g.nodes[4].type.dtype, isa::DType::int32);
  ASSERT_NE(g.nodes[4].int_attr("axis"), nullptr);
  EXPECT_EQ(*g.nodes[4].int_attr("axis"), 1);
  EXPECT_EQ(g.nodes[4].attrs.size(), 1u);  // shape and dtype are the type, not attributes
  EXPECT_EQ(*g.nodes[5].text_attr("cmp"), "lt");
  EXPECT_EQ(*g.nodes[5].text_attr("scalar"), "len");
  EXPECT_EQ(*g.nodes[6].real_attr("value"), 0.125);
  EXPECT_EQ(*g.nodes[7].ints_attr("perm"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(g.nodes[7].output_name, "y");
  EXPECT_EQ(value_name(g, 7), "y");
  EXPECT_EQ(value_name(g, 6), "v6");
  EXPECT_EQ(g.nodes[8].type.dims[0], Dim::unknown());
  EXPECT_EQ(g.outputs, (std::vector<int32_t>{7, 5}));
}

TEST(GraphIo, RoundTripsExactly) {
  Json j = Json::parse(kCanonical);
  Graph g = graph_from_json(j);
  EXPECT_EQ(to_json(g), j);
  EXPECT_EQ(to_json(graph_from_json(to_json(g))), j);
}

TEST(GraphIo, InferredTypesAreNotWritten) {
  Json j = Json::parse(kCanonical);
  Graph g = graph_from_json(j);
  infer_types(g);
  EXPECT_EQ(g.nodes[3].type.dtype, isa::DType::fp32);  // from fc1's explicit dtype
  EXPECT_EQ(to_json(g), j);
}

TEST(GraphIo, IntegerValuesOfRealAttributesAreReal) {
  Graph g = make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [2]},
                           {"id": 1, "op": "scale", "inputs": [0], "value": 2},
                           {"id": 2, "op": "layernorm", "inputs": [0, 0, 0], "eps": 0}])",
                       "[1]");
  ASSERT_NE(g.nodes[1].real_attr("value"), nullptr);
  EXPECT_EQ(*g.nodes[1].real_attr("value"), 2.0);
  EXPECT_EQ(norm_eps(g.nodes[2]), 0.0);
  EXPECT_EQ(g.nodes[0].role, InputRole::input);  // the default
}

TEST(GraphIo, CommentsAreIgnored) {
  Json j = Json::parse(kCanonical);
  j["_doc"] = "a comment";
  j["nodes"][3]["_why"] = {1, 2};
  j["nodes"][0]["shape"][0]["_note"] = "bounded";
  EXPECT_EQ(to_json(graph_from_json(j)), Json::parse(kCanonical));
}

std::string read_error(const std::string& text) {
  return error_of([&] { graph_from_json(Json::parse(text)); });
}

std::string node_error(const std::string& node) {
  return error_of([&] {
    make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [2, 3]}, )" +
                   node + "]",
               "[1]");
  });
}

TEST(GraphIo, RejectsUnknownKeysWithTheirPath) {
  EXPECT_EQ(node_error(R"({"id": 1, "op": "slice", "inputs": [0], "axsi": 1})"),
            "nodes[1].axsi: unknown key");
  // An attribute of another op is unknown too.
  EXPECT_EQ(node_error(R"({"id": 1, "op": "relu", "inputs": [0], "perm": [0]})"),
            "nodes[1].perm: unknown key");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "relu", "inputs": [0], "role": "weight"})"),
            "nodes[1].role: unknown key");
  EXPECT_EQ(read_error(R"({"format": "wallsim-graph", "version": 1, "name": "g", "nodes": [],
                           "outputs": [], "extra": 1})"),
            "(root).extra: unknown key");
  EXPECT_EQ(read_error(R"({"format": "wallsim-graph", "version": 1, "name": "g", "nodes": [],
                           "outputs": [], "scalars": [{"name": "n", "min": 0, "max": 1, "x": 0}]})"),
            "scalars[0].x: unknown key");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "input", "name": "y", "dtype": "fp32",
                           "shape": [{"max": 4, "scalar": "n", "min": 1}]})"),
            "nodes[1].shape[0].min: unknown key");
}

TEST(GraphIo, RejectsMalformedValues) {
  EXPECT_EQ(node_error(R"({"id": 1, "op": "frobnicate", "inputs": [0]})"),
            "nodes[1].op: unknown op \"frobnicate\"");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "relu", "inputs": [0], "dtype": "fp8"})"),
            "nodes[1].dtype: unknown dtype \"fp8\"");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "slice", "inputs": [0], "axis": 1.5})"),
            "nodes[1].axis: expected an integer in [-1099511627776, 1099511627776], got 1.5");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "scale", "inputs": [0], "value": "two"})"),
            "nodes[1].value: expected a number, got \"two\"");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "compare", "inputs": [0], "cmp": 3})"),
            "nodes[1].cmp: expected a string, got 3");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "transpose", "inputs": [0], "perm": [1, "0"]})"),
            "nodes[1].perm[1]: expected an integer in [-1099511627776, 1099511627776], got \"0\"");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "input", "name": "y", "dtype": "fp32", "shape": [0]})"),
            "nodes[1].shape[0]: expected an integer in [1, 1099511627776], got 0");
  EXPECT_EQ(
      node_error(R"({"id": 1, "op": "input", "name": "y", "dtype": "fp32", "shape": ["*"]})"),
      "nodes[1].shape[0]: expected an integer, {\"max\": N, \"scalar\": NAME} or \"?\", got \"*\"");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "input", "name": "y", "shape": [1]})"),
            "nodes[1]: missing key \"dtype\"");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "iota", "dtype": "int32", "axis": 0})"),
            "nodes[1]: missing key \"shape\"");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "input", "name": "y", "dtype": "fp32", "shape": [1],
                           "role": "bias"})"),
            "nodes[1].role: expected \"input\" or \"weight\", got \"bias\"");
  EXPECT_EQ(node_error(R"({"id": -1, "op": "relu", "inputs": [0]})"),
            "nodes[1].id: expected an integer in [0, 2147483647], got -1");
  EXPECT_EQ(node_error(R"({"id": 1, "op": "relu", "inputs": 0})"),
            "nodes[1].inputs: expected an array, got 0");
  EXPECT_EQ(node_error(R"([1])"), "nodes[1]: expected an object, got [1]");
  EXPECT_EQ(read_error(R"({"format": "wallsim-plan", "version": 1})"),
            "(root).format: expected \"wallsim-graph\", got \"wallsim-plan\"");
  EXPECT_EQ(read_error(R"({"format": "wallsim-graph", "version": 2})"),
            "(root).version: unsupported graph format version 2 (this build reads version 1)");
  EXPECT_EQ(read_error(R"({"format": "wallsim-graph", "version": 1, "name": "g", "nodes": []})"),
            "(root): missing key \"outputs\"");
  EXPECT_EQ(read_error(R"({"format": "wallsim-graph", "version": 1, "name": "g", "nodes": [],
                           "outputs": [], "scalars": [{"name": "n", "min": 3, "max": 1}]})"),
            "scalars[0]: min 3 exceeds max 1");
  EXPECT_EQ(read_error(R"({"format": "wallsim-graph", "version": 1, "name": "g", "nodes": [],
                           "outputs": [], "scalars": [{"name": "n", "min": 0, "max": 1},
                                                      {"name": "n", "min": 0, "max": 2}]})"),
            "scalars[1]: duplicate scalar \"n\"");
}

class TempFile {
 public:
  explicit TempFile(std::string name) : m_path(testing::TempDir() + name) {}
  ~TempFile() { std::remove(m_path.c_str()); }
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

TEST(GraphIo, FilesRoundTripAndErrorsNameTheFile) {
  TempFile f("graph_io_test.json");
  Graph g = graph_from_json(Json::parse(kCanonical));
  write_graph_file(g, f.path());
  EXPECT_EQ(to_json(read_graph_file(f.path())), Json::parse(kCanonical));

  {
    std::ofstream out(f.path());
    out << R"({"format": "wallsim-graph", "version": 1, "name": "g",
               "nodes": [{"id": 0, "op": "nop"}], "outputs": [0]})";
  }
  EXPECT_EQ(error_of([&] { read_graph_file(f.path()); }),
            f.path() + ": nodes[0].op: unknown op \"nop\"");
  {
    std::ofstream out(f.path());
    out << "{ not json";
  }
  EXPECT_EQ(error_of([&] { read_graph_file(f.path()); }).rfind(f.path() + ": ", 0), 0u);
  EXPECT_EQ(error_of([&] { read_graph_file(f.path() + ".missing"); }),
            f.path() + ".missing: cannot open file");
}

}  // namespace
}  // namespace wallsim::compiler_stub
