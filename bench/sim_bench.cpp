// Simulation speed: instructions per second in timing-only and functional mode, the cost of
// tracing, and the independence of wall time from instruction length and transfer size.
#include <benchmark/benchmark.h>

#include <memory>
#include <ostream>
#include <sstream>
#include <streambuf>

#include "wallsim/isa/plan_io.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"
#include "wallsim/traces/chrome_trace.h"

namespace wallsim {
namespace {

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

// SystemC elaborates once per process, so every device the benchmarks use is built up front.
struct Devices {
  runtime::Config cfg = runtime::load_config(WALLSIM_SOURCE_DIR "/configs/trn2.json");
  NullBuffer null_buffer;
  std::ostream null_stream{&null_buffer};
  traces::ChromeTraceWriter trace{null_stream};
  std::unique_ptr<sim::System> plain_system, traced_system, functional_system;
  sim::Core *plain, *traced, *functional;
  std::deque<isa::Plan> plans;

  Devices() {
    sim::init_systemc();
    sim::CoreOptions o;
    plain_system = std::make_unique<sim::System>(cfg.chip, o, "plain");
    plain = &plain_system->core();
    o.trace = &trace;
    o.trace_level = engines::TraceLevel::instructions;
    traced_system = std::make_unique<sim::System>(cfg.chip, o, "traced");
    traced = &traced_system->core();
    sim::CoreOptions f;
    f.functional = true;
    functional_system = std::make_unique<sim::System>(cfg.chip, f, "functional");
    functional = &functional_system->core();
  }
  // Launches `plan` on `device` and simulates until it has drained.
  void run(sim::Core& device, const isa::Plan& plan) {
    device.launch(plan, {});
    wallsim::sim::simulate();
  }
};

Devices& devices() {
  static Devices d;
  return d;
}

isa::Plan parse(const std::string& text) {
  return isa::plan_sequence_from_json(base::Json::parse(text)).plans.at(0);
}

// `n` independent vector adds over [128 x free] fp32.
const isa::Plan& vector_stream(int n, int free) {
  std::ostringstream s;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "vec",
    "buffers": [{"name": "a", "space": "sbuf", "partitions": [0, 128], "bytes": )"
    << free * 8 << R"(}], "streams": [{"engine": "vector", "instructions": [)";
  for (int i = 0; i < n; ++i) {
    s << (i ? "," : "") << R"({"op": "tensor_tensor", "alu": "add",
      "dst": {"buf": "a", "dtype": "fp32", "partitions": [0, 128], "free": [[)"
      << free << R"(, 1]]},
      "lhs": {"buf": "a", "dtype": "fp32", "partitions": [0, 128], "free": [[)"
      << free << R"(, 1]]},
      "rhs": {"buf": "a", "dtype": "fp32", "partitions": [0, 128], "offset": )"
      << free << R"(, "free": [[)" << free << R"(, 1]]}})";
  }
  s << "]}]}]}";
  return devices().plans.emplace_back(parse(s.str()));
}

// `n` DMA descriptors HBM -> SBUF of `bytes_per_partition` x 128 partitions on one queue.
const isa::Plan& dma_stream(int n, int bytes_per_partition) {
  const int f = bytes_per_partition / 4;
  std::ostringstream s;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "dma",
    "tensors": [{"name": "t", "space": "hbm", "dtype": "fp32", "shape": [128, )"
    << f
    << R"(], "role": "input"}], "buffers": [{"name": "b", "space": "sbuf", "partitions": [0, 128], "bytes": )"
    << bytes_per_partition
    << R"(}], "streams": [{"engine": "dma", "name": "q", "dma_engine": 0, "instructions": [)";
  for (int i = 0; i < n; ++i) {
    s << (i ? "," : "") << R"({"op": "dma_copy",
      "dst": {"buf": "b", "dtype": "fp32", "partitions": [0, 128], "free": [[)"
      << f << R"(, 1]]},
      "src": {"buf": "t", "dtype": "fp32", "rows": [128, )"
      << f << R"(], "free": [[)" << f << R"(, 1]]}})";
  }
  s << "]}]}]}";
  return devices().plans.emplace_back(parse(s.str()));
}

void run_plan(benchmark::State& state, sim::Core& device, const isa::Plan& plan) {
  for (auto _ : state) devices().run(device, plan);
  state.SetItemsProcessed(state.iterations() * plan.instruction_count());
}

void BM_TimingOnly_SmallVectorInstructions(benchmark::State& state) {
  static const isa::Plan& plan = vector_stream(100000, 64);
  run_plan(state, *devices().plain, plan);
}
BENCHMARK(BM_TimingOnly_SmallVectorInstructions)->Unit(benchmark::kMillisecond);

void BM_TimingOnly_10xLongerVectorInstructions(benchmark::State& state) {
  static const isa::Plan& plan = vector_stream(100000, 6400);
  run_plan(state, *devices().plain, plan);
}
BENCHMARK(BM_TimingOnly_10xLongerVectorInstructions)->Unit(benchmark::kMillisecond);

void BM_TimingOnly_TracedVectorInstructions(benchmark::State& state) {
  static const isa::Plan& plan = vector_stream(100000, 64);
  run_plan(state, *devices().traced, plan);
}
BENCHMARK(BM_TimingOnly_TracedVectorInstructions)->Unit(benchmark::kMillisecond);

void BM_TimingOnly_Dma4KiB(benchmark::State& state) {
  static const isa::Plan& plan = dma_stream(20000, 32);  // 4 KiB descriptors
  run_plan(state, *devices().plain, plan);
}
BENCHMARK(BM_TimingOnly_Dma4KiB)->Unit(benchmark::kMillisecond);

void BM_TimingOnly_Dma400KiB(benchmark::State& state) {
  static const isa::Plan& plan = dma_stream(20000, 3200);  // 100x the bytes
  run_plan(state, *devices().plain, plan);
}
BENCHMARK(BM_TimingOnly_Dma400KiB)->Unit(benchmark::kMillisecond);

// 128 x 128 x 512 fp32 matmuls, functional, against the same products in plain Eigen.
const isa::Plan& matmul_stream(int n) {
  std::ostringstream s;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "mm",
    "buffers": [{"name": "w", "space": "sbuf", "partitions": [0, 128], "bytes": 512},
                {"name": "x", "space": "sbuf", "partitions": [0, 128], "offset": 512, "bytes": 2048},
                {"name": "o", "space": "psum", "partitions": [0, 128], "bytes": 2048}],
    "streams": [{"engine": "tensor", "instructions": [)";
  for (int i = 0; i < n; ++i) {
    s << (i ? "," : "") << R"({"op": "matmul",
      "dst": {"buf": "o", "dtype": "fp32", "partitions": [0, 128], "free": [[512, 1]]},
      "stationary": {"buf": "w", "dtype": "fp32", "partitions": [0, 128], "free": [[128, 1]]},
      "moving": {"buf": "x", "dtype": "fp32", "partitions": [0, 128], "free": [[512, 1]]}})";
  }
  s << "]}]}]}";
  return devices().plans.emplace_back(parse(s.str()));
}

void BM_Functional_Matmul128x128x512(benchmark::State& state) {
  static const isa::Plan& plan = matmul_stream(200);
  run_plan(state, *devices().functional, plan);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 128 * 128 * 512 * plan.instruction_count(),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Functional_Matmul128x128x512)->Unit(benchmark::kMillisecond);

void BM_PlainEigen_Matmul128x128x512(benchmark::State& state) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M w = M::Random(128, 128), x = M::Random(128, 512), o(128, 512);
  for (auto _ : state) {
    for (int i = 0; i < 200; ++i) {
      o.noalias() = w.transpose() * x;
      benchmark::DoNotOptimize(o.data());
    }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 128 * 128 * 512 * 200,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PlainEigen_Matmul128x128x512)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace wallsim

BENCHMARK_MAIN();
