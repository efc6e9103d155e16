// `wallsim run -w program:file=P.json` end to end: captured programs in every mode, functional
// replay against PyTorch's values, exact vs bounded shapes, the host fallback, bad programs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace wallsim::test {
namespace {

using nlohmann::json;

const char* kModes[] = {"native", "eager", "fused", "aot"};

json run_program(const std::string& program, const std::string& mode, const std::string& extra,
                 const std::string& name, int* code = nullptr, std::string* err = nullptr,
                 std::string* out_dir = nullptr) {
  const std::string out = fresh_dir("replay", name + "_" + mode);
  if (out_dir) *out_dir = out;
  const int rc = run_wallsim(
      "run -c configs/tiny.json -w program:file=" + program + " --mode " + mode +
          (extra.find("--trace-level") == std::string::npos ? " --trace-level none" : "") +
          " --out " + out + " " + extra,
      err);
  if (code) *code = rc;
  if (rc != 0) return json();
  return json::parse(slurp(out + "/stats.json"));
}

const json& aten_row(const json& stats, const std::string& aten) {
  for (const json& r : stats["program"]["aten_ops"]) {
    if (r["aten"] == aten) return r;
  }
  static const json kNone;
  ADD_FAILURE() << "no aten_ops row for " << aten;
  return kNone;
}

int64_t step_compiles(const json& stats, size_t from) {
  int64_t c = 0;
  for (size_t i = from; i < stats["steps"].size(); ++i)
    c += stats["steps"][i]["compiles"].get<int64_t>();
  return c;
}

// A float32 .npy file of `shape`.
void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<float>& v) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t n = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&n), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
}

// A generation-like program: step t feeds x[1, L] (L = 3 + t, axis "seq") and v[L, 4], computes
// softmax(x), its dot with x, softmax(x) @ v summed, and x's last element, and reads their sum:
// every reduction and contraction runs over "seq", and the last element is a select of -1.
// Values are written for a functional check (x = 0.1 * i, v = 1).
std::string write_generation(const std::string& dir, int steps) {
  std::filesystem::create_directories(dir + "/gen.values");
  std::ostringstream ev;
  int id = 0, reads = 0;
  const auto op = [&](const std::string& kind, const std::vector<int>& in, const std::string& attrs,
                      const std::string& shape, const std::string& names, const std::string& aten) {
    ev << R"({"ev":"op","id":)" << id << R"(,"op":")" << kind << R"(","inputs":[)";
    for (size_t k = 0; k < in.size(); ++k) ev << (k ? "," : "") << in[k];
    ev << R"(],"attrs":{)" << attrs << R"(},"dtype":"fp32","shape":)" << shape;
    if (!names.empty()) ev << R"(,"dim_names":)" << names;
    ev << R"(,"aten":")" << aten << R"(","module":"lm"},)"
       << "\n";
    return id++;
  };
  for (int t = 0; t < steps; ++t) {
    const int L = 3 + t;
    const std::string len = std::to_string(L);
    std::vector<float> xs(L), ones(static_cast<size_t>(L) * 4, 1.0f);
    for (int i = 0; i < L; ++i) xs[i] = 0.1f * float(i);
    const int x = id++;
    ev << R"({"ev":"input","id":)" << x << R"(,"name":"x","dtype":"fp32","shape":[1,)" << len
       << R"(],"dim_names":[null,"seq"]},)"
       << "\n";
    write_npy(dir + "/gen.values/i" + std::to_string(x) + ".npy", {1, L}, xs);
    const int v = id++;
    ev << R"({"ev":"input","id":)" << v << R"(,"name":"v","dtype":"fp32","shape":[)" << len
       << R"(,4],"dim_names":["seq",null]},)"
       << "\n";
    write_npy(dir + "/gen.values/i" + std::to_string(v) + ".npy", {L, 4}, ones);
    const std::string row = "[1," + len + "]", seq = R"([null,"seq"])";
    const int s = op("softmax", {x}, "", row, seq, "aten._softmax.default");
    const int sx = op("mul", {s, x}, "", row, seq, "aten.mul.Tensor");
    const int dot = op("reduce_sum", {sx}, "", "[1,1]", "", "aten.sum.dim_IntList");
    const int mv = op("matmul", {s, v}, "", "[1,4]", "", "aten.mm.default");
    const int mvs = op("reduce_sum", {mv}, "", "[1,1]", "", "aten.sum.dim_IntList");
    const int last =
        op("slice", {x},
           R"("axis":1,"start":{"dim":"seq","offset":-1},"limit":{"dim":"seq","offset":0})",
           "[1,1]", seq, "aten.select.int");
    const int y = op("add", {op("add", {dot, mvs}, "", "[1,1]", "", "aten.add.Tensor"), last}, "",
                     "[1,1]", "", "aten.add.Tensor");
    ev << R"({"ev":"read","id":)" << y << R"(,"reason":"item"},)"
       << "\n";
    double z = 0, e = 0;
    for (int i = 0; i < L; ++i) z += std::exp(0.1 * i);
    for (int i = 0; i < L; ++i) e += std::exp(0.1 * i) / z * 0.1 * i;
    write_npy(dir + "/gen.values/r" + std::to_string(reads++) + ".npy", {1, 1},
              {float(e + 4.0 + 0.1 * (L - 1))});
    ev << R"({"ev":"step"})" << (t + 1 < steps ? "," : "") << "\n";
  }
  const std::string path = dir + "/gen.json";
  std::ofstream(path) << R"({"format":"wallsim-program","version":1,"name":"gen",)"
                      << R"("values":"gen.values","events":[)" << ev.str() << "]}";
  return path;
}

