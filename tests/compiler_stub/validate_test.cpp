// Validation and shape inference: the output type of every op, and each kind of error with its
// message.
#include "wallsim/compiler_stub/validate.h"

#include <gtest/gtest.h>

#include "graph_test_util.h"

namespace wallsim::compiler_stub {
namespace {

using test::error_of;
using test::make_graph;

// Inputs 0-7; the node under test is nodes[8] (id 8).
const char* const kBase = R"(
  {"id": 0, "op": "input", "name": "a", "dtype": "fp32", "shape": [2, 3]},
  {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [3, 4], "role": "weight"},
  {"id": 2, "op": "input", "name": "v", "dtype": "fp32", "shape": [3]},
  {"id": 3, "op": "input", "name": "r", "dtype": "fp32", "shape": [1, 3]},
  {"id": 4, "op": "input", "name": "c", "dtype": "fp32", "shape": [4, 2, 3]},
  {"id": 5, "op": "input", "name": "ids", "dtype": "int32", "shape": [5]},
  {"id": 6, "op": "input", "name": "d", "dtype": "fp32", "shape": [4, 3, 5]},
  {"id": 7, "op": "input", "name": "p", "dtype": "int32", "shape": [2, 1]})";
const char* const kScalars = R"([{"name": "n", "min": 0, "max": 1}])";

Graph with(const std::string& node, const std::string& more = "") {
  Graph g = make_graph(std::string("[") + kBase + ", " + node + more + "]", "[8]", kScalars);
  infer_types(g);
  return g;
}

std::string type_of(const std::string& node) { return to_string(with(node).nodes[8].type); }

std::string problem(const std::string& node, const std::string& more = "") {
  return error_of([&] { with(node, more); });
}

TEST(InferTypes, EveryOp) {
  struct Case {
    const char* node;
    const char* type;
  };
  const Case cases[] = {
      {R"({"id": 8, "op": "input", "name": "i", "dtype": "fp16", "shape": [7]})", "fp16[7]"},
      {R"({"id": 8, "op": "matmul", "inputs": [0, 1]})", "fp32[2, 4]"},
      {R"({"id": 8, "op": "matmul", "inputs": [4, 1]})", "fp32[4, 2, 4]"},
      {R"({"id": 8, "op": "matmul", "inputs": [0, 1], "dtype": "bf16"})", "bf16[2, 4]"},
      {R"({"id": 8, "op": "batch_matmul", "inputs": [4, 6]})", "fp32[4, 2, 5]"},
      {R"({"id": 8, "op": "batch_matmul", "inputs": [4, 4], "transpose_b": 1})", "fp32[4, 2, 2]"},
      {R"({"id": 8, "op": "add", "inputs": [0, 3]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "sub", "inputs": [4, 0]})", "fp32[4, 2, 3]"},
      {R"({"id": 8, "op": "mul", "inputs": [3, 0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "div", "inputs": [2, 7]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "maximum", "inputs": [7, 4]})", "int32[4, 2, 3]"},
      {R"({"id": 8, "op": "bias_add", "inputs": [4, 2]})", "fp32[4, 2, 3]"},
      {R"({"id": 8, "op": "scale", "inputs": [1], "value": 0.5})", "bf16[3, 4]"},
      {R"({"id": 8, "op": "relu", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "gelu", "inputs": [1]})", "bf16[3, 4]"},
      {R"({"id": 8, "op": "silu", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "exp", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "tanh", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "sigmoid", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "rsqrt", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "softmax", "inputs": [4]})", "fp32[4, 2, 3]"},
      {R"({"id": 8, "op": "log_softmax", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "layernorm", "inputs": [0, 2, 2], "eps": 1e-6})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "rmsnorm", "inputs": [4, 2]})", "fp32[4, 2, 3]"},
      {R"({"id": 8, "op": "reduce_sum", "inputs": [0]})", "fp32[2, 1]"},
      {R"({"id": 8, "op": "reduce_max", "inputs": [4]})", "fp32[4, 2, 1]"},
      {R"({"id": 8, "op": "reduce_mean", "inputs": [2]})", "fp32[1]"},
      {R"({"id": 8, "op": "transpose", "inputs": [4], "perm": [2, 0, 1]})", "fp32[3, 4, 2]"},
      {R"({"id": 8, "op": "reshape", "inputs": [4], "shape": [8, 3]})", "fp32[8, 3]"},
      {R"({"id": 8, "op": "slice", "inputs": [4], "axis": 1, "start": 1, "limit": 2})",
       "fp32[4, 1, 3]"},
      {R"({"id": 8, "op": "concat", "inputs": [0, 0, 3], "axis": 0})", "fp32[5, 3]"},
      {R"({"id": 8, "op": "iota", "dtype": "int32", "shape": [2, 6], "axis": 1})", "int32[2, 6]"},
      {R"({"id": 8, "op": "compare", "inputs": [0, 3], "cmp": "lt"})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "compare", "inputs": [5], "cmp": "ge", "scalar": "n"})", "int32[5]"},
      {R"({"id": 8, "op": "select", "inputs": [7, 0, 2]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "embedding", "inputs": [1, 5]})", "bf16[5, 4]"},
      {R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 3], "scalar": "n"})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 7], "scalar": "n", "axis": 1})",
       "fp32[2, 3]"},
      {R"({"id": 8, "op": "broadcast", "inputs": [3], "shape": [4, 2, 3]})", "fp32[4, 2, 3]"},
      {R"({"id": 8, "op": "minimum", "inputs": [0, 3]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "clip", "inputs": [0], "lo": 0, "hi": 6})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "affine", "inputs": [1], "value": 2, "offset": 1})", "bf16[3, 4]"},
      {R"({"id": 8, "op": "sqrt", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "log", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "abs", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "reciprocal", "inputs": [0]})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "attention", "inputs": [0, 3, 3], "heads": 3})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "all_reduce", "inputs": [0], "comm": "tp", "ranks": 4})", "fp32[2, 3]"},
      {R"({"id": 8, "op": "all_gather", "inputs": [0], "comm": "tp", "ranks": 4})", "fp32[8, 3]"},
      {R"({"id": 8, "op": "reduce_scatter", "inputs": [4], "comm": "dp", "ranks": 2})",
       "fp32[2, 2, 3]"},
      {R"({"id": 8, "op": "send", "inputs": [4], "comm": "pp", "ranks": 2, "peer": 1})",
       "int32[1]"},
      {R"({"id": 8, "op": "recv", "dtype": "bf16", "shape": [4, 6], "comm": "pp", "ranks": 4,
           "peer": 3})",
       "bf16[4, 6]"},
      {R"({"id": 8, "op": "pad", "inputs": [4], "begin": [0, 1, 0], "end": [1, 0, 2]})",
       "fp32[5, 3, 5]"},
      {R"({"id": 8, "op": "reduce", "inputs": [4], "reduction": "sum", "axes": [0, 2]})",
       "fp32[2]"},
  };
  for (const Case& c : cases) EXPECT_EQ(type_of(c.node), c.type) << c.node;
  // Every op of ops.def has a case above.
  for (int op = 0; op < kNumOps; ++op) {
    std::string name(info(static_cast<OpKind>(op)).name);
    // InferTypes.IndexCopy and .DecodeAttention: they need inputs kBase lacks.
    // InferTypes.Im2col: it needs a 4-D input.
    bool covered = name == "index_copy" || name == "decode_attention" || name == "im2col";
    for (const Case& c : cases) {
      covered |= std::string(c.node).find("\"op\": \"" + name + "\"") != std::string::npos;
    }
    EXPECT_TRUE(covered) << name;
  }
}

