// Published measurements of NKI kernels on real NeuronCores, with their conditions and
// sources: what `wallsim validate`'s real-hardware section holds the chip model against.
#pragma once

#include <string>
#include <vector>

#include "wallsim/validation/nki_matmul.h"

namespace wallsim::validation {

// A kernel's measured latency on one NeuronCore.
struct MeasuredLatency {
  NkiMatmul kernel;
  std::string config;  // the wallsim config that models the measured core (configs/<name>.json)
  NkiMatmulShape shape;
  double latency_ms = 0;
  double hfu_pct = 0;  // hardware FLOPs utilisation the source reports
  std::string source, conditions;
};

// A profiled kernel: the share of its time each engine was active, as the source reports.
struct MeasuredActivity {
  NkiMatmul kernel;
  std::string config;
  NkiMatmulShape shape;
  double total_ms = 0;  // the profile's timeline (read from its image)
  double dma_active_pct = 0;
  double tensor_active_pct = 0;
  std::string bound_by;  // what the source says bounds the step: "dma", "tensor" or "both"
  std::string source, conditions;
};

// The NKI matrix-multiplication tutorial's table (Trn1.32xlarge).
const std::vector<MeasuredLatency>& nki_matmul_latencies();
// The NKI kernel-optimization guide's matmul steps (Trn2, fp32 inputs).
const std::vector<MeasuredActivity>& nki_matmul_activity();

}  // namespace wallsim::validation
