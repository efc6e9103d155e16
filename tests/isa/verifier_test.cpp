// The verifier: every example passes; every rule rejects a plan that breaks it.
#include "wallsim/isa/verifier.h"

#include <gtest/gtest.h>

#include "test_plans.h"
#include "wallsim/runtime/config.h"

namespace wallsim::isa {

using base::Json;
namespace {

using testing::example_json;

ArchSpec trn2() {
  return runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json").chip.arch;
}
ArchSpec tiny() {
  return runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/tiny.json").chip.arch;
}

struct Mutation {
  std::string pointer;
  Json value;
};

// The diagnostics of `example` after applying `mutations`.
std::vector<Diagnostic> verify_mutated(const std::string& example, std::vector<Mutation> mutations,
                                       const ArchSpec& arch = trn2()) {
  Json j = example_json(example);
  for (auto& m : mutations) j[Json::json_pointer(m.pointer)] = m.value;
  return verify(plan_sequence_from_json(j), arch);
}

bool has_rule(const std::vector<Diagnostic>& ds, const std::string& rule) {
  for (const auto& d : ds) {
    if (d.rule == rule) return true;
  }
  return false;
}

std::string dump(const std::vector<Diagnostic>& ds) {
  std::string s;
  for (const auto& d : ds) s += d.to_string() + "\n";
  return s;
}

#define EXPECT_RULE(diags, rule)                                                        \
  do {                                                                                  \
    auto _d = (diags);                                                                  \
    EXPECT_TRUE(has_rule(_d, rule)) << "expected [" << rule << "], got:\n" << dump(_d); \
  } while (0)

const std::string kVecIns = "/plans/0/streams/2/instructions/0";  // vector_add: the add
const std::string kMm0 = "/plans/0/streams/2/instructions/0";     // matmul: first matmul

TEST(Verifier, ExamplesPassOnTrn2) {
  for (const char* name : {"matmul", "vector_add", "softmax", "gather"}) {
    auto ds = verify_mutated(name, {});
    EXPECT_TRUE(ds.empty()) << name << ":\n" << dump(ds);
  }
}

TEST(Verifier, DiagnosticNamesPlanStreamAndInstruction) {
  auto ds = verify_mutated("vector_add", {{kVecIns + "/dst/offset", 100000}});
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds[0].stream, "vector");
  EXPECT_EQ(ds[0].instruction, 0);
  EXPECT_EQ(ds[0].to_string().rfind("plan 'vector_add_128x1024' vector[0]: [bounds] dst x_sb", 0),
            0u)
      << ds[0].to_string();
}

TEST(Verifier, Decl) {
  // A buffer beyond SBUF's partitions or bytes; too many DMA queues; a missing DMA engine.
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/buffers/0/partitions", {0, 129}}}), "decl");
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/buffers/1/offset", 229376}}), "decl");
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/streams/0/dma_engine", 16}}), "decl");
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/streams/1/name", "q_x"}}), "decl");
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/tensors/0/shape", {1 << 20, 1 << 20}}}),
              "decl");  // 4 TiB of HBM
  // The same plan fits tiny's 32 partitions only when its buffers do.
  EXPECT_RULE(verify(plan_sequence_from_json(example_json("vector_add")), tiny()), "decl");
}

TEST(Verifier, Engine) {
  Json j = example_json("vector_add");
  j["plans"][0]["streams"][2]["engine"] = "scalar";
  EXPECT_RULE(verify(plan_sequence_from_json(j), trn2()), "engine");
}

TEST(Verifier, Space) {
  // The tensor engine may not write SBUF; DMA may not read PSUM (with a psum buffer).
  EXPECT_RULE(verify_mutated("matmul", {{kMm0 + "/dst/buf", "c_sb"}}), "space");
  ArchSpec no_psum_reads = trn2();
  no_psum_reads.access.vector.reads = {MemSpace::sbuf};
  EXPECT_RULE(verify_mutated("matmul", {}, no_psum_reads), "space");
}

