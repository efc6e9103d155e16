// Benchmarks: ChromeTraceWriter slices per second to a discarding stream, counter increments.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <ostream>
#include <streambuf>
#include <string>

#include "wallsim/traces/chrome_trace.h"
#include "wallsim/traces/stats.h"

namespace {

using wallsim::traces::ChromeTraceWriter;
using wallsim::traces::Counter;
using wallsim::traces::StatsRegistry;
using wallsim::traces::TimePs;
using wallsim::traces::TraceArgs;
using wallsim::traces::Track;

// Counts and drops everything written to it.
class DiscardBuf : public std::streambuf {
 public:
  std::int64_t bytes() const { return m_bytes; }

 protected:
  int_type overflow(int_type c) override {
    ++m_bytes;
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    m_bytes += n;
    return n;
  }

 private:
  std::int64_t m_bytes = 0;
};

// Slices round-robin over 8 engine tracks; range(0) is the number of arguments per slice.
void BM_ChromeTraceSlices(benchmark::State& state) {
  DiscardBuf buf;
  std::ostream os(&buf);
  ChromeTraceWriter writer(os);
  Track tracks[8];
  for (int i = 0; i < 8; ++i) {
    tracks[i] = writer.declare_track(2, "device0 core0", i + 1, "engine " + std::to_string(i));
  }
  const std::string op = "matmul_tile";
  const bool with_args = state.range(0) > 0;
  TimePs now = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    const Track& track = tracks[n & 7];
    if (with_args) {
      writer.slice(track, now, 1250, "matmul", "tensor",
                   TraceArgs().add("bytes", 4096).add("op", op).add("util", 0.875));
    } else {
      writer.slice(track, now, 1250, "matmul", "tensor", {});
    }
    ++n;
    if ((n & 7) == 0) now += 1250;
  }
  writer.finish();
  state.SetItemsProcessed(n);
  state.SetBytesProcessed(buf.bytes());
}
BENCHMARK(BM_ChromeTraceSlices)->Arg(0)->Arg(3);

void BM_ChromeTraceCounter(benchmark::State& state) {
  DiscardBuf buf;
  std::ostream os(&buf);
  ChromeTraceWriter writer(os);
  TimePs now = 0;
  double value = 0;
  for (auto _ : state) {
    writer.counter(2, "sbuf_occupancy", now, "bytes", value);
    now += 1000;
    value += 64.5;
  }
  writer.finish();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChromeTraceCounter);

void BM_CounterIncrement(benchmark::State& state) {
  StatsRegistry reg;
  Counter& counter = reg.add_counter("device.engines.tensor.busy_cycles", "cycles", "busy");
  for (auto _ : state) {
    ++counter;
    benchmark::DoNotOptimize(counter);
  }
  benchmark::DoNotOptimize(counter.value());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterIncrement);

void BM_CounterAdd(benchmark::State& state) {
  StatsRegistry reg;
  Counter& counter = reg.add_counter("device.dma.bytes", "bytes", "bytes moved");
  std::uint64_t n = 1;
  for (auto _ : state) {
    counter += n;
    benchmark::DoNotOptimize(counter);
    n ^= 3;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterAdd);

}  // namespace
