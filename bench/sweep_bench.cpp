// Sweep spec reading (issue 20, defect 22): a spec with more points than kMaxSweepPoints is
// refused from the product of its axis sizes, before any point's config is loaded. With k axes
// of 10 values (10^k points) the refusal's time must grow with k (the spec's size), not with
// 10^k: the complexity fit is O(N) in the number of axes.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../cli/src/sweep.h"
#include "wallsim/base/params.h"
#include "wallsim/runtime/execution_mode.h"

namespace wallsim::cli {
namespace {

void BM_RejectTooManySweepPoints(benchmark::State& state) {
  const int64_t axes = state.range(0);
  std::string spec = std::string(R"({"base_config": ")") + WALLSIM_SOURCE_DIR +
                     R"(/configs/tiny.json", "workloads": ["gemm:m=64"], "modes": [")" +
                     std::string(runtime::default_mode().name()) + R"("],
                     "axes": {)";
  for (int64_t a = 0; a < axes; ++a) {
    spec += (a ? ", " : "") + std::string("\"runtime.inject.bench_") + std::to_string(a) +
            "\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
  }
  spec += "}}";
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("wallsim_sweep_bench_" + std::to_string(axes) + ".json"))
                               .string();
  std::ofstream(file) << spec;
  for (auto _ : state) {
    try {
      read_sweep(file);
      state.SkipWithError("expected a refusal");
    } catch (const base::InputError& e) {
      if (std::string(e.what()).find("more than the limit") == std::string::npos)
        state.SkipWithError(e.what());
    }
  }
  std::filesystem::remove(file);
  state.SetComplexityN(axes);
}
BENCHMARK(BM_RejectTooManySweepPoints)->DenseRange(6, 30, 6)->Complexity(benchmark::oN);

}  // namespace
}  // namespace wallsim::cli

BENCHMARK_MAIN();