TEST(ProgramReplay, CapturedForwardRunsInEveryMode) {
  for (const char* mode : kModes) {
    int code = 0;
    std::string err;
    const json s = run_program(PROGRAMS_DIR "/mlp_forward.json", mode, "", "fwd", &code, &err);
    ASSERT_EQ(code, 0) << mode << ": " << err;
    // Two forward steps, then the frees after the last `step` form a third.
    EXPECT_EQ(s["steps"].size(), 3u) << mode;
    EXPECT_EQ(s["program"]["program_steps"], 3);
    const json& mm = aten_row(s, "aten.addmm.default");
    EXPECT_EQ(mm["calls"], 6) << mode;  // 3 layers x 2 steps
    EXPECT_GT(mm["device_ns"].get<double>(), 0) << mode;
    EXPECT_GT(mm["macs"].get<double>(), 0) << mode;
  }
}

// Adam in PyTorch 1.13 reads its step count with .item() per parameter: each read is a flush
// mid-step under fused (a "flush: value read" in the trace) and, under every mode, a transfer
// that cuts the step's launches.
TEST(ProgramReplay, CapturedTrainingStepsRunAndAttributeBackwardOps) {
  const std::pair<const char*, const char*> cases[] = {
      {"mlp_adam", "aten.threshold_backward.default"},
      {"transformer_adam", "aten.gelu_backward.default"}};
  for (const auto& [prog, backward] : cases) {
    const std::string file = std::string(PROGRAMS_DIR) + "/" + prog + ".json";
    int64_t reads = 0;
    for (std::istringstream in(slurp(file)); in;) {
      std::string line;
      std::getline(in, line);
      reads += line.find(R"("ev":"read")") != std::string::npos;
    }
    ASSERT_GT(reads, 2) << prog;
    for (const char* mode : kModes) {
      int code = 0;
      std::string err;
      const std::string traced = std::string(mode) == "fused" ? "--trace-level plans" : "";
      std::string out;
      const json s = run_program(file, mode, traced, prog, &code, &err, &out);
      ASSERT_EQ(code, 0) << prog << " " << mode << ": " << err;
      EXPECT_GT(aten_row(s, "aten.addmm.default")["device_ns"].get<double>(), 0) << mode;
      EXPECT_GT(aten_row(s, backward)["device_ns"].get<double>(), 0) << prog << " " << mode;
      EXPECT_GT(aten_row(s, backward)["calls"].get<int64_t>(), 0) << prog << " " << mode;
      EXPECT_GT(aten_row(s, "aten.addcdiv_.default")["calls"].get<int64_t>(), 0) << mode;
      int64_t transfers = 0, launches = 0;
      for (const json& st : s["steps"]) {
        transfers += st["transfers"].get<int64_t>();
        launches += st["plans_launched"].get<int64_t>();
      }
      EXPECT_GE(transfers, reads) << prog << " " << mode;
      EXPECT_GT(launches, int64_t(s["steps"].size())) << prog << " " << mode;
      if (std::string(mode) == "fused") {
        EXPECT_NE(slurp(out + "/trace.json").find("flush: value read"), std::string::npos) << prog;
      }
    }
  }
}

