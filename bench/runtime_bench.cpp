// The runtime's speed target: the full 12-layer GPT-2-small forward at seq 1024, timing-only,
// in every mode, as whole `wallsim run` processes (SystemC elaborates once per process, so each
// iteration is a process). Reports wall time per run and the child's peak RSS.
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "wallsim/runtime/execution_mode.h"

extern char** environ;

namespace {

// Every registered mode but the variants of another (eager-debug times the same plans as eager).
std::vector<std::string> bench_modes() {
  std::vector<std::string> out;
  for (const auto* m : wallsim::runtime::all_modes()) {
    if (m->family() == m->name()) out.emplace_back(m->name());
  }
  return out;
}

void BM_Gpt2SmallForwardSeq1024(benchmark::State& state) {
  const std::string mode = bench_modes().at(static_cast<size_t>(state.range(0)));
  const std::string out = "/tmp/wallsim_runtime_bench_" + mode;
  std::vector<std::string> args = {WALLSIM_BIN,
                                   "run",
                                   "-c",
                                   WALLSIM_SOURCE_DIR "/configs/trn2.json",
                                   "-w",
                                   "transformer:layers=12,seq=1024",
                                   "--mode",
                                   mode,
                                   "--steps",
                                   "2",
                                   "--trace-level",
                                   "none",
                                   "--out",
                                   out};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  long peak_kb = 0;
  for (auto _ : state) {
    pid_t pid = 0;
    if (posix_spawn(&pid, WALLSIM_BIN, nullptr, nullptr, argv.data(), environ) != 0) {
      state.SkipWithError("cannot start wallsim");
      return;
    }
    int status = 0;
    struct rusage usage {};
    wait4(pid, &status, 0, &usage);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      state.SkipWithError("wallsim run failed");
      return;
    }
    peak_kb = std::max(peak_kb, usage.ru_maxrss);
  }
  state.counters["peak_rss_MB"] = double(peak_kb) / 1024.0;
  state.SetLabel(mode);
}
}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("BM_Gpt2SmallForwardSeq1024", BM_Gpt2SmallForwardSeq1024)
      ->DenseRange(0, static_cast<int64_t>(bench_modes().size()) - 1)
      ->ArgName("mode")
      ->Iterations(1)
      ->Unit(benchmark::kSecond)
      ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