TEST(Verifier, Bounds) {
  EXPECT_RULE(verify_mutated("vector_add", {{kVecIns + "/dst/offset", 1}}), "bounds");
  EXPECT_RULE(verify_mutated("vector_add", {{kVecIns + "/lhs/offset", -1}}), "bounds");
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/streams/0/instructions/0/src/offset", 1}}),
              "bounds");
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/buffers/0/partitions", {0, 64}}}), "bounds");
}

TEST(Verifier, BoundsCoverTheWholeRangeOfARunTimeScalar) {
  // Load row `pos` of x: in bounds for pos <= 127, out of bounds when pos may reach 128.
  auto plan_with_max = [](int64_t max) {
    return std::vector<Mutation>{
        {"/plans/0/scalars", Json::array({{{"name", "pos"}, {"min", 0}, {"max", max}}})},
        {"/plans/0/streams/0/instructions/0/src/rows", {1, 1024}},
        {"/plans/0/streams/0/instructions/0/src/scalar", {"pos", 1024}},
        {"/plans/0/streams/0/instructions/0/dst/partitions", {0, 1}}};
  };
  auto ok = verify_mutated("vector_add", plan_with_max(127));
  EXPECT_FALSE(has_rule(ok, "bounds")) << dump(ok);
  EXPECT_RULE(verify_mutated("vector_add", plan_with_max(128)), "bounds");
}

TEST(Verifier, Alignment) {
  // Compute engines start at a multiple of 32 partitions; DMA may start anywhere.
  EXPECT_RULE(verify_mutated("vector_add", {{kVecIns + "/dst/partitions", {16, 64}},
                                            {kVecIns + "/lhs/partitions", {16, 64}},
                                            {kVecIns + "/rhs/partitions", {16, 64}}}),
              "alignment");
  auto dma_ok =
      verify_mutated("vector_add", {{"/plans/0/streams/0/instructions/0/dst/partitions", {16, 64}},
                                    {"/plans/0/streams/0/instructions/0/src/rows", {64, 1024}}});
  EXPECT_FALSE(has_rule(dma_ok, "alignment")) << dump(dma_ok);
}

TEST(Verifier, Tile) {
  // Moving free size beyond 512 (here 1024 elements of a 2048-byte buffer), and a matmul
  // output crossing a PSUM bank.
  EXPECT_RULE(verify_mutated("matmul", {{kMm0 + "/moving/free", {{1024, 1}}},
                                        {kMm0 + "/dst/free", {{1024, 1}}}}),
              "tile");
  EXPECT_RULE(verify_mutated("matmul", {{kMm0 + "/dst/offset", 256}}), "tile");
  // A vector instruction of 2048 fp32 elements per partition fits tiny (free_max 4096) but
  // not a variant of it whose vector engine takes at most 1024.
  Json j = example_json("vector_add");
  for (auto& b : j["plans"][0]["buffers"]) b["partitions"] = {0, 32}, b["bytes"] = 8192;
  j["plans"][0]["buffers"][1]["offset"] = 8192;
  for (auto& t : j["plans"][0]["tensors"]) t["shape"] = {32, 2048};
  for (auto& s : j["plans"][0]["streams"]) {
    for (auto& in : s["instructions"]) {
      for (const char* k : {"dst", "src", "lhs", "rhs"}) {
        if (!in.contains(k)) continue;
        if (in[k].contains("partitions")) in[k]["partitions"] = {0, 32};
        if (in[k].contains("rows")) in[k]["rows"] = {32, 2048};
        in[k]["free"] = {{2048, 1}};
      }
    }
  }
  PlanSequence seq = plan_sequence_from_json(j);
  auto fits = verify(seq, tiny());
  EXPECT_TRUE(fits.empty()) << dump(fits);
  ArchSpec narrow = tiny();
  narrow.vector.free_max = 1024;
  EXPECT_RULE(verify(seq, narrow), "tile");
}

TEST(Verifier, Shape) {
  EXPECT_RULE(verify_mutated("vector_add", {{kVecIns + "/rhs/free", {{512, 1}}}}), "shape");
  EXPECT_RULE(verify_mutated("matmul", {{kMm0 + "/moving/partitions", {0, 64}}}), "shape");
  EXPECT_RULE(verify_mutated("softmax", {{"/plans/0/streams/1/instructions/0/dst/free", {{2, 1}}}}),
              "shape");  // reduce keeps one value per row
  EXPECT_RULE(verify_mutated("vector_add", {{kVecIns + "/dst/free", {{1024, 0}}}}),
              "shape");  // a broadcast destination writes elements twice
  EXPECT_RULE(
      verify_mutated("gather", {{"/plans/0/streams/0/instructions/1/index/partitions", {0, 64}}}),
      "shape");
}