TEST(ProgramReplay, FunctionalReplayMatchesPyTorch) {
  for (const char* prog : {"mlp_forward", "mlp_adam", "transformer_adam"}) {
    int code = 0;
    std::string err;
    const json s = run_program(std::string(PROGRAMS_DIR) + "/" + prog + ".json", "fused",
                               "--functional", prog, &code, &err);
    ASSERT_EQ(code, 0) << prog << ": " << err;
    EXPECT_GT(s["program"]["reads_checked"].get<int64_t>(), 0) << prog;
    EXPECT_LE(s["program"]["max_rel_error"].get<double>(), 1e-3) << prog;
  }
}

// nn.Linear reads its weight as weight.t(): where the mode pre-lays constants the weight is
// uploaded transposed, so aten.t.default runs no device op; strict eager runs it every step.
// PyTorch's values are matched either way.
TEST(ProgramReplay, LinearWeightsArePreLaidExceptUnderStrictEager) {
  for (const char* mode : kModes) {
    int code = 0;
    std::string err;
    const json s =
        run_program(PROGRAMS_DIR "/mlp_forward.json", mode, "--functional", "prelaid", &code, &err);
    ASSERT_EQ(code, 0) << mode << ": " << err;
    EXPECT_GT(s["program"]["reads_checked"].get<int64_t>(), 0) << mode;
    EXPECT_LE(s["program"]["max_rel_error"].get<double>(), 1e-3) << mode;
    const double t_ns = aten_row(s, "aten.t.default")["device_ns"].get<double>();
    if (std::string(mode) == "eager") {
      EXPECT_GT(t_ns, 0);
    } else {
      EXPECT_EQ(t_ns, 0) << mode;
    }
  }
}

TEST(ProgramReplay, ExactShapesRecompilePerLengthBoundedCompilesOnce) {
  const std::string dir = fresh_dir("replay", "gen");
  const std::string gen = write_generation(dir, 6);
  int code = 0;
  std::string err;
  const json exact = run_program(gen, "fused", "--functional", "gen_exact", &code, &err);
  ASSERT_EQ(code, 0) << err;
  const json bounded =
      run_program(gen, "fused", "--functional --bound 'seq<=16'", "gen_bounded", &code, &err);
  ASSERT_EQ(code, 0) << err;
  EXPECT_GT(exact["totals"]["recompiles"].get<int64_t>(), 0);
  EXPECT_GE(step_compiles(exact, 1), 5);    // every new length compiles again
  EXPECT_EQ(step_compiles(bounded, 1), 0);  // one plan serves every length
  EXPECT_EQ(bounded["totals"]["recompiles"], 0);
  EXPECT_EQ(bounded["program"]["bounds"]["seq"], 16);
  EXPECT_GT(bounded["totals"]["masked_flop_fraction"].get<double>(), 0);
  for (const json* s : {&exact, &bounded}) {
    EXPECT_EQ((*s)["program"]["reads_checked"], 6);
    EXPECT_LE((*s)["program"]["max_rel_error"].get<double>(), 1e-5);
  }
  // Every mode replays it bounded.
  for (const char* mode : kModes) {
    run_program(gen, mode, "--functional --bound 'seq<=16'", "gen_all", &code, &err);
    EXPECT_EQ(code, 0) << mode << ": " << err;
  }
}

