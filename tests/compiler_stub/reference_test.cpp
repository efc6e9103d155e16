// The reference evaluator: every op against hand-computed values on small tensors, softmax and
// layernorm statistics, dtype rounding, bounded dims, input errors, a tiny attention block.
#include "wallsim/compiler_stub/reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph_test_util.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

using test::error_of;
using test::make_graph;
using Values = std::vector<float>;

// Inputs 0-7; the node under test is id 8.
const char* const kBase = R"(
  {"id": 0, "op": "input", "name": "a", "dtype": "fp32", "shape": [2, 3]},
  {"id": 1, "op": "input", "name": "b", "dtype": "fp32", "shape": [3, 2]},
  {"id": 2, "op": "input", "name": "v", "dtype": "fp32", "shape": [3]},
  {"id": 3, "op": "input", "name": "r", "dtype": "fp32", "shape": [1, 3]},
  {"id": 4, "op": "input", "name": "c", "dtype": "fp32", "shape": [2, 1, 2]},
  {"id": 5, "op": "input", "name": "d", "dtype": "fp32", "shape": [2, 2, 1]},
  {"id": 6, "op": "input", "name": "ids", "dtype": "int32", "shape": [3]},
  {"id": 7, "op": "input", "name": "p", "dtype": "int32", "shape": [2, 1]})";

std::map<std::string, HostTensor> base_inputs() {
  return {{"a", {{2, 3}, {1, -2, 3, -4, 5, -6}}},
          {"b", {{3, 2}, {1, 2, 3, 4, 5, 6}}},
          {"v", {{3}, {10, 20, 30}}},
          {"r", {{1, 3}, {1, 2, 3}}},
          {"c", {{2, 1, 2}, {1, 2, 3, 4}}},
          {"d", {{2, 2, 1}, {5, 6, 7, 8}}},
          {"ids", {{3}, {2, 0, 2}}},
          {"p", {{2, 1}, {1, 0}}}};
}

HostTensor run(const std::string& node, int64_t n = 1) {
  Graph g = make_graph(std::string("[") + kBase + ", " + node + "]", "[8]",
                       R"([{"name": "n", "min": 0, "max": 1}])");
  return evaluate(g, base_inputs(), {{"n", n}}).at(8);
}

