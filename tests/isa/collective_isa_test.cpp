// Collective instructions in plans: communicators read and written, packed, disassembled, and
// the verifier's operand and sequence rules.
#include <gtest/gtest.h>

#include "wallsim/isa/disasm.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/plan_pack.h"
#include "wallsim/isa/verifier.h"

namespace wallsim::isa {
namespace {

using base::Json;

// Two ranks on cores [0, 0] and [1, 0], each all-reducing x (8 x 64 fp32) into y, then
// gathering y into z, then sending y to the other rank and receiving it into w.
Json two_rank_file() {
  auto ap = [](const char* t, int rows) {
    return Json{{"buf", t}, {"dtype", "fp32"}, {"rows", {rows, 64}}, {"free", {{64, 1}}}};
  };
  Json plans = Json::array();
  for (int r = 0; r < 2; ++r) {
    Json p = {
        {"name", "rank" + std::to_string(r)},
        {"comms", {{{"name", "world"}, {"size", 2}}}},
        {"semaphores", {"sent"}},
        {"tensors",
         {{{"name", "x"},
           {"space", "hbm"},
           {"dtype", "fp32"},
           {"shape", {8, 64}},
           {"role", "input"}},
          {{"name", "y"},
           {"space", "hbm"},
           {"dtype", "fp32"},
           {"shape", {8, 64}},
           {"role", "output"}},
          {{"name", "z"},
           {"space", "hbm"},
           {"dtype", "fp32"},
           {"shape", {16, 64}},
           {"role", "output"}},
          {{"name", "w"},
           {"space", "hbm"},
           {"dtype", "fp32"},
           {"shape", {8, 64}},
           {"role", "output"}}}},
        {"streams",
         {{{"engine", "dma"},
           {"name", "q0"},
           {"dma_engine", 0},
           {"instructions",
            {{{"op", "all_reduce"},
              {"alu", "add"},
              {"comm", "world"},
              {"dst", ap("y", 8)},
              {"src", ap("x", 8)}},
             {{"op", "all_gather"}, {"comm", "world"}, {"dst", ap("z", 16)}, {"src", ap("y", 8)}},
             {{"op", "send"},
              {"comm", "world"},
              {"peer", 1 - r},
              {"src", ap("y", 8)},
              {"signal", Json::array({Json::array({"sent", 1})})}}}}},
          {{"engine", "dma"},
           {"name", "q1"},
           {"dma_engine", 1},
           {"instructions",
            {{{"op", "recv"},
              {"comm", "world"},
              {"peer", 1 - r},
              {"dst", ap("w", 8)},
              {"wait", Json::array({Json::array({"sent", 1})})}}}}}}},
        {"core", {r, 0}}};
    plans.push_back(p);
  }
  return {{"format", "wallsim-plan"}, {"version", 1}, {"plans", plans}};
}

ArchSpec arch() {
  ArchSpec a;
  a.dma.engines = 2;
  return a;
}

std::string dump(const std::vector<Diagnostic>& ds) {
  std::string s;
  for (const auto& d : ds) s += d.to_string() + "\n";
  return s;
}

TEST(CollectiveIsa, CommunicatorsAndCollectivesRoundTrip) {
  const PlanSequence seq = plan_sequence_from_json(two_rank_file());
  ASSERT_EQ(seq.plans[0].comms.size(), 1u);
  EXPECT_EQ(seq.plans[0].comms[0].name, "world");
  EXPECT_EQ(seq.plans[0].comms[0].size, 2);
  const Instruction& ar = seq.plans[0].streams[0].instructions[0];
  EXPECT_EQ(ar.op, Opcode::all_reduce);
  EXPECT_EQ(ar.comm, 0);
  EXPECT_TRUE(is_collective(ar.op));
  EXPECT_FALSE(is_collective(Opcode::dma_copy));
  EXPECT_EQ(seq.plans[1].streams[0].instructions[2].peer, 0);
  EXPECT_EQ(plan_sequence_from_json(to_json(seq)), seq);
  for (const Plan& p : seq.plans) EXPECT_EQ(PackedPlan(p).unpack(), p);
}

TEST(CollectiveIsa, DisassemblyNamesCommunicatorAndPeer) {
  const std::string text = disassemble(plan_sequence_from_json(two_rank_file()));
  EXPECT_NE(text.find("  comm      world of 2 ranks\n"), std::string::npos) << text;
  EXPECT_NE(text.find("q0[0]        all_reduce.add dst=y<fp32>[r8*64][+0; 64*1] "
                      "src=x<fp32>[r8*64][+0; 64*1] comm=world\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("send src=y<fp32>[r8*64][+0; 64*1] comm=world peer=1 signal(sent+=1)"),
            std::string::npos)
      << text;
}

TEST(CollectiveIsa, ReaderRejectsUnknownCommunicatorAndBadSize) {
  Json j = two_rank_file();
  j["plans"][0]["streams"][0]["instructions"][0]["comm"] = "wrld";
  try {
    plan_sequence_from_json(j);
    FAIL();
  } catch (const base::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no communicator named \"wrld\""), std::string::npos);
  }
  j = two_rank_file();
  j["plans"][0]["comms"][0]["size"] = 0;
  EXPECT_THROW(plan_sequence_from_json(j), base::InputError);
  j = two_rank_file();
  j["plans"][0]["comms"].push_back({{"name", "world"}, {"size", 2}});
  EXPECT_THROW(plan_sequence_from_json(j), base::InputError);
}

TEST(CollectiveIsa, VerifierAcceptsMatchingRanks) {
  const auto ds = verify(plan_sequence_from_json(two_rank_file()), arch());
  EXPECT_TRUE(ds.empty()) << dump(ds);
}

// The findings of rule `rule` after `edit` of the two-rank file.
std::vector<std::string> findings(const std::function<void(Json&)>& edit, const std::string& rule) {
  Json j = two_rank_file();
  edit(j);
  std::vector<std::string> out;
  for (const auto& d : verify(plan_sequence_from_json(j), arch())) {
    if (d.rule == rule) out.push_back(d.to_string());
  }
  return out;
}

TEST(CollectiveIsa, VerifierChecksOperands) {
  auto& q0 = "/plans/0/streams/0/instructions";
  // all_gather's dst must be size x src.
  auto f = findings([&](Json& j) { j[Json::json_pointer(std::string(q0) + "/1/dst/rows/0")] = 8; },
                    "shape");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("dst has 512 elements, not size x src = 1024 on communicator world of 2"),
            std::string::npos)
      << f[0];
  // A reduction takes add, max or min.
  EXPECT_EQ(
      findings([&](Json& j) { j[Json::json_pointer(std::string(q0) + "/0/alu")] = "sub"; }, "alu")
          .size(),
      1u);
  // A peer outside the communicator.
  f = findings([&](Json& j) { j[Json::json_pointer(std::string(q0) + "/2/peer")] = 2; },
               "collective");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("peer 2 is not a rank of world (0..1)"), std::string::npos) << f[0];
  // Operands live in HBM.
  f = findings(
      [&](Json& j) {
        j["plans"][0]["buffers"] = {
            {{"name", "b"}, {"space", "sbuf"}, {"partitions", {0, 8}}, {"bytes", 256}}};
        j[Json::json_pointer(std::string(q0) + "/0/src")] = {
            {"buf", "b"}, {"dtype", "fp32"}, {"partitions", {0, 8}}, {"free", {{64, 1}}}};
      },
      "collective");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("src must be an HBM tensor"), std::string::npos) << f[0];
}

TEST(CollectiveIsa, VerifierRejectsRanksIssuingDifferentSequences) {
  // Rank 1 gathers before it reduces.
  auto f = findings(
      [](Json& j) {
        Json& ins = j["plans"][1]["streams"][0]["instructions"];
        std::swap(ins[0], ins[1]);
        ins[0]["src"]["buf"] = "x";
        ins[1]["src"]["buf"] = "z";
        ins[1]["src"]["rows"][0] = 8;
      },
      "collective");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0],
            "plan 'rank1': [collective] communicator world collective 0: core [1, 0] issues "
            "all_gather of 2048 bytes fp32, core [0, 0] all_reduce of 2048 bytes fp32 (add)");
  // Rank 1 stops after the reduction.
  f = findings(
      [](Json& j) {
        Json& ins = j["plans"][1]["streams"][0]["instructions"];
        ins.erase(1);
      },
      "collective");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("collective 1: core [1, 0] issues nothing, core [0, 0] all_gather"),
            std::string::npos)
      << f[0];
}

}  // namespace
}  // namespace wallsim::isa