// A captured generation under fused, functional: with exact shapes every token recompiles,
// with `seq` bounded only the first step compiles; both give PyTorch's tokens.
void expect_recompiles_per_token_unless_bounded(const std::string& gen, const std::string& name) {
  int code = 0;
  std::string err;
  const json exact = run_program(gen, "fused", "--functional", name + "_exact", &code, &err);
  ASSERT_EQ(code, 0) << err;
  const json bounded =
      run_program(gen, "fused", "--functional --bound 'seq<=16'", name + "_bounded", &code, &err);
  ASSERT_EQ(code, 0) << err;
  const size_t steps = exact["steps"].size();
  ASSERT_GE(steps, 5u);
  for (size_t i = 0; i < steps; ++i) EXPECT_GT(exact["steps"][i]["compiles"].get<int64_t>(), 0);
  EXPECT_EQ(exact["totals"]["recompiles"].get<int64_t>(), int64_t(steps) - 1);
  EXPECT_GT(step_compiles(bounded, 0), 0);
  EXPECT_EQ(step_compiles(bounded, 1), 0);
  for (const json* s : {&exact, &bounded}) {
    EXPECT_EQ((*s)["program"]["reads_checked"].get<size_t>(), steps);
    EXPECT_EQ((*s)["program"]["max_rel_error"].get<double>(), 0.0);  // the tokens themselves
  }
}

// The captured GPT-2 generation (examples/torch/gpt2.py, no KV cache: the whole sequence every
// token, the "seq" axis of the token ids growing by one a step; a select of the last position,
// the causal mask cut from a [context, context] buffer), then bounded in the other modes.
TEST(ProgramReplay, CapturedGpt2GenerationRecompilesPerTokenUnlessBounded) {
  const std::string gen = PROGRAMS_DIR "/gpt2_generate.json";
  expect_recompiles_per_token_unless_bounded(gen, "gpt2");
  for (const char* mode : {"native", "eager", "aot"}) {
    int code = 0;
    std::string err;
    const json s = run_program(gen, mode, "--bound 'seq<=16'", "gpt2_modes", &code, &err);
    ASSERT_EQ(code, 0) << mode << ": " << err;
    EXPECT_EQ(step_compiles(s, 1), 0) << mode;
  }
}

// Batch 2: nn.Linear merges [B, T, D] into [B*T, D], whose axis the capture names "2*seq",
// so the bounded replay still bounds it (it was refused: "the reshape moves a bounded axis").
TEST(ProgramReplay, BatchedGpt2GenerationKeepsItsSeqThroughMergedAxes) {
  const std::string gen = PROGRAMS_DIR "/gpt2_batch2_generate.json";
  ASSERT_NE(slurp(gen).find(R"("2*seq")"), std::string::npos);
  expect_recompiles_per_token_unless_bounded(gen, "gpt2b2");
}

TEST(ProgramReplay, CapturedGpt2LogitsMatchPyTorch) {
  for (const char* extra : {"--functional", "--functional --bound 'seq<=16'"}) {
    int code = 0;
    std::string err;
    const json s =
        run_program(PROGRAMS_DIR "/gpt2_logits.json", "fused", extra, "gpt2_logits", &code, &err);
    ASSERT_EQ(code, 0) << extra << ": " << err;
    EXPECT_EQ(s["program"]["reads_checked"], 1);
    EXPECT_LE(s["program"]["max_rel_error"].get<double>(), 1e-3) << extra;
  }
}