void expect_values(const HostTensor& t, const std::vector<int64_t>& shape, const Values& want,
                   float tol = 1e-6f) {
  EXPECT_EQ(t.shape, shape);
  ASSERT_EQ(t.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(t.data[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "element " << i;
  }
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

TEST(Reference, MatmulAndBatchMatmul) {
  expect_values(run(R"({"id": 8, "op": "matmul", "inputs": [0, 1]})"), {2, 2}, {10, 12, -19, -24});
  expect_values(run(R"({"id": 8, "op": "batch_matmul", "inputs": [4, 5]})"), {2, 1, 1}, {17, 53});
  expect_values(run(R"({"id": 8, "op": "batch_matmul", "inputs": [4, 4], "transpose_b": 1})"),
                {2, 1, 1}, {5, 25});
}

TEST(Reference, ElementWiseWithBroadcasting) {
  expect_values(run(R"({"id": 8, "op": "add", "inputs": [0, 2]})"), {2, 3},
                {11, 18, 33, 6, 25, 24});
  expect_values(run(R"({"id": 8, "op": "sub", "inputs": [0, 3]})"), {2, 3}, {0, -4, 0, -5, 3, -9});
  expect_values(run(R"({"id": 8, "op": "mul", "inputs": [2, 0]})"), {2, 3},
                {10, -40, 90, -40, 100, -180});
  expect_values(run(R"({"id": 8, "op": "div", "inputs": [0, 2]})"), {2, 3},
                {0.1f, -0.1f, 0.1f, -0.4f, 0.25f, -0.2f});
  expect_values(run(R"({"id": 8, "op": "maximum", "inputs": [0, 3]})"), {2, 3}, {1, 2, 3, 1, 5, 3});
  // [2, 1] against [1, 3]: both broadcast.
  expect_values(run(R"({"id": 8, "op": "add", "inputs": [7, 3]})"), {2, 3}, {2, 3, 4, 1, 2, 3});
  expect_values(run(R"({"id": 8, "op": "bias_add", "inputs": [0, 2]})"), {2, 3},
                {11, 18, 33, 6, 25, 24});
  expect_values(run(R"({"id": 8, "op": "scale", "inputs": [0], "value": 0.5})"), {2, 3},
                {0.5f, -1, 1.5f, -2, 2.5f, -3});
}

TEST(Reference, Activations) {
  const Values a = {1, -2, 3, -4, 5, -6};
  auto each = [&](double (*f)(double)) {
    Values out;
    for (float x : a) out.push_back(static_cast<float>(f(x)));
    return out;
  };
  expect_values(run(R"({"id": 8, "op": "relu", "inputs": [0]})"), {2, 3}, {1, 0, 3, 0, 5, 0});
  expect_values(run(R"({"id": 8, "op": "gelu", "inputs": [0]})"), {2, 3}, each(gelu));
  EXPECT_NEAR(run(R"({"id": 8, "op": "gelu", "inputs": [0]})").data[0], 0.8413447f, 1e-6f);
  expect_values(run(R"({"id": 8, "op": "silu", "inputs": [0]})"), {2, 3},
                each([](double x) { return x / (1 + std::exp(-x)); }));
  expect_values(run(R"({"id": 8, "op": "exp", "inputs": [0]})"), {2, 3},
                each([](double x) { return std::exp(x); }));
  expect_values(run(R"({"id": 8, "op": "tanh", "inputs": [0]})"), {2, 3},
                each([](double x) { return std::tanh(x); }));
  expect_values(run(R"({"id": 8, "op": "sigmoid", "inputs": [0]})"), {2, 3},
                each([](double x) { return 1 / (1 + std::exp(-x)); }));
  expect_values(run(R"({"id": 8, "op": "rsqrt", "inputs": [2]})"), {3},
                {1 / std::sqrt(10.0f), 1 / std::sqrt(20.0f), 1 / std::sqrt(30.0f)});
}

// The ops ONNX import composes with (issue 22).
TEST(Reference, ImportOps) {
  expect_values(run(R"({"id": 8, "op": "minimum", "inputs": [0, 3]})"), {2, 3},
                {1, -2, 3, -4, 2, -6});
  expect_values(run(R"({"id": 8, "op": "clip", "inputs": [0], "lo": -3, "hi": 2})"), {2, 3},
                {1, -2, 2, -3, 2, -3});
  expect_values(run(R"({"id": 8, "op": "clip", "inputs": [0], "hi": 0})"), {2, 3},
                {0, -2, 0, -4, 0, -6});
  expect_values(run(R"({"id": 8, "op": "affine", "inputs": [0], "value": 2, "offset": 1})"), {2, 3},
                {3, -3, 7, -7, 11, -11});
  expect_values(run(R"({"id": 8, "op": "abs", "inputs": [0]})"), {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(run(R"({"id": 8, "op": "sqrt", "inputs": [2]})"), {3},
                {std::sqrt(10.0f), std::sqrt(20.0f), std::sqrt(30.0f)});
  expect_values(run(R"({"id": 8, "op": "log", "inputs": [2]})"), {3},
                {std::log(10.0f), std::log(20.0f), std::log(30.0f)});
  expect_values(run(R"({"id": 8, "op": "reciprocal", "inputs": [2]})"), {3},
                {0.1f, 0.05f, 1.0f / 30});
  // [1, 3] broadcast to [2, 2, 3]: the row repeated.
  expect_values(run(R"({"id": 8, "op": "broadcast", "inputs": [3], "shape": [2, 2, 3]})"),
                {2, 2, 3}, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  // A 2x2 window, stride 1 along H and 2 along W, over x[1, 1, 3, 4] = 0..11.
  Graph g =
      make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [1, 1, 3, 4]},
    {"id": 1, "op": "im2col", "inputs": [0], "kernel": [2, 2], "strides": [1, 2]}])",
                 "[1]");
  HostTensor x{{1, 1, 3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}};
  expect_values(evaluate(g, {{"x", x}}, {}).at(1), {1, 1, 2, 2, 2, 2},
                {0, 1, 4, 5, 2, 3, 6, 7, 4, 5, 8, 9, 6, 7, 10, 11});
}

TEST(Reference, RowOps) {
  // Rows [1, 2, 3] of r.
  expect_values(run(R"({"id": 8, "op": "softmax", "inputs": [3]})"), {1, 3},
                {0.09003057f, 0.24472847f, 0.66524096f});
  expect_values(run(R"({"id": 8, "op": "log_softmax", "inputs": [3]})"), {1, 3},
                {-2.40760596f, -1.40760596f, -0.40760596f});
  // x = r = [1, 2, 3]: mean 2, biased variance 2/3; gamma = v / 10 = [1, 2, 3], beta = v.
  Graph g = make_graph(std::string("[") + kBase + R"(,
      {"id": 8, "op": "scale", "inputs": [2], "value": 0.1},
      {"id": 9, "op": "layernorm", "inputs": [3, 8, 2], "eps": 0},
      {"id": 10, "op": "rmsnorm", "inputs": [3, 8], "eps": 0}])",
                       "[9, 10]");
  auto out = evaluate(g, base_inputs(), {});
  const float s = std::sqrt(1.5f);
  expect_values(out.at(9), {1, 3}, {-s * 1 + 10, 0 * 2 + 20, s * 3 + 30});
  const float rms = 1 / std::sqrt(14.0f / 3);
  expect_values(out.at(10), {1, 3}, {rms * 1, rms * 2 * 2, rms * 3 * 3});
  // eps: variance 2/3 + 1/3 = 1 makes rstd exactly 1.
  Graph e = make_graph(std::string("[") + kBase + R"(,
      {"id": 8, "op": "scale", "inputs": [2], "value": 0.1},
      {"id": 9, "op": "layernorm", "inputs": [3, 8, 2], "eps": 0.3333333333333333}])",
                       "[9]");
  expect_values(evaluate(e, base_inputs(), {}).at(9), {1, 3}, {9, 20, 33}, 1e-5f);
}

