// The host runtime on the chip model: every mode computes the reference's values; warm steps
// hit the compile cache; host states sum exactly to wall time; caches evict; compile failures
// fall back or stop. One device per process.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "wallsim/memory/npy.h"
#include "wallsim/runtime/ops.h"
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/system.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::runtime {
namespace {

Config load(const std::string& name, const std::vector<std::string>& overrides = {}) {
  return load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/" + name + ".json", overrides);
}

// A device and a session on it, and a way to run host code against them.
struct Rig {
  explicit Rig(const Config& c, const ExecutionMode& mode, bool functional = true) : config(c) {
    sim::init_systemc();
    sim::CoreOptions o;
    o.functional = functional;
    o.stats = &stats;
    system = std::make_unique<sim::System>(config.chip, o);
    device = &system->core();
    SessionOptions so;
    so.mode = &mode;
    so.functional = functional;
    so.keep_reference = functional;
    session = std::make_unique<Session>(config, *device, so);
  }
  void run(const std::function<void(Session&)>& body) {
    run_host(*device, [&] { body(*session); });
  }
  Config config;
  traces::StatsRegistry stats;
  std::unique_ptr<sim::System> system;
  sim::Core* device = nullptr;
  std::unique_ptr<Session> session;
};

// Worst |chip - reference| relative to the reference's largest magnitude.
double error(const compiler_stub::HostTensor& got, const compiler_stub::HostTensor& want) {
  EXPECT_EQ(got.shape, want.shape);
  double scale = 1, worst = 0;
  for (float w : want.data) scale = std::max(scale, double(std::abs(w)));
  for (size_t i = 0; i < std::min(got.data.size(), want.data.size()); ++i) {
    worst = std::max(worst, std::abs(double(got.data[i]) - want.data[i]) / scale);
  }
  return worst;
}

// Sets `w` up on the rig's session (AOT start-up included) and runs `steps` steps, each step's
// output against the reference evaluator's.
void run_against_reference(Rig& rig, workloads::Workload& w, int steps, double tolerance) {
  rig.run([&](Session& s) {
    w.setup(s);
    s.startup(w.buckets(s), [&](int64_t b) { w.trace(s, b); });
    for (int i = 0; i < steps; ++i) {
      s.begin_step(i);
      Tensor out = w.step(s, i);
      compiler_stub::HostTensor got = s.to_host(out);
      s.end_step();
      EXPECT_LT(error(got, s.reference(out)), tolerance) << s.mode().name() << " step " << i;
    }
  });
}

// Runs `spec` for `steps` steps under `mode`: each step's output against the reference.
// `warm_hits`: the workload repeats its shapes, so steps after the first compile nothing.
void check_workload(const std::string& config, const std::string& spec, const ExecutionMode& mode,
                    int steps, double tolerance, bool warm_hits = true) {
  Rig rig(load(config), mode);
  auto w = workloads::make_workload(workloads::parse_spec(spec));
  run_against_reference(rig, *w, steps, tolerance);
  const auto& steps_done = rig.session->steps();
  ASSERT_EQ(static_cast<int>(steps_done.size()), steps);
  // Host states never overlap and account for every nanosecond.
  for (const StepRecord& r : steps_done) {
    int64_t sum = 0;
    for (int64_t ns : r.host_ns) sum += ns;
    EXPECT_EQ(sum, r.wall_ns) << "step " << r.index;
    EXPECT_GT(r.device_busy_ns, 0);
    EXPECT_LE(r.device_busy_ns, r.wall_ns);
  }
  // Warm steps compile nothing: every lookup hits.
  if (mode.compiles() && warm_hits) {
    for (size_t i = 1; i < steps_done.size(); ++i) {
      EXPECT_EQ(steps_done[i].counts.compiles, 0) << "step " << i;
      EXPECT_EQ(steps_done[i].counts.cache_misses, 0) << "step " << i;
      EXPECT_GT(steps_done[i].counts.cache_hits, 0) << "step " << i;
    }
  }
}

const char* kMlp = "mlp:batch=96,d_model=64,d_ff=160,layers=2,dtype=fp32";
const char* kTransformer = "transformer:seq=64,d_model=64,heads=2,d_ff=128,layers=2,dtype=fp32";

TEST(Runtime, MlpNativeMatchesReference) {
  check_workload("trn2", kMlp, mode_named("native"), 2, 1e-4);
}
TEST(Runtime, MlpEagerMatchesReference) {
  check_workload("trn2", kMlp, mode_named("eager"), 2, 1e-4);
}
TEST(Runtime, MlpFusedMatchesReference) {
  check_workload("trn2", kMlp, mode_named("fused"), 2, 1e-4);
}
TEST(Runtime, MlpAotMatchesReference) { check_workload("trn2", kMlp, mode_named("aot"), 2, 1e-4); }
TEST(Runtime, MlpFusedOnTinyMatchesReference) {
  check_workload("tiny", kMlp, mode_named("fused"), 2, 1e-4);
}
TEST(Runtime, TransformerNativeMatchesReference) {
  check_workload("trn2", kTransformer, mode_named("native"), 2, 1e-3);
}
TEST(Runtime, TransformerEagerMatchesReference) {
  check_workload("trn2", kTransformer, mode_named("eager"), 2, 1e-3);
}
TEST(Runtime, TransformerFusedMatchesReference) {
  check_workload("trn2", kTransformer, mode_named("fused"), 2, 1e-3);
}
TEST(Runtime, TransformerAotMatchesReference) {
  check_workload("trn2", kTransformer, mode_named("aot"), 2, 1e-3);
}
// Batches of sequences (heads x batch as attention batches), and Llama-style blocks.
TEST(Runtime, BatchedTransformerFusedMatchesReference) {
  check_workload("trn2",
                 "transformer:seq=32,batch=3,d_model=64,heads=2,d_ff=96,layers=1,dtype=fp32",
                 mode_named("fused"), 1, 1e-3);
}
TEST(Runtime, LlamaTransformerEagerMatchesReference) {
  check_workload("trn2",
                 "transformer:style=llama,seq=48,batch=2,d_model=64,heads=4,d_ff=128,dtype=fp32",
                 mode_named("eager"), 1, 1e-3);
}
TEST(Runtime, LlamaTransformerOnTinyMatchesReference) {
  check_workload("tiny", "transformer:style=llama,seq=40,d_model=64,heads=2,d_ff=96,dtype=fp32",
                 mode_named("fused"), 1, 1e-3);
}

// Decode: a prefill and one token over the KV cache (the reference binds one value per
// run-time scalar, so only the first append can be checked against it).
const char* kDecode =
    "decode:prompt=20,new_tokens=1,d_model=64,heads=2,d_ff=128,layers=2,dtype=fp32";
TEST(Runtime, DecodeFusedMatchesReference) {
  check_workload("trn2", kDecode, mode_named("fused"), 2, 1e-3, /*warm_hits=*/false);
}
TEST(Runtime, DecodeAotMatchesReference) {
  check_workload("trn2", kDecode, mode_named("aot"), 2, 1e-3);
}
TEST(Runtime, DecodeNativeOnTinyMatchesReference) {
  check_workload("tiny", kDecode, mode_named("native"), 2, 1e-3);
}

// Bounded decode: one plan for every token length, masked on the chip by the run-time length.
TEST(Runtime, DecodeBoundedMatchesReference) {
  check_workload("trn2", std::string(kDecode) + ",dynamic=bounded", mode_named("fused"), 2, 1e-3,
                 /*warm_hits=*/false);  // step 1 compiles the token plan
}

// Paged KV: attention reads K and V through a scattered block table by gather; the values are
// the reference's, and equal to the contiguous cache's (same weights and inputs, one session).
TEST(Runtime, PagedDecodeEqualsContiguousDecode) {
  Rig rig(load("trn2"), mode_named("eager"));
  const std::string dims = "prompt=20,new_tokens=3,d_model=64,heads=2,d_ff=96,dtype=fp32,block=4";
  auto paged = workloads::make_workload(workloads::parse_spec("decode:kv=paged," + dims));
  auto contiguous = workloads::make_workload(workloads::parse_spec("decode:" + dims));
  rig.run([&](Session& s) {
    paged->setup(s);
    contiguous->setup(s);
    for (int i = 0; i < 4; ++i) {
      s.begin_step(i);
      Tensor a = paged->step(s, i);
      compiler_stub::HostTensor pa = s.to_host(a);
      if (i < 2) {
        EXPECT_LT(error(pa, s.reference(a)), 1e-3) << "step " << i;
      }
      compiler_stub::HostTensor ca = s.to_host(contiguous->step(s, i));
      EXPECT_LT(error(pa, ca), 1e-5) << "step " << i;
      s.end_step();
    }
  });
}

// Runs 8 decode tokens timing-only; returns (startup counts, step counts, padded, real MACs).
struct DecodeRun {
  Counts startup, steps;
  std::vector<Counts> per_step;  // step 0 is the prefill
  double padded_macs = 0, real_macs = 0;
  nlohmann::ordered_json report;  // the workload's own section ("decoding")
};
DecodeRun decode_run(const ExecutionMode& mode, const std::string& dynamic = "exact") {
  Rig rig(load("trn2"), mode, false);
  auto w = workloads::make_workload(workloads::parse_spec(
      "decode:prompt=40,new_tokens=8,d_model=128,heads=2,d_ff=256,dynamic=" + dynamic));
  rig.run([&](Session& s) {  // the steps, each read back (Workload::run)
    w->setup(s);
    s.startup(w->buckets(s), [&](int64_t b) { w->trace(s, b); });
    w->run(s, 9);
  });
  DecodeRun r;
  r.report = w->report()->second;
  r.startup = rig.session->startup_record().counts;
  for (const auto& st : rig.session->steps()) {
    r.steps.add(st.counts);
    r.per_step.push_back(st.counts);
    r.padded_macs += st.padded_macs;
    r.real_macs += st.real_macs;
  }
  return r;
}

// Exact shapes: every token is a new shape, so fused decode recompiles for each. (The step is
// cut into groups by the materialization heuristics: the groups whose shapes do not depend on
// the length hit; the attention group over the keys is recompiled every token.)
TEST(Runtime, DecodeUnderFusedRecompilesEveryToken) {
  DecodeRun r = decode_run(mode_named("fused"));
  EXPECT_EQ(r.startup.compiles, 0);
  ASSERT_EQ(r.per_step.size(), 9u);  // the prefill and 8 tokens
  for (size_t i = 2; i < r.per_step.size(); ++i) {
    EXPECT_GE(r.per_step[i].compiles, 1) << "token " << i;
    EXPECT_GE(r.per_step[i].recompiles, 1) << "token " << i;  // the same group at a new length
    EXPECT_GT(r.per_step[i].cache_hits, 0) << "token " << i;  // the length-free groups
  }
  EXPECT_EQ(r.padded_macs, r.real_macs);
}

// Bounded: the token groups are compiled once at the bound, whatever the length; nothing
// padded. Only the first token compiles (some of its groups are the prefill's at other shapes).
TEST(Runtime, DecodeBoundedCompilesOncePerBound) {
  DecodeRun r = decode_run(mode_named("fused"), "bounded");
  ASSERT_EQ(r.per_step.size(), 9u);
  EXPECT_GT(r.per_step[1].compiles, 0);
  for (size_t i = 2; i < r.per_step.size(); ++i) {
    EXPECT_EQ(r.per_step[i].compiles, 0) << "token " << i;
    EXPECT_EQ(r.per_step[i].cache_misses, 0) << "token " << i;
  }
  EXPECT_GT(r.padded_macs, r.real_macs);  // masked keys past the real length
}

// Bucketed: lazy, but every length is padded to its power-of-two bucket: one bucket here, so
// the tokens after the first compile nothing.
TEST(Runtime, DecodeBucketedPadsToBuckets) {
  DecodeRun r = decode_run(mode_named("fused"), "bucketed");
  ASSERT_EQ(r.per_step.size(), 9u);
  for (size_t i = 2; i < r.per_step.size(); ++i) {
    EXPECT_EQ(r.per_step[i].compiles, 0) << "token " << i;
  }
  EXPECT_EQ(r.steps.recompiles, 0);
  EXPECT_GT(r.padded_macs, r.real_macs);
}

// AOT compiles the prefill and the token step per bucket before the first step, then pads.
TEST(Runtime, DecodeUnderAotPadsInsteadOfRecompiling) {
  DecodeRun r = decode_run(mode_named("aot"));
  EXPECT_GT(r.startup.compiles, 0);
  EXPECT_EQ(r.steps.compiles, 0);
  EXPECT_EQ(r.steps.recompiles, 0);
  EXPECT_EQ(r.steps.cache_hits, 9);
  EXPECT_GT(r.padded_macs, r.real_macs);  // keys padded to the 128 bucket
}

// Host tensors from .npy files: the device holds their values.
// A chain of element-wise ops under native whose values sum to five times HBM but of which at
// most three are live: with launches in issue order, a dropped value's bytes go to the next
// allocation at once (a stream-ordered allocator). (With launches that may overlap they wait for
// the step's end: the DeviceMemory tests in runtime_parts_test.cpp.)
void run_long_chain(const std::vector<std::string>& overrides) {
  Rig rig(load("tiny", overrides), mode_named("native"), false);
  rig.run([&](Session& s) {
    s.begin_step(0);
    Tensor x = s.upload_random({256, 1024}, isa::DType::fp32, 1);  // 1 MiB
    for (int i = 0; i < 40; ++i) x = runtime::add(x, x);
    s.to_host(x);
    s.end_step();
  });
}

TEST(Runtime, DroppedValuesAreReusableAtOnceWhenLaunchesRunInOrder) {
  EXPECT_NO_THROW(run_long_chain({"arch.hbm.bytes=8388608"}));
}

TEST(Runtime, UploadsNpyFiles) {
  const std::string path = ::testing::TempDir() + "/x_" + std::to_string(::getpid()) + ".npy";
  memory::TensorStore::Tensor t;
  t.dtype = isa::DType::fp32;
  t.shape = {3, 4};
  t.bytes.resize(48);
  memory::fill_random(t, 5);
  memory::write_npy(path, memory::npy_from_tensor(t));
  Rig rig(load("tiny"), mode_named("eager"));
  compiler_stub::HostTensor got;
  rig.run([&](Session& s) { got = s.to_host(relu(s.upload_npy(path, isa::DType::fp32))); });
  const std::vector<float> want = memory::to_floats(t);
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.data[i], std::max(0.0f, want[i]));
}

// A weight read only as w.t() (nn.Linear) is stored transposed where the mode pre-lays
// constants: the matmul reads it as stored and no transpose runs. Reads of it as given (an add,
// a copy to the host) go through the transpose that undoes the layout. Values match the
// reference either way.
void check_pre_laid_weight(const ExecutionMode& mode) {
  Rig rig(load("trn2"), mode);
  rig.run([&](Session& s) {
    compiler_stub::Node t;
    t.op = OpKind::transpose;
    t.inputs = {0};
    t.attrs["perm"] = std::vector<int64_t>{1, 0};
    compiler_stub::TensorType type;
    type.dims = {compiler_stub::Dim::of(32), compiler_stub::Dim::of(48)};
    const compiler_stub::WeightLayout layout = s.weight_layout(type, {&t});
    EXPECT_EQ(layout.as_given(), !mode.pre_lays_constants());
    if (!layout.as_given()) {
      EXPECT_EQ(layout.perm, (std::vector<int64_t>{1, 0}));
    }
    const Tensor w = s.upload_random({32, 48}, isa::DType::fp32, 7, layout);
    const Tensor x = s.upload_random({16, 48}, isa::DType::fp32, 8);
    const int64_t before = s.totals().plans_launched;
    const Tensor y = matmul(x, transpose(w, {1, 0}));
    const compiler_stub::HostTensor got = s.to_host(y);
    // Per op: the matmul and, unless the weight is pre-laid, its transpose.
    if (!mode.compiles_ahead() && mode.name() != "fused") {
      EXPECT_EQ(s.totals().plans_launched - before, mode.pre_lays_constants() ? 1 : 2);
    }
    EXPECT_LT(error(got, s.reference(y)), 1e-5);
    const Tensor z = add(w, w);
    EXPECT_LT(error(s.to_host(z), s.reference(z)), 1e-6);
    EXPECT_LT(error(s.to_host(w), s.reference(w)), 1e-6);
  });
}
TEST(Runtime, PreLaidWeightUnderNativeMatchesReference) {
  check_pre_laid_weight(mode_named("native"));
}
TEST(Runtime, PreLaidWeightUnderFusedMatchesReference) {
  check_pre_laid_weight(mode_named("fused"));
}
TEST(Runtime, WeightUnderEagerIsUploadedAsGiven) { check_pre_laid_weight(mode_named("eager")); }

// A convolution's weight [8, 2, 3, 3], read only as transpose(reshape(w, [8, 18]), [1, 0]), is
// stored as that chain's result where the mode pre-lays constants: both ops are views and the
// matmul alone runs. Reads of it as given go through the ops that undo the layout. Values match
// the reference either way.
void check_pre_laid_reshaped_weight(const ExecutionMode& mode) {
  Rig rig(load("trn2"), mode);
  rig.run([&](Session& s) {
    compiler_stub::Node r, t;
    r.id = 1;
    r.op = OpKind::reshape;
    r.inputs = {0};
    r.attrs["shape"] = std::vector<int64_t>{8, 18};
    t.op = OpKind::transpose;
    t.inputs = {1};
    t.attrs["perm"] = std::vector<int64_t>{1, 0};
    const std::vector<const compiler_stub::Node*> of_r = {&t};
    compiler_stub::TensorType type;
    for (int64_t d : {8, 2, 3, 3}) type.dims.push_back(compiler_stub::Dim::of(d));
    const compiler_stub::WeightLayout layout =
        s.weight_layout(type, {&r}, [&](int32_t id) { return id == 1 ? &of_r : nullptr; });
    EXPECT_EQ(layout.as_given(), !mode.pre_lays_constants());
    if (!layout.as_given()) {
      EXPECT_EQ(layout.reshape, (std::vector<int64_t>{8, 18}));
      EXPECT_EQ(layout.perm, (std::vector<int64_t>{1, 0}));
    }
    const Tensor w = s.upload_random({8, 2, 3, 3}, isa::DType::fp32, 7, layout);
    const Tensor x = s.upload_random({16, 18}, isa::DType::fp32, 8);
    const int64_t before = s.totals().plans_launched;
    const Tensor y = matmul(x, transpose(reshape(w, {8, 18}), {1, 0}));
    const compiler_stub::HostTensor got = s.to_host(y);
    if (!mode.compiles_ahead() && mode.name() != "fused") {
      const int64_t launched = s.totals().plans_launched - before;
      if (mode.pre_lays_constants()) {
        EXPECT_EQ(launched, 1);
      } else {
        EXPECT_GT(launched, 1);
      }
    }
    EXPECT_LT(error(got, s.reference(y)), 1e-5);
    // The reshape alone (its transpose not taken), the weight as given, and a copy to the host.
    const Tensor r2 = add(reshape(w, {8, 18}), reshape(w, {8, 18}));
    EXPECT_LT(error(s.to_host(r2), s.reference(r2)), 1e-6);
    const Tensor z = add(w, w);
    EXPECT_LT(error(s.to_host(z), s.reference(z)), 1e-6);
    EXPECT_LT(error(s.to_host(w), s.reference(w)), 1e-6);
  });
}
TEST(Runtime, PreLaidReshapedWeightUnderNativeMatchesReference) {
  check_pre_laid_reshaped_weight(mode_named("native"));
}
TEST(Runtime, PreLaidReshapedWeightUnderFusedMatchesReference) {
  check_pre_laid_reshaped_weight(mode_named("fused"));
}
TEST(Runtime, ReshapedWeightUnderEagerIsUploadedAsGiven) {
  check_pre_laid_reshaped_weight(mode_named("eager"));
}

// AOT traces and compiles before the first step: the cost is under `startup`, and steps only
// look up and launch.
TEST(Runtime, AotCompilesUnderStartupOnly) {
  Rig rig(load("trn2"), mode_named("aot"), false);
  auto w = workloads::make_workload(workloads::parse_spec("mlp:batch=128,d_model=128,d_ff=256"));
  rig.run([&](Session& s) {  // the steps, each read back (Workload::run)
    w->setup(s);
    s.startup(w->buckets(s), [&](int64_t b) { w->trace(s, b); });
    w->run(s, 3);
  });
  const StepRecord& st = rig.session->startup_record();
  EXPECT_EQ(st.counts.compiles, 1);
  EXPECT_GT(st.host_ns[static_cast<int>(HostState::compile)], 0);
  for (const StepRecord& r : rig.session->steps()) {
    EXPECT_EQ(r.counts.compiles, 0);
    EXPECT_EQ(r.counts.cache_hits, 1);
    EXPECT_EQ(r.counts.plans_launched, 1);
    EXPECT_EQ(r.host_ns[static_cast<int>(HostState::compile)], 0);
  }
}

// How a mode finds a group's plan (ExecutionMode::plan_key): a lazy mode hashes the traced graph
// node by node, AOT keys the step by its inputs' shapes. Each run sets the other mode's cost
// absurdly high, so a step's dispatch time shows which one was charged.
std::vector<StepRecord> mlp_steps(const ExecutionMode& mode, const std::vector<std::string>& set) {
  Rig rig(load("trn2", set), mode, false);
  auto w = workloads::make_workload(
      workloads::parse_spec("mlp:batch=128,d_model=128,d_ff=256,layers=2"));  // 12 ops, 9 inputs
  rig.run([&](Session& s) {
    w->setup(s);
    s.startup(w->buckets(s), [&](int64_t b) { w->trace(s, b); });
    w->run(s, 2);
  });
  return rig.session->steps();
}

TEST(Runtime, AotStepPaysAKeyPerInputNotAHashPerNode) {
  const auto steps = mlp_steps(mode_named("aot"), {"runtime.lazy.hash_ns_per_node=1000000",
                                                   "runtime.aot.key_ns_per_input=1000"});
  ASSERT_EQ(steps.size(), 2u);
  for (const StepRecord& r : steps) {
    ASSERT_EQ(r.counts.plans_launched, 1);
    // plan_launch_ns + cache_lookup_ns + 9 inputs x key_ns_per_input; no op costs.
    EXPECT_EQ(r.host_ns[static_cast<int>(HostState::dispatch)], 20000 + 500 + 9 * 1000);
  }
}

TEST(Runtime, FusedGroupsPayAHashPerNodeNotAKeyPerInput) {
  const auto steps = mlp_steps(mode_named("fused"), {"runtime.lazy.hash_ns_per_node=1000",
                                                     "runtime.aot.key_ns_per_input=1000000"});
  ASSERT_EQ(steps.size(), 2u);
  for (const StepRecord& r : steps) {
    EXPECT_EQ(r.counts.ops, 12);
    // 12 ops x (dispatch 5000 + record 2000) + 12 nodes x 1000 + per group a lookup and a launch.
    EXPECT_EQ(r.host_ns[static_cast<int>(HostState::dispatch)],
              12 * 7000 + 12 * 1000 + r.counts.plans_launched * (500 + 20000));
  }
}

// Fused groups are cut by the policy: at most max_group_ops ops, `not_fusible` ops alone.
TEST(Runtime, FusionPolicyCutsGroups) {
  Rig rig(load("trn2", {"runtime.lazy.max_group_ops=2", "runtime.lazy.not_fusible=[\"gelu\"]"}),
          mode_named("fused"), false);
  rig.run([&](Session& s) {
    Tensor x = s.upload_random({128, 64}, isa::DType::bf16, 1);
    Tensor w = s.upload_random({64, 64}, isa::DType::bf16, 2);
    s.begin_step(0);
    // matmul, relu | gelu | exp, add | relu: four groups.
    Tensor y = relu(add(exp(gelu(relu(matmul(x, w)))), x));
    s.to_host(y);
    s.end_step();
  });
  EXPECT_EQ(rig.session->steps().at(0).counts.plans_launched, 4);
  EXPECT_EQ(rig.session->steps().at(0).counts.compiles, 4);
}

// Background compilation: launches wait for a compiler thread while the host goes on; values
// are still the reference's, the states still sum, and the host waits less than the compiles
// take (here the first flush's compiles overlap the host recording the rest of the step).
TEST(Runtime, BackgroundCompileOverlapsTheHost) {
  Rig rig(load("trn2", {"runtime.compile_in_background=true", "runtime.lazy.max_group_ops=2",
                        "runtime.lazy.max_pending_ops=2", "runtime.compile_cost.profile=\"xla\"",
                        "runtime.compile_cost.xla.per_node_ms=0"}),
          mode_named("fused"));
  auto w = workloads::make_workload(workloads::parse_spec(kMlp));
  run_against_reference(rig, *w, 2, 1e-4);
  const StepRecord& cold = rig.session->steps().at(0);
  int64_t sum = 0;
  for (int64_t ns : cold.host_ns) sum += ns;
  EXPECT_EQ(sum, cold.wall_ns);
  // Every compile takes 5 ms here (the xla fixed cost, no per-node term): blocking, the host would
  // wait exactly compiles x 5 ms.
  ASSERT_GT(cold.counts.compiles, 1);
  EXPECT_LT(cold.host_ns[static_cast<int>(HostState::compile)],
            cold.counts.compiles * int64_t{5000000});
  EXPECT_GT(cold.host_ns[static_cast<int>(HostState::compile)], 0);
}

// Injected failures (runtime.inject): a fused step of more than 3 ops "does not fit". Under
// `split` and `eager` the run completes with the reference's values; under `fail` it stops.
Counts injected_run(const std::string& policy) {
  Rig rig(load("trn2",
               {"runtime.inject.fail_groups_over=3", "runtime.lazy.fallback=\"" + policy + "\""}),
          mode_named("fused"));
  auto w = workloads::make_workload(workloads::parse_spec(kMlp));
  run_against_reference(rig, *w, 2, 1e-4);
  return rig.session->totals();
}
TEST(Runtime, InjectedFailuresSplitAndComplete) {
  Counts c = injected_run("split");
  EXPECT_GT(c.compile_failures, 0);
  EXPECT_GT(c.fallbacks, 0);
}
TEST(Runtime, InjectedFailuresFallBackToEagerAndComplete) {
  Counts c = injected_run("eager");
  EXPECT_EQ(c.compile_failures, 1);  // the step's group, once: then remembered
  EXPECT_EQ(c.fallbacks, 2);         // once per step
}
TEST(Runtime, InjectedFailureUnderFailStops) {
  try {
    injected_run("fail");
    ADD_FAILURE() << "the run should have stopped";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
  }
}
// An op rejected inside a fused group: split retries until it stands alone, where it compiles.
TEST(Runtime, InjectedUnsupportedOpFallsBack) {
  Rig rig(load("trn2", {"runtime.inject.fail_ops=[\"gelu\"]"}), mode_named("fused"), false);
  auto w = workloads::make_workload(workloads::parse_spec(kMlp));
  rig.run([&](Session& s) {
    w->setup(s);
    s.begin_step(0);
    s.to_host(w->step(s, 0));
    s.end_step();
  });
  EXPECT_GT(rig.session->totals().fallbacks, 0);
  EXPECT_GT(rig.session->totals().compile_failures, 0);
}

// A cache smaller than the working set of signatures evicts, and warm steps miss again.
TEST(Runtime, SmallCacheEvictsAndMissesAgain) {
  Rig rig(load("trn2", {"runtime.cache_capacity=2"}), mode_named("eager"), false);
  auto w = workloads::make_workload(workloads::parse_spec("mlp:batch=128,d_model=128,d_ff=256"));
  rig.run([&](Session& s) {  // the steps, each read back (Workload::run)
    w->setup(s);
    s.startup(w->buckets(s), [&](int64_t b) { w->trace(s, b); });
    w->run(s, 2);
  });
  const StepRecord& warm = rig.session->steps().at(1);
  EXPECT_GT(warm.counts.cache_evictions, 0);
  EXPECT_GT(warm.counts.cache_misses, 0);
  EXPECT_GT(warm.counts.compiles, 0);
}

// A group that cannot compile: `fail` stops with a one-line RuntimeError naming the reason.
TEST(Runtime, CompileFailureUnderFailPolicyStops) {
  Rig rig(load("tiny", {"runtime.lazy.fallback=\"fail\""}), mode_named("fused"), false);
  std::string message;
  try {
    rig.run([&](Session& s) {
      Tensor x = s.upload_random({64, 8192}, isa::DType::fp32, 1);
      s.begin_step(0);
      s.to_host(softmax(x));  // a row of 32 KiB per partition, needed whole
      s.end_step();
    });
  } catch (const RuntimeError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("failed to compile"), std::string::npos) << message;
  EXPECT_NE(message.find("does not fit in SBUF"), std::string::npos) << message;
}

// Under `split`, a failing group is split and retried; a single op that still fails is retried
// as strict eager and then stops the run: every attempt is a counted compile.
TEST(Runtime, CompileFailureUnderSplitRetriesThenStops) {
  Rig rig(load("tiny"), mode_named("fused"), false);
  EXPECT_THROW(rig.run([&](Session& s) {
    Tensor x = s.upload_random({64, 8192}, isa::DType::fp32, 1);
    s.begin_step(0);
    s.to_host(exp(softmax(x)));
    s.end_step();
  }),
               RuntimeError);
  // The pair fails, then its first half (softmax alone); strict eager then meets softmax's
  // remembered failure without compiling it again, and the run stops.
  EXPECT_EQ(rig.session->totals().compile_failures, 2);
  EXPECT_EQ(rig.session->totals().compiles, 2);
  EXPECT_EQ(rig.session->totals().fallbacks, 2);
}

// count_macs records a step's shapes only: a hand-built step's MACs are its contractions' (a
// matmul [64, 32] x [32, 48] and a batch_matmul [4, 8, 16] x [4, 8, 16]^T; not the attention,
// the softmax or the element-wise ops), and nothing is uploaded, compiled, launched, charged to
// the host or logged; its tensors have no value outside it.
TEST(CountMacs, CountsAHandBuiltStepsContractionsAndLeavesNoTrace) {
  Rig rig(load("trn2"), mode_named("fused"));
  rig.run([&](Session& s) {
    Tensor w = s.upload_random({32, 48}, isa::DType::fp32, 1);
    s.synchronize();
    const Counts before = s.totals();
    const int64_t now = s.now_ns();
    const auto host_by_op = s.host_ns_by_op();
    Tensor kept;
    const double macs = s.count_macs([&] {
      s.set_origin({"counted", ""});
      Tensor x = s.upload_random({64, 32}, isa::DType::fp32, 2);
      Tensor y = gelu(matmul(x, w));
      EXPECT_EQ(y.shape(), (std::vector<int64_t>{64, 48}));
      Tensor q = s.upload({4, 8, 16}, isa::DType::fp32, {});
      Tensor p = softmax(batch_matmul(q, q, /*transpose_b=*/true));
      EXPECT_EQ(p.shape(), (std::vector<int64_t>{4, 8, 8}));
      Tensor a = s.upload_random({16, 32}, isa::DType::fp32, 3);
      Tensor o = attention(a, a, a, nullptr, 2, true);
      EXPECT_EQ(s.iota({16, 32}, isa::DType::int32, 1).shape(), (std::vector<int64_t>{16, 32}));
      EXPECT_THROW(add(o, s.upload_random({3}, isa::DType::fp32, 4)), base::InputError);
      s.mark_step();
      s.mark_split();
      s.synchronize();
      EXPECT_THROW(s.to_host(y), std::logic_error);
      EXPECT_THROW(s.begin_step(0), std::logic_error);
      EXPECT_THROW(s.count_macs([] {}), std::logic_error);
      kept = y;
    });
    // The matmul, the batch_matmul and the attention's q.k and p.v (16 rows against 16 keys).
    EXPECT_EQ(macs, 64.0 * 32 * 48 + 4.0 * 8 * 8 * 16 + 2.0 * 16 * 16 * 32);
    EXPECT_EQ(s.now_ns(), now);
    EXPECT_EQ(s.host_ns_by_op(), host_by_op);
    const Counts after = s.totals();
    EXPECT_EQ(after.ops, before.ops);
    EXPECT_EQ(after.transfers, before.transfers);
    EXPECT_EQ(after.compiles, before.compiles);
    EXPECT_EQ(after.plans_launched, before.plans_launched);
    EXPECT_TRUE(s.cache_entries().empty());
    EXPECT_TRUE(s.origins().empty());
    EXPECT_TRUE(s.steps().empty());
    EXPECT_THROW(s.reference(kept), RuntimeError);
    EXPECT_THROW(s.to_host(kept), std::logic_error);
    EXPECT_THROW(matmul(kept, s.upload_random({48, 8}, isa::DType::fp32, 5)), std::logic_error);
  });
}

// The real MACs of a step are its MACs recorded at its real shapes (Session::count_macs): a
// workload that never pads does exactly the MACs it reports.
TEST(CountMacs, GemmUnderAotDoesItsRealMacs) {
  Rig rig(load("trn2"), mode_named("aot"), false);
  auto w = workloads::make_workload(workloads::parse_spec("gemm:m=100,k=64,n=48"));
  rig.run([&](Session& s) {
    w->setup(s);
    s.startup(w->buckets(s), [&](int64_t b) { w->trace(s, b); });
    w->run(s, 2);
  });
  ASSERT_EQ(rig.session->steps().size(), 2u);
  for (const StepRecord& r : rig.session->steps()) {
    EXPECT_EQ(r.real_macs, 100.0 * 64 * 48);
    EXPECT_EQ(r.padded_macs, r.real_macs);
  }
}
// A run of `spec` under native (no padding): the steps' real MACs equal their plans' MACs.
void expect_real_equals_padded(const std::string& spec) {
  Rig rig(load("trn2"), mode_named("native"), false);
  auto w = workloads::make_workload(workloads::parse_spec(spec));
  rig.run([&](Session& s) {
    w->setup(s);
    w->run(s, 1);
  });
  ASSERT_EQ(rig.session->steps().size(), 1u);
  const StepRecord& r = rig.session->steps()[0];
  EXPECT_GT(r.real_macs, 0);
  EXPECT_EQ(r.real_macs, r.padded_macs);
}
// The fused attention is not a contraction: its MACs are in neither count.
TEST(CountMacs, TransformerDoesItsRealMacs) { expect_real_equals_padded(kTransformer); }
// The first layer's backward computes no input gradient.
TEST(CountMacs, TrainingStepDoesItsRealMacs) {
  expect_real_equals_padded("train:batch=64,d_model=32,d_ff=96,layers=2,dtype=fp32");
}
TEST(CountMacs, ExactDecodeUnderNativeDoesItsRealMacs) {
  DecodeRun r = decode_run(mode_named("native"));
  EXPECT_GT(r.real_macs, 0);
  EXPECT_EQ(r.padded_macs, r.real_macs);
  EXPECT_EQ(r.report["padding_by_source"]["padded_fraction"], 0.0);
}

// (padded - real) / padded, from the steps' records.
double padded_fraction(const DecodeRun& r) { return (r.padded_macs - r.real_macs) / r.padded_macs; }

// AOT pads the keys (and the prompt) to buckets; the padding by source sums to what the plans
// did beyond the real MACs.
TEST(CountMacs, AotDecodePaddingBySourceSumsToPaddedLessReal) {
  DecodeRun r = decode_run(mode_named("aot"));
  EXPECT_GT(r.padded_macs, r.real_macs);
  const auto& by = r.report["padding_by_source"];
  EXPECT_NEAR(by["padded_fraction"].get<double>(), padded_fraction(r), 1e-12);
  EXPECT_EQ(by["batch_share"], 0.0);
  EXPECT_GT(by["keys_share"].get<double>(), 0.0);
  EXPECT_GT(by["prompt_share"].get<double>(), 0.0);  // the prompt of 40 runs at 64 rows
  EXPECT_NEAR(by["keys_share"].get<double>() + by["prompt_share"].get<double>(), 1.0, 1e-12);
}

// serve under the static scheduler pads batches (finished sequences ride along), prompts and
// keys to buckets: each source's MACs are counted at the shapes between real and padded, and
// they sum to the plans' MACs beyond the real ones. Continuous batching under AOT pads too.
void check_serve_padding(const std::string& scheduler, const char* mode) {
  Rig rig(load("trn2"), mode_named(mode), false);
  auto w = workloads::make_workload(workloads::parse_spec(
      "serve:requests=6,layers=1,d_model=64,heads=4,d_ff=128,vocab=100,context=64,max_prompt=32,"
      "prompt_mean=12,max_batch=4,block=4,scheduler=" +
      scheduler));
  rig.run([&](Session& s) {
    w->setup(s);
    s.startup(w->buckets(s), [&](int64_t b) { w->trace(s, b); });
    w->run(s, 0);
  });
  double padded = 0, real = 0;
  for (const StepRecord& st : rig.session->steps()) {
    padded += st.padded_macs;
    real += st.real_macs;
  }
  EXPECT_GT(padded, real);
  const auto by = w->report()->second["padding_by_source"];
  EXPECT_NEAR(by["padded_fraction"].get<double>(), (padded - real) / padded, 1e-12);
  EXPECT_GT(by["prompt_share"].get<double>(), 0.0);
  EXPECT_GT(by["batch_share"].get<double>(), 0.0);
  // A token's keys past its sequence's own length are decode_attention work the plans do.
  EXPECT_GT(by["keys_share"].get<double>(), 0.0);
  const double shares = by["batch_share"].get<double>() + by["prompt_share"].get<double>() +
                        by["keys_share"].get<double>();
  EXPECT_NEAR(shares, 1.0, 1e-12);
}
TEST(CountMacs, StaticServePaddingBySourceSumsToPaddedLessReal) {
  check_serve_padding("static", "native");
}
TEST(CountMacs, ContinuousServeUnderAotPaddingBySourceSumsToPaddedLessReal) {
  check_serve_padding("continuous", "aot");
}

}  // namespace
}  // namespace wallsim::runtime
