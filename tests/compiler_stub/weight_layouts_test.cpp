// choose_weight_layout: a weight read only through transposes of one permutation, or only
// through one reshape and then such transposes, is stored as their result; any other reader
// keeps it as given. lay_out lays its values out as those ops would.
#include <gtest/gtest.h>

#include <map>

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

// A [4, 2, 3] weight read as transpose(reshape(w, [4, 6]), [1, 0]) (a convolution's weight).
struct ReshapeThenTranspose {
  TensorType type = matrix(4, 2);
  Node r1 = reader(OpKind::reshape), r2 = reader(OpKind::reshape);
  Node t1 = reader(OpKind::transpose, {1, 0}), t2 = reader(OpKind::transpose, {1, 0});
  std::map<int32_t, std::vector<const Node*>> readers;
  ReshapeThenTranspose() {
    type.dims.push_back(Dim::of(3));
    r1.id = 1;
    r2.id = 2;
    r1.attrs["shape"] = r2.attrs["shape"] = std::vector<int64_t>{4, 6};
    readers[1] = {&t1};
    readers[2] = {&t2};
  }
  ReadersOf readers_of() {
    return [this](int32_t id) -> const std::vector<const Node*>* {
      auto it = readers.find(id);
      return it == readers.end() ? nullptr : &it->second;
    };
  }
};

TEST(WeightLayouts, AWeightReadOnlyThroughOneReshapeAndTransposeIsStoredAsTheirResult) {
  ReshapeThenTranspose c;
  const WeightLayout l = choose_weight_layout(c.type, {&c.r1, &c.r2}, c.readers_of());
  EXPECT_EQ(l.reshape, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(l.perm, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(reshaped_type(c.type, l), matrix(4, 6));
  EXPECT_EQ(stored_type(c.type, l), matrix(6, 4));
  // Not followed without the readers of the reshapes.
  EXPECT_TRUE(choose_weight_layout(c.type, {&c.r1, &c.r2}).as_given());
}

TEST(WeightLayouts, AChainWithAnyOtherReaderKeepsTheWeightAsGiven) {
  {
    ReshapeThenTranspose c;  // a reshape's value also read by a matmul
    const Node mm = reader(OpKind::matmul);
    c.readers[2].push_back(&mm);
    EXPECT_TRUE(choose_weight_layout(c.type, {&c.r1, &c.r2}, c.readers_of()).as_given());
  }
  {
    ReshapeThenTranspose c;  // a reshape's value read by the host
    c.readers.erase(2);
    EXPECT_TRUE(choose_weight_layout(c.type, {&c.r1, &c.r2}, c.readers_of()).as_given());
  }
  {
    ReshapeThenTranspose c;  // two shapes
    c.r2.attrs["shape"] = std::vector<int64_t>{8, 3};
    c.t2.attrs["perm"] = std::vector<int64_t>{1, 0};
    EXPECT_TRUE(choose_weight_layout(c.type, {&c.r1, &c.r2}, c.readers_of()).as_given());
  }
  {
    ReshapeThenTranspose c;  // the weight itself also read as given
    const Node mm = reader(OpKind::matmul);
    EXPECT_TRUE(choose_weight_layout(c.type, {&c.r1, &mm}, c.readers_of()).as_given());
  }
  {
    ReshapeThenTranspose c;  // a reshape that is not static
    c.r1.attrs["shape"] = c.r2.attrs["shape"] = std::vector<int64_t>{4, -1};
    EXPECT_TRUE(choose_weight_layout(c.type, {&c.r1, &c.r2}, c.readers_of()).as_given());
  }
}

TEST(WeightLayouts, LayOutPermutesTheValues) {
  const HostTensor w{{2, 3}, {1, 2, 3, 4, 5, 6}};
  const HostTensor t = lay_out(w, isa::DType::fp32, WeightLayout{{1, 0}});
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(lay_out(w, isa::DType::fp32, {}).data, w.data);
  // Reshaped to [3, 2] first: [[1, 2], [3, 4], [5, 6]], then transposed.
  const HostTensor r = lay_out(w, isa::DType::fp32, WeightLayout{{1, 0}, {3, 2}});
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.data, (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

}  // namespace
}  // namespace wallsim::compiler_stub