TEST(Reference, Reductions) {
  expect_values(run(R"({"id": 8, "op": "reduce_sum", "inputs": [0]})"), {2, 1}, {2, -5});
  expect_values(run(R"({"id": 8, "op": "reduce_max", "inputs": [0]})"), {2, 1}, {3, 5});
  expect_values(run(R"({"id": 8, "op": "reduce_mean", "inputs": [0]})"), {2, 1},
                {2.0f / 3, -5.0f / 3});
}

TEST(Reference, DataMovement) {
  expect_values(run(R"({"id": 8, "op": "transpose", "inputs": [0], "perm": [1, 0]})"), {3, 2},
                {1, -4, -2, 5, 3, -6});
  // d [2, 2, 1] = 5 6 / 7 8; perm [1, 2, 0] -> [2, 1, 2]: out[i][0][k] = d[k][i][0].
  expect_values(run(R"({"id": 8, "op": "transpose", "inputs": [5], "perm": [1, 2, 0]})"), {2, 1, 2},
                {5, 7, 6, 8});
  expect_values(run(R"({"id": 8, "op": "reshape", "inputs": [0], "shape": [3, 1, 2]})"), {3, 1, 2},
                {1, -2, 3, -4, 5, -6});
  expect_values(run(R"({"id": 8, "op": "slice", "inputs": [0], "axis": 1, "start": 1,
                        "limit": 3})"),
                {2, 2}, {-2, 3, 5, -6});
  expect_values(run(R"({"id": 8, "op": "slice", "inputs": [0], "axis": 0, "start": 1,
                        "limit": 2})"),
                {1, 3}, {-4, 5, -6});
  expect_values(run(R"({"id": 8, "op": "concat", "inputs": [0, 3], "axis": 0})"), {3, 3},
                {1, -2, 3, -4, 5, -6, 1, 2, 3});
  expect_values(run(R"({"id": 8, "op": "concat", "inputs": [0, 7, 0], "axis": 1})"), {2, 7},
                {1, -2, 3, 1, 1, -2, 3, -4, 5, -6, 0, -4, 5, -6});
}

