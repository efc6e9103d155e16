// Packed plans (isa::PackedPlan, how the compile cache holds bodies it dropped): unpacking gives
// back the plan exactly, and packed it takes a fraction of its in-memory size.
#include "wallsim/isa/plan_pack.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "../support/chip_arch.h"
#include "test_plans.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::isa {
namespace {

// Every field bit for bit, the free dims past num_free included (operator== skips those).
void expect_identical(const Plan& a, const Plan& b) {
  ASSERT_TRUE(a == b);
  for (size_t s = 0; s < a.streams.size(); ++s) {
    const auto& x = a.streams[s].instructions;
    const auto& y = b.streams[s].instructions;
    for (size_t i = 0; i < x.size(); ++i) {
      const Instruction* ins[2] = {&x[i], &y[i]};
      const AccessPattern* aps[2][5];
      for (int k = 0; k < 2; ++k) {
        aps[k][0] = &ins[k]->dst;
        aps[k][1] = &ins[k]->src[0];
        aps[k][2] = &ins[k]->src[1];
        aps[k][3] = &ins[k]->src[2];
        aps[k][4] = &ins[k]->accum;
      }
      for (int k = 0; k < 5; ++k) {
        for (int d = 0; d < kMaxFreeDims; ++d) {
          ASSERT_TRUE(aps[0][k]->free[d] == aps[1][k]->free[d]) << "stream " << s << " #" << i;
        }
      }
      EXPECT_EQ(std::memcmp(&x[i].scale, &y[i].scale, sizeof(double)), 0);
      EXPECT_EQ(std::memcmp(&x[i].scalar.imm, &y[i].scalar.imm, sizeof(double)), 0);
    }
  }
}

int64_t in_memory_bytes(const Plan& p) {
  int64_t b = 0;
  for (const Stream& s : p.streams) {
    for (const Instruction& in : s.instructions) {
      b += sizeof(Instruction) + (in.waits.size() * sizeof(SemWait)) +
           (in.signals.size() * sizeof(SemSignal));
    }
  }
  return b;
}

TEST(PlanPack, ExamplePlansUnpackToThemselves) {
  for (const char* name : {"matmul", "vector_add", "softmax", "gather"}) {
    for (const Plan& p : plan_sequence_from_json(testing::example_json(name)).plans) {
      expect_identical(PackedPlan(p).unpack(), p);
    }
  }
}

TEST(PlanPack, OddFieldsRoundTrip) {
  Plan p = plan_sequence_from_json(testing::example_json("matmul")).plans.at(0);
  Instruction& in = p.streams.at(0).instructions.at(0);
  in.dst.free[3] = {5, -7};  // past num_free: not compared by operator==, kept all the same
  in.dst.offset = int64_t{1} << 40;
  in.src[2].partition_stride = std::numeric_limits<int64_t>::min();
  in.src[2].scalar_stride = std::numeric_limits<int64_t>::max();
  in.scale = -0.0;
  in.bias = std::numeric_limits<double>::quiet_NaN();
  in.scalar = {3, 2.5};
  in.node = -1;
  in.waits.push_back({2, int64_t{1} << 48});
  in.signals.push_back({0, -3});
  in.reverse = true;
  in.start = false;
  const Plan q = PackedPlan(p).unpack();
  const Instruction& out = q.streams.at(0).instructions.at(0);
  EXPECT_TRUE(out.dst.free[3] == (Dim{5, -7}));
  EXPECT_EQ(out.dst.offset, int64_t{1} << 40);
  EXPECT_EQ(out.src[2].partition_stride, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(out.src[2].scalar_stride, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(std::signbit(out.scale));
  EXPECT_TRUE(std::isnan(out.bias));
  EXPECT_EQ(out.waits, in.waits);
  EXPECT_EQ(out.signals, in.signals);
  EXPECT_TRUE(out.reverse);
  EXPECT_FALSE(out.start);
  EXPECT_TRUE(out.stop);
  EXPECT_EQ(out.scalar, in.scalar);
}

TEST(PlanPack, CompiledPlansUnpackToThemselvesAtAFifthOfTheirSize) {
  int compiled = 0;
  for (const char* name : {"mlp", "transformer_block", "decode_attention", "gemm_4096"}) {
    auto g = compiler_stub::read_graph_file(std::string(WALLSIM_SOURCE_DIR) + "/examples/graphs/" +
                                            name + ".json");
    compiler_stub::infer_types(g);
    for (auto policy : {compiler_stub::GroupPolicy::whole, compiler_stub::GroupPolicy::per_op}) {
      auto r = compiler_stub::compile_graph(g, wallsim::test::trn2_arch(), policy);
      if (!std::holds_alternative<compiler_stub::CompiledGraph>(r)) continue;  // too big here
      ++compiled;
      int64_t packed = 0, unpacked = 0;
      for (const Plan& p : std::get<compiler_stub::CompiledGraph>(r).plans.plans) {
        const PackedPlan pk(p);
        EXPECT_EQ(pk.instruction_count(), p.instruction_count());
        expect_identical(pk.unpack(), p);
        packed += pk.instruction_bytes();
        unpacked += in_memory_bytes(p);
      }
      EXPECT_LT(5 * packed, unpacked) << name << ": " << packed << " packed of " << unpacked;
    }
  }
  EXPECT_GE(compiled, 6);
}

}  // namespace
}  // namespace wallsim::isa
