// Benchmarks: the fluid network's cost per event (a transfer's start or finish) by component.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/memory/fluid_share.h"

namespace {

using wallsim::memory::FluidShare;
using wallsim::memory::ResourceUse;
using Ps = FluidShare::Ps;

// `engines` DMA engines on one HBM, each always busy with a descriptor whose size cycles
// through a few values; a finish starts the engine's next descriptor. `chunked`: the engine
// weight of a descriptor with 64-byte chunk overheads (1 + 256 / bytes), else 1. Runs the
// benchmark's iterations (one finish time each) and reports ns per event (a start or a finish)
// and, with `count_fast`, the share of the iterations' events that took a fast path.
void run_engines_on_one_hbm(benchmark::State& state, FluidShare& fs, int engines, bool chunked,
                            bool count_fast) {
  const int hbm = fs.add_resource("hbm", 2900e9);
  std::vector<int> engine;
  for (int e = 0; e < engines; ++e) engine.push_back(fs.add_resource("dma", 28.99e9));
  std::vector<int> owner;  // per transfer id: its engine
  int64_t started = 0;
  const auto start = [&](Ps now, int e) {
    const double bytes = 4096.0 * (1 + (started++ * 7 + e) % 13);
    owner.push_back(e);
    const double weight = chunked ? 1.0 + 64.0 / bytes * 4 : 1.0;
    fs.start_weighted(now, bytes, {{engine[e], weight}, {hbm, 2.0}});
  };
  for (int e = 0; e < engines; ++e) start(0, e);
  int64_t events = 0;
  const uint64_t fast_before = fs.fast_events();
  for (auto _ : state) {
    const Ps t = fs.next_finish();
    for (uint64_t id : fs.advance(t)) {
      start(t, owner[id]);
      events += 2;  // a finish and a start
    }
  }
  state.counters["ns/event"] =
      benchmark::Counter(static_cast<double>(events) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (count_fast) {
    state.counters["fast"] =
        static_cast<double>(fs.fast_events() - fast_before) / static_cast<double>(events);
  }
}

// One chip's DMA: range(0) engines on one HBM, descriptors with chunk overheads. Every event
// refills the whole component (the HBM joins every engine).
void BM_FluidShare_EnginesOnOneHbm(benchmark::State& state) {
  FluidShare fs;
  run_engines_on_one_hbm(state, fs, static_cast<int>(state.range(0)), true, false);
}
BENCHMARK(BM_FluidShare_EnginesOnOneHbm)->Arg(16)->Arg(128);

// As EnginesOnOneHbm, with descriptors of whole 64-byte chunks (engine weight 1: every engine
// at the same share) and the HBM unsaturated: each start and finish changes no other
// transfer's rate, the case FluidShare's fast paths skip the refill for. range(1) = 0 refills
// at every event (set_incremental(false)), the cost without them. Counter `fast`: the share
// of events that took a fast path.
void BM_FluidShare_EqualEnginesOnOneHbm(benchmark::State& state) {
  FluidShare fs;
  fs.set_incremental(state.range(1) != 0);
  run_engines_on_one_hbm(state, fs, static_cast<int>(state.range(0)), false, true);
}
BENCHMARK(BM_FluidShare_EqualEnginesOnOneHbm)
    ->Args({16, 1})
    ->Args({16, 0})
    ->Args({128, 1})
    ->Args({128, 0});

// A mesh collective step: range(0) ranks on chips of 8 cores in a ring of chips; every rank
// sends to every other over its chip's cc_dma and HBM, the ring links between the chips, and
// the destination's HBM, all started at once; one iteration runs the step to its end.
void BM_FluidShare_MeshStep(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const int cores = 8, chips = (ranks + cores - 1) / cores;
  FluidShare fs;
  std::vector<int> hbm, cc, link;
  for (int c = 0; c < chips; ++c) {
    hbm.push_back(fs.add_resource("hbm", 2900e9));
    cc.push_back(fs.add_resource("cc_dma", 500e9));
    link.push_back(fs.add_resource("x+", 128e9));
  }
  Ps now = 0;
  int64_t events = 0;
  for (auto _ : state) {
    for (int a = 0; a < ranks; ++a) {
      for (int b = 0; b < ranks; ++b) {
        if (a == b) continue;
        const int ca = a / cores, cb = b / cores;
        std::vector<ResourceUse> uses = {{cc[ca], 1.0}, {hbm[ca], 1.0}, {hbm[cb], 1.0}};
        for (int c = ca; c != cb; c = (c + 1) % chips) uses.push_back({link[c], 1.0});
        fs.start_weighted(now, 8192.0, std::move(uses));
        ++events;
      }
    }
    while (fs.active() > 0) {
      now = fs.next_finish();
      events += static_cast<int64_t>(fs.advance(now).size());
    }
  }
  state.counters["ns/event"] =
      benchmark::Counter(static_cast<double>(events) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_FluidShare_MeshStep)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