TEST(Reference, MasksAndGathers) {
  expect_values(run(R"({"id": 8, "op": "iota", "dtype": "int32", "shape": [2, 3], "axis": 0})"),
                {2, 3}, {0, 0, 0, 1, 1, 1});
  expect_values(run(R"({"id": 8, "op": "iota", "dtype": "fp32", "shape": [2, 3], "axis": 1})"),
                {2, 3}, {0, 1, 2, 0, 1, 2});
  expect_values(run(R"({"id": 8, "op": "compare", "inputs": [0, 3], "cmp": "lt"})"), {2, 3},
                {0, 1, 0, 1, 0, 1});
  expect_values(run(R"({"id": 8, "op": "compare", "inputs": [0, 3], "cmp": "eq"})"), {2, 3},
                {1, 0, 1, 0, 0, 0});
  expect_values(run(R"({"id": 8, "op": "compare", "inputs": [3], "cmp": "ge", "scalar": "n"})", 1),
                {1, 3}, {1, 1, 1});
  expect_values(run(R"({"id": 8, "op": "compare", "inputs": [0], "cmp": "le", "scalar": "n"})", 1),
                {2, 3}, {1, 1, 0, 1, 0, 1});
  expect_values(run(R"({"id": 8, "op": "compare", "inputs": [0], "cmp": "ne", "scalar": "n"})", 1),
                {2, 3}, {0, 1, 1, 1, 1, 1});
  expect_values(run(R"({"id": 8, "op": "compare", "inputs": [0], "cmp": "gt", "scalar": "n"})", 0),
                {2, 3}, {1, 0, 1, 0, 1, 0});
  // pred [2, 1] = 1 / 0: row 0 from a, row 1 from v.
  expect_values(run(R"({"id": 8, "op": "select", "inputs": [7, 0, 2]})"), {2, 3},
                {1, -2, 3, 10, 20, 30});
  expect_values(run(R"({"id": 8, "op": "embedding", "inputs": [1, 6]})"), {3, 2},
                {5, 6, 1, 2, 5, 6});
  // ids {2, 0, 2}: row 2 is written twice (the last wins), row 1 is untouched.
  expect_values(run(R"({"id": 8, "op": "index_copy", "inputs": [1, 6, 1]})"), {3, 2},
                {3, 4, 3, 4, 5, 6});
  expect_values(
      run(R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 3], "scalar": "n"})", 1), {2, 3},
      {1, -2, 3, 1, 2, 3});
  expect_values(
      run(R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 3], "scalar": "n"})", 0), {2, 3},
      {1, 2, 3, -4, 5, -6});
  expect_values(run(R"({"id": 8, "op": "dynamic_update_slice", "inputs": [0, 7], "scalar": "n",
                        "axis": 1})",
                    1),
                {2, 3}, {1, 1, 3, -4, 0, -6});
}