TEST(ProgramReplay, BoundedReplayRefusesWhatItCannotRunExactly) {
  const std::string dir = fresh_dir("replay", "norm");
  std::filesystem::create_directories(dir);
  const std::string p = dir + "/norm.json";
  std::ofstream(p) << R"({"format":"wallsim-program","version":1,"name":"norm","events":[
    {"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[2,5],"dim_names":[null,"seq"]},
    {"ev":"op","id":1,"op":"reduce_mean","inputs":[0],"attrs":{},"dtype":"fp32","shape":[2,1],
     "aten":"aten.mean.dim","module":"pool"},
    {"ev":"read","id":1,"reason":"item"}]})";
  int code = 0;
  std::string err;
  run_program(p, "fused", "--bound 'seq<=8'", "norm", &code, &err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("events[1] (op reduce_mean, aten.mean.dim): cannot run with a bounded dim"),
            std::string::npos)
      << err;
  run_program(p, "fused", "--bound 'len<=8'", "norm2", &code, &err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("the program names no dim 'len' (named: seq)"), std::string::npos) << err;
  run_program(p, "fused", "--bound 'seq<=4'", "norm3", &code, &err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("over its bound 4"), std::string::npos) << err;
  run_program(p, "fused", "", "norm4", &code, &err);  // exact shapes: fine
  EXPECT_EQ(code, 0) << err;
}

std::string write_fallback(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string p = dir + "/fallback.json";
  std::ofstream(p) << R"({"format":"wallsim-program","version":1,"name":"fb","events":[
    {"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[64,64]},
    {"ev":"op","id":1,"op":"relu","inputs":[0],"attrs":{},"dtype":"fp32","shape":[64,64],
     "aten":"aten.relu.default","module":"blocks.0"},
    {"ev":"host_op","aten":"aten.cumsum.default","module":"blocks.0.scan","inputs":[1],
     "outputs":[{"id":2,"dtype":"fp32","shape":[64,64]}],"flops":4096,"bytes":32768},
    {"ev":"op","id":3,"op":"add","inputs":[2,1],"attrs":{},"dtype":"fp32","shape":[64,64],
     "aten":"aten.add.Tensor","module":"blocks.0"},
    {"ev":"read","id":3,"reason":"cpu"}]})";
  return p;
}

TEST(ProgramReplay, HostFallbackRunsTheOpOnTheHostAndReportsIt) {
  const std::string p = write_fallback(fresh_dir("replay", "fb"));
  for (const char* mode : kModes) {
    int code = 0;
    std::string err;
    const json s = run_program(p, mode, "", "fb", &code, &err);
    ASSERT_EQ(code, 0) << mode << ": " << err;
    const json& row = aten_row(s, "aten.cumsum.default");
    EXPECT_EQ(row["host_ops"], 1) << mode;
    // 5 us overhead + max(4096 FLOP at 2000 GFLOP/s, 32768 B at 160 GB/s) = 5000 + 205 ns.
    EXPECT_EQ(row["host_fallback_ns"], 5205) << mode;
    EXPECT_EQ(row["transfer_bytes"], 2 * 64 * 64 * 4) << mode;
    EXPECT_EQ(s["program"]["host_fallback"]["ns"], 5205);
    EXPECT_GE(s["totals"]["host_other_ns"].get<int64_t>(), 5205) << mode;
  }
}

TEST(ProgramReplay, WithTheFallbackOffTheRunStopsNamingTheOpAndModule) {
  const std::string p = write_fallback(fresh_dir("replay", "fboff"));
  int code = 0;
  std::string err;
  run_program(p, "fused", "--set runtime.host_fallback=false", "fboff", &code, &err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("aten.cumsum.default in module 'blocks.0.scan' has no device lowering"),
            std::string::npos)
      << err;
  // Under AddressSanitizer a throw on the host thread's coroutine stack adds ASan's own
  // three-line warning (google/sanitizers#189); wallsim's message is the one line after it.
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n') -
                3 * int(err.find("__asan_handle_no_return") != std::string::npos),
            1)
      << err;
}