TEST(InferTypes, Im2col) {
  auto type = [&](const std::string& attrs) {
    Graph g = make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32",
                              "shape": [2, 3, 9, 7]},
                             {"id": 1, "op": "im2col", "inputs": [0], )" +
                             attrs + "}]",
                         "[1]");
    infer_types(g);
    return to_string(g.nodes[1].type);
  };
  EXPECT_EQ(type(R"("kernel": [3, 3])"), "fp32[2, 3, 7, 5, 3, 3]");
  EXPECT_EQ(type(R"("kernel": [3, 2], "strides": [2, 2], "dilations": [2, 1])"),
            "fp32[2, 3, 3, 3, 3, 2]");
  EXPECT_EQ(error_of([&] { type(R"("kernel": [10, 1])"); }),
            "nodes[1] (op 'im2col'): a window of 10 exceeds the input's 9 along spatial axis 0");
  EXPECT_EQ(error_of([&] { type(R"("kernel": [3])"); }),
            "nodes[1] (op 'im2col'): kernel must be two integers >= 1, got [3]");
}

TEST(InferTypes, IndexCopy) {
  const std::string inputs = R"(
    {"id": 0, "op": "input", "name": "pool", "dtype": "bf16", "shape": [16, 4]},
    {"id": 1, "op": "input", "name": "ids", "dtype": "int32", "shape": [3]},
    {"id": 2, "op": "input", "name": "rows", "dtype": "bf16", "shape": [3, 4]},
    {"id": 3, "op": "input", "name": "wide", "dtype": "bf16", "shape": [3, 5]},
    {"id": 4, "op": "input", "name": "f", "dtype": "fp32", "shape": [3, 4]},)";
  auto type = [&](const std::string& node) {
    Graph g = make_graph("[" + inputs + node + "]", "[5]");
    infer_types(g);
    return to_string(g.nodes[5].type);
  };
  EXPECT_EQ(type(R"({"id": 5, "op": "index_copy", "inputs": [0, 1, 2]})"), "bf16[16, 4]");
  EXPECT_EQ(error_of([&] { type(R"({"id": 5, "op": "index_copy", "inputs": [0, 1, 3]})"); }),
            "nodes[5] (op 'index_copy'): src [3, 5] must be [3, 4]: a row of dst per id");
  EXPECT_EQ(error_of([&] { type(R"({"id": 5, "op": "index_copy", "inputs": [0, 1, 4]})"); }),
            "nodes[5] (op 'index_copy'): src and dst differ in dtype");
  EXPECT_EQ(error_of([&] { type(R"({"id": 5, "op": "index_copy", "inputs": [0, 2, 2]})"); }),
            "nodes[5] (op 'index_copy'): ids [N] must have rank 1, got [3, 4]");
}