TEST(Reference, SoftmaxRowsSumToOne) {
  Graph g = make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [4, 37]},
                           {"id": 1, "op": "scale", "inputs": [0], "value": 20},
                           {"id": 2, "op": "softmax", "inputs": [1]}])",
                       "[2]");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  HostTensor x{{4, 37}, {}};
  for (int i = 0; i < 4 * 37; ++i) x.data.push_back(u(rng));
  HostTensor y = evaluate(g, {{"x", x}}, {}).at(2);
  for (int r = 0; r < 4; ++r) {
    double sum = 0;
    for (int j = 0; j < 37; ++j) {
      float p = y.data[r * 37 + j];
      EXPECT_GE(p, 0.0f);
      EXPECT_LE(p, 1.0f);
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(Reference, LayernormStatistics) {
  Graph g = make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [5, 64]},
                           {"id": 1, "op": "input", "name": "g", "dtype": "fp32", "shape": [64]},
                           {"id": 2, "op": "input", "name": "b", "dtype": "fp32", "shape": [64]},
                           {"id": 3, "op": "layernorm", "inputs": [0, 1, 2]},
                           {"id": 4, "op": "rmsnorm", "inputs": [0, 1]}])",
                       "[3, 4]");
  std::mt19937 rng(5);
  std::normal_distribution<float> n(3, 2);
  HostTensor x{{5, 64}, {}};
  for (int i = 0; i < 5 * 64; ++i) x.data.push_back(n(rng));
  HostTensor ones{{64}, Values(64, 1.0f)}, zeros{{64}, Values(64, 0.0f)};
  auto out = evaluate(g, {{"x", x}, {"g", ones}, {"b", zeros}}, {});
  for (int r = 0; r < 5; ++r) {
    double mean = 0, var = 0, ms = 0;
    for (int j = 0; j < 64; ++j) mean += out.at(3).data[r * 64 + j] / 64.0;
    for (int j = 0; j < 64; ++j) {
      double d = out.at(3).data[r * 64 + j] - mean;
      var += d * d / 64.0;  // biased
      ms += double(out.at(4).data[r * 64 + j]) * out.at(4).data[r * 64 + j] / 64.0;
    }
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(var, 1.0, 1e-4);  // var / (var + 1e-5), var around 4
    EXPECT_NEAR(ms, 1.0, 1e-4);
  }
}

TEST(Reference, OutputsAndInputsAreRoundedToTheirDtype) {
  Graph g = make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "bf16", "shape": [3]},
                           {"id": 1, "op": "scale", "inputs": [0], "value": 1.01},
                           {"id": 2, "op": "scale", "inputs": [0], "value": 1.0001, "dtype": "fp16"},
                           {"id": 3, "op": "scale", "inputs": [0], "value": 2.6, "dtype": "int32"},
                           {"id": 4, "op": "scale", "inputs": [0], "value": 1.01, "dtype": "fp32"}])",
                       "[1, 2, 3, 4]");
  // 1 + 2^-8 is a tie between bf16 neighbours 1 and 1 + 2^-7: to even, 1.
  auto out = evaluate(g, {{"x", {{3}, {1.00390625f, 3.0f, -1.0f}}}}, {});
  EXPECT_EQ(out.at(0).data, (Values{1.0f, 3.0f, -1.0f}));
  EXPECT_EQ(out.at(1).data, (Values{1.0078125f, 3.03125f, -1.0078125f}));  // bf16 of 1.01x
  EXPECT_EQ(out.at(2).data, (Values{1.0f, 3.0f, -1.0f}));                  // fp16 of 1.0001x
  EXPECT_EQ(out.at(3).data, (Values{3.0f, 8.0f, -3.0f}));                  // 2.6, 7.8, -2.6
  EXPECT_EQ(out.at(4).data[0], 1.01f);
  EXPECT_EQ(round_to_dtype(isa::DType::bf16, 1.00390625f), 1.0f);
  EXPECT_EQ(round_to_dtype(isa::DType::fp16, 65520.0f), INFINITY);
  EXPECT_EQ(round_to_dtype(isa::DType::int32, 2.5f), 2.0f);  // ties to even
  EXPECT_EQ(round_to_dtype(isa::DType::fp32, 0.1f), 0.1f);
}

