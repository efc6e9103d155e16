// What `wallsim validate` compares and runs: a row (one figure against its reference), a kernel
// (a plan with its span and roofline bound), shared by its sections (validate_command.cpp, the
// real-hardware section in validate_hardware.cpp).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "wallsim/isa/plan.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/chip_config.h"
#include "wallsim/sim/core.h"

namespace wallsim::cli::validate {

// Where a reference figure comes from (docs/VALIDATION.md).
inline constexpr const char* kPublic = "public source";
inline constexpr const char* kInferred = "inference";
inline constexpr const char* kAssumption = "model assumption";
inline constexpr const char* kMeasured = "hardware measurement";

// One compared figure. `tolerance_pct` < 0: shown, not checked; `tolerance_abs` >= 0 checks
// |measured - reference| instead.
struct Row {
  std::string section, name;
  double measured = 0, reference = 0;
  std::string unit, kind, source;
  double tolerance_pct = 1.0;
  bool upper_bound_only = false;  // the check is measured <= reference (plus tolerance)
  double tolerance_abs = -1.0;
  double error_pct() const { return reference != 0 ? (measured / reference - 1.0) * 100.0 : 0.0; }
  bool ok() const {
    if (tolerance_abs >= 0) return std::fabs(measured - reference) <= tolerance_abs;
    if (tolerance_pct < 0) return true;
    if (upper_bound_only) return measured <= reference * (1 + tolerance_pct / 100.0);
    return std::fabs(error_pct()) <= tolerance_pct;
  }
};

// A plan the device runs, and what no schedule of it can beat.
struct Kernel {
  std::string kind, name;  // kind: engine, dma, hbm, gemm, elementwise, copy, nki
  isa::Plan plan;
  double span_ns = 0, bound_ns = 0;
  std::string bound_by;
};

// Sets k.bound_ns and k.bound_by: the least time any schedule of k.plan needs on `chip` (the
// busiest of the tensor array at its dtype's peak, the vector and scalar lanes streaming, HBM,
// the host link and each DMA engine at its bandwidth).
void roofline(Kernel& k, const sim::ChipConfig& chip);

// The real-hardware section: published NKI kernels rebuilt as plans, run on `device` after
// every other kernel has drained, compared with their measured latencies where the config
// models the measured chip. Appends rows, and the kernels' spans and bounds (plans freed).
void real_hardware(const runtime::Config& cfg, sim::Core& device, bool quick,
                   std::vector<Row>& rows, std::vector<Kernel>& kernels);

}  // namespace wallsim::cli::validate
