// `wallsim validate shapes`: a seeded population of GEMM, conv and attention shapes vs rooflines.
// rooflines.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <variant>

#include "cli_util.h"
#include "commands.h"
#include "wallsim/base/file_write.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/dma/dma_route.h"
#include "wallsim/engines/timing_model.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/schedule_tuner.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim::cli {
namespace {

using base::Json;

// One shape of the population: its graph and what no schedule of it can avoid.
struct Shape {
  std::string family, name, dtype;  // family: gemm, batch_matmul, conv, attention
  Json graph;
  double macs = 0;        // tensor-array multiply-accumulates the op needs
  double exp_rows = 0;    // attention: score elements whose exponent must be taken
  int64_t min_bytes = 0;  // the operands read once and the result written once
  std::string twin;       // a transposed-operand variant: the name of its plain twin
};

int64_t dtype_bytes(const std::string& dt) { return dt == "fp32" || dt == "int32" ? 4 : 2; }

Json input(int id, const std::string& name, const std::string& dtype, std::vector<int64_t> shape) {
  return {{"id", id},       {"op", "input"},  {"name", name},
          {"dtype", dtype}, {"shape", shape}, {"role", "input"}};
}
Json graph_of(const std::string& name, Json nodes, int out) {
  return {{"format", "wallsim-graph"},
          {"version", 1},
          {"name", name},
          {"nodes", nodes},
          {"outputs", {out}}};
}
Json transpose2(int id, int in) {
  return {{"id", id}, {"op", "transpose"}, {"inputs", {in}}, {"perm", {1, 0}}};
}

// C[M, N] = A[M, K] . B[K, N]; `ta`: A is given as A^T [K, M] (a transpose node makes A), `tb`:
// B as B^T [N, K] (PyTorch's Linear weight).
Shape gemm(int64_t M, int64_t K, int64_t N, const std::string& dt, bool ta, bool tb) {
  Shape s;
  s.family = "gemm";
  s.dtype = dt;
  s.name = "gemm " + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N) +
           (ta ? " A^T" : "") + (tb ? " B^T" : "") + " " + dt;
  if (ta || tb) s.twin = gemm(M, K, N, dt, false, false).name;
  Json nodes = Json::array();
  nodes.push_back(input(0, "a", dt, ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K}));
  nodes.push_back(input(1, "b", dt, tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}));
  int a = 0, b = 1, id = 2;
  if (ta) nodes.push_back(transpose2(id, 0)), a = id++;
  if (tb) nodes.push_back(transpose2(id, 1)), b = id++;
  nodes.push_back({{"id", id}, {"op", "matmul"}, {"inputs", {a, b}}});
  s.graph = graph_of("shape", nodes, id);
  s.macs = double(M) * double(K) * double(N);
  s.min_bytes = (M * K + K * N + M * N) * dtype_bytes(dt);
  return s;
}

Shape batch_matmul(int64_t B, int64_t M, int64_t K, int64_t N, const std::string& dt, bool tb) {
  Shape s;
  s.family = "batch_matmul";
  s.dtype = dt;
  s.name = "bmm " + std::to_string(B) + "x" + std::to_string(M) + "x" + std::to_string(K) + "x" +
           std::to_string(N) + (tb ? " B^T" : "") + " " + dt;
  Json mm = {{"id", 2}, {"op", "batch_matmul"}, {"inputs", {0, 1}}};
  if (tb) mm["transpose_b"] = 1;
  s.graph = graph_of(
      "shape",
      {input(0, "a", dt, {B, M, K}),
       input(1, "b", dt, tb ? std::vector<int64_t>{B, N, K} : std::vector<int64_t>{B, K, N}), mm},
      2);
  s.macs = double(B) * double(M) * double(K) * double(N);
  s.min_bytes = B * (M * K + K * N + M * N) * dtype_bytes(dt);
  return s;
}

