// `wallsim validate`'s real-hardware section: the NKI matmul tutorial's kernels rebuilt as
// plans (wallsim/validation) and run on the chip, against the latencies AWS measured on a Trn1
// NeuronCore and the engine-active shares its Trn2 optimization guide profiled.
#include <algorithm>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>

#include "validate_rows.h"
#include "wallsim/dma/dma_route.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/validation/nki_kernel.h"
#include "wallsim/validation/published.h"

namespace wallsim::cli::validate {
namespace {

using validation::NkiMatmul;
using validation::NkiMatmulShape;

// What one run of a rebuilt kernel gave.
struct KernelRun {
  double span_ms = 0;
  double dma_active = 0, tensor_active = 0, vector_active = 0;  // fractions of the span
  double hbm_read_gb = 0, dma_gb = 0;                           // bytes moved, 1e9
  std::string bound_by;
};

// Length of the union of [start, end) intervals.
double union_ns(std::vector<std::pair<double, double>>& v) {
  std::sort(v.begin(), v.end());
  double total = 0, lo = 0, hi = -1;
  for (const auto& [a, b] : v) {
    if (a > hi) {
      if (hi > lo) total += hi - lo;
      lo = a;
      hi = b;
    } else {
      hi = std::max(hi, b);
    }
  }
  if (hi > lo) total += hi - lo;
  return total;
}

std::string shape_text(const NkiMatmulShape& s) {
  std::ostringstream o;
  o << "[" << s.m << "," << s.k << "] @ [" << s.k << "," << s.n << "] " << isa::name_of(s.dtype);
  return o.str();
}

KernelRun run_kernel(NkiMatmul which, const NkiMatmulShape& shape, const sim::ChipConfig& chip,
                     sim::Core& device, std::vector<Kernel>& kernels) {
  auto plan = std::make_shared<isa::Plan>(validation::nki_matmul_plan(which, shape, chip.arch));
  for (const auto& d : isa::verify(*plan, chip.arch)) {
    throw std::runtime_error("validate: plan " + plan->name + ": " + d.to_string());
  }
  KernelRun r;
  Kernel k{"nki", validation::name_of(which) + " " + shape_text(shape), {}, 0, 0, ""};
  k.plan.streams = plan->streams;  // roofline reads the instructions only
  roofline(k, chip);
  k.plan = {};
  for (const isa::Stream& s : plan->streams) {
    if (s.engine != isa::Engine::dma) continue;
    for (const isa::Instruction& in : s.instructions) {
      const dma::DescriptorCost c =
          dma::descriptor_cost(in, chip.timing.dma, chip.timing.hbm, chip.timing.host_link);
      r.hbm_read_gb += double(c.hbm_read_bytes) / 1e9;
      r.dma_gb += double(c.bytes) / 1e9;
    }
  }
  device.launch(*plan, {}, {}, plan);
  const size_t index = device.launch_count() - 1;
  wallsim::sim::simulate();
  if (auto e = device.error()) throw sim::SimulationError(*e);
  const engines::Launch* l = device.live_launch(index);
  if (!l || !l->drained) throw sim::SimulationError("validate: " + plan->name + " did not finish");
  const double span = (l->end_time - l->start_time).to_seconds() * 1e9;
  std::vector<std::pair<double, double>> dma, tensor, vector;
  for (size_t s = 0; s < plan->streams.size(); ++s) {
    const isa::Stream& st = plan->streams[s];
    auto& to = st.engine == isa::Engine::dma      ? dma
               : st.engine == isa::Engine::tensor ? tensor
                                                  : vector;
    for (size_t i = 0; i < st.instructions.size(); ++i) {
      const engines::InstructionTimes& t = l->times[l->stream_offset[s] + i];
      to.emplace_back(t.start.to_seconds() * 1e9, t.end.to_seconds() * 1e9);
    }
  }
  r.span_ms = span / 1e6;
  r.dma_active = span > 0 ? union_ns(dma) / span : 0;
  r.tensor_active = span > 0 ? union_ns(tensor) / span : 0;
  r.vector_active = span > 0 ? union_ns(vector) / span : 0;
  k.span_ns = span;
  r.bound_by = k.bound_by;
  kernels.push_back(std::move(k));
  device.retire_drained();  // frees the plan
  return r;
}

std::string fmt2(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << v;
  return o.str();
}

// The NKI DMA guides' statements on throughput against bytes per partition: a stream of
// NKI-style loads of [128 x c] bytes (16 engines x 8 partitions each, every engine's pieces on
// one queue, back to back), alone on the chip; its bandwidth relative to the 32 KiB stream's.
void dma_guide(const sim::ChipConfig& chip, sim::Core& device, bool quick, std::vector<Row>& rows) {
  constexpr int kLoads = 16;
  // Relative throughput read off the DMA overview's figure "DMA Throughput varying Bytes per
  // Partition for p_dim = 128" (nki/img/overviews/nki-dma-intro-1.jpg; marker heights against
  // the 32 KiB point; the generation is not stated, the page's examples are on Trn2).
  const std::vector<std::pair<int64_t, double>> figure = {
      {64, 2.8}, {256, 10.4}, {1024, 42.5}, {2048, 81.4}, {4096, 96.6}, {8192, 98.3}, {32768, 100}};
  std::vector<int64_t> sizes = {64, 256, 1024, 2048, 4096, 8192, 32768};
  if (quick) sizes = {64, 4096, 32768};
  const int32_t parts = std::min<int32_t>(128, chip.arch.sbuf.partitions);
  std::map<int64_t, double> gbs;
  for (int64_t c : sizes) {
    if (c > chip.arch.sbuf.bytes_per_partition) continue;
    validation::NkiKernel kk("dma_load_" + std::to_string(c), chip.arch);
    const auto src = kk.hbm_tensor("a", isa::DType::bf16, parts, c / 2, isa::TensorRole::input);
    auto pool = kk.pool("t", isa::MemSpace::sbuf, isa::DType::bf16, parts, c / 2, 1);
    const validation::Tile tile = pool.next();
    for (int i = 0; i < kLoads; ++i) kk.load(tile, src, 0, 0);
    auto plan = std::make_shared<isa::Plan>(kk.build());
    device.launch(*plan, {}, {}, plan);
    const size_t index = device.launch_count() - 1;
    wallsim::sim::simulate();
    const engines::Launch* l = device.live_launch(index);
    if (!l || !l->drained)
      throw sim::SimulationError("validate: " + plan->name + " did not finish");
    gbs[c] = double(kLoads) * double(parts) * double(c) /
             ((l->end_time - l->start_time).to_seconds() * 1e9);
    device.retire_drained();
  }
  if (!gbs.count(32768)) return;
  const double top = gbs[32768];
  std::map<int64_t, double> fig(figure.begin(), figure.end());
  for (const auto& [c, v] : gbs) {
    if (!fig.count(c)) continue;  // no point of the figure to show beside it
    const double rel = v / top * 100;
    Row r{"dma_guide",
          std::to_string(c) + " B per partition: % of the 32 KiB load's bandwidth",
          rel,
          fig[c],
          "%",
          kPublic,
          std::to_string(kLoads) + " loads of [128 x c], first issue to last data in SBUF (" +
              fmt2(v) +
              " GB/s); reference read off the NKI DMA overview's figure (relative, generation "
              "not stated): shown",
          -1};
    rows.push_back(r);
  }
  // The guides' text (nki-dma-bandwidth-guide.rst): below 256 B per partition a DMA is
  // "severely overhead-bound", at 4 KiB it "saturates the DMA engines".
  if (gbs.count(64)) {
    Row r{"dma_guide",
          "64 B per partition: severely overhead-bound (< 50 % of 32 KiB)",
          gbs[64] / top * 100,
          50,
          "%",
          kPublic,
          "NKI DMA bandwidth guide: < 256 B per partition severely overhead-bound",
          0};
    r.upper_bound_only = true;
    rows.push_back(r);
  }
  if (gbs.count(4096)) {
    Row r{"dma_guide",
          "4 KiB per partition: near peak (>= 90 % of 32 KiB)",
          gbs[4096] / top * 100,
          90,
          "%",
          kPublic,
          "NKI DMA bandwidth guide: >= 4 KiB per partition saturates the engines",
          -1};
    r.tolerance_abs = 10;  // 90 +- 10: at least 90 (it cannot exceed 100)
    r.reference = 100;
    rows.push_back(r);
  }
}

}  // namespace

void real_hardware(const runtime::Config& cfg, sim::Core& device, bool quick,
                   std::vector<Row>& rows, std::vector<Kernel>& kernels) {
  const sim::ChipConfig& chip = cfg.chip;
  dma_guide(chip, device, quick, rows);
  // Quick: every kernel at a small shape, bound-checked (not compared: the shape differs).
  if (quick) {
    const NkiMatmulShape small{1024, 2048, 1024, isa::DType::bf16};
    for (NkiMatmul k : validation::all_nki_matmuls()) {
      KernelRun r;
      try {
        r = run_kernel(k, small, chip, device, kernels);
      } catch (const std::invalid_argument& e) {  // a chip smaller than NKI's tiles
        rows.push_back({"hardware", validation::name_of(k) + ": not rebuilt (" + e.what() + ")", 0,
                        0, "ms", kMeasured, "quick: not compared", -1});
        continue;
      }
      rows.push_back({"hardware", validation::name_of(k) + " " + shape_text(small) + " (quick)",
                      r.span_ms, 0, "ms", kMeasured, "quick: not compared", -1});
    }
    return;
  }
  std::map<NkiMatmul, KernelRun> trn1;
  for (const validation::MeasuredLatency& m : validation::nki_matmul_latencies()) {
    if (m.config != chip.name) continue;
    const KernelRun r = run_kernel(m.kernel, m.shape, chip, device, kernels);
    trn1[m.kernel] = r;
    const std::string name = validation::name_of(m.kernel);
    rows.push_back(
        {"hardware", name + " latency", r.span_ms, m.latency_ms, "ms", kMeasured, m.source, 10.0});
    const double hw_rate = (r.dma_gb) / m.latency_ms;  // GB/ms = TB/s
    rows.push_back({"hardware", name + ": DMA bytes / latency", r.dma_gb / r.span_ms * 1e3,
                    hw_rate * 1e3, "GB/s", kMeasured,
                    "the kernel's DMA bytes (" + fmt2(r.dma_gb) + " GB) / its latency", -1});
    rows.push_back({"hardware", name + ": tensor engine active", r.tensor_active * 100, m.hfu_pct,
                    "%", kMeasured,
                    "reference: the tutorial's HFU; wallsim bound by " + r.bound_by +
                        ", DMA active " + fmt2(r.dma_active * 100) + " %, vector active " +
                        fmt2(r.vector_active * 100) + " %",
                    -1});
  }
  if (trn1.count(NkiMatmul::tiled) && trn1.count(NkiMatmul::hoisted)) {
    Row ratio{"hardware",
              "tiled / hoisted latency",
              trn1[NkiMatmul::tiled].span_ms / trn1[NkiMatmul::hoisted].span_ms,
              51.80 / 42.96,
              "x",
              kMeasured,
              "the tutorial's 51.80 / 42.96 ms; within 0.1",
              -1};
    ratio.tolerance_abs = 0.1;
    rows.push_back(ratio);
  }
  for (const validation::MeasuredActivity& m : validation::nki_matmul_activity()) {
    if (m.config != chip.name) continue;
    const std::string name = validation::name_of(m.kernel);
    KernelRun r;
    try {
      r = run_kernel(m.kernel, m.shape, chip, device, kernels);
    } catch (const std::invalid_argument& e) {
      rows.push_back({"hardware_activity",
                      name + ": not rebuilt (" + std::string(e.what()) +
                          "; the Neuron compiler must have spilled)",
                      0, m.total_ms, "ms", kMeasured, m.source, -1});
      continue;
    }
    const bool dma_bound = r.dma_active >= 0.95, tensor_bound = r.tensor_active >= 0.95;
    const std::string bound = dma_bound && tensor_bound ? "both"
                              : dma_bound               ? "dma"
                              : tensor_bound            ? "tensor"
                                                        : "neither";
    Row dma{"hardware_activity",
            name + ": DMA active",
            r.dma_active * 100,
            m.dma_active_pct,
            "%",
            kMeasured,
            m.source + "; within 10 points",
            -1};
    dma.tolerance_abs = 10;
    // The profile's TensorE counts more than matmuls (163,912 instructions for 65,536 matmuls
    // in the tiled step), so its active share runs above the matmuls' alone.
    Row tensor{"hardware_activity",
               name + ": tensor engine active (matmuls)",
               r.tensor_active * 100,
               m.tensor_active_pct,
               "%",
               kMeasured,
               m.source +
                   "; within 15 points (the profile's TensorE also runs non-matmul "
                   "instructions)",
               -1};
    tensor.tolerance_abs = 15;
    Row bound_row{"hardware_activity",
                  name + ": bound by " + bound + " (hardware: " + m.bound_by + ")",
                  bound == m.bound_by ? 1.0 : 0.0,
                  1.0,
                  "match",
                  kMeasured,
                  "an engine bounds a step when it is active >= 95 % of it",
                  0};
    rows.push_back(dma);
    rows.push_back(tensor);
    rows.push_back(bound_row);
    rows.push_back({"hardware_activity", name + ": time", r.span_ms, m.total_ms, "ms", kMeasured,
                    "the profile's timeline (shown, not checked)", -1});
  }
}

}  // namespace wallsim::cli::validate
