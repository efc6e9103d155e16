// choose_weight_layout: a weight read only through transposes of one permutation is stored so;
// any other reader keeps it as given. lay_out permutes its values as the transpose would.
#include <gtest/gtest.h>

#include "wallsim/compiler_stub/weight_layouts.h"

namespace wallsim::compiler_stub {
namespace {

TensorType matrix(int64_t r, int64_t c) {
  TensorType t;
  t.dims = {Dim::of(r), Dim::of(c)};
  return t;
}

Node reader(OpKind op, std::vector<int64_t> perm = {}) {
  Node n;
  n.op = op;
  n.inputs = {0};
  if (!perm.empty()) n.attrs["perm"] = perm;
  return n;
}

TEST(WeightLayouts, AWeightReadOnlyAsItsTransposeIsStoredTransposed) {
  const Node t1 = reader(OpKind::transpose, {1, 0}), t2 = reader(OpKind::transpose, {1, 0});
  const WeightLayout l = choose_weight_layout(matrix(64, 16), {&t1, &t2});
  EXPECT_EQ(l.perm, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(stored_type(matrix(64, 16), l), matrix(16, 64));
  EXPECT_EQ(inverse(WeightLayout{{1, 2, 0}}), (std::vector<int64_t>{2, 0, 1}));
}

TEST(WeightLayouts, AnyOtherReaderKeepsTheWeightAsGiven) {
  const Node t = reader(OpKind::transpose, {1, 0}), mm = reader(OpKind::matmul);
  const Node other = reader(OpKind::transpose, {0, 1});
  EXPECT_TRUE(choose_weight_layout(matrix(8, 8), {&t, &mm}).as_given());
  EXPECT_TRUE(choose_weight_layout(matrix(8, 8), {&mm}).as_given());
  EXPECT_TRUE(choose_weight_layout(matrix(8, 8), {}).as_given());
  EXPECT_TRUE(choose_weight_layout(matrix(8, 8), {&other}).as_given());  // the identity
  const Node a = reader(OpKind::transpose, {1, 2, 0}), b = reader(OpKind::transpose, {2, 0, 1});
  TensorType cube = matrix(2, 3);
  cube.dims.push_back(Dim::of(4));
  EXPECT_TRUE(choose_weight_layout(cube, {&a, &b}).as_given());  // two permutations
  EXPECT_EQ(choose_weight_layout(cube, {&a}).perm, (std::vector<int64_t>{1, 2, 0}));
}

TEST(WeightLayouts, LayOutPermutesTheValues) {
  const HostTensor w{{2, 3}, {1, 2, 3, 4, 5, 6}};
  const HostTensor t = lay_out(w, isa::DType::fp32, WeightLayout{{1, 0}});
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(lay_out(w, isa::DType::fp32, {}).data, w.data);
}

}  // namespace
}  // namespace wallsim::compiler_stub