// A convolution layer as the ONNX importer writes it: im2col (the input given already padded),
// the window axes last, a [pixels, C*KH*KW] x [C*KH*KW, OC] matmul.
struct ConvLayer {
  const char* net;
  int64_t c, hw, k, stride, oc;  // input channels, padded input height = width, kernel, stride
};
Shape conv(const ConvLayer& l, int64_t batch, const std::string& dt) {
  Shape s;
  s.family = "conv";
  s.dtype = dt;
  const int64_t o = (l.hw - l.k) / l.stride + 1, ck = l.c * l.k * l.k, px = batch * o * o;
  s.name = std::string("conv ") + l.net + " " + std::to_string(l.c) + "x" + std::to_string(l.hw) +
           "^2 k" + std::to_string(l.k) + "s" + std::to_string(l.stride) + "->" +
           std::to_string(l.oc) + " n" + std::to_string(batch) + " " + dt;
  Json nodes = {input(0, "x", dt, {batch, l.c, l.hw, l.hw}),
                input(1, "w", dt, {ck, l.oc}),
                {{"id", 2},
                 {"op", "im2col"},
                 {"inputs", {0}},
                 {"kernel", {l.k, l.k}},
                 {"strides", {l.stride, l.stride}}},
                {{"id", 3}, {"op", "transpose"}, {"inputs", {2}}, {"perm", {0, 2, 3, 1, 4, 5}}},
                {{"id", 4}, {"op", "reshape"}, {"inputs", {3}}, {"shape", {px, ck}}},
                {{"id", 5}, {"op", "matmul"}, {"inputs", {4, 1}}}};
  s.graph = graph_of("shape", nodes, 5);
  s.macs = double(px) * double(ck) * double(l.oc);
  s.min_bytes = (batch * l.c * l.hw * l.hw + ck * l.oc + px * l.oc) * dtype_bytes(dt);
  return s;
}

// Self-attention over L tokens of H heads of width hd; mask: none, causal, segment (int32 ids,
// runs the plan cannot know: priced as dense).
Shape attention(int64_t L, int64_t H, int64_t hd, const std::string& mask, const std::string& dt) {
  Shape s;
  s.family = "attention";
  s.dtype = dt;
  const int64_t D = H * hd;
  s.name = "attn L" + std::to_string(L) + " " + std::to_string(H) + "x" + std::to_string(hd) + " " +
           mask + " " + dt;
  Json nodes = {input(0, "q", dt, {L, D}), input(1, "k", dt, {L, D}), input(2, "v", dt, {L, D})};
  Json att = {{"id", 4}, {"op", "attention"}, {"inputs", {0, 1, 2}}, {"heads", H}};
  if (mask == "causal") att["causal"] = 1;
  if (mask == "segment") {
    nodes.push_back(input(3, "seg", "int32", {L}));
    att["inputs"] = {0, 1, 2, 3};
  }
  nodes.push_back(att);
  s.graph = graph_of("shape", nodes, 4);
  const double pairs = mask == "causal" ? double(L) * double(L + 1) / 2 : double(L) * double(L);
  s.macs = 2 * pairs * double(D);  // q.k^T and p.v
  s.exp_rows = pairs * double(H);
  s.min_bytes = 4 * L * D * dtype_bytes(dt) + (mask == "segment" ? 4 * L : 0);
  return s;
}

// Convolutions of real CNNs (padding folded into the input size): ResNet-50's stem and
// bottlenecks, VGG-16, MobileNet-v2's pointwise and AlexNet's stem.
const ConvLayer kConvLayers[] = {
    {"resnet50", 3, 230, 7, 2, 64},     {"resnet50", 64, 56, 1, 1, 64},
    {"resnet50", 64, 58, 3, 1, 64},     {"resnet50", 64, 56, 1, 1, 256},
    {"resnet50", 256, 56, 1, 1, 128},   {"resnet50", 128, 58, 3, 2, 128},
    {"resnet50", 128, 30, 3, 1, 128},   {"resnet50", 128, 28, 1, 1, 512},
    {"resnet50", 512, 28, 1, 1, 256},   {"resnet50", 256, 16, 3, 1, 256},
    {"resnet50", 1024, 14, 1, 1, 256},  {"resnet50", 512, 9, 3, 1, 512},
    {"resnet50", 2048, 7, 1, 1, 512},   {"vgg16", 3, 226, 3, 1, 64},
    {"vgg16", 64, 114, 3, 1, 128},      {"vgg16", 128, 58, 3, 1, 256},
    {"vgg16", 256, 30, 3, 1, 512},      {"vgg16", 512, 16, 3, 1, 512},
    {"mobilenetv2", 32, 112, 1, 1, 16}, {"mobilenetv2", 96, 56, 1, 1, 24},
    {"mobilenetv2", 144, 28, 1, 1, 32}, {"mobilenetv2", 384, 14, 1, 1, 64},
    {"mobilenetv2", 960, 7, 1, 1, 160}, {"alexnet", 3, 227, 11, 4, 64},
    {"alexnet", 192, 15, 3, 1, 384},
};

