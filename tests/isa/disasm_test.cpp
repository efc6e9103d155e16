// The disassembler's line format.
#include "wallsim/isa/disasm.h"

#include <gtest/gtest.h>

#include "test_plans.h"

namespace wallsim::isa {
namespace {

using testing::example_plan;

TEST(Disasm, OneLinePerInstruction) {
  PlanSequence seq{{example_plan("matmul")}};
  std::string text = disassemble(seq);
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  // header + semaphores + 3 tensors + 4 buffers + 2 nodes + 12 instructions
  EXPECT_EQ(lines, 1u + 1 + 3 + 4 + 2 + 12);
  EXPECT_NE(text.find("  tensor[1]    matmul dst=c_ps<fp32>[p0:128][+0; 512*1] "
                      "stationary=a_sb<bf16>[p0:128][+256; 128*1] "
                      "moving=b_sb<bf16>[p0:128][+512; 512*1] stop signal(mm_done+=1) @node 0\n"),
            std::string::npos)
      << text;
}

TEST(Disasm, ShowsBroadcastScalarsAndReverse) {
  Plan p = example_plan("softmax");
  const Stream& vec = p.streams[1];
  EXPECT_EQ(disassemble(vec.instructions[1], p),
            "tensor_tensor.sub dst=x_sb<fp32>[p0:128][+0; 512*1] lhs=x_sb<fp32>[p0:128][+0; 512*1] "
            "rhs=stats<fp32>[p0:128][+0; 512*0] signal(shifted+=1) @node 0");
  EXPECT_EQ(disassemble(vec.instructions[2], p),
            "tensor_scalar.div dst=stats<fp32>[p0:128][+2] src=stats<fp32>[p0:128][+1] scalar=1 "
            "reverse wait(exp_done>=1) @node 0");
}

TEST(Disasm, OffChipAccessWithRunTimeScalar) {
  Plan p = example_plan("gather");
  p.scalars.push_back({"pos", 0, 10});
  AccessPattern ap = p.streams[0].instructions[2].dst;
  ap.scalar = 0;
  ap.scalar_stride = 64;
  EXPECT_EQ(format_access(ap, p), "out<fp32>[r128*64][+0+pos*64; 64*1]");
}

}  // namespace
}  // namespace wallsim::isa