TEST(Reference, UnknownDimsTakeTheGivenExtents) {
  const std::string x =
      R"({"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": ["?", 2]})";
  Graph g = make_graph("[" + x + R"(, {"id": 1, "op": "reduce_sum", "inputs": [0]}])", "[1]");
  const HostTensor given{{3, 2}, {1, 2, 3, 4, 5, 6}};
  expect_values(evaluate(g, {{"x", given}}, {}).at(1), {3, 1}, {3, 7, 11});
  Graph h = make_graph(
      "[" + x + R"(, {"id": 1, "op": "iota", "dtype": "fp32", "shape": ["?"], "axis": 0}])", "[1]");
  EXPECT_EQ(error_of([&] {
              evaluate(h, {{"x", given}}, {});
            }),
            "nodes[1] (op 'iota'): cannot evaluate the unknown dim of fp32[?]");
}

TEST(Reference, InputAndScalarErrors) {
  auto err = [](std::map<std::string, HostTensor> inputs, std::map<std::string, int64_t> scalars,
                const std::string& node = R"({"id": 8, "op": "relu", "inputs": [0]})") {
    return error_of([&] {
      Graph g = make_graph(std::string("[") + kBase + ", " + node + "]", "[8]",
                           R"([{"name": "n", "min": 0, "max": 1}])");
      evaluate(g, inputs, scalars);
    });
  };
  auto inputs = base_inputs();
  EXPECT_EQ(err(inputs, {{"n", 0}}), "no error");
  auto missing = inputs;
  missing.erase("a");
  EXPECT_EQ(err(missing, {{"n", 0}}), "inputs: 'a' not given");
  auto shaped = inputs;
  shaped["a"].shape = {3, 2};
  EXPECT_EQ(err(shaped, {{"n", 0}}), "inputs: 'a' has shape [3, 2], expected [2, 3]");
  auto short_data = inputs;
  short_data["a"].data.pop_back();
  EXPECT_EQ(err(short_data, {{"n", 0}}), "inputs: 'a' has 5 values for shape [2, 3]");
  auto extra = inputs;
  extra["zz"] = {{1}, {0}};
  EXPECT_EQ(err(extra, {{"n", 0}}), "inputs: 'zz' is not an input of the graph");
  EXPECT_EQ(err(inputs, {}), "scalars: 'n' not given");
  EXPECT_EQ(err(inputs, {{"n", 2}}), "scalars: 'n' = 2 is outside [0, 1]");
  EXPECT_EQ(err(inputs, {{"n", 0}, {"m", 0}}), "scalars: 'm' is not a scalar of the graph");
  auto bad_ids = inputs;
  bad_ids["ids"].data = {0, 3, 1};
  EXPECT_EQ(err(bad_ids, {{"n", 0}}, R"({"id": 8, "op": "embedding", "inputs": [1, 6]})"),
            "nodes[8] (op 'embedding'): id 3 at element 1 is out of range [0, 3)");
  // Invalid graphs fail as in infer_types.
  EXPECT_EQ(err(inputs, {{"n", 0}}, R"({"id": 8, "op": "add", "inputs": [0, 1]})"),
            "nodes[8] (op 'add'): cannot broadcast [2, 3] with the second input [3, 2]: 2 vs 3");
}