TEST(ProgramReplay, BadProgramFilesExitTwoNamingFileAndEvent) {
  const std::string dir = fresh_dir("replay", "bad");
  std::filesystem::create_directories(dir);
  const std::string p = dir + "/bad.json";
  std::ofstream(p) << R"({"format":"wallsim-program","version":1,"name":"b","events":[
    {"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[4,8]},
    {"ev":"op","id":1,"op":"relu","inputs":[0],"attrs":{},"dtype":"fp32","shape":[4,9],
     "aten":"aten.relu.default","module":""}]})";
  int code = 0;
  std::string err;
  run_program(p, "fused", "", "bad", &code, &err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find(p + ": events[1] (op relu): the graph op's inferred type"), std::string::npos)
      << err;
  run_program(dir + "/missing.json", "fused", "", "missing", &code, &err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("missing.json"), std::string::npos) << err;
  run_program(write_fallback(dir + "/fb"), "fused", "--bound seq", "badbound", &code, &err);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("expected NAME<=MAX"), std::string::npos) << err;
}

TEST(ProgramReplay, StepsBeyondTheProgramWrapAround) {
  int code = 0;
  std::string err;
  const json s =
      run_program(PROGRAMS_DIR "/mlp_forward.json", "fused", "--steps 5", "wrap", &code, &err);
  ASSERT_EQ(code, 0) << err;
  EXPECT_EQ(s["steps"].size(), 5u);
  EXPECT_EQ(s["program"]["steps_run"], 5);
  EXPECT_EQ(step_compiles(s, 3), 0);  // the wrapped steps hit the plans of the first pass
}

// Issue 40: a program whose set-up (x * 2, read once) feeds each step's matmul, with values:
// x = 0.1 * i, w = 1, y = 1; each step reads (y + x * 2) @ w.
std::string write_setup_program(const std::string& dir, bool as_setup) {
  std::filesystem::create_directories(dir + "/s.values");
  std::vector<float> x(32), w(24, 1.0f), y(32, 1.0f), x2(32), out(12);
  for (int i = 0; i < 32; ++i) x[i] = 0.1f * float(i), x2[i] = 2 * x[i];
  for (int r = 0; r < 4; ++r) {
    float sum = 0;
    for (int k = 0; k < 8; ++k) sum += 1 + x2[r * 8 + k];
    for (int c = 0; c < 3; ++c) out[r * 3 + c] = sum;
  }
  write_npy(dir + "/s.values/i0.npy", {4, 8}, x);
  write_npy(dir + "/s.values/w2.npy", {8, 3}, w);
  write_npy(dir + "/s.values/r0.npy", {4, 8}, x2);
  int r = 1;
  std::string steps;
  for (int step = 0, id = 3; step < 2; ++step, id += 3) {
    const std::string a = std::to_string(id), b = std::to_string(id + 1),
                      c = std::to_string(id + 2);
    write_npy(dir + "/s.values/i" + a + ".npy", {4, 8}, y);
    write_npy(dir + "/s.values/r" + std::to_string(r++) + ".npy", {4, 3}, out);
    steps += R"(,{"ev":"input","id":)" + a + R"(,"name":"y","dtype":"fp32","shape":[4,8]},
      {"ev":"op","id":)" +
             b + R"(,"op":"add","inputs":[)" + a + R"(,1],"attrs":{},"dtype":"fp32",
       "shape":[4,8],"aten":"aten.add.Tensor","module":""},
      {"ev":"op","id":)" +
             c + R"(,"op":"matmul","inputs":[)" + b + R"(,2],"attrs":{},
       "dtype":"fp32","shape":[4,3],"aten":"aten.mm.default","module":"fc"},
      {"ev":"read","id":)" +
             c + R"(,"reason":"numpy"},{"ev":"step"})";
  }
  const std::string setup = R"({"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[4,8]},
      {"ev":"op","id":1,"op":"scale","inputs":[0],"attrs":{"value":2.0},"dtype":"fp32",
       "shape":[4,8],"aten":"aten.mul.Tensor","module":""},
      {"ev":"free","id":0},{"ev":"read","id":1,"reason":"tolist"})";
  const std::string weight = R"({"ev":"weight","id":2,"name":"w","dtype":"fp32","shape":[8,3]})";
  const std::string path = dir + "/s.json";
  std::ofstream(path)
      << R"({"format":"wallsim-program","version":1,"name":"s","values":"s.values",)"
      << (as_setup ? R"("setup":[)" + setup + "]," : "") << R"("events":[)"
      << (as_setup ? "" : setup + ",") << weight << steps << "]}";
  return path;
}