TEST(InferTypes, DecodeAttention) {
  const std::string inputs = R"(
    {"id": 0, "op": "input", "name": "q", "dtype": "bf16", "shape": [3, 8]},
    {"id": 1, "op": "input", "name": "pool", "dtype": "bf16", "shape": [16, 8]},
    {"id": 2, "op": "input", "name": "ids", "dtype": "int32", "shape": [3, 5]},
    {"id": 3, "op": "input", "name": "bias", "dtype": "fp32", "shape": [3, 2, 5]},
    {"id": 4, "op": "input", "name": "narrow", "dtype": "bf16", "shape": [16, 6]},)";
  auto type = [&](const std::string& node) {
    Graph g = make_graph("[" + inputs + node + "]", "[5]");
    infer_types(g);
    return to_string(g.nodes[5].type);
  };
  auto node = [](const std::string& in, const std::string& attrs) {
    return R"({"id": 5, "op": "decode_attention", "inputs": )" + in + attrs + "}";
  };
  EXPECT_EQ(type(node("[0, 1, 1, 2, 3]", R"(, "heads": 2)")), "bf16[3, 8]");
  EXPECT_EQ(type(node("[0, 1, 1, 2]", R"(, "heads": 4, "scale": 0.5)")), "bf16[3, 8]");
  EXPECT_EQ(error_of([&] { type(node("[0, 1, 1, 2, 3]", R"(, "heads": 4)")); }),
            "nodes[5] (op 'decode_attention'): bias [3, 2, 5] must have 4 heads in dim 1");
  EXPECT_EQ(error_of([&] { type(node("[0, 1, 1, 2]", R"(, "heads": 3)")); }),
            "nodes[5] (op 'decode_attention'): heads 3 must divide the width 8");
  EXPECT_EQ(error_of([&] { type(node("[0, 1, 4, 2]", R"(, "heads": 2)")); }),
            "nodes[5] (op 'decode_attention'): q and v differ in width: 8 vs 6");
  EXPECT_EQ(error_of([&] { type(node("[0, 1, 1, 1]", R"(, "heads": 2)")); }),
            "nodes[5] (op 'decode_attention'): ids must be int32, got bf16");
  EXPECT_EQ(error_of([&] { type(node("[0, 1, 1, 2]", "")); }),
            "nodes[5] (op 'decode_attention'): missing attribute 'heads'");
}