TEST(Verifier, Dtype) {
  EXPECT_RULE(verify_mutated("matmul", {{kMm0 + "/dst/dtype", "bf16"}}), "dtype");
  EXPECT_RULE(
      verify_mutated("vector_add", {{"/plans/0/streams/0/instructions/0/src/dtype", "bf16"}}),
      "dtype");  // off-chip access in another dtype than its tensor
  EXPECT_RULE(
      verify_mutated("vector_add", {{"/plans/0/streams/0/instructions/0/dst/dtype", "int32"}}),
      "dtype");  // DMA does not convert
  EXPECT_RULE(verify_mutated("gather", {{"/plans/0/streams/0/instructions/1/index/dtype", "fp32"}}),
              "dtype");
}

TEST(Verifier, Scalar) {
  // Run-time scalar offsets are for off-chip DMA accesses only.
  EXPECT_RULE(
      verify_mutated("vector_add",
                     {{"/plans/0/scalars", Json::array({{{"name", "n"}, {"min", 0}, {"max", 0}}})},
                      {"/plans/0/streams/0/instructions/0/dst/scalar", {"n", 1}}}),
      "scalar");
}

TEST(Verifier, Provenance) {
  EXPECT_RULE(verify_mutated("vector_add", {{kVecIns + "/node", 9}}), "provenance");
  EXPECT_RULE(verify_mutated("vector_add",
                             {{"/plans/0/nodes/1", {{"id", 0}, {"name", "dup"}, {"op", "x"}}}}),
              "provenance");
}

TEST(Verifier, StaticDeadlock) {
  // Waiting for more than all signals can give.
  auto ds = verify_mutated("vector_add", {{kVecIns + "/wait/0/1", 2}});
  EXPECT_RULE(ds, "semaphore");
  EXPECT_NE(dump(ds).find("deadlock: waits for x_in >= 2 but it can reach at most 1"),
            std::string::npos)
      << dump(ds);
  // A cycle: the load of x waits on `added`, which the add signals only after x is loaded.
  EXPECT_RULE(verify_mutated("vector_add", {{"/plans/0/streams/0/instructions/0/wait",
                                             Json::array({Json::array({"added", 1})})}}),
              "semaphore");
  // A wait satisfied by a later instruction of another stream is fine (softmax ping-pongs).
  EXPECT_FALSE(has_rule(verify_mutated("softmax", {}), "semaphore"));
}

// Issue 20, defect 8: 32,768 signals of 2^48 on one semaphore overflowed int64 in the deadlock
// check ("can reach at most -9223372036854775808"); the count saturates now.
TEST(Verifier, DeadlockCheckSaturatesHugeSignalSums) {
  Json sig = Json::array();
  for (int i = 0; i < 32768; ++i) sig.push_back(Json::array({"added", int64_t{1} << 48}));
  auto ds = verify_mutated("vector_add", {{kVecIns + "/signal", sig}});
  EXPECT_EQ(dump(ds).find("-9223372036854775808"), std::string::npos) << dump(ds);
  EXPECT_FALSE(has_rule(ds, "semaphore")) << dump(ds);
  // A wait nothing can satisfy is still reported, next to the saturated semaphore.
  auto blocked =
      verify_mutated("vector_add", {{kVecIns + "/signal", sig}, {kVecIns + "/wait/0/1", 2}});
  EXPECT_RULE(blocked, "semaphore");
}

TEST(Verifier, Binding) {
  Json j = example_json("vector_add");
  Json second = j["plans"][0];
  second["name"] = "again";
  second["tensors"][0]["shape"] = {64, 1024};  // x, now with another shape
  j["plans"].push_back(second);
  EXPECT_RULE(verify(plan_sequence_from_json(j), trn2()), "binding");
}

}  // namespace
}  // namespace wallsim::isa
