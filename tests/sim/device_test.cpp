// The chip model executing plans: cycle-exact timing against the formulas, pipelining, fair
// bandwidth sharing, semaphores, deadlocks, and functional results against references.
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "wallsim/engines/compute_unit.h"
#include "wallsim/isa/dtype_convert.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/critical_path.h"
#include "wallsim/sim/exec.h"

namespace wallsim::sim {
namespace {

using base::Json;
using sc_core::sc_time;

runtime::Config load(const std::string& name) {
  return runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/" + name + ".json");
}
isa::Plan example(const std::string& name) {
  return isa::read_plan_file(std::string(WALLSIM_SOURCE_DIR) + "/examples/plans/" + name + ".json")
      .plans.at(0);
}
sc_time cycles(int64_t n, double freq_mhz) {
  // n periods, to the nearest picosecond (the time resolution)
  return sc_time::from_value(
      static_cast<sc_dt::uint64>((n * engines::period_fs(freq_mhz) + 500) / 1000));
}

// One device per test process.
struct Rig {
  runtime::Config cfg;
  traces::StatsRegistry stats;
  std::unique_ptr<System> system;
  Core* device = nullptr;
  std::vector<isa::Plan> plans;

  explicit Rig(bool functional, const std::string& config = "trn2", traces::CsvLog* log = nullptr,
               const std::function<void(runtime::Config&)>& tweak = nullptr)
      : cfg(load(config)) {
    if (tweak) tweak(cfg);
    init_systemc();
    CoreOptions o;
    o.functional = functional;
    o.stats = &stats;
    o.instruction_log = log;
    system = std::make_unique<System>(cfg.chip, o);
    device = &system->core();
    plans.reserve(16);
  }
  engines::Launch& launch(isa::Plan p, std::vector<int64_t> scalars = {}) {
    auto diags = isa::verify(p, cfg.chip.arch);
    for (const auto& d : diags) ADD_FAILURE() << d.to_string();
    plans.push_back(std::move(p));
    return device->launch(plans.back(), std::move(scalars));
  }
  void run() {
    wallsim::sim::simulate();
    ASSERT_FALSE(device->error()) << *device->error();
    device->finalize();
  }
  memory::TensorStore::Tensor& put(const isa::Plan& p, const std::string& name) {
    const auto& t = p.tensors[p.find_tensor(name)];
    return device->tensors().put(t.name, t.space, t.dtype, t.shape);
  }
  std::vector<float> values(const std::string& name) {
    return memory::to_floats(*device->tensors().find(name));
  }
  double stat(const std::string& name) {
    const traces::Stat* s = stats.find(name);
    if (!s) ADD_FAILURE() << "no stat " << name;
    if (auto* c = stats.find_as<traces::Counter>(name)) return double(c->value());
    if (auto* v = stats.find_as<traces::Value>(name)) return v->as_double();
    return NAN;
  }
};

isa::Plan parse(const std::string& text) {
  return isa::plan_sequence_from_json(Json::parse(text)).plans.at(0);
}

// A plan of `n` vector instructions on [128 x free] fp32 with no DMA.
isa::Plan vector_plan(int n, int free) {
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
  return parse(s.str());
}

TEST(Device, IsolatedInstructionTakesExactlyItsFormula) {
  Rig rig(false);
  engines::Launch& l = rig.launch(vector_plan(1, 512));
  rig.run();
  ASSERT_TRUE(l.drained);
  const auto& v = rig.cfg.chip.timing.vector;
  const int64_t occupancy = v.fixed_overhead_cycles + 2 * 512;  // two inputs, 1 element/cycle
  EXPECT_EQ(rig.stat("device.engines.vector.busy_cycles"), occupancy);
  EXPECT_EQ(l.end_time - l.start_time, cycles(occupancy + v.access_latency_cycles, v.freq_mhz));
  EXPECT_EQ(rig.stat("device.engines.vector.instructions"), 1);
}

TEST(Device, LaunchPaysSwitchResetAndInstructionFetch) {
  Rig rig(false);
  engines::Launch& l = rig.launch(vector_plan(10, 64));
  rig.run();
  const auto& t = rig.cfg.chip.timing;
  const double fetch_ns = 10.0 * t.launch.bytes_per_instruction / (t.hbm.bandwidth_gb_per_s);
  const double expected_ns =
      t.launch.switch_ns + t.launch.semaphore_reset_ns + fetch_ns + t.hbm.latency_ns;
  EXPECT_NEAR(l.start_time.to_seconds() * 1e9, expected_ns, 1e-3);
}

TEST(Device, BackToBackMatmulsReachThePipelinedBound) {
  Rig rig(false);
  std::ostringstream s;
  const int n = 16;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "mm",
    "buffers": [{"name": "w", "space": "sbuf", "partitions": [0, 128], "bytes": 256},
                {"name": "x", "space": "sbuf", "partitions": [0, 128], "offset": 256, "bytes": 1024},
                {"name": "o", "space": "psum", "partitions": [0, 128], "bytes": 2048}],
    "streams": [{"engine": "tensor", "instructions": [)";
  for (int i = 0; i < n; ++i) {
    s << (i ? "," : "") << R"({"op": "matmul",
      "dst": {"buf": "o", "dtype": "fp32", "partitions": [0, 128], "free": [[512, 1]]},
      "stationary": {"buf": "w", "dtype": "bf16", "partitions": [0, 128], "free": [[128, 1]]},
      "moving": {"buf": "x", "dtype": "bf16", "partitions": [0, 128], "free": [[512, 1]]}})";
  }
  s << "]}]}]}";
  engines::Launch& l = rig.launch(parse(s.str()));
  rig.run();
  const auto& t = rig.cfg.chip.timing.tensor;
  const int64_t load = 128 / t.load_stationary_speedup;  // once: the weights stay loaded
  const int64_t busy = load + n * 512;
  EXPECT_EQ(rig.stat("device.engines.tensor.busy_cycles"), busy);
  // Pipelined: one fill + drain at the end, not one per matmul.
  // Within the 1 ps time resolution: the clock's period is not a whole number of picoseconds.
  EXPECT_NEAR(double((l.end_time - l.start_time).value()),
              double(cycles(busy + t.fill_cycles + t.drain_cycles, t.freq_mhz).value()), 1.0);
}

TEST(Device, DmaEnginesShareHbmEqually) {
  Rig rig(false);
  const int queues = 16;
  const int64_t row_bytes = 16384;  // per partition: 128 partitions x 16 KiB = 2 MiB per queue
  std::ostringstream s;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "dma",
    "tensors": [{"name": "src", "space": "hbm", "dtype": "fp32", "shape": [)"
    << queues * 128 << ", " << row_bytes / 4 << R"(], "role": "input"}],
    "buffers": [{"name": "dst", "space": "sbuf", "partitions": [0, 128], "bytes": )"
    << row_bytes << R"(}], "streams": [)";
  for (int q = 0; q < queues; ++q) {
    s << (q ? "," : "") << R"({"engine": "dma", "name": "q)" << q << R"(", "dma_engine": )" << q
      << R"(, "instructions": [{"op": "dma_copy",
        "dst": {"buf": "dst", "dtype": "fp32", "partitions": [0, 128], "free": [[)"
      << row_bytes / 4 << R"(, 1]]},
        "src": {"buf": "src", "dtype": "fp32", "rows": [128, )"
      << row_bytes / 4 << R"(], "offset": )" << q * 128 * row_bytes / 4 << R"(, "free": [[)"
      << row_bytes / 4 << R"(, 1]]}}]})";
  }
  s << "]}]}";
  engines::Launch& l = rig.launch(parse(s.str()));
  rig.run();
  const auto& t = rig.cfg.chip.timing;
  ASSERT_GT(queues * t.dma.bandwidth_gb_per_s, t.hbm.bandwidth_gb_per_s);  // HBM-bound
  const double bytes = 128.0 * row_bytes;
  const double transfer_ns = queues * bytes / t.hbm.bandwidth_gb_per_s;  // all finish together
  const double expected = t.dma.descriptor_issue_ns + transfer_ns + t.hbm.latency_ns;
  EXPECT_NEAR((l.end_time - l.start_time).to_seconds() * 1e9, expected, 1e-3);
  for (int q = 0; q < queues; ++q) {
    const std::string e = "device.dma.engines.e" + std::to_string(q);
    EXPECT_EQ(rig.stat(e + ".bytes"), bytes);
    EXPECT_NEAR(rig.stat(e + ".busy_ns"), transfer_ns, 1e-3);
  }
  EXPECT_EQ(rig.stat("device.hbm.read_bytes"), queues * bytes + 64.0 * 16);  // + fetch
}

// 16 queues each copying 4 MiB from HBM to HBM: every byte is read and written, so HBM carries
// twice the bytes and the copies take twice as long as loads of the same size.
TEST(Device, HbmToHbmCopiesPayHbmForBothEnds) {
  Rig rig(false);
  const int queues = 16;
  const int64_t cols = 16384;  // bf16: 128 rows x 32 KiB = 4 MiB per queue
  std::ostringstream s;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "copy",
    "tensors": [{"name": "a", "space": "hbm", "dtype": "bf16", "shape": [)"
    << queues * 128 << ", " << cols << R"(], "role": "input"},
                {"name": "b", "space": "hbm", "dtype": "bf16", "shape": [)"
    << queues * 128 << ", " << cols << R"(], "role": "output"}], "streams": [)";
  for (int q = 0; q < queues; ++q) {
    s << (q ? "," : "") << R"({"engine": "dma", "name": "q)" << q << R"(", "dma_engine": )" << q
      << R"(, "instructions": [{"op": "dma_copy",
        "dst": {"buf": "b", "dtype": "bf16", "rows": [128, )"
      << cols << R"(], "offset": )" << q * 128 * cols << R"(, "free": [[)" << cols << R"(, 1]]},
        "src": {"buf": "a", "dtype": "bf16", "rows": [128, )"
      << cols << R"(], "offset": )" << q * 128 * cols << R"(, "free": [[)" << cols
      << R"(, 1]]}}]})";
  }
  s << "]}]}";
  engines::Launch& l = rig.launch(parse(s.str()));
  rig.run();
  const auto& t = rig.cfg.chip.timing;
  const double bytes = 128.0 * cols * 2 * queues;
  EXPECT_EQ(rig.stat("device.hbm.write_bytes"), bytes);
  const double transfer_ns = 2 * bytes / t.hbm.bandwidth_gb_per_s;  // read + write on HBM
  const double expected = t.dma.descriptor_issue_ns + transfer_ns + t.hbm.latency_ns;
  EXPECT_NEAR((l.end_time - l.start_time).to_seconds() * 1e9, expected, 1e-3);
  EXPECT_LE(rig.stat("device.hbm.achieved_gb_per_s"), t.hbm.bandwidth_gb_per_s);
  // HBM moved read + write bytes at no more than its bandwidth over the plan's transfer time.
  EXPECT_LE((rig.stat("device.hbm.read_bytes") + rig.stat("device.hbm.write_bytes")) /
                ((l.end_time - l.start_time).to_seconds() * 1e9),
            t.hbm.bandwidth_gb_per_s);
}

// Two plans on one queue: a contiguous 1 MiB load into [128 x 4096] bf16, then the same bytes
// read transposed from a [4096 x 128] tensor (the HBM side strides by 128 elements).
isa::Plan load_plan(bool transposed) {
  std::ostringstream s;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": ")"
    << (transposed ? "transposed" : "contiguous") << R"(",
    "tensors": [{"name": "x", "space": "hbm", "dtype": "bf16", "shape": )"
    << (transposed ? "[4096, 128]" : "[128, 4096]") << R"(, "role": "input"}],
    "buffers": [{"name": "xb", "space": "sbuf", "partitions": [0, 128], "bytes": 8192}],
    "streams": [{"engine": "dma", "name": "q", "dma_engine": 0, "instructions": [{"op": "dma_copy",
      "dst": {"buf": "xb", "dtype": "bf16", "partitions": [0, 128], "free": [[4096, 1]]},
      "src": {"buf": "x", "dtype": "bf16", )"
    << (transposed ? R"("rows": [128, 1], "free": [[4096, 128]])"
                   : R"("rows": [128, 4096], "free": [[4096, 1]])")
    << "}}]}]}]}";
  return parse(s.str());
}

// Transfer time of each launch: its span less the issue cost and the HBM latency.
std::vector<double> transfer_ns(Rig& rig) {
  std::vector<double> out;
  const auto& t = rig.cfg.chip.timing;
  for (const auto& l : rig.device->launches()) {
    out.push_back((l.end_time - l.start_time).to_seconds() * 1e9 - t.dma.descriptor_issue_ns -
                  t.hbm.latency_ns);
  }
  return out;
}

TEST(Device, TransposedLoadCostsTheDerivedFactor) {
  Rig rig(false, "trn2", nullptr,
          [](runtime::Config& c) { c.chip.timing.dma.transpose_chunk_bytes = 0; });
  rig.launch(load_plan(false));
  rig.launch(load_plan(true));
  rig.run();
  const auto& d = rig.cfg.chip.timing.dma;
  const double mib = 1 << 20;
  const std::vector<double> ns = transfer_ns(rig);
  // Contiguous: 128 chunks of 8 KiB; element-strided: 2-byte chunks (configs/README.md).
  const double contiguous = mib * (1 + 128.0 * d.chunk_overhead_bytes / mib) / d.bandwidth_gb_per_s;
  const double strided = mib * (1 + double(d.chunk_overhead_bytes) / 2) / d.bandwidth_gb_per_s;
  EXPECT_NEAR(ns[0], contiguous, 1e-3);
  EXPECT_NEAR(ns[1], strided, 1e-2);
  EXPECT_NEAR(ns[1] / ns[0], 257.0 / 1.0625, 1e-6 * 242);  // the factor in configs/README.md
  EXPECT_EQ(rig.stat("device.dma.transposes"), 1);
}

TEST(Device, HardwareDmaTransposeIsCheaperThanElementStrided) {
  Rig rig(false);  // trn2: hardware DMA transpose of 2-byte elements
  rig.launch(load_plan(false));
  rig.launch(load_plan(true));
  rig.run();
  const auto& d = rig.cfg.chip.timing.dma;
  ASSERT_GT(d.transpose_chunk_bytes, 0);
  const std::vector<double> ns = transfer_ns(rig);
  const double hw = double(d.chunk_overhead_bytes) / double(d.transpose_chunk_bytes);
  EXPECT_NEAR(ns[1] / ns[0], (1 + hw) / 1.0625, 1e-5);
  EXPECT_LT(1 + hw, 1 + d.chunk_overhead_bytes / 2.0);  // cheaper than element by element
}

TEST(Device, PeakFractionIsPerDtypeExecuted) {
  Rig rig(false);
  // One bf16 and one fp32 matmul of [128 x 128] x [128 x 512], back to back.
  engines::Launch& l = rig.launch(parse(R"({"format": "wallsim-plan", "version": 1, "plans": [{
    "name": "mixed",
    "buffers": [{"name": "w", "space": "sbuf", "partitions": [0, 128], "bytes": 512},
                {"name": "x", "space": "sbuf", "partitions": [0, 128], "offset": 512, "bytes": 2048},
                {"name": "o", "space": "psum", "partitions": [0, 128], "bytes": 2048}],
    "streams": [{"engine": "tensor", "instructions": [
      {"op": "matmul", "dst": {"buf": "o", "dtype": "fp32", "partitions": [0, 128], "free": [[512, 1]]},
       "stationary": {"buf": "w", "dtype": "bf16", "partitions": [0, 128], "free": [[128, 1]]},
       "moving": {"buf": "x", "dtype": "bf16", "partitions": [0, 128], "free": [[512, 1]]}},
      {"op": "matmul", "dst": {"buf": "o", "dtype": "fp32", "partitions": [0, 128], "free": [[512, 1]]},
       "stationary": {"buf": "w", "dtype": "fp32", "partitions": [0, 128], "free": [[128, 1]]},
       "moving": {"buf": "x", "dtype": "fp32", "partitions": [0, 128], "free": [[512, 1]]}}]}]}]})"));
  rig.run();
  const auto& t = rig.cfg.chip.timing.tensor;
  const double macs = 128.0 * 128 * 512;
  EXPECT_EQ(rig.stat("device.engines.tensor.bf16.macs"), macs);
  EXPECT_EQ(rig.stat("device.engines.tensor.fp32.macs"), macs);
  EXPECT_NEAR(rig.stat("device.engines.tensor.bf16.peak_tflops"), 78.6432, 1e-4);
  EXPECT_NEAR(rig.stat("device.engines.tensor.fp32.peak_tflops"), 78.6432 / t.fp32_slowdown, 1e-4);
  const double cycles = (l.end_time).to_seconds() * t.freq_mhz * 1e6;
  const double array = 128.0 * 128 * cycles;
  EXPECT_NEAR(rig.stat("device.engines.tensor.bf16.peak_fraction"), macs / array, 1e-9);
  EXPECT_NEAR(rig.stat("device.engines.tensor.fp32.peak_fraction"), macs * t.fp32_slowdown / array,
              1e-9);
  EXPECT_NEAR(rig.stat("device.engines.tensor.peak_fraction"), macs * (1 + t.fp32_slowdown) / array,
              1e-9);
}

// On the device, configured like SCALE-Sim v2: a GEMM's span from the first tensor-engine issue
// to the last PSUM write matches SCALE-Sim's weight-stationary count (0-based last cycle).
TEST(Device, GemmSpanMatchesScaleSimWeightStationary) {
  Rig rig(false, "trn2", nullptr, [](runtime::Config& c) {
    c.chip.timing.tensor = engines::scalesim_like(c.chip.timing.tensor, 128, 128);
  });
  const int64_t m = 1000, k = 300, n = 200;  // SCALE-Sim's M streams; K x N stationary
  std::ostringstream s;
  s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "gemm",
    "buffers": [{"name": "w", "space": "sbuf", "partitions": [0, 128], "bytes": )"
    << 2 * n * ((k + 127) / 128) << R"(},
                {"name": "x", "space": "sbuf", "partitions": [0, 128], "offset": 4096, "bytes": )"
    << 2 * m * ((k + 127) / 128) << R"(},
                {"name": "o", "space": "psum", "partitions": [0, 128], "bytes": 2048}],
    "streams": [{"engine": "tensor", "instructions": [)";
  bool first = true;
  for (int64_t n0 = 0; n0 < n; n0 += 128) {
    for (int64_t k0 = 0, kt = 0; k0 < k; k0 += 128, ++kt) {
      const int64_t rows = std::min<int64_t>(128, k - k0), width = std::min<int64_t>(128, n - n0);
      for (int64_t m0 = 0; m0 < m; m0 += 512) {
        const int64_t free = std::min<int64_t>(512, m - m0);
        s << (first ? "" : ",") << R"({"op": "matmul",
          "dst": {"buf": "o", "dtype": "fp32", "partitions": [0, )"
          << width << R"(], "free": [[)" << free << R"(, 1]]},
          "stationary": {"buf": "w", "dtype": "bf16", "partitions": [0, )"
          << rows << R"(], "offset": )" << kt * n + n0 << R"(, "free": [[)" << width << R"(, 1]]},
          "moving": {"buf": "x", "dtype": "bf16", "partitions": [0, )"
          << rows << R"(], "offset": )" << kt * m + m0 << R"(, "free": [[)" << free << R"(, 1]]}})";
        first = false;
      }
    }
  }
  s << "]}]}]}";
  engines::Launch& l = rig.launch(parse(s.str()));
  rig.run();
  const double f = rig.cfg.chip.timing.tensor.freq_mhz;
  const double span_cycles = (l.end_time - l.start_time).to_seconds() * f * 1e6;
  const double scalesim =
      double(((k + 127) / 128) * ((n + 127) / 128) * (2 * 128 + 128 + m - 2) - 1);
  EXPECT_NEAR(span_cycles - 1, scalesim, 0.05);  // within the 1 ps time resolution
}

TEST(Device, SemaphoresOrderEngines) {
  std::string path = ::testing::TempDir() + "/sem_order.csv";
  auto log = std::make_unique<traces::CsvLog>(
      path, std::vector<std::string>{"plan", "stream", "index", "opcode", "node", "start_ps",
                                     "end_ps", "ready_ps", "busy_cycles", "bytes"});
  Rig rig(false, "trn2", log.get());
  rig.launch(example("vector_add"));
  rig.run();
  log->finish();
  std::ifstream in(path);
  std::string line;
  std::map<std::string, std::vector<int64_t>> rows;  // stream -> start, end, ready
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string x;
    while (std::getline(ss, x, ',')) f.push_back(x);
    rows[f[1]] = {std::stoll(f[5]), std::stoll(f[6]), std::stoll(f[7])};
  }
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows["vector"][0], std::max(rows["q_x"][2], rows["q_y"][2]));  // waits both loads
  EXPECT_EQ(rows["q_z"][0], rows["vector"][2]);  // the store waits the add's result
}

TEST(Device, DeadlockIsReportedWithTheWait) {
  Rig rig(false);
  isa::Plan p = vector_plan(3, 64);
  p.semaphores = {"never"};
  p.streams[0].instructions[1].waits.push_back({0, 1});
  rig.plans.push_back(p);  // skips the verifier on purpose: it would reject this plan
  rig.device->launch(rig.plans.back(), {});
  rig.run();
  EXPECT_FALSE(rig.device->all_drained());
  auto report = rig.device->deadlock_report();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_NE(report[0].find("vec' vector[1] waits for never >= 1, which reached 0"),
            std::string::npos)
      << report[0];
}

// SystemC threads under `objects`, at any depth (a spawned one is its spawner's child).
int64_t threads_under(const std::vector<sc_core::sc_object*>& objects) {
  int64_t n = 0;
  for (const sc_core::sc_object* o : objects) {
    n += std::string(o->kind()) == "sc_thread_process";
    n += threads_under(o->get_child_objects());
  }
  return n;
}

// A core holds a thread per compute engine and its launcher; a DMA queue's thread starts with
// its first stream (issue 39: 64 idle queue threads a core were most of a 512-rank run's maps).
TEST(Device, DmaQueueThreadsStartOnlyForTheQueuesPlansUse) {
  Rig rig(true);
  isa::Plan p = example("matmul");
  int dma_streams = 0;
  for (const isa::Stream& s : p.streams) dma_streams += s.engine == isa::Engine::dma;
  ASSERT_GT(dma_streams, 0);
  ASSERT_LT(dma_streams, rig.cfg.chip.arch.dma.queues_max());
  memory::fill_random(rig.put(p, "a_t"), 1);
  memory::fill_random(rig.put(p, "b"), 2);
  rig.put(p, "c");
  const int64_t before = threads_under(sc_core::sc_get_top_level_objects());
  rig.launch(p);
  rig.run();
  EXPECT_EQ(threads_under(sc_core::sc_get_top_level_objects()), before + dma_streams);
}

TEST(Device, MatmulExampleMatchesEigen) {
  Rig rig(true);
  isa::Plan p = example("matmul");
  memory::fill_random(rig.put(p, "a_t"), 1);
  memory::fill_random(rig.put(p, "b"), 2);
  rig.put(p, "c");
  rig.launch(p);
  rig.run();
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::vector<float> at = rig.values("a_t"), b = rig.values("b"), c = rig.values("c");
  M ref = Eigen::Map<M>(at.data(), 256, 256).transpose() * Eigen::Map<M>(b.data(), 256, 512);
  M got = Eigen::Map<M>(c.data(), 256, 512);
  EXPECT_LT((ref - got).cwiseAbs().maxCoeff(), 1e-4f);  // bf16 inputs, fp32 accumulation
  EXPECT_GT(got.cwiseAbs().maxCoeff(), 1.0f);
}

TEST(Device, SoftmaxExampleMatchesReference) {
  Rig rig(true);
  isa::Plan p = example("softmax");
  memory::fill_random(rig.put(p, "x"), 3);
  rig.put(p, "y");
  rig.launch(p);
  rig.run();
  std::vector<float> x = rig.values("x"), y = rig.values("y");
  for (int r = 0; r < 128; ++r) {
    double mx = -1e30, sum = 0;
    for (int i = 0; i < 512; ++i) mx = std::max(mx, double(x[r * 512 + i]));
    for (int i = 0; i < 512; ++i) sum += std::exp(x[r * 512 + i] - mx);
    for (int i = 0; i < 512; ++i) {
      ASSERT_NEAR(y[r * 512 + i], std::exp(x[r * 512 + i] - mx) / sum, 1e-6) << r << "," << i;
    }
  }
}

TEST(Device, GatherMovesTheNamedRows) {
  Rig rig(true);
  isa::Plan p = example("gather");
  auto& table = rig.put(p, "table");
  for (int64_t r = 0; r < 1000; ++r) {
    for (int c = 0; c < 64; ++c) {
      isa::store_element(table.bytes.data() + (r * 64 + c) * 4, isa::DType::fp32,
                         float(r * 100 + c));
    }
  }
  auto& idx = rig.put(p, "idx");
  for (int i = 0; i < 128; ++i) {
    isa::store_element(idx.bytes.data() + i * 4, isa::DType::int32, float((i * 37 + 11) % 1000));
  }
  rig.put(p, "out");
  rig.launch(p);
  rig.run();
  std::vector<float> out = rig.values("out");
  for (int i = 0; i < 128; ++i) {
    for (int c = 0; c < 64; ++c)
      ASSERT_EQ(out[i * 64 + c], float(((i * 37 + 11) % 1000) * 100 + c));
  }
}

TEST(Device, OutOfRangeGatherStopsWithCycleModuleAndInstruction) {
  Rig rig(true);
  isa::Plan p = example("gather");
  rig.put(p, "table");
  auto& idx = rig.put(p, "idx");
  isa::store_element(idx.bytes.data() + 5 * 4, isa::DType::int32, 5000.0f);
  rig.put(p, "out");
  rig.launch(p);
  wallsim::sim::simulate();
  auto err = rig.device->error();
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("device.dma_q0 plan 'gather_128_of_1000x64' q0[1] (dma_gather)"),
            std::string::npos)
      << *err;
}

TEST(Device, RunTimeScalarOffsetsADma) {
  Rig rig(true);
  isa::Plan p = parse(R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "row",
    "scalars": [{"name": "pos", "min": 0, "max": 7}], "semaphores": ["in"],
    "tensors": [{"name": "t", "space": "hbm", "dtype": "fp32", "shape": [8, 16], "role": "input"},
                {"name": "r", "space": "hbm", "dtype": "fp32", "shape": [1, 16], "role": "output"}],
    "buffers": [{"name": "b", "space": "sbuf", "partitions": [0, 1], "bytes": 64}],
    "streams": [{"engine": "dma", "name": "q", "dma_engine": 0, "instructions": [
      {"op": "dma_copy", "dst": {"buf": "b", "dtype": "fp32", "partitions": [0, 1], "free": [[16, 1]]},
       "src": {"buf": "t", "dtype": "fp32", "rows": [1, 16], "free": [[16, 1]], "scalar": ["pos", 16]},
       "signal": [["in", 1]]},
      {"op": "dma_copy", "dst": {"buf": "r", "dtype": "fp32", "rows": [1, 16], "free": [[16, 1]]},
       "src": {"buf": "b", "dtype": "fp32", "partitions": [0, 1], "free": [[16, 1]]},
       "wait": [["in", 1]]}]}]}]})");
  auto& t = rig.put(p, "t");
  for (int i = 0; i < 128; ++i)
    isa::store_element(t.bytes.data() + i * 4, isa::DType::fp32, float(i));
  rig.put(p, "r");
  rig.launch(p, {5});
  rig.run();
  std::vector<float> r = rig.values("r");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(r[i], float(5 * 16 + i));
}

TEST(Device, PlansRunInOrderEachPayingItsLaunch) {
  Rig rig(false);
  engines::Launch& a = rig.launch(vector_plan(4, 128));
  engines::Launch& b = rig.launch(vector_plan(4, 128));
  rig.run();
  ASSERT_TRUE(a.drained && b.drained);
  const auto& t = rig.cfg.chip.timing.launch;
  EXPECT_GE(b.start_time - a.end_time,
            sc_time(double(t.switch_ns + t.semaphore_reset_ns), sc_core::SC_NS));
  EXPECT_EQ(rig.stat("device.plans_launched"), 2);
}

TEST(Device, TinyConfigRunsItsOwnGeometry) {
  Rig rig(true, "tiny");
  isa::Plan p = parse(R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "mm",
    "semaphores": ["in", "mm"],
    "tensors": [{"name": "w", "space": "hbm", "dtype": "fp32", "shape": [32, 24], "role": "input"},
                {"name": "x", "space": "hbm", "dtype": "fp32", "shape": [32, 96], "role": "input"},
                {"name": "y", "space": "hbm", "dtype": "fp32", "shape": [24, 96], "role": "output"}],
    "buffers": [{"name": "wb", "space": "sbuf", "partitions": [0, 32], "bytes": 96},
                {"name": "xb", "space": "sbuf", "partitions": [0, 32], "offset": 96, "bytes": 384},
                {"name": "yb", "space": "sbuf", "partitions": [0, 24], "offset": 480, "bytes": 384},
                {"name": "yp", "space": "psum", "partitions": [0, 24], "bytes": 384}],
    "streams": [
      {"engine": "dma", "name": "q", "dma_engine": 3, "instructions": [
        {"op": "dma_copy", "dst": {"buf": "wb", "dtype": "fp32", "partitions": [0, 32], "free": [[24, 1]]},
         "src": {"buf": "w", "dtype": "fp32", "rows": [32, 24], "free": [[24, 1]]}, "signal": [["in", 1]]},
        {"op": "dma_copy", "dst": {"buf": "xb", "dtype": "fp32", "partitions": [0, 32], "free": [[96, 1]]},
         "src": {"buf": "x", "dtype": "fp32", "rows": [32, 96], "free": [[96, 1]]}, "signal": [["in", 1]]},
        {"op": "dma_copy", "dst": {"buf": "y", "dtype": "fp32", "rows": [24, 96], "free": [[96, 1]]},
         "src": {"buf": "yb", "dtype": "fp32", "partitions": [0, 24], "free": [[96, 1]]}, "wait": [["mm", 2]]}]},
      {"engine": "tensor", "instructions": [
        {"op": "matmul", "dst": {"buf": "yp", "dtype": "fp32", "partitions": [0, 24], "free": [[96, 1]]},
         "stationary": {"buf": "wb", "dtype": "fp32", "partitions": [0, 32], "free": [[24, 1]]},
         "moving": {"buf": "xb", "dtype": "fp32", "partitions": [0, 32], "free": [[96, 1]]},
         "wait": [["in", 2]], "signal": [["mm", 1]]}]},
      {"engine": "vector", "instructions": [
        {"op": "tensor_copy", "dst": {"buf": "yb", "dtype": "fp32", "partitions": [0, 24], "free": [[96, 1]]},
         "src": {"buf": "yp", "dtype": "fp32", "partitions": [0, 24], "free": [[96, 1]]},
         "wait": [["mm", 1]], "signal": [["mm", 1]]}]}]}]})");
  memory::fill_random(rig.put(p, "w"), 4);
  memory::fill_random(rig.put(p, "x"), 5);
  rig.put(p, "y");
  rig.launch(p);
  rig.run();
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::vector<float> w = rig.values("w"), x = rig.values("x"), y = rig.values("y");
  M ref = Eigen::Map<M>(w.data(), 32, 24).transpose() * Eigen::Map<M>(x.data(), 32, 96);
  EXPECT_LT((ref - Eigen::Map<M>(y.data(), 24, 96)).cwiseAbs().maxCoeff(), 1e-5f);
  // fp32 on the array: load and moving (96 >= 16 minimum), both times the fp32 slowdown.
  const auto& t = rig.cfg.chip.timing.tensor;
  EXPECT_EQ(
      rig.stat("device.engines.tensor.busy_cycles"),
      ((24 + t.load_stationary_speedup - 1) / t.load_stationary_speedup + 96) * t.fp32_slowdown);
}

// One vector and one scalar instruction with no dependency between them on tiny: they overlap
// with separate SBUF ports and serialise on a shared one.
isa::Plan two_engine_plan() {
  return parse(R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "two",
    "buffers": [{"name": "a", "space": "sbuf", "partitions": [0, 32], "bytes": 1024}],
    "streams": [
      {"engine": "vector", "instructions": [{"op": "memset", "value": 1,
        "dst": {"buf": "a", "dtype": "fp32", "partitions": [0, 32], "free": [[128, 1]]}}]},
      {"engine": "scalar", "instructions": [{"op": "activation", "act": "exp",
        "dst": {"buf": "a", "dtype": "fp32", "partitions": [0, 32], "offset": 128, "free": [[128, 1]]},
        "src": {"buf": "a", "dtype": "fp32", "partitions": [0, 32], "offset": 128, "free": [[128, 1]]}}]}]}]})");
}

TEST(Device, SharedSbufPortSerialisesEngines) {
  Rig rig(false, "tiny");  // tiny shares one port between vector and scalar
  ASSERT_EQ(rig.cfg.chip.timing.shared_sbuf_port.size(), 2u);
  engines::Launch& l = rig.launch(two_engine_plan());
  rig.run();
  const auto& v = rig.cfg.chip.timing.vector;
  const auto& s = rig.cfg.chip.timing.scalar;
  const int64_t occ_v = v.fixed_overhead_cycles + 128, occ_s = s.fixed_overhead_cycles + 128;
  // Same clock on tiny: the second waits for the first's occupancy.
  ASSERT_EQ(v.freq_mhz, s.freq_mhz);
  EXPECT_EQ(l.end_time - l.start_time, cycles(occ_v + occ_s + s.access_latency_cycles, v.freq_mhz));
}

TEST(Device, SeparatePortsLetEnginesOverlap) {
  Rig rig(false, "tiny", nullptr,
          [](runtime::Config& c) { c.chip.timing.shared_sbuf_port.clear(); });
  engines::Launch& l = rig.launch(two_engine_plan());
  rig.run();
  const auto& v = rig.cfg.chip.timing.vector;
  EXPECT_EQ(l.end_time - l.start_time,
            cycles(v.fixed_overhead_cycles + 128 + v.access_latency_cycles, v.freq_mhz));
}

// ---- Critical path (sim/critical_path.h): plans whose path is known by construction.

// A memset of [partitions x free] fp32 at element `offset` of buffer `a`, with optional wait,
// signal and node.
std::string memset_at(int partitions, int free, int offset, const std::string& extra) {
  std::ostringstream s;
  s << R"({"op": "memset", "value": 1, "dst": {"buf": "a", "dtype": "fp32", "partitions": [0, )"
    << partitions << R"(], "offset": )" << offset << R"(, "free": [[)" << free << R"(, 1]]})"
    << extra << "}";
  return s.str();
}

sc_time ps(int64_t v) { return sc_time::from_value(static_cast<sc_dt::uint64>(v)); }

TEST(CriticalPath, OfTwoIndependentOpsOnTwoEnginesTheShorterIsHidden) {
  Rig rig(false);  // trn2: each engine has its own SBUF port
  engines::Launch& l = rig.launch(parse(R"({"format": "wallsim-plan", "version": 1, "plans": [{
    "name": "two", "buffers": [{"name": "a", "space": "sbuf", "partitions": [0, 128], "bytes": 16384}],
    "nodes": [{"id": 0, "name": "long", "op": "fill"}, {"id": 1, "name": "short", "op": "exp"}],
    "streams": [{"engine": "vector", "instructions": [)" +
                                        memset_at(128, 2048, 0, R"(, "node": 0)") + R"(]},
      {"engine": "scalar", "instructions": [{"op": "activation", "act": "exp", "node": 1,
        "dst": {"buf": "a", "dtype": "fp32", "partitions": [0, 32], "offset": 2048, "free": [[128, 1]]},
        "src": {"buf": "a", "dtype": "fp32", "partitions": [0, 32], "offset": 2048, "free": [[128, 1]]}}]}]}]})"));
  rig.run();
  ASSERT_LT(l.times[1].ready, l.times[0].ready);  // the exp ends first: hidden under the fill
  const CriticalPath path = critical_path(l);
  EXPECT_EQ(path.by_node[0], l.end_time - l.start_time);
  EXPECT_EQ(path.by_node[1], sc_time());
  EXPECT_EQ(path.no_node, sc_time());
  EXPECT_EQ(path.instructions, 1u);
  // The device folds the same into its op totals (the equal split gave exp a share). Retiring
  // frees the launch, so its span is read first.
  const double span_ns = (l.end_time - l.start_time).to_seconds() * 1e9;
  rig.device->retire_drained();
  EXPECT_DOUBLE_EQ(rig.device->op_totals().at("fill").exposed_ns, span_ns);
  EXPECT_EQ(rig.device->op_totals().at("exp").exposed_ns, 0.0);
  EXPECT_GT(rig.device->op_totals().at("exp").busy[int(isa::Engine::scalar)], sc_time());
}

TEST(CriticalPath, OfAChainEachLinkGetsItsOwnSpan) {
  Rig rig(false);
  isa::Plan p = example("vector_add");  // loads x, y -> add -> store z, one stream each
  p.nodes = {{0, "load x", "load"},
             {1, "load y", "load"},
             {2, "z = x + y", "add"},
             {3, "store z", "store"}};
  for (int s = 0; s < 4; ++s) p.streams[s].instructions[0].node = s;
  ASSERT_EQ(p.streams[2].engine, isa::Engine::vector);
  engines::Launch& l = rig.launch(p);
  rig.run();
  const auto& x = l.times[0];
  const auto& y = l.times[1];
  const auto& add = l.times[2];
  const auto& z = l.times[3];
  ASSERT_EQ(add.start, std::max(x.ready, y.ready));  // the add waited for both loads
  ASSERT_EQ(z.start, add.ready);
  ASSERT_EQ(l.end_time, z.ready);
  // The later load is on the path (on a tie, the add's first wait: x).
  const int load = x.ready >= y.ready ? 0 : 1;
  const CriticalPath path = critical_path(l);
  EXPECT_EQ(path.by_node[load], add.start - l.start_time);
  EXPECT_EQ(path.by_node[1 - load], sc_time());
  EXPECT_EQ(path.by_node[2], add.ready - add.start);
  EXPECT_EQ(path.by_node[3], z.ready - z.start);
  EXPECT_EQ(path.instructions, 3u);
}

TEST(CriticalPath, ADmaBoundLoadHidesTheComputeOverlappingIt) {
  Rig rig(false);
  engines::Launch& l = rig.launch(
      parse(R"({"format": "wallsim-plan", "version": 1, "plans": [{
    "name": "dma_bound", "semaphores": ["x_in"],
    "tensors": [{"name": "x", "space": "hbm", "dtype": "fp32", "shape": [128, 8192], "role": "input"}],
    "buffers": [{"name": "a", "space": "sbuf", "partitions": [0, 128], "bytes": 36864}],
    "nodes": [{"id": 0, "name": "load", "op": "load"}, {"id": 1, "name": "fill", "op": "fill"},
              {"id": 2, "name": "use", "op": "use"}],
    "streams": [
      {"engine": "dma", "name": "q", "dma_engine": 0, "instructions": [{"op": "dma_copy", "node": 0,
        "dst": {"buf": "a", "dtype": "fp32", "partitions": [0, 128], "free": [[8192, 1]]},
        "src": {"buf": "x", "dtype": "fp32", "rows": [128, 8192], "free": [[8192, 1]]},
        "signal": [["x_in", 1]]}]},
      {"engine": "vector", "instructions": [)" +
            memset_at(128, 1024, 8192, R"(, "node": 1)") + "," +
            memset_at(128, 8192, 0, R"(, "node": 2, "wait": [["x_in", 1]])") + "]}]}]}"));
  rig.run();
  const auto& load = l.times[0];
  const auto& fill = l.times[1];
  const auto& use = l.times[2];
  ASSERT_LT(fill.ready, load.ready);  // the fill runs under the load
  ASSERT_EQ(use.start, load.ready);
  const CriticalPath path = critical_path(l);
  EXPECT_EQ(path.by_node[0], load.ready - l.start_time);
  EXPECT_EQ(path.by_node[1], sc_time());
  EXPECT_EQ(path.by_node[2], l.end_time - load.ready);
  EXPECT_GT(path.by_node[0], 10 * path.by_node[2]);  // DMA-bound
}

// Times set by hand (no simulation) for the rules a simulation rarely shows by itself.
struct HandTimed {
  isa::Plan plan;
  std::unique_ptr<engines::Launch> launch;
  explicit HandTimed(const std::string& streams, int nodes) {
    init_systemc();
    std::string node_list;
    for (int i = 0; i < nodes; ++i)
      node_list += (i ? "," : "") + std::string(R"({"id": )") + std::to_string(i) +
                   R"(, "name": "n", "op": "op)" + std::to_string(i) + R"("})";
    plan = parse(R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "hand",
      "semaphores": ["s"], "buffers": [{"name": "a", "space": "sbuf", "partitions": [0, 1], "bytes": 64}],
      "nodes": [)" +
                 node_list + R"(], "streams": [)" + streams + "]}]}");
    launch = std::make_unique<engines::Launch>(plan, 0, std::vector<int64_t>{});
  }
  // start, end, ready in ps, instruction after instruction (stream after stream).
  CriticalPath path(std::vector<std::array<int64_t, 3>> times, int64_t end) {
    for (size_t i = 0; i < times.size(); ++i)
      launch->times.at(i) = {ps(times[i][0]), ps(times[i][1]), ps(times[i][2])};
    launch->end_time = ps(end);
    return critical_path(*launch);
  }
};

std::string instr(int node, const std::string& extra = "") {
  return memset_at(1, 1, 0, R"(, "node": )" + std::to_string(node) + extra);
}

TEST(CriticalPath, InOrderRetirePassesThePathToTheResultWaitedFor) {
  // vector: i0 (ready at 100), i1 (its own result at 30, signals s when i0's is ready);
  // scalar: j0 waits for s.
  HandTimed h(R"({"engine": "vector", "instructions": [)" + instr(0) + "," +
                  instr(1, R"(, "signal": [["s", 1]])") + R"(]},
      {"engine": "scalar", "instructions": [)" +
                  instr(2, R"(, "wait": [["s", 1]])") + "]}",
              3);
  const CriticalPath p = h.path({{0, 10, 100}, {10, 20, 30}, {100, 150, 150}}, 150);
  EXPECT_EQ(p.by_node, (std::vector<sc_time>{ps(100), ps(0), ps(50)}));
  EXPECT_EQ(p.instructions, 3u);
}

TEST(CriticalPath, SignalsAtOneInstantCrossInStreamOrder) {
  // Streams 0 and 1 both add 1 to s at 50; stream 2 waits for s >= need.
  for (int need : {1, 2}) {
    HandTimed h(R"({"engine": "vector", "instructions": [)" +
                    instr(0, R"(, "signal": [["s", 1]])") +
                    R"(]}, {"engine": "scalar", "instructions": [)" +
                    instr(1, R"(, "signal": [["s", 1]])") +
                    R"(]}, {"engine": "tensor", "instructions": [)" +
                    instr(2, R"(, "wait": [["s", )" + std::to_string(need) + "]]") + "]}",
                3);
    const CriticalPath p = h.path({{0, 50, 50}, {0, 50, 50}, {50, 60, 60}}, 60);
    // s reaches 1 with stream 0's signal, 2 with stream 1's.
    EXPECT_EQ(p.by_node[0], ps(need == 1 ? 50 : 0)) << need;
    EXPECT_EQ(p.by_node[1], ps(need == 2 ? 50 : 0)) << need;
    EXPECT_EQ(p.by_node[2], ps(10)) << need;
  }
}

TEST(CriticalPath, AnEnginesNextStreamStartsWhenItsPreviousOneEnds) {
  // Two vector streams of one launch run one after the other on the vector engine; a scalar
  // instruction runs beside them. A gap nothing explains is charged to the waiting instruction.
  HandTimed h(R"({"engine": "vector", "instructions": [)" + instr(0) + "," + instr(1) + R"(]},
      {"engine": "vector", "instructions": [)" +
                  instr(2) + R"(]},
      {"engine": "scalar", "instructions": [)" +
                  instr(3) + "]}",
              4);
  CriticalPath p = h.path({{0, 30, 35}, {30, 40, 45}, {40, 70, 80}, {0, 20, 25}}, 80);
  EXPECT_EQ(p.by_node, (std::vector<sc_time>{ps(30), ps(10), ps(40), ps(0)}));
  p = h.path({{0, 30, 35}, {30, 40, 45}, {42, 70, 80}, {0, 20, 25}}, 80);  // 2 ps unexplained
  EXPECT_EQ(p.by_node, (std::vector<sc_time>{ps(0), ps(0), ps(80), ps(0)}));
}

}  // namespace
}  // namespace wallsim::sim
