// Simulation speed of a system: instructions per second with 1, 2, 8 and 16 x 8 busy cores of
// one trn2.48xlarge (16 chips of 8 cores, a 4 x 4 torus), each busy core copying tiles to the
// same core of its x+ neighbour chip, and the network's cost per transfer event.
#include <benchmark/benchmark.h>

#include <deque>
#include <memory>
#include <sstream>
#include <string>

#include "wallsim/isa/plan_io.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim {
namespace {

constexpr int kTorusX = 4, kTorusY = 4, kCores = 8;
constexpr int kTiles = 500;  // 16 KiB tiles per busy core and iteration

// SystemC elaborates once per process: the one system every benchmark runs on is built first,
// and a benchmark keeps the cores it does not use idle (an idle core posts no events).
struct Trn2Instance {
  runtime::Config cfg = runtime::load_config(WALLSIM_SOURCE_DIR "/configs/trn2.json");
  std::unique_ptr<sim::System> system;
  std::deque<isa::Plan> plans;  // by busy core, in launch order

  Trn2Instance() {
    sim::init_systemc();
    sim::SystemConfig s = cfg.system;
    s.chip.cores = kCores;
    s.topology.torus_x = kTorusX;
    s.topology.torus_y = kTorusY;
    s.topology.instances = 1;
    system = std::make_unique<sim::System>(cfg.chip, s, sim::CoreOptions{});
    for (int c = 0; c < kTorusX * kTorusY; ++c) {
      for (int k = 0; k < kCores; ++k) plans.push_back(neighbour_copy(c, k));
    }
  }

  // Core k of chip c loads kTiles 16 KiB fp32 tiles from its chip's HBM into SBUF (two
  // buffers) and stores each to the same tensor on chip c's x+ neighbour: two DMA streams,
  // 2 x kTiles descriptors.
  static isa::Plan neighbour_copy(int c, int k) {
    const int rows = 128, cols = 32, x = c % kTorusX, y = c / kTorusX;
    const int neighbour = y * kTorusX + (x + 1) % kTorusX;
    const std::string t = "t_c" + std::to_string(c) + "_k" + std::to_string(k);
    const std::string remote = "chip" + std::to_string(neighbour) + ":" + t;
    const std::string rows_free = "\"rows\": [128, " + std::to_string(cols * kTiles) + "]";
    std::ostringstream loads, stores;
    for (int i = 0; i < kTiles; ++i) {
      const std::string slot = R"({"buf": "tile", "dtype": "fp32", "partitions": [0, 128], )"
                               R"("offset": )" +
                               std::to_string((i % 2) * cols) + R"(, "free": [[32, 1]]})";
      const std::string at =
          ", \"offset\": " + std::to_string(i * cols) + R"(, "free": [[32, 1]]})";
      loads << (i ? "," : "") << R"({"op": "dma_copy", "dst": )" << slot << R"(, "src": {"buf": ")"
            << t << "\", \"dtype\": \"fp32\", " << rows_free << at << R"(, "signal": [["in", 1]])";
      if (i >= 2) loads << R"(, "wait": [["out", )" << i - 1 << "]]";
      loads << "}";
      stores << (i ? "," : "") << R"({"op": "dma_copy", "wait": [["in", )" << i + 1
             << R"(]], "src": )" << slot << R"(, "signal": [["out", 1]], "dst": {"buf": ")"
             << remote << "\", \"dtype\": \"fp32\", " << rows_free << at << "}";
    }
    const std::string shape =
        "[" + std::to_string(rows) + ", " + std::to_string(cols * kTiles) + "]";
    std::ostringstream s;
    s << R"({"format": "wallsim-plan", "version": 1, "plans": [{"name": "copy_)" << t
      << R"(", "semaphores": ["in", "out"], "tensors": [{"name": ")" << t
      << R"(", "space": "hbm", "dtype": "fp32", "shape": )" << shape
      << R"(, "role": "input"}, {"name": ")" << remote
      << R"(", "space": "hbm", "dtype": "fp32", "shape": )" << shape
      << R"(, "role": "output"}], "buffers": [{"name": "tile", "space": "sbuf", )"
      << R"("partitions": [0, 128], "bytes": 256}], "streams": [)"
      << R"({"engine": "dma", "name": "load", "dma_engine": 0, "instructions": [)" << loads.str()
      << R"(]}, {"engine": "dma", "name": "store", "dma_engine": 1, "instructions": [)"
      << stores.str() << "]}]}]}";
    return isa::plan_sequence_from_json(base::Json::parse(s.str())).plans.at(0);
  }
};

Trn2Instance& instance() {
  static Trn2Instance i;
  return i;
}

// state.range(0) busy cores, filled chip by chip: 1 and 2 share chip 0, 8 fill it, 128 is the
// whole instance.
void BM_System_NeighbourCopy(benchmark::State& state) {
  Trn2Instance& in = instance();
  const int busy = static_cast<int>(state.range(0));
  int64_t instructions = 0;
  for (auto _ : state) {
    for (int i = 0; i < busy; ++i) {
      const isa::Plan& p = in.plans[static_cast<size_t>(i)];
      in.system->core(static_cast<size_t>(i / kCores), static_cast<size_t>(i % kCores))
          .launch(p, {});
      instructions += p.instruction_count();
    }
    sim::simulate();
  }
  state.SetItemsProcessed(instructions);
  // Every descriptor is two network events: its start and its finish.
  state.counters["network_events/s"] =
      benchmark::Counter(2.0 * static_cast<double>(instructions), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_System_NeighbourCopy)->Arg(1)->Arg(2)->Arg(8)->Arg(128)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace wallsim

BENCHMARK_MAIN();
