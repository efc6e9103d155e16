// The implicit-GEMM convolution (window_matmul.cpp) on the chip against the reference evaluator:
// kernel sizes, strides, dilations, padding by a zero border, channel chunks and column blocks,
// bf16, a fused bias and relu, on trn2 and trn1; the route is chosen and reads x once. One
// device per process: one run per test.
#include "on_chip_run.h"

namespace wallsim::compiler_stub {
namespace {

using test::load;
using test::Outcome;
using test::run_on_chip;

struct Conv {
  int64_t n, c, hw, oc, k, s, d;
  std::string dt = "fp32";
  int64_t pad = 0;    // a zero border of `pad` made by concats with a zeros input (the importer's)
  bool bias = false;  // + bias_add and relu
};

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// x [n, c, hw, hw] (padded by `pad` zeros on each side when asked), w [c*k*k, oc]: im2col, the
// transpose and reshape the importer writes, and the matmul.
Graph conv_graph(const Conv& v) {
  const int64_t hw = v.hw + 2 * v.pad, span = (v.k - 1) * v.d + 1;
  const int64_t o = (hw - span) / v.s + 1, ck = v.c * v.k * v.k, px = v.n * o * o;
  std::string nodes = R"({"id": 0, "op": "input", "name": "x", "dtype": ")" + v.dt +
                      R"(", "shape": )" + ints({v.n, v.c, v.hw, v.hw}) + R"(, "role": "input"},
    {"id": 1, "op": "input", "name": "w", "dtype": ")" +
                      v.dt + R"(", "shape": )" + ints({ck, v.oc}) +
                      R"(, "role": "weight"},
    {"id": 2, "op": "input", "name": "b", "dtype": ")" +
                      v.dt + R"(", "shape": )" + ints({v.oc}) + R"(, "role": "weight"},)";
  int32_t x = 0, id = 3;
  if (v.pad) {
    // Zeros as x - x: a border [n, c, pad, hw] above and below, [n, c, hw + 2 pad, pad] beside.
    auto zeros = [&](std::vector<int64_t> shape) {
      nodes += R"({"id": )" + std::to_string(id) + R"(, "op": "input", "name": "z)" +
               std::to_string(id) + R"(", "dtype": ")" + v.dt + R"(", "shape": )" + ints(shape) +
               R"(, "role": "input"},
    {"id": )" + std::to_string(id + 1) +
               R"(, "op": "sub", "inputs": [)" + std::to_string(id) + ", " + std::to_string(id) +
               "]},";
      id += 2;
      return id - 1;
    };
    const int32_t rows = zeros({v.n, v.c, v.pad, v.hw});
    nodes += R"({"id": )" + std::to_string(id) + R"(, "op": "concat", "inputs": [)" +
             std::to_string(rows) + ", 0, " + std::to_string(rows) + R"(], "axis": 2},)";
    const int32_t tall = id++;
    const int32_t cols = zeros({v.n, v.c, hw, v.pad});
    nodes += R"({"id": )" + std::to_string(id) + R"(, "op": "concat", "inputs": [)" +
             std::to_string(cols) + ", " + std::to_string(tall) + ", " + std::to_string(cols) +
             R"(], "axis": 3},)";
    x = id++;
  }
  const int32_t im = id;
  nodes += R"({"id": )" + std::to_string(im) + R"(, "op": "im2col", "inputs": [)" +
           std::to_string(x) + R"(], "kernel": )" + ints({v.k, v.k}) + R"(, "strides": )" +
           ints({v.s, v.s}) + R"(, "dilations": )" + ints({v.d, v.d}) + R"(},
    {"id": )" +
           std::to_string(im + 1) + R"(, "op": "transpose", "inputs": [)" + std::to_string(im) +
           R"(], "perm": [0, 2, 3, 1, 4, 5]},
    {"id": )" +
           std::to_string(im + 2) + R"(, "op": "reshape", "inputs": [)" + std::to_string(im + 1) +
           R"(], "shape": )" + ints({px, ck}) + R"(},
    {"id": )" +
           std::to_string(im + 3) + R"(, "op": "matmul", "inputs": [)" + std::to_string(im + 2) +
           R"(, 1]})";
  int32_t out = im + 3;
  if (v.bias) {
    nodes += R"(,
    {"id": )" +
             std::to_string(im + 4) + R"(, "op": "bias_add", "inputs": [)" +
             std::to_string(im + 3) + R"(, 2]},
    {"id": )" +
             std::to_string(im + 5) + R"(, "op": "relu", "inputs": [)" + std::to_string(im + 4) +
             "]}";
    out = im + 5;
  }
  return test::graph(R"({"format": "wallsim-graph", "version": 1, "name": "conv", "nodes": [)" +
                     nodes + R"(], "outputs": [)" + std::to_string(out) + "]}");
}