// The population: seeded, the same on every machine (std::mt19937_64 and integer arithmetic).
// `quick`: the test suite's few small shapes. Each case's multiply-accumulates are capped (2^40,
// attention 2^37: its plans hold far more instructions per MAC) so that the full population's
// plans fit in memory and it runs in minutes.
std::vector<Shape> population(uint64_t seed, bool quick) {
  std::mt19937_64 rng(seed);
  auto below = [&](uint64_t n) { return int64_t(rng() % n); };
  // Log-uniform in [1, hi]; half of them rounded to a multiple of 128 when that is >= 128.
  auto dim = [&](int64_t hi) {
    const double e = double(rng() % 1000000) / 1e6 * std::log2(double(hi));
    int64_t d = std::max<int64_t>(1, std::llround(std::exp2(e)));
    if (below(2) == 0 && d >= 128) d = d / 128 * 128;
    return std::min(d, hi);
  };
  const double cap = quick ? std::exp2(32) : std::exp2(40);
  const int64_t hi = quick ? 2048 : 16384;
  std::vector<Shape> out;
  auto dt = [&](int bf16_in_10) { return below(10) < bf16_in_10 ? "bf16" : "fp32"; };
  // GEMMs: a plain one and a transposed-operand twin of each.
  const int gemms = quick ? 6 : 64;
  if (!quick) {
    // The shapes issue 35 names, besides the seeded ones: 1024^3, 4096^3, 4096 x 8192 x 8192
    // with A transposed, PyTorch's Linear layout, GPT-2's MLP up-projection; attention at 16K
    // and 32K.
    for (int64_t n : {1024, 4096}) {
      out.push_back(gemm(n, n, n, "bf16", false, false));
      out.push_back(gemm(n, n, n, "bf16", false, true));
    }
    out.push_back(gemm(4096, 8192, 8192, "bf16", false, false));
    out.push_back(gemm(4096, 8192, 8192, "bf16", true, false));
    out.push_back(gemm(2048, 4096, 4096, "bf16", false, false));
    out.push_back(gemm(2048, 4096, 4096, "bf16", false, true));
    out.push_back(gemm(1024, 768, 3072, "bf16", false, false));
    out.push_back(gemm(1024, 768, 3072, "bf16", false, true));
    out.push_back(attention(16384, 1, 128, "segment", "bf16"));
    out.push_back(attention(32768, 1, 64, "causal", "bf16"));
  }
  for (int i = 0; i < gemms; ++i) {
    int64_t M, K, N;
    do {
      M = dim(hi), K = dim(hi), N = dim(hi);
    } while (double(M) * double(K) * double(N) > cap);
    const std::string d = dt(7);
    const int t = 1 + int(below(3));  // 1: A^T, 2: B^T, 3: both
    out.push_back(gemm(M, K, N, d, false, false));
    out.push_back(gemm(M, K, N, d, t & 1, t & 2));
  }
  for (int i = 0; i < (quick ? 2 : 22); ++i) {
    int64_t B, M, K, N;
    do {
      B = 1 + below(quick ? 4 : 64), M = dim(hi / 4), K = dim(hi / 8), N = dim(hi / 4);
    } while (double(B) * double(M) * double(K) * double(N) > cap);
    out.push_back(batch_matmul(B, M, K, N, dt(7), below(2) == 1));
  }
  const size_t layers = std::size(kConvLayers);
  for (size_t i = 0; i < (quick ? 2 : layers); ++i) {
    const ConvLayer& l = kConvLayers[quick ? i + 1 : i];
    out.push_back(conv(l, quick ? 1 : int64_t{1} << below(4), dt(7)));
  }
  const char* masks[] = {"none", "causal", "segment"};
  for (int i = 0; i < (quick ? 3 : 42); ++i) {
    int64_t L, H, hd;
    do {
      L = quick ? 128 << below(3) : std::max<int64_t>(128, dim(32768));
      H = int64_t{1} << below(5), hd = below(2) ? 128 : 64;
    } while (2 * double(L) * double(L) * double(H * hd) > cap / 8);
    out.push_back(attention(L, H, hd, masks[quick ? i : below(3)], dt(8)));
  }
  return out;
}

