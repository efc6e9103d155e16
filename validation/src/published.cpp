// The published NKI measurements (published.h). Sources are the aws-neuron/aws-neuron-sdk
// documentation repository at the commits named; docs/VALIDATION.md quotes the conditions.
#include "wallsim/validation/published.h"

namespace wallsim::validation {

namespace {

constexpr const char* kTutorial =
    "NKI matrix multiplication tutorial, aws-neuron/aws-neuron-sdk "
    "nki/tutorials/matrix_multiplication.rst (table from SDK 2.20.0, 72825d50, to 1db4d74e, "
    "2025-10-17)";
constexpr const char* kTutorialConditions =
    "Trn1.32xlarge, one NeuronCore-v2; lhsT [8192, 4096] and rhs [8192, 8192] bf16, fp32 PSUM; "
    "nki.benchmark(warmup=5, iters=10), P99 latency; SDK <= 2.20 (not stated)";
constexpr const char* kGuide =
    "NKI kernel optimization guide, aws-neuron/aws-neuron-sdk "
    "nki/guides/tutorials/kernel-optimization.rst (fb4ce106; first db1586c3, 2025-12-01): "
    "engine-active shares from its text, total time from its profile images v2-v5";
constexpr const char* kGuideConditions =
    "NEURON_PLATFORM_TARGET_OVERRIDE=trn2, one NeuronCore-v3; lhs [4096, 8192] and rhs "
    "[8192, 8192] fp32 (numpy float32 inputs)";

}  // namespace

const std::vector<MeasuredLatency>& nki_matmul_latencies() {
  static const std::vector<MeasuredLatency> v = {
      {NkiMatmul::tiled, "trn1", {}, 51.80, 10.98, kTutorial, kTutorialConditions},
      {NkiMatmul::hoisted, "trn1", {}, 42.96, 13.24, kTutorial, kTutorialConditions},
      {NkiMatmul::blocked_free, "trn1", {}, 22.07, 26.51, kTutorial, kTutorialConditions},
      {NkiMatmul::fully_blocked, "trn1", {}, 6.97, 85.24, kTutorial, kTutorialConditions},
  };
  return v;
}

const std::vector<MeasuredActivity>& nki_matmul_activity() {
  const NkiMatmulShape fp32{8192, 4096, 8192, isa::DType::fp32};
  static const std::vector<MeasuredActivity> v = {
      {NkiMatmul::tiled, "trn2", fp32, 39.89, 99.93, 87.28, "dma", kGuide, kGuideConditions},
      {NkiMatmul::hoisted, "trn2", fp32, 28.20, 99.73, 99.85, "both", kGuide, kGuideConditions},
      {NkiMatmul::blocked_free, "trn2", fp32, 28.41, 95.70, 99.52, "both", kGuide,
       kGuideConditions},
      {NkiMatmul::fully_blocked, "trn2", fp32, 28.30, 21.54, 99.50, "tensor", kGuide,
       kGuideConditions},
  };
  return v;
}

}  // namespace wallsim::validation