// Set-up work runs once, in start-up (a model load), in every mode: the steps launch the same
// plans as each other, its read is checked once however many steps run, and its ATen rows are
// apart from the steps'. The same events without the section run in step 0.
TEST(ProgramReplay, SetUpRunsOnceBeforeTheStepsInEveryMode) {
  const std::string dir = fresh_dir("replay", "setup_files");
  const std::string with = write_setup_program(dir + "/with", true);
  const std::string without = write_setup_program(dir + "/without", false);
  for (const char* mode : {"native", "eager", "eager-debug", "fused", "aot"}) {
    int code = 0;
    std::string err;
    const json s = run_program(with, mode, "--functional --steps 4", "setup", &code, &err);
    ASSERT_EQ(code, 0) << mode << ": " << err;
    EXPECT_EQ(s["program"]["setup"]["events"], 4) << mode;
    EXPECT_GT(s["program"]["setup"]["wall_ns"].get<int64_t>(), 0) << mode;
    EXPECT_EQ(s["program"]["reads_checked"], 1 + 4) << mode;  // the set-up's read once
    EXPECT_LT(s["program"]["max_rel_error"].get<double>(), 1e-6) << mode;
    EXPECT_EQ(aten_row(s, "aten.mul.Tensor (set-up)")["graph_ops"], 1) << mode;
    const json& steps = s["steps"];
    ASSERT_EQ(steps.size(), 4u);
    for (size_t i = 1; i < steps.size(); ++i)
      EXPECT_EQ(steps[i]["plans_launched"], steps[0]["plans_launched"]) << mode << " " << i;
    const json b = run_program(without, mode, "--functional --steps 4", "nosetup", &code, &err);
    ASSERT_EQ(code, 0) << mode << ": " << err;
    EXPECT_EQ(b["program"]["reads_checked"], 2 + 4) << mode;  // step 0 runs twice
    EXPECT_EQ(b["program"]["setup"]["events"], 0) << mode;
    EXPECT_GT(b["steps"][0]["plans_launched"].get<int64_t>(),
              steps[0]["plans_launched"].get<int64_t>())
        << mode;
  }
}

// Origins are one mechanism for programs and built-in workloads: the transformer sets a layer
// origin per block, and although layers 1 and 2 launch layer 0's cached plan, each launch
// carries its own layer, so `layers` has one row per block with the same work.
TEST(ProgramReplay, RunReportsPerLayerThroughLaunchOrigins) {
  const std::string out = fresh_dir("replay", "layers");
  ASSERT_EQ(run_wallsim("run -c configs/tiny.json -w transformer:layers=3,seq=32,d_model=64,"
                        "heads=2,d_ff=128 --mode fused --trace-level none --out " +
                        out),
            0);
  const json s = json::parse(slurp(out + "/stats.json"));
  ASSERT_EQ(s["layers"].size(), 3u);
  for (int l = 0; l < 3; ++l) {
    const json& r = s["layers"][l];
    EXPECT_EQ(r["layer"], "layers." + std::to_string(l));
    EXPECT_EQ(r["nodes"], s["layers"][0]["nodes"]);
    EXPECT_EQ(r["macs"], s["layers"][0]["macs"]);
    EXPECT_GT(r["exposed_ns"].get<double>(), 0);
  }
  // A program's layers are its modules.
  const json p = run_program(PROGRAMS_DIR "/mlp_forward.json", "fused", "", "mlp_layers");
  ASSERT_FALSE(p["layers"].empty());
  EXPECT_EQ(p["layers"][0]["layer"], "0");
}

}  // namespace
}  // namespace wallsim::test