TEST(InferTypes, InputsAndIotaKeepTheirDeclaredType) {
  Graph g = with(R"({"id": 8, "op": "iota", "dtype": "fp16", "shape": [2], "axis": 0})");
  EXPECT_EQ(to_string(g.nodes[1].type), "bf16[3, 4]");
  EXPECT_EQ(to_string(g.nodes[8].type), "fp16[2]");
}

// Bounded dims: "m" is a length up to 8.
Graph bounded(const std::string& nodes, const std::string& outputs) {
  Graph g = make_graph(R"([{"id": 0, "op": "input", "name": "k", "dtype": "fp32",
                            "shape": [{"max": 8, "scalar": "m"}, 6]},
                           {"id": 1, "op": "input", "name": "q", "dtype": "fp32", "shape": [2, 6]},
                           {"id": 2, "op": "iota", "dtype": "int32", "shape": [2, 8], "axis": 1},
                           )" +
                           nodes + "]",
                       outputs,
                       R"([{"name": "m", "min": 1, "max": 8}, {"name": "z", "min": 0, "max": 8}])");
  infer_types(g);
  return g;
}

TEST(InferTypes, BoundedDims) {
  Graph g = bounded(R"({"id": 3, "op": "transpose", "inputs": [0], "perm": [1, 0]},
                       {"id": 4, "op": "matmul", "inputs": [1, 3]},
                       {"id": 5, "op": "add", "inputs": [4, 2]},
                       {"id": 6, "op": "add", "inputs": [2, 4]},
                       {"id": 7, "op": "softmax", "inputs": [5]},
                       {"id": 8, "op": "matmul", "inputs": [7, 0]},
                       {"id": 9, "op": "reshape", "inputs": [0], "shape": [8, 2, 3]},
                       {"id": 10, "op": "compare", "inputs": [2], "cmp": "lt", "scalar": "m"})",
                    "[8, 9, 10]");
  EXPECT_EQ(to_string(g.nodes[3].type), "fp32[6, m<=8]");
  EXPECT_EQ(to_string(g.nodes[4].type), "fp32[2, m<=8]");
  // A static dim at a bounded dim's max matches it; the result stays bounded.
  EXPECT_EQ(to_string(g.nodes[5].type), "fp32[2, m<=8]");
  EXPECT_EQ(to_string(g.nodes[6].type), "int32[2, m<=8]");
  EXPECT_EQ(to_string(g.nodes[8].type), "fp32[2, 6]");  // K bounded on both sides
  EXPECT_EQ(to_string(g.nodes[9].type), "fp32[m<=8, 2, 3]");
  EXPECT_EQ(g.nodes[9].type.elements(), 48);
  EXPECT_FALSE(has_unknown_dims(g));
}

