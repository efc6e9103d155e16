// The NKI matmul tutorial's kernels rebuilt as plans: each passes the verifier, moves the bytes
// its loop structure names, fits the chip's SBUF, and computes lhsT^T . rhs on the chip model.
// One device per process.
#include <gtest/gtest.h>

#include <cmath>

#include "wallsim/dma/dma_route.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/memory/tensor_store.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"
#include "wallsim/validation/nki_matmul.h"

namespace wallsim::validation {
namespace {

runtime::Config load(const std::string& name) {
  return runtime::load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/" + name + ".json");
}

// The smallest shape every version accepts (fully blocked: M of 2048, N and K of 1024).
const NkiMatmulShape kSmall{1024, 2048, 1024, isa::DType::fp32};

TEST(NkiMatmul, EveryVersionPassesTheVerifierAndMovesTheBytesItsLoopsName) {
  const runtime::Config cfg = load("trn1");
  for (NkiMatmul k : all_nki_matmuls()) {
    const isa::Plan p = nki_matmul_plan(k, kSmall, cfg.chip.arch);
    EXPECT_TRUE(isa::verify(p, cfg.chip.arch).empty()) << name_of(k);
    int64_t read = 0, written = 0;
    for (const isa::Stream& s : p.streams) {
      for (const isa::Instruction& in : s.instructions) {
        if (s.engine != isa::Engine::dma) continue;
        const auto c = dma::descriptor_cost(in, cfg.chip.timing.dma, cfg.chip.timing.hbm,
                                            cfg.chip.timing.host_link);
        read += c.hbm_read_bytes;
        written += c.hbm_write_bytes;
      }
    }
    const NkiTraffic t = nki_matmul_traffic(k, kSmall);
    EXPECT_EQ(read, t.read) << name_of(k);
    EXPECT_EQ(written, t.written) << name_of(k);
  }
}

TEST(NkiMatmul, BlockingCutsTheBytesRead) {
  const NkiMatmulShape tutorial;  // [4096, 8192] @ [8192, 8192] bf16
  // The tutorial's own arithmetic: 160 KB per inner iteration of the tiled kernel.
  EXPECT_EQ(nki_matmul_traffic(NkiMatmul::tiled, tutorial).read, int64_t{32768} * 160 * 1024);
  int64_t last = INT64_MAX;
  for (NkiMatmul k : all_nki_matmuls()) {
    const int64_t read = nki_matmul_traffic(k, tutorial).read;
    EXPECT_LT(read, last) << name_of(k);
    last = read;
  }
}

TEST(NkiMatmul, ShapesOffTheBlocksAndChipsBelowTheTilesAreRefused) {
  const runtime::Config trn1 = load("trn1"), tiny = load("tiny");
  EXPECT_THROW(nki_matmul_plan(NkiMatmul::fully_blocked, {1024, 1024, 1024}, trn1.chip.arch),
               std::invalid_argument);
  EXPECT_THROW(nki_matmul_plan(NkiMatmul::tiled, {100, 128, 512}, trn1.chip.arch),
               std::invalid_argument);
  EXPECT_THROW(nki_matmul_plan(NkiMatmul::tiled, kSmall, tiny.chip.arch), std::invalid_argument);
}

// Runs `k` at `shape` functionally on trn1; the worst |chip - reference| / max |reference| over
// a sample of output elements (every 7th: a full reference of the fully blocked shape is 2^31
// multiply-adds).
double run_functional(NkiMatmul k, const NkiMatmulShape& shape) {
  const runtime::Config cfg = load("trn1");
  const isa::Plan plan = nki_matmul_plan(k, shape, cfg.chip.arch);
  sim::init_systemc();
  traces::StatsRegistry stats;
  sim::CoreOptions opts;
  opts.functional = true;
  opts.stats = &stats;
  sim::System system(cfg.chip, opts);
  sim::Core& device = system.core();
  for (const isa::TensorDecl& t : plan.tensors)
    device.tensors().put(t.name, t.space, t.dtype, t.shape);
  memory::fill_random(*device.tensors().find("lhsT"), 3);
  memory::fill_random(*device.tensors().find("rhs"), 4);
  const std::vector<float> a = memory::to_floats(*device.tensors().find("lhsT"));
  const std::vector<float> b = memory::to_floats(*device.tensors().find("rhs"));
  device.launch(plan, {});
  wallsim::sim::simulate();
  EXPECT_FALSE(device.error());
  EXPECT_TRUE(device.all_drained());
  const std::vector<float> got = memory::to_floats(*device.tensors().find("result"));
  const int64_t K = shape.k, M = shape.m, N = shape.n;
  double scale = 1, worst = 0;
  std::vector<std::pair<size_t, double>> want;
  for (int64_t i = 0; i < M * N; i += 7) {
    const int64_t m = i / N, n = i % N;
    double w = 0;
    for (int64_t kk = 0; kk < K; ++kk) {
      w += double(a[static_cast<size_t>(kk * M + m)]) * b[static_cast<size_t>(kk * N + n)];
    }
    want.emplace_back(static_cast<size_t>(i), w);
    scale = std::max(scale, std::abs(w));
  }
  for (const auto& [i, w] : want) worst = std::max(worst, std::abs(got[i] - w) / scale);
  return worst;
}

const NkiMatmulShape kTiny{256, 256, 1024,
                           isa::DType::fp32};  // M of 256, N of 1024: blocked_free's

TEST(NkiMatmulOnChip, TiledComputesTheProduct) {
  EXPECT_LT(run_functional(NkiMatmul::tiled, kTiny), 1e-5);
}
TEST(NkiMatmulOnChip, HoistedComputesTheProduct) {
  EXPECT_LT(run_functional(NkiMatmul::hoisted, kTiny), 1e-5);
}
TEST(NkiMatmulOnChip, BlockedFreeComputesTheProduct) {
  EXPECT_LT(run_functional(NkiMatmul::blocked_free, kTiny), 1e-5);
}
TEST(NkiMatmulOnChip, FullyBlockedComputesTheProduct) {
  EXPECT_LT(run_functional(NkiMatmul::fully_blocked, kSmall), 1e-5);
}

}  // namespace
}  // namespace wallsim::validation