LoweringOptions schedule(int64_t point) {
  LoweringOptions o;
  o.matmul_schedule = point;
  return o;
}

// Array instructions by opcode over a compiled graph's plans.
std::map<isa::Opcode, int64_t> ops_of(const Graph& g, const std::string& config,
                                      const LoweringOptions& options = {}) {
  auto r = compile_graph(g, load(config).chip.arch, GroupPolicy::whole, {}, options);
  std::map<isa::Opcode, int64_t> out;
  if (auto* e = std::get_if<CompileError>(&r)) {
    ADD_FAILURE() << e->message();
    return out;
  }
  for (const isa::Plan& p : std::get<CompiledGraph>(r).plans.plans)
    for (const auto& s : p.streams)
      for (const isa::Instruction& in : s.instructions) ++out[in.op];
  return out;
}

double tolerance(const Conv& v) { return v.dt == "bf16" ? 2e-2 : 1e-5; }

// `matmuls` (when >= 0): the array's multiplies the plan must hold.
void expect_matches(const Conv& v, const std::string& config, int64_t point = -1,
                    int64_t matmuls = -1) {
  auto ops = ops_of(conv_graph(v), config, schedule(point));
  EXPECT_EQ(ops[isa::Opcode::transpose], 0);
  if (matmuls >= 0) EXPECT_EQ(ops[isa::Opcode::matmul], matmuls);
  Outcome o = run_on_chip(conv_graph(v), config, GroupPolicy::whole, {}, schedule(point));
  EXPECT_LT(o.max_error, tolerance(v));
}

// The window route: per output tile (whole output rows, 128 / OW of them) and column block,
// KH·KW·ceil(C/128) multiplies; no transposes; x, w and the output cross HBM once each. C·KH =
// 144 exceeds the array's rows, so the kernel rows cannot fold into the contraction.
TEST(WindowConvOnChip, RouteIsChosenAndReadsXOnce) {
  const Conv v{2, 48, 18, 24, 3, 1, 1};  // OH = OW = 16: 8 rows per tile, 2 tiles per image
  auto ops = ops_of(conv_graph(v), "trn2");
  EXPECT_EQ(ops[isa::Opcode::matmul], 2 * 2 * 9);
  EXPECT_EQ(ops[isa::Opcode::transpose], 0);
  Outcome o = run_on_chip(conv_graph(v), "trn2", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-5);
  const int64_t bytes = 4 * (2 * 48 * 18 * 18 + 432 * 24 + 2 * 16 * 16 * 24);
  EXPECT_GE(o.hbm_bytes, bytes);
  EXPECT_LT(o.hbm_bytes, bytes * 105 / 100);  // HBM's access granularity on short rows
}

// C·KH = 48 fits the array's rows: the kernel rows fold into the contraction. Partition
// c·KH + kh holds channel c's input rows oh + kh, one per output row (x read 3 x 16 / 18
// times over), and each output tile takes KW multiplies of 48 rows, not KH·KW of 16.
TEST(WindowConvOnChip, KernelRowsFoldIntoTheContractionWhereTheyFit) {
  const Conv v{2, 16, 18, 24, 3, 1, 1};
  auto ops = ops_of(conv_graph(v), "trn2");
  EXPECT_EQ(ops[isa::Opcode::matmul], 2 * 2 * 3);
  EXPECT_EQ(ops[isa::Opcode::transpose], 0);
  Outcome o = run_on_chip(conv_graph(v), "trn2", GroupPolicy::whole);
  EXPECT_LT(o.max_error, 1e-5);
  const int64_t bytes = 4 * (2 * 16 * 3 * 16 * 18 + 144 * 24 + 2 * 16 * 16 * 24);
  EXPECT_GE(o.hbm_bytes, bytes);
  EXPECT_LT(o.hbm_bytes, bytes * 105 / 100);
}

// compiler.matmul_schedule = 0 keeps the rules' point: A's row tiles loaded and transposed
// through the array (and read KH·KW times over).
TEST(WindowConvOnChip, RulesPointStaysAvailable) {
  const Conv v{2, 16, 18, 24, 3, 1, 1};
  auto ops = ops_of(conv_graph(v), "trn2", schedule(0));
  EXPECT_GT(ops[isa::Opcode::transpose], 0);
  EXPECT_EQ(ops_of(conv_graph(v), "trn2", schedule(-2))[isa::Opcode::transpose],
            ops[isa::Opcode::transpose]);
  Outcome o = run_on_chip(conv_graph(v), "trn2", GroupPolicy::whole, {}, schedule(0));
  EXPECT_LT(o.max_error, 1e-5);
  EXPECT_GT(o.hbm_bytes, 4 * (2 * 16 * 18 * 18 + 144 * 24 + 2 * 16 * 16 * 24) * 3 / 2);
}