TEST(InferTypes, BoundedDimErrors) {
  auto err = [](const std::string& nodes) { return error_of([&] { bounded(nodes, "[3]"); }); };
  EXPECT_EQ(
      err(R"({"id": 3, "op": "input", "name": "y", "dtype": "fp32",
                    "shape": [{"max": 8, "scalar": "z"}]},
                   {"id": 4, "op": "add", "inputs": [0, 3]})"),
      "nodes[4] (op 'add'): cannot broadcast [m<=8, 6] with the second input [z<=8]: 6 vs z<=8");
  EXPECT_EQ(err(R"({"id": 3, "op": "input", "name": "y", "dtype": "fp32",
                    "shape": [{"max": 8, "scalar": "z"}, 1]},
                   {"id": 4, "op": "add", "inputs": [0, 3]})"),
            "nodes[4] (op 'add'): cannot broadcast [m<=8, 6] with the second input [z<=8, 1]: "
            "m<=8 vs z<=8");
  EXPECT_EQ(err(R"({"id": 3, "op": "input", "name": "y", "dtype": "fp32",
                    "shape": [{"max": 4, "scalar": "m"}]})"),
            "nodes[3] (op 'input'): shape[0] is bounded by 4 but scalar 'm' can reach 8");
  EXPECT_EQ(err(R"({"id": 3, "op": "input", "name": "y", "dtype": "fp32",
                    "shape": [{"max": 4, "scalar": "len"}]})"),
            "nodes[3] (op 'input'): shape[0] is bounded by undeclared scalar 'len'");
  EXPECT_EQ(err(R"({"id": 3, "op": "reshape", "inputs": [0], "shape": [48]})"),
            "nodes[3] (op 'reshape'): reshape of [m<=8, 6] to [48] must keep the leading dims up "
            "to the last bounded one in place");
  EXPECT_EQ(err(R"({"id": 3, "op": "slice", "inputs": [0], "axis": 0, "start": 0, "limit": 2})"),
            "nodes[3] (op 'slice'): slice along bounded axis 0 (m<=8) is not supported");
  EXPECT_EQ(err(R"({"id": 3, "op": "concat", "inputs": [0, 0], "axis": 0})"),
            "nodes[3] (op 'concat'): concat along bounded dim m<=8 of input 0 is not supported");
}

TEST(InferTypes, UnknownDimsPassThroughAndAreFlagged) {
  Graph g =
      make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": ["?", 4]},
                           {"id": 1, "op": "input", "name": "w", "dtype": "fp32", "shape": [4, 2]},
                           {"id": 2, "op": "matmul", "inputs": [0, 1]},
                           {"id": 3, "op": "add", "inputs": [2, 2]},
                           {"id": 4, "op": "reduce_sum", "inputs": [3]}])",
                 "[4]");
  infer_types(g);
  EXPECT_EQ(to_string(g.nodes[4].type), "fp32[?, 1]");
  EXPECT_EQ(g.nodes[4].type.elements(), -1);
  EXPECT_TRUE(has_unknown_dims(g));
  Graph s = with(R"({"id": 8, "op": "relu", "inputs": [0]})");
  EXPECT_FALSE(has_unknown_dims(s));
}