// ---- measuring ----

struct Measured {
  std::string chip;
  const Shape* shape = nullptr;
  double time_ns = 0, compute_ns = 0, exp_ns = 0, data_ns = 0, compile_ms = 0;
  int64_t hbm_bytes = 0, instructions = 0;
  std::string error;  // it did not compile or run
  double roofline_ns() const { return std::max({compute_ns, exp_ns, data_ns}); }
  const char* bound_by() const {
    const double r = roofline_ns();
    return r == compute_ns ? "compute" : r == exp_ns ? "exp" : "data";
  }
  double fraction() const { return time_ns > 0 ? roofline_ns() / time_ns : 0; }
};

// The roofline parts of `s` on `chip`: the tensor array at the dtype's peak, the scalar lanes
// taking one exponent per score (attention), and the minimum bytes at the smaller of the HBM
// bandwidth and the DMA engines' bandwidth (payload only).
void bounds(Measured& m, const Shape& s, const sim::ChipConfig& chip) {
  const auto& t = chip.timing;
  const isa::DType dt = s.dtype == "fp32" ? isa::DType::fp32 : isa::DType::bf16;
  const double array = double(chip.arch.tensor.rows) * chip.arch.tensor.cols;
  const double passes = double(engines::tensor_passes(dt, t.tensor));
  m.compute_ns = s.macs * passes / array / t.tensor.freq_mhz * 1e3;
  m.exp_ns = s.exp_rows / double(chip.arch.sbuf.partitions) / t.scalar.elements_per_cycle /
             t.scalar.freq_mhz * 1e3;
  const double gbps =
      std::min(t.hbm.bandwidth_gb_per_s, t.dma.bandwidth_gb_per_s * chip.arch.dma.engines);
  m.data_ns = double(s.min_bytes) / gbps;
}

struct Chip {
  runtime::Config cfg;
  std::unique_ptr<sim::System> system;  // the one-core view
  sim::Core* device = nullptr;
  std::unique_ptr<runtime::SimulatedTuner> tuner;  // --tune / --tuning-cache: measures on `device`
};

Measured measure(const Shape& s, Chip& c) {
  Measured m;
  m.chip = c.cfg.chip.name;
  m.shape = &s;
  bounds(m, s, c.cfg.chip);
  compiler_stub::Graph g = compiler_stub::graph_from_json(s.graph);
  compiler_stub::infer_types(g);
  const auto t0 = std::chrono::steady_clock::now();
  compiler_stub::LoweringOptions options = c.cfg.compiler;
  options.tuner = c.tuner.get();
  auto r = compiler_stub::compile_graph(g, c.cfg.chip.arch, compiler_stub::GroupPolicy::whole, {},
                                        options);
  m.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (auto* e = std::get_if<compiler_stub::CompileError>(&r)) {
    m.error = "did not compile: " + e->message();
    return m;
  }
  // Every plan has passed the verifier (compile_graph); the plans are run in timing-only mode.
  auto plans = std::make_shared<isa::PlanSequence>(
      std::move(std::get<compiler_stub::CompiledGraph>(r).plans));
  const auto& tm = c.cfg.chip.timing;
  for (const isa::Plan& p : plans->plans) {
    for (const isa::Stream& st : p.streams) {
      m.instructions += int64_t(st.instructions.size());
      if (st.engine != isa::Engine::dma) continue;
      for (const isa::Instruction& in : st.instructions) {
        const dma::DescriptorCost d = dma::descriptor_cost(in, tm.dma, tm.hbm, tm.host_link);
        m.hbm_bytes += d.hbm_read_bytes + d.hbm_write_bytes;
      }
    }
  }
  sim::Core& dev = *c.device;
  const size_t first = dev.launch_count();
  for (const isa::Plan& p : plans->plans) dev.launch(p, {}, {}, plans);
  wallsim::sim::simulate();
  if (auto e = dev.error()) {
    m.error = "did not run: " + *e;
    return m;
  }
  if (!dev.all_drained()) {
    m.error = "did not finish";
    return m;
  }
  const auto a = dev.launch_times(first), b = dev.launch_times(dev.launch_count() - 1);
  m.time_ns = (b.end - a.start).to_seconds() * 1e9;
  dev.retire_drained();
  return m;
}

