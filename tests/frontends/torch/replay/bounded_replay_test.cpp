// BoundedReplay (frontends/torch) on its own, without a runtime: how each op of a program runs
// at its dims' bounds, the masks and scalars exactness needs, and the ops it refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "wallsim/base/params.h"
#include "wallsim/torch/bounded_replay.h"

namespace wallsim::torch {
namespace {

Program program(const std::string& name, const std::string& events) {
  const std::string path =
      ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << R"({"format": "wallsim-program", "version": 1, "name": ")" << name
                      << R"(", "events": [)" << events << "]}";
  return read_program_file(path);
}

// x [2, seq=5, 8] (seq named), then `op` with its attrs and captured shape.
std::string with_op(const std::string& op, const std::string& attrs, const std::string& shape) {
  return R"({"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[2,5,8],
      "dim_names":[null,"seq",null]},
      {"ev":"op","id":1,"op":")" +
         op + R"(","inputs":[0],"attrs":)" + attrs + R"(,"dtype":"fp32","shape":)" + shape +
         R"(,"aten":"aten.x","module":"m"})";
}

std::string error_of(const Program& p, std::map<std::string, int64_t> bounds) {
  try {
    BoundedReplay b(p, std::move(bounds));
  } catch (const base::InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return what.substr(p.file.size() + 2);
  }
  return "";
}

TEST(BoundedReplay, WithoutBoundsEveryOpRunsAsCaptured) {
  const Program p = program("plain", with_op("softmax", "{}", "[2,5,8]"));
  const BoundedReplay b(p, {});
  EXPECT_TRUE(b.op(1).masks.empty());
  EXPECT_FALSE(b.op(1).gather);
  EXPECT_EQ(b.run_shape(b.tensor(0)), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(b.bound_of(b.tensor(0), 1), -1);
  EXPECT_TRUE(b.scalar_offsets().empty());
}

TEST(BoundedReplay, AReductionOverABoundedAxisIsMaskedAndReadsOneScalar) {
  // seq is the last axis: softmax over it masks the padded keys with -1e9 first.
  const Program p = program("sm", R"({"ev":"input","id":0,"name":"x","dtype":"fp32",
      "shape":[2,8,5],"dim_names":[null,null,"seq"]},
      {"ev":"op","id":1,"op":"softmax","inputs":[0],"attrs":{},"dtype":"fp32","shape":[2,8,5],"dim_names":[null,null,"seq"],
      "aten":"aten._softmax","module":"attn"})");
  const BoundedReplay b(p, {{"seq", 16}});
  EXPECT_EQ(b.run_shape(b.tensor(0)), (std::vector<int64_t>{2, 8, 16}));
  ASSERT_EQ(b.op(1).masks.size(), 1u);
  EXPECT_EQ(b.op(1).masks[0].input, 0u);
  EXPECT_EQ(b.op(1).masks[0].axis, 2u);
  EXPECT_EQ(b.op(1).masks[0].fill, -1e9f);
  // One scalar: seq's real extent, at offset 0 from the step's base extent.
  ASSERT_EQ(b.scalar_offsets().count("seq"), 1u);
  EXPECT_EQ(b.scalar_offsets().at("seq"), (std::set<int64_t>{0}));
  EXPECT_EQ(b.base_extent(0, "seq"), 5);
  EXPECT_EQ(b.scalar_name("seq", 0), "seq");
  EXPECT_EQ(b.scalar_name("seq", 2), "seq_p2");
  EXPECT_EQ(b.scalar_name("seq", -1), "seq_m1");
}

TEST(BoundedReplay, TheLastPositionIsAGatherAtTheRunTimeExtent) {
  // x[:, -1]: a one-position slice relative to seq's extent.
  const Program p = program("last", R"({"ev":"input","id":0,"name":"x","dtype":"fp32",
      "shape":[1,5,8],"dim_names":[null,"seq",null]},
      {"ev":"op","id":1,"op":"slice","inputs":[0],"attrs":{"axis":1,
      "start":{"dim":"seq","offset":-1},"limit":{"dim":"seq","offset":0}},
      "dtype":"fp32","shape":[1,1,8],"aten":"aten.select.int","module":""})");
  const BoundedReplay b(p, {{"seq", 16}});
  ASSERT_TRUE(b.op(1).gather);
  EXPECT_EQ(b.op(1).gather->axis, 1u);
  EXPECT_EQ(b.op(1).gather->at, 4);
  EXPECT_EQ(BoundedReplay::gather_dim(p.events[1]), "seq");
  EXPECT_EQ(b.scalar_offsets().at("seq"), (std::set<int64_t>{-1}));
}

TEST(BoundedReplay, AnInexactOpOrAnExtentOverItsBoundIsOneLine) {
  const Program mean = program("mean", R"({"ev":"input","id":0,"name":"x","dtype":"fp32",
      "shape":[2,8,5],"dim_names":[null,null,"seq"]},
      {"ev":"op","id":1,"op":"reduce_mean","inputs":[0],"attrs":{},"dtype":"fp32",
      "shape":[2,8,1],"aten":"aten.mean.dim","module":"pool"})");
  EXPECT_EQ(error_of(mean, {{"seq", 16}}),
            "events[1] (op reduce_mean, aten.mean.dim): cannot run with a bounded dim: it "
            "reduces over a bounded axis by its extent");
  EXPECT_EQ(error_of(mean, {}), "");  // as captured it is exact
  const Program p = program("over", with_op("relu", "{}", "[2,5,8]"));
  EXPECT_EQ(error_of(p, {{"seq", 4}}),
            "events[0] (input): dim 'seq' has extent 5, over its bound 4");
}

}  // namespace
}  // namespace wallsim::torch