TEST(InferTypes, StructuralErrors) {
  EXPECT_EQ(problem(R"({"id": 8, "op": "add", "inputs": [0]})"),
            "nodes[8] (op 'add'): expects 2 inputs, got 1");
  EXPECT_EQ(problem(R"({"id": 8, "op": "concat", "inputs": [0], "axis": 0})"),
            "nodes[8] (op 'concat'): expects 2 to 16 inputs, got 1");
  EXPECT_EQ(problem(R"({"id": 8, "op": "iota", "inputs": [0], "dtype": "int32", "shape": [2],
                        "axis": 0})"),
            "nodes[8] (op 'iota'): expects 0 inputs, got 1");
  EXPECT_EQ(problem(R"({"id": 8, "op": "relu", "inputs": [42]})"),
            "nodes[8] (op 'relu'): inputs[0] = 42 is not a node id");
  EXPECT_EQ(problem(R"({"id": 8, "op": "relu", "inputs": [9]})",
                    R"(, {"id": 9, "op": "relu", "inputs": [0]})"),
            "nodes[8] (op 'relu'): inputs[0] = 9 refers to a later node (nodes[9]); nodes must be "
            "in topological order");
  EXPECT_EQ(problem(R"({"id": 8, "op": "add", "inputs": [0, 8]})"),
            "nodes[8] (op 'add'): inputs[1] = 8 is the node itself");
  EXPECT_EQ(problem(R"({"id": 8, "op": "relu", "inputs": [0]})",
                    R"(, {"id": 8, "op": "relu", "inputs": [0]})"),
            "nodes[9] (op 'relu'): duplicate id 8 (also nodes[8])");
  EXPECT_EQ(problem(R"({"id": 8, "op": "relu", "inputs": [0], "name": "a"})"),
            "nodes[8] (op 'relu'): duplicate name 'a' (also nodes[0])");
  EXPECT_EQ(problem(R"({"id": 8, "op": "input", "dtype": "fp32", "shape": [1]})"),
            "nodes[8] (op 'input'): an input needs a name");
  EXPECT_EQ(problem(R"({"id": 8, "op": "slice", "inputs": [0], "axis": 0, "limit": 1})"),
            "nodes[8] (op 'slice'): missing attribute 'start'");

  // A graph output's name is its tensor's and its file's (exec's outputs/NAME.npy).
  EXPECT_EQ(
      with(R"({"id": 8, "op": "relu", "inputs": [0], "output_name": "y.1"})").nodes[8].output_name,
      "y.1");
  EXPECT_EQ(problem(R"({"id": 8, "op": "relu", "inputs": [0], "output_name": "a"})"),
            "nodes[8] (op 'relu'): output_name 'a' is also the name of nodes[0]");
  for (const char* bad : {"a/b", "..", "v12", " y", "-y"}) {
    EXPECT_EQ(problem(std::string(R"({"id": 8, "op": "relu", "inputs": [0], "output_name": ")") +
                      bad + R"("})"),
              std::string("nodes[8] (op 'relu'): output_name '") + bad +
                  "' is not a tensor name (letters, digits, '_', '-', '.', not first; not "
                  "v<digits>)");
  }
  EXPECT_EQ(problem(R"({"id": 8, "op": "relu", "inputs": [0]})",
                    R"(, {"id": 9, "op": "relu", "inputs": [0], "output_name": "z"})"),
            "nodes[9] (op 'relu'): output_name 'z' on a node that is not a graph output");

  Graph g = make_graph(std::string("[") + kBase + "]", "[99]");
  EXPECT_EQ(error_of([&] { infer_types(g); }), "outputs[0]: 99 is not a node id");
  g.outputs = {1, 1};
  EXPECT_EQ(error_of([&] { infer_types(g); }), "outputs[1]: duplicate output 1");
  g.outputs = {};
  EXPECT_EQ(error_of([&] { infer_types(g); }), "outputs: a graph needs at least one output");
  g.outputs = {1};
  g.scalars = {{"n", 0, 1}, {"n", 0, 2}};
  EXPECT_EQ(error_of([&] { infer_types(g); }), "scalars[1]: duplicate scalar 'n'");
  g.scalars = {{"n", -1, 1}};
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "scalars[0]: needs 0 <= min <= max, got min -1 and max 1");
}

TEST(InferTypes, AttributeErrorsInGraphsBuiltInCode) {
  Graph g = with(R"({"id": 8, "op": "slice", "inputs": [0], "axis": 1, "start": 0, "limit": 1})");
  g.nodes[8].attrs["axis"] = 1.0;
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "nodes[8] (op 'slice'): attribute 'axis' must be an integer");
  g.nodes[8].attrs["axis"] = int64_t{1};
  g.nodes[8].attrs["perm"] = std::vector<int64_t>{0};
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "nodes[8] (op 'slice'): unknown attribute 'perm' (this op takes: axis start limit)");
  g.nodes[8].attrs.erase("perm");
  g.nodes[0].attrs["shape"] = std::vector<int64_t>{2, 3};
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "nodes[0] (op 'input'): 'shape' is held by Node::type, not by an attribute");
  g.nodes[0].attrs.clear();
  g.nodes[0].dtype = isa::DType::bf16;
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "nodes[0] (op 'input'): explicit dtype bf16 differs from the declared fp32 (input, "
            "iota and recv declare their type)");
}

