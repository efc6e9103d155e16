// Group signatures: stable, shape-sensitive, arch-sensitive, independent of node numbering.
#include "wallsim/compiler_stub/signature.h"

#include <gtest/gtest.h>

#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

Graph chain(int64_t rows, int first_id, const std::string& len_dim = "") {
  std::string shape = len_dim.empty() ? std::to_string(rows) : len_dim;
  std::string a = std::to_string(first_id), b = std::to_string(first_id + 1),
              c = std::to_string(first_id + 2);
  Graph g = graph_from_json(base::Json::parse(
      R"({"format": "wallsim-graph", "version": 1, "name": "c",
          "scalars": [{"name": "len", "min": 1, "max": 512}],
          "nodes": [{"id": )" +
      a + R"(, "op": "input", "name": "x", "dtype": "bf16", "shape": [)" + shape +
      R"(, 64], "role": "input"},
          {"id": )" +
      b + R"(, "op": "exp", "inputs": [)" + a + R"(]},
          {"id": )" +
      c + R"(, "op": "scale", "inputs": [)" + b + R"(], "value": 0.5}],
          "outputs": [)" +
      c + "]}"));
  infer_types(g);
  return g;
}

std::vector<int32_t> ops(const Graph& g) { return {g.nodes[1].id, g.nodes[2].id}; }

TEST(Signature, SameComputationSameSignatureWhateverTheIds) {
  const uint64_t arch = arch_fingerprint(isa::ArchSpec{});
  Graph a = chain(128, 0), b = chain(128, 40);
  EXPECT_EQ(group_signature(a, ops(a), arch).hash, group_signature(b, ops(b), arch).hash);
  EXPECT_EQ(group_signature(a, ops(a), arch).hex().size(), 16u);
}

TEST(Signature, ShapesChangeTheKeyButNotTheShapeFreeKey) {
  const uint64_t arch = arch_fingerprint(isa::ArchSpec{});
  Graph a = chain(128, 0), b = chain(256, 0);
  auto sa = group_signature(a, ops(a), arch), sb = group_signature(b, ops(b), arch);
  EXPECT_NE(sa.hash, sb.hash);
  EXPECT_EQ(sa.shape_free, sb.shape_free);
}

TEST(Signature, BoundedDimsKeyByTheirMaximum) {
  const uint64_t arch = arch_fingerprint(isa::ArchSpec{});
  Graph bounded = chain(0, 0, R"({"max": 512, "scalar": "len"})");
  Graph fixed = chain(512, 0);
  auto s = group_signature(bounded, ops(bounded), arch);
  EXPECT_NE(s.text.find("bf16[<=512,64]"), std::string::npos) << s.text;
  EXPECT_NE(s.hash, group_signature(fixed, ops(fixed), arch).hash);  // bounded is not static
}

TEST(Signature, ArchIsPartOfTheKey) {
  isa::ArchSpec small;
  small.sbuf.bytes_per_partition = 64 * 1024;
  Graph a = chain(128, 0);
  EXPECT_NE(group_signature(a, ops(a), arch_fingerprint(isa::ArchSpec{})).hash,
            group_signature(a, ops(a), arch_fingerprint(small)).hash);
}

TEST(Signature, CanonicalText) {
  Graph a = chain(128, 3);
  auto s = group_signature(a, ops(a), 42);
  EXPECT_EQ(s.text,
            "arch 42\n%0 = exp($0:bf16[128,64]) -> bf16[128,64]\n"
            "%1 = scale(%0) value=0.5 -> bf16[128,64]\n"
            "out %1\n");
}

TEST(Signature, TheGroupsOutputsArePartOfTheKey) {
  // The same ops with another value leaving the group write other HBM tensors: another plan.
  const uint64_t arch = arch_fingerprint(isa::ArchSpec{});
  Graph a = chain(128, 0), b = chain(128, 0);
  b.outputs = {b.nodes[1].id, b.nodes[2].id};
  EXPECT_NE(group_signature(a, ops(a), arch).hash, group_signature(b, ops(b), arch).hash);
}

}  // namespace
}  // namespace wallsim::compiler_stub