TEST(WindowConvOnChip, Trn2K3S1) { expect_matches({2, 16, 18, 24, 3, 1, 1}, "trn2", 1); }
// Folded with a stride and a dilation: the shifted rows are read sh rows apart, kh·dh down.
TEST(WindowConvOnChip, Trn2FoldedK3S2Dilation2) {
  expect_matches({2, 5, 21, 12, 3, 2, 2}, "trn2", 1, 2 * 3);  // one 9 x 9 tile an image
}
// A ResNet stem's shape, smaller: C = 3, 7 x 7, stride 2, padded, bf16 (21 rows folded).
TEST(WindowConvOnChip, Trn2FoldedStemBf16) {
  expect_matches({2, 3, 45, 32, 7, 2, 1, "bf16", 3}, "trn2", 1, 2 * 5 * 7);  // 5 tiles of 23^2
}
TEST(WindowConvOnChip, Trn2K3S2) { expect_matches({3, 8, 17, 20, 3, 2, 1}, "trn2", 1); }
TEST(WindowConvOnChip, Trn2K3Dilation2) { expect_matches({1, 8, 20, 12, 3, 1, 2}, "trn2", 1); }
TEST(WindowConvOnChip, Trn2K5Padded) {
  expect_matches({2, 6, 12, 10, 5, 1, 1, "fp32", 2}, "trn2", 1);
}
TEST(WindowConvOnChip, Trn2K1) { expect_matches({2, 40, 14, 30, 1, 1, 1}, "trn2", 1); }
TEST(WindowConvOnChip, Trn2K1S2) { expect_matches({2, 40, 14, 30, 1, 2, 1}, "trn2", 1); }
// C = 200: a short second channel chunk; OC = 600: two column blocks; OW = 130: row pieces.
TEST(WindowConvOnChip, Trn2ChannelChunksAndColumnBlocks) {
  expect_matches({1, 200, 8, 600, 3, 1, 1}, "trn2", 1);
}
TEST(WindowConvOnChip, Trn2WideRows) { expect_matches({1, 4, 132, 8, 3, 1, 1}, "trn2", 1); }
TEST(WindowConvOnChip, Trn2Bf16) { expect_matches({2, 64, 16, 64, 3, 1, 1, "bf16", 1}, "trn2", 1); }
TEST(WindowConvOnChip, Trn2BiasRelu) {
  expect_matches({2, 16, 12, 24, 3, 1, 1, "fp32", 1, true}, "trn2", 1);
}
TEST(WindowConvOnChip, Trn2CostModelPick) { expect_matches({2, 64, 30, 64, 3, 1, 1}, "trn2"); }
TEST(WindowConvOnChip, Trn1K3S2Padded) {
  expect_matches({2, 24, 15, 40, 3, 2, 1, "fp32", 1}, "trn1", 1);
}
TEST(WindowConvOnChip, Trn1K7S2Bf16) {
  expect_matches({1, 3, 37, 16, 7, 2, 1, "bf16", 3}, "trn1", 1);
}
TEST(WindowConvOnChip, Trn1Dilation2BiasRelu) {
  expect_matches({2, 130, 11, 70, 3, 1, 2, "fp32", 0, true}, "trn1", 1);
}

// The torch capture's padded x is a [N·C·H, W] value reshaped to [N, C, H, W]: the window is
// recognised from the view's strides over that flat base.
TEST(WindowConvOnChip, Trn2FlatBase) {
  const Graph g =
      test::graph(R"({"format": "wallsim-graph", "version": 1, "name": "conv", "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [160, 10], "role": "input"},
    {"id": 1, "op": "input", "name": "w", "dtype": "fp32", "shape": [72, 12], "role": "weight"},
    {"id": 2, "op": "reshape", "inputs": [0], "shape": [2, 8, 10, 10]},
    {"id": 3, "op": "im2col", "inputs": [2], "kernel": [3, 3], "strides": [1, 1], "dilations": [1, 1]},
    {"id": 4, "op": "transpose", "inputs": [3], "perm": [0, 2, 3, 1, 4, 5]},
    {"id": 5, "op": "reshape", "inputs": [4], "shape": [128, 72]},
    {"id": 6, "op": "matmul", "inputs": [5, 1]}], "outputs": [6]})");
  auto ops = ops_of(g, "trn2", schedule(1));
  EXPECT_EQ(ops[isa::Opcode::transpose], 0);
  EXPECT_EQ(ops[isa::Opcode::matmul], 2 * 3);  // one tile of 8 rows of 8 per image, folded
  Outcome o = run_on_chip(g, "trn2", GroupPolicy::whole, {}, schedule(1));
  EXPECT_LT(o.max_error, 1e-5);
}

}  // namespace
}  // namespace wallsim::compiler_stub