TEST(InferTypes, CollectiveErrors) {
  EXPECT_NE(problem(R"({"id": 8, "op": "reduce_scatter", "inputs": [0], "comm": "tp", "ranks": 4})")
                .find("reduce_scatter of 2 rows does not split over 4 ranks"),
            std::string::npos);
  EXPECT_NE(problem(R"({"id": 8, "op": "all_reduce", "inputs": [0], "ranks": 4})")
                .find("missing attribute 'comm'"),
            std::string::npos);
  EXPECT_NE(problem(R"({"id": 8, "op": "all_reduce", "inputs": [0], "comm": "tp", "ranks": 0})")
                .find("'ranks' must be 1 to 65536"),
            std::string::npos);
}

TEST(InferTypes, PointToPointErrors) {
  EXPECT_NE(
      problem(R"({"id": 8, "op": "send", "inputs": [0], "comm": "pp", "ranks": 2, "peer": 2})")
          .find("'peer' must be a rank of the 2, not 2"),
      std::string::npos);
  EXPECT_NE(
      problem(R"({"id": 8, "op": "send", "inputs": [0], "comm": "pp", "ranks": 1, "peer": 0})")
          .find("'ranks' must be 2 to 65536"),
      std::string::npos);
  EXPECT_NE(problem(R"({"id": 8, "op": "recv", "dtype": "fp32", "shape": [2], "comm": "pp",
                        "ranks": 2})")
                .find("missing attribute 'peer'"),
            std::string::npos);
}