// A single-head causal self-attention block at seq 2, width 2, with a residual and layernorm,
// against a direct double-precision computation.
TEST(Reference, TinyTransformerBlock) {
  Graph g = make_graph(R"([
      {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [2, 2]},
      {"id": 1, "op": "input", "name": "wq", "dtype": "fp32", "shape": [2, 2], "role": "weight"},
      {"id": 2, "op": "input", "name": "wk", "dtype": "fp32", "shape": [2, 2], "role": "weight"},
      {"id": 3, "op": "input", "name": "wv", "dtype": "fp32", "shape": [2, 2], "role": "weight"},
      {"id": 4, "op": "input", "name": "g", "dtype": "fp32", "shape": [2], "role": "weight"},
      {"id": 5, "op": "input", "name": "b", "dtype": "fp32", "shape": [2], "role": "weight"},
      {"id": 6, "op": "matmul", "inputs": [0, 1]},
      {"id": 7, "op": "matmul", "inputs": [0, 2]},
      {"id": 8, "op": "matmul", "inputs": [0, 3]},
      {"id": 9, "op": "reshape", "inputs": [6], "shape": [1, 2, 2]},
      {"id": 10, "op": "reshape", "inputs": [7], "shape": [1, 2, 2]},
      {"id": 11, "op": "reshape", "inputs": [8], "shape": [1, 2, 2]},
      {"id": 12, "op": "batch_matmul", "inputs": [9, 10], "transpose_b": 1},
      {"id": 13, "op": "scale", "inputs": [12], "value": 0.7071067811865476},
      {"id": 14, "op": "iota", "dtype": "int32", "shape": [2, 2], "axis": 0},
      {"id": 15, "op": "iota", "dtype": "int32", "shape": [2, 2], "axis": 1},
      {"id": 16, "op": "compare", "inputs": [15, 14], "cmp": "gt"},
      {"id": 17, "op": "scale", "inputs": [16], "value": -1e9},
      {"id": 18, "op": "add", "inputs": [13, 17]},
      {"id": 19, "op": "softmax", "inputs": [18]},
      {"id": 20, "op": "batch_matmul", "inputs": [19, 11]},
      {"id": 21, "op": "reshape", "inputs": [20], "shape": [2, 2]},
      {"id": 22, "op": "add", "inputs": [0, 21]},
      {"id": 23, "op": "layernorm", "inputs": [22, 4, 5]}])",
                       "[23]");
  const double x[2][2] = {{0.5, -1.0}, {2.0, 0.25}};
  const double wq[2][2] = {{1.0, 0.5}, {-0.5, 1.0}};
  const double wk[2][2] = {{0.25, 1.0}, {1.0, -1.0}};
  const double wv[2][2] = {{2.0, 0.0}, {1.0, 1.0}};
  auto flat = [](const double m[2][2]) {
    return HostTensor{{2, 2}, {float(m[0][0]), float(m[0][1]), float(m[1][0]), float(m[1][1])}};
  };
  auto out = evaluate(g,
                      {{"x", flat(x)},
                       {"wq", flat(wq)},
                       {"wk", flat(wk)},
                       {"wv", flat(wv)},
                       {"g", {{2}, {1.5f, 0.5f}}},
                       {"b", {{2}, {0.1f, -0.1f}}}},
                      {});
  auto mm = [](const double a[2][2], const double b[2][2], double o[2][2]) {
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) o[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j];
  };
  double q[2][2], k[2][2], v[2][2];
  mm(x, wq, q);
  mm(x, wk, k);
  mm(x, wv, v);
  double want[2][2];
  for (int i = 0; i < 2; ++i) {
    double s[2], p[2], sum = 0;
    for (int j = 0; j < 2; ++j) {
      s[j] = (q[i][0] * k[j][0] + q[i][1] * k[j][1]) / std::sqrt(2.0);
      p[j] = j > i ? 0.0 : std::exp(s[j]);
      sum += p[j];
    }
    double h[2];
    for (int c = 0; c < 2; ++c) h[c] = x[i][c] + (p[0] * v[0][c] + p[1] * v[1][c]) / sum;
    double mean = (h[0] + h[1]) / 2;
    double var = ((h[0] - mean) * (h[0] - mean) + (h[1] - mean) * (h[1] - mean)) / 2;
    want[i][0] = (h[0] - mean) / std::sqrt(var + 1e-5) * 1.5 + 0.1;
    want[i][1] = (h[1] - mean) / std::sqrt(var + 1e-5) * 0.5 - 0.1;
  }
  expect_values(out.at(23), {2, 2},
                {float(want[0][0]), float(want[0][1]), float(want[1][0]), float(want[1][1])},
                1e-5f);
  // The mask hid position 1 from row 0 entirely.
  EXPECT_EQ(out.at(19).data[1], 0.0f);
}

}  // namespace
}  // namespace wallsim::compiler_stub