// ---- the report ----

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(std::floor(q * double(v.size() - 1)))];
}

struct ShapesArgs {
  std::vector<std::string> configs{"configs/trn1.json", "configs/trn2.json"};
  std::string out = "out/validate_shapes";
  uint64_t seed = 35;
  bool quick = false;
  size_t sample = 0;  // 0: every shape
  bool tune = false;
  std::string tuning_cache;
};

void run_shapes(ShapesArgs a, const CLI::App* cmd) {
  if (cmd->get_option("--config")->count() == 0) {
    for (std::string& c : a.configs) c = project_file(c);
  }
  std::vector<Shape> shapes = population(a.seed, a.quick);
  if (a.sample > 0 && a.sample < shapes.size()) {
    // Every k-th shape: the sample keeps the families' mix and each twin next to its variant.
    std::vector<Shape> kept;
    const double step = double(shapes.size()) / double(a.sample);
    for (size_t i = 0; i < a.sample; ++i) kept.push_back(shapes[size_t(double(i) * step)]);
    shapes = std::move(kept);
  }
  std::vector<Chip> chips;
  // One tuning cache for every chip (its keys hold the arch and timing fingerprints).
  runtime::TuningCache cache = runtime::TuningCache::load(a.tuning_cache);
  for (const std::string& path : a.configs) {
    Chip c{runtime::load_config(path), nullptr, nullptr, nullptr};
    sim::CoreOptions o;
    c.system =
        std::make_unique<sim::System>(c.cfg.chip, o, "device_" + std::to_string(chips.size()));
    c.device = &c.system->core();
    if (a.tune) c.cfg.compiler.tune.enabled = 1;
    chips.push_back(std::move(c));
  }
  for (Chip& c : chips)  // (the tuner keeps a reference to c.cfg: made once chips stay put)
    if (a.tune || !a.tuning_cache.empty())
      c.tuner = std::make_unique<runtime::SimulatedTuner>(c.cfg, cache, a.tune, c.device);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Measured> rows;
  std::map<std::pair<std::string, std::string>, double> time_of;  // (chip, shape) -> ns
  for (const Shape& s : shapes) {
    for (Chip& c : chips) {
      rows.push_back(measure(s, c));
      time_of[{rows.back().chip, s.name}] = rows.back().time_ns;
    }
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.tune && !a.tuning_cache.empty()) cache.save(a.tuning_cache);

  std::unique_ptr<traces::RunDirectory> dir = sim::open_run_directory(a.out);
  std::ostringstream md, csv;
  int failures = 0;
  Json summary = {{"shapes", shapes.size()}, {"seed", a.seed}, {"wall_seconds", wall_s}};
  csv << "chip,family,shape,dtype,time_ns,roofline_ns,bound_by,fraction,compute_ns,data_ns,exp_ns,"
         "hbm_bytes,min_bytes,hbm_ratio,twin_ratio,instructions,compile_ms,error\n";
  md << "# wallsim validate shapes\n\n"
     << shapes.size() << " shapes (seed " << a.seed << (a.quick ? ", quick" : "")
     << (a.sample ? ", sample " + std::to_string(a.sample) : "") << ") on " << chips.size()
     << " chip(s), compiled and run in timing-only mode in " << fmt(wall_s, 4)
     << " s. fraction = roofline / time, the roofline the largest of the tensor array at the "
        "dtype's peak, the scalar lanes at one exponent per attention score, and the operands' "
        "minimum bytes at min(HBM bandwidth, DMA engines x per-engine bandwidth). hbm ratio = the "
        "plan's HBM bytes / that minimum. twin = time / the plain twin's time (transposed-operand "
        "variants).\n";
  for (const Chip& c : chips) {
    const std::string chip = c.cfg.chip.name;
    std::vector<double> all, big;
    int compute_n = 0, compute_ok = 0, data_n = 0, data_ok = 0, twin_n = 0, twin_ok = 0;
    md << "\n## " << chip
       << "\n\n| shape | time (us) | roofline (us) | bound by | fraction | "
          "hbm ratio | twin | compile (ms) |\n|---|---|---|---|---|---|---|---|\n";
    for (const Measured& m : rows) {
      if (m.chip != chip) continue;
      const Shape& s = *m.shape;
      double twin = 0;
      if (!s.twin.empty()) {
        auto it = time_of.find({chip, s.twin});
        if (it != time_of.end() && it->second > 0) twin = m.time_ns / it->second;
      }
      const double ratio = double(m.hbm_bytes) / double(s.min_bytes);
      bool bad = !m.error.empty();
      if (m.error.empty()) {
        // No schedule beats the roofline; no plan moves less than its operands and result.
        bad = m.time_ns < m.roofline_ns() * (1 - 1e-9) || m.hbm_bytes < s.min_bytes;
        all.push_back(m.fraction());
        if (m.roofline_ns() >= 20e3) {
          big.push_back(m.fraction());
          const bool compute = std::string(m.bound_by()) != "data";
          (compute ? compute_n : data_n)++;
          (compute ? compute_ok : data_ok) += m.fraction() >= (compute ? 0.75 : 0.70);
          if (twin > 0) twin_n++, twin_ok += twin <= 1.10;
        }
      }
      failures += bad;
      md << "| " << s.name << " | " << fmt(m.time_ns / 1e3, 4) << " | "
         << fmt(m.roofline_ns() / 1e3, 4) << " | " << m.bound_by() << " | " << fmt(m.fraction(), 3)
         << " | " << fmt(ratio, 3) << " | " << (twin > 0 ? fmt(twin, 3) : "") << " | "
         << fmt(m.compile_ms, 3) << " |" << (m.error.empty() ? "" : " **" + m.error + "**")
         << (bad ? " **failed**" : "") << "\n";
      csv << chip << "," << s.family << ",\"" << s.name << "\"," << s.dtype << ","
          << std::setprecision(10) << m.time_ns << "," << m.roofline_ns() << "," << m.bound_by()
          << "," << m.fraction() << "," << m.compute_ns << "," << m.data_ns << "," << m.exp_ns
          << "," << m.hbm_bytes << "," << s.min_bytes << "," << ratio << "," << twin << ","
          << m.instructions << "," << m.compile_ms << ",\"" << m.error << "\"\n";
    }
    // Per family: the fraction's distribution and the median HBM ratio.
    md << "\n| family | shapes | fraction min | p10 | median | median hbm ratio |\n"
          "|---|---|---|---|---|---|\n";
    for (const char* fam : {"gemm", "batch_matmul", "conv", "attention"}) {
      std::vector<double> f, r;
      for (const Measured& m : rows) {
        if (m.chip != chip || m.shape->family != fam || !m.error.empty()) continue;
        f.push_back(m.fraction());
        r.push_back(double(m.hbm_bytes) / double(m.shape->min_bytes));
      }
      md << "| " << fam << " | " << f.size() << " | " << fmt(quantile(f, 0), 3) << " | "
         << fmt(quantile(f, 0.1), 3) << " | " << fmt(quantile(f, 0.5), 3) << " | "
         << fmt(quantile(r, 0.5), 3) << " |\n";
    }
    md << "\n**" << chip << "**: fraction of roofline over " << all.size() << " shapes: min "
       << fmt(quantile(all, 0), 3) << ", p10 " << fmt(quantile(all, 0.1), 3) << ", median "
       << fmt(quantile(all, 0.5), 3) << "; over the " << big.size()
       << " with a roofline >= 20 us: min " << fmt(quantile(big, 0), 3) << ", p10 "
       << fmt(quantile(big, 0.1), 3) << ", median " << fmt(quantile(big, 0.5), 3)
       << ". Floors (roofline >= 20 us): compute-bound >= 0.75 of peak " << compute_ok << "/"
       << compute_n << ", data-bound >= 0.70 " << data_ok << "/" << data_n
       << ", transposed within 10 % of the plain twin " << twin_ok << "/" << twin_n << ".\n";
    if (c.tuner) {
      const runtime::TuningStats& t = c.tuner->stats();
      md << "\nTuning (" << chip << "): " << t.queries << " matmul(s) asked, " << t.hits
         << " from the cache, " << t.tuned << " measured (" << t.simulations
         << " candidates simulated, " << fmt(t.device_ns / 1e6, 4)
         << " ms of simulated device time, " << fmt(t.wall_seconds, 4) << " s), " << t.changed
         << " off the model's pick.\n";
      summary["tuning"][chip] = {{"queries", t.queries},          {"hits", t.hits},
                                 {"measured", t.tuned},           {"changed", t.changed},
                                 {"simulations", t.simulations},  {"device_ms", t.device_ns / 1e6},
                                 {"wall_seconds", t.wall_seconds}};
    }
    summary["chips"][chip] = {{"fraction_min", quantile(all, 0)},
                              {"fraction_p10", quantile(all, 0.1)},
                              {"fraction_median", quantile(all, 0.5)},
                              {"over_20us",
                               {{"shapes", big.size()},
                                {"fraction_min", quantile(big, 0)},
                                {"fraction_p10", quantile(big, 0.1)},
                                {"fraction_median", quantile(big, 0.5)},
                                {"compute_floor", {compute_ok, compute_n}},
                                {"data_floor", {data_ok, data_n}},
                                {"twin_floor", {twin_ok, twin_n}}}}};
    std::cout << chip << ": " << all.size() << " shapes, fraction of roofline min "
              << fmt(quantile(all, 0), 3) << " p10 " << fmt(quantile(all, 0.1), 3) << " median "
              << fmt(quantile(all, 0.5), 3) << "; >= 20 us: " << big.size() << " shapes, min "
              << fmt(quantile(big, 0), 3) << " p10 " << fmt(quantile(big, 0.1), 3) << " median "
              << fmt(quantile(big, 0.5), 3) << "; floors: compute " << compute_ok << "/"
              << compute_n << ", data " << data_ok << "/" << data_n << ", twin " << twin_ok << "/"
              << twin_n << "\n";
  }
  md << "\n"
     << failures << " shape(s) failed (did not compile or run, beat the roofline, or "
     << "moved fewer bytes than the minimum).\n";
  base::write_file_atomically(dir->file("shapes.md"), md.str());
  base::write_file_atomically(dir->file("shapes.csv"), csv.str());
  summary["failed"] = failures;
  base::write_file_atomically(dir->file("stats.json"), summary.dump(2) + "\n");
  dir->commit();
  std::cout << a.out << ": shapes.md, shapes.csv: " << shapes.size() << " shapes x " << chips.size()
            << " chip(s) in " << fmt(wall_s, 4) << " s, " << failures << " failed\n";
  if (failures > 0) throw Exit{kExitFailed};
}

}  // namespace

void add_validate_shapes_command(CLI::App& validate) {
  auto a = std::make_shared<ShapesArgs>();
  CLI::App* cmd = validate.add_subcommand(
      "shapes", "a seeded population of GEMM, conv and attention shapes against their rooflines");
  cmd->add_option("--config,-c", a->configs, "chip configs (default: configs/trn1 and trn2.json)");
  cmd->add_option("--out,-o", a->out, "output directory (replaced if it holds an earlier run)");
  cmd->add_option("--seed", a->seed, "the population's seed");
  cmd->add_option("--sample", a->sample, "run only this many shapes, evenly spread (0: all)");
  cmd->add_flag("--quick", a->quick, "a few small shapes (the test suite's version)");
  cmd->add_flag("--tune", a->tune,
                "measured tuning: each matmul's best candidates simulated, the fastest kept "
                "(compiler.tune.candidates)");
  cmd->add_option("--tuning-cache", a->tuning_cache,
                  "tuning cache file: entries reused; with --tune, new ones written back");
  cmd->callback([a, cmd] { run_shapes(*a, cmd); });
}

}  // namespace wallsim::cli