TEST(InferTypes, OpErrors) {
  EXPECT_EQ(problem(R"({"id": 8, "op": "add", "inputs": [0, 1]})"),
            "nodes[8] (op 'add'): cannot broadcast [2, 3] with the second input [3, 4]: 2 vs 3");
  EXPECT_EQ(problem(R"({"id": 8, "op": "select", "inputs": [7, 0, 6]})"),
            "nodes[8] (op 'select'): cannot broadcast [2, 3] with the third input [4, 3, 5]: "
            "2 vs 3");
  EXPECT_EQ(problem(R"({"id": 8, "op": "matmul", "inputs": [1, 0]})"),
            "nodes[8] (op 'matmul'): K mismatch: [3, 4] x [2, 3] (4 vs 2)");
  EXPECT_EQ(
      problem(R"({"id": 8, "op": "matmul", "inputs": [0, 4]})"),
      "nodes[8] (op 'matmul'): second input (weights [K, N]) must have rank 2, got [4, 2, 3]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "matmul", "inputs": [2, 1]})"),
            "nodes[8] (op 'matmul'): first input must have rank >= 2, got [3]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "batch_matmul", "inputs": [4, 4]})"),
            "nodes[8] (op 'batch_matmul'): K mismatch: [4, 2, 3] x [4, 2, 3] (3 vs 2)");
  EXPECT_EQ(problem(R"({"id": 8, "op": "batch_matmul", "inputs": [4, 6], "transpose_b": 2})"),
            "nodes[8] (op 'batch_matmul'): transpose_b must be 0 or 1, got 2");
  EXPECT_EQ(problem(R"({"id": 8, "op": "bias_add", "inputs": [0, 1]})"),
            "nodes[8] (op 'bias_add'): bias must be [N] with N the last dim of [2, 3], got [3, 4]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "layernorm", "inputs": [0, 2, 5]})"),
            "nodes[8] (op 'layernorm'): beta must be [N] with N the last dim of [2, 3], got [5]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "scale", "inputs": [0]})"),
            "nodes[8] (op 'scale'): missing attribute 'value'");
  EXPECT_EQ(problem(R"({"id": 8, "op": "slice", "inputs": [4], "axis": 3, "start": 0,
                        "limit": 1})"),
            "nodes[8] (op 'slice'): axis 3 is out of range for rank 3");
  EXPECT_EQ(problem(R"({"id": 8, "op": "slice", "inputs": [0], "axis": 1, "start": 1,
                        "limit": 5})"),
            "nodes[8] (op 'slice'): slice [1, 5) of axis 1 (size 3) is out of range or empty");
  EXPECT_EQ(problem(R"({"id": 8, "op": "transpose", "inputs": [0], "perm": [0, 0]})"),
            "nodes[8] (op 'transpose'): perm [0, 0] is not a permutation of the 2 axes of [2, 3]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "transpose", "inputs": [0], "perm": [1, 0, 2]})"),
            "nodes[8] (op 'transpose'): perm [1, 0, 2] is not a permutation of the 2 axes of "
            "[2, 3]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "reshape", "inputs": [0], "shape": [4, 2]})"),
            "nodes[8] (op 'reshape'): reshape of [2, 3] (6 elements) to [4, 2] (8 elements)");
  EXPECT_EQ(problem(R"({"id": 8, "op": "reshape", "inputs": [0], "shape": [6, 0]})"),
            "nodes[8] (op 'reshape'): shape [6, 0] has a dim below 1");
  EXPECT_EQ(problem(R"({"id": 8, "op": "concat", "inputs": [0, 1], "axis": 0})"),
            "nodes[8] (op 'concat'): input 1 [3, 4] does not match [2, 3] in dim 1");
  EXPECT_EQ(problem(R"({"id": 8, "op": "concat", "inputs": [0, 4], "axis": 0})"),
            "nodes[8] (op 'concat'): input 1 [4, 2, 3] has a different rank from [2, 3]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "iota", "dtype": "int32", "shape": [2], "axis": 1})"),
            "nodes[8] (op 'iota'): axis 1 is out of range for rank 1");
  EXPECT_EQ(problem(R"({"id": 8, "op": "compare", "inputs": [0, 3], "cmp": "lt",
                        "scalar": "n"})"),
            "nodes[8] (op 'compare'): compares with a second input or with scalar 'n', not both");
  EXPECT_EQ(problem(R"({"id": 8, "op": "compare", "inputs": [0], "cmp": "lt"})"),
            "nodes[8] (op 'compare'): needs a second input or a 'scalar' attribute");
  EXPECT_EQ(problem(R"({"id": 8, "op": "compare", "inputs": [0], "cmp": "lt", "scalar": "len"})"),
            "nodes[8] (op 'compare'): scalar 'len' is not declared in the graph's scalars");
  EXPECT_EQ(problem(R"({"id": 8, "op": "compare", "inputs": [0, 0], "cmp": "<"})"),
            "nodes[8] (op 'compare'): cmp \"<\" is not one of eq ne lt le gt ge");
  EXPECT_EQ(problem(R"({"id": 8, "op": "embedding", "inputs": [1, 2]})"),
            "nodes[8] (op 'embedding'): ids must be int32, got fp32");
  EXPECT_EQ(problem(R"({"id": 8, "op": "embedding", "inputs": [2, 5]})"),
            "nodes[8] (op 'embedding'): table [V, D] must have rank 2, got [3]");
  EXPECT_EQ(problem(R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 3]})"),
            "nodes[8] (op 'dynamic_update_slice'): missing attribute 'scalar'");
  EXPECT_EQ(problem(R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 3],
                        "scalar": "pos"})"),
            "nodes[8] (op 'dynamic_update_slice'): scalar 'pos' is not declared in the graph's "
            "scalars");
  EXPECT_EQ(problem(R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 0],
                        "scalar": "n"})"),
            "nodes[8] (op 'dynamic_update_slice'): update of 2 rows at position 'n' (up to 1) "
            "does not fit dst's 2 rows along axis 0");
  EXPECT_EQ(problem(R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 1],
                        "scalar": "n"})"),
            "nodes[8] (op 'dynamic_update_slice'): update [3, 4] does not match dst [2, 3] in "
            "dim 1");
}

TEST(NodePath, NamesIndexAndOp) {
  Graph g = with(R"({"id": 8, "op": "relu", "inputs": [0]})");
  EXPECT_EQ(node_path(g, 8), "nodes[8] (op 'relu')");
}

}  // namespace
}  // namespace wallsim::compiler_stub
