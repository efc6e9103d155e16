// `wallsim validate [-c CONFIG] [--out DIR] [--quick]`: microbenchmarks of the chip model against
// outside references (NKI figures, SCALE-Sim's weight-stationary count, the configured
// bandwidths) and the roofline bound of every kernel run; writes validation.md, validation.csv
// and plots. Exits 1 when a check fails: a bound violated or a reference missed.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <variant>

#include "cli_util.h"
#include "commands.h"
#include "validate_rows.h"
#include "wallsim/base/file_write.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/dma/dma_route.h"
#include "wallsim/engines/timing_model.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim::cli {

using validate::kAssumption;
using validate::Kernel;
using validate::kInferred;
using validate::kPublic;
using validate::Row;

namespace validate {

void roofline(Kernel& k, const sim::ChipConfig& chip) {
  const auto& t = chip.timing;
  std::map<std::string, double> ns;
  auto add = [&](const std::string& r, double v) { ns[r] += v; };
  const double array = double(chip.arch.tensor.rows) * chip.arch.tensor.cols;
  for (const isa::Stream& s : k.plan.streams) {
    for (const isa::Instruction& in : s.instructions) {
      switch (s.engine) {
        case isa::Engine::tensor: {
          const double passes = double(engines::tensor_passes(engines::tensor_dtype(in), t.tensor));
          add("tensor", double(isa::macs(in)) * passes / array / t.tensor.freq_mhz * 1e3);
          break;
        }
        case isa::Engine::vector:
        case isa::Engine::scalar: {
          const auto& lane = s.engine == isa::Engine::vector ? t.vector : t.scalar;
          add(std::string(isa::name_of(s.engine)),
              double(in.dst.free_elements()) / lane.elements_per_cycle / lane.freq_mhz * 1e3);
          break;
        }
        case isa::Engine::dma: {
          const dma::DescriptorCost c = dma::descriptor_cost(in, t.dma, t.hbm, t.host_link);
          add("hbm", double(c.hbm_read_bytes + c.hbm_write_bytes) / t.hbm.bandwidth_gb_per_s);
          add("host_link", double(c.link_bytes) / t.host_link.bandwidth_gb_per_s);
          add("dma" + std::to_string(s.dma_engine), double(c.bytes) / t.dma.bandwidth_gb_per_s);
          break;
        }
      }
    }
  }
  k.bound_ns = 0;
  k.bound_by = "none";
  for (const auto& [r, v] : ns) {
    if (v > k.bound_ns) {
      k.bound_ns = v;
      k.bound_by = r;
    }
  }
}

}  // namespace validate

namespace {

using base::Json;
namespace fs = std::filesystem;

// ---- plan construction (JSON, parsed like a plan file) ----

Json on_chip(const std::string& buf, const std::string& dtype, int64_t parts, int64_t free,
             int64_t offset = 0) {
  return Json{{"buf", buf},
              {"dtype", dtype},
              {"partitions", {0, parts}},
              {"offset", offset},
              {"free", {{free, 1}}}};
}
Json off_chip(const std::string& buf, const std::string& dtype, int64_t rows, int64_t row_stride,
              int64_t free, int64_t stride = 1, int64_t offset = 0) {
  return Json{{"buf", buf},
              {"dtype", dtype},
              {"rows", {rows, row_stride}},
              {"offset", offset},
              {"free", {{free, stride}}}};
}
isa::Plan parse_plan(Json plan) {
  Json seq{{"format", "wallsim-plan"}, {"version", 1}, {"plans", Json::array({std::move(plan)})}};
  return isa::plan_sequence_from_json(seq).plans.at(0);
}
Json sbuf_buffer(const std::string& name, int64_t parts, int64_t bytes, int64_t offset = 0) {
  return Json{{"name", name},
              {"space", "sbuf"},
              {"partitions", {0, parts}},
              {"offset", offset},
              {"bytes", bytes}};
}

// `n` copies of one compute instruction on `engine`, operating on SBUF/PSUM tiles.
isa::Plan engine_plan(const std::string& engine, int n, int64_t parts, int64_t free) {
  Json instrs = Json::array();
  for (int i = 0; i < n; ++i) {
    if (engine == "tensor") {
      instrs.push_back({{"op", "matmul"},
                        {"dst", on_chip("o", "fp32", parts, free)},
                        {"stationary", on_chip("w", "bf16", parts, parts)},
                        {"moving", on_chip("x", "bf16", parts, free)}});
    } else if (engine == "vector") {
      instrs.push_back({{"op", "tensor_tensor"},
                        {"alu", "add"},
                        {"dst", on_chip("x", "bf16", parts, free)},
                        {"lhs", on_chip("x", "bf16", parts, free)},
                        {"rhs", on_chip("x", "bf16", parts, free, free)}});
    } else {
      instrs.push_back({{"op", "activation"},
                        {"act", "exp"},
                        {"dst", on_chip("x", "bf16", parts, free)},
                        {"src", on_chip("x", "bf16", parts, free, free)}});
    }
  }
  Json buffers = {
      sbuf_buffer("w", parts, parts * 2), sbuf_buffer("x", parts, free * 4, parts * 2),
      Json{{"name", "o"}, {"space", "psum"}, {"partitions", {0, parts}}, {"bytes", free * 4}}};
  return parse_plan({{"name", engine + "_x" + std::to_string(n)},
                     {"buffers", buffers},
                     {"streams", {{{"engine", engine}, {"instructions", instrs}}}}});
}

// `queues` queues, each on its own DMA engine (modulo `engines`), one descriptor each:
// HBM -> SBUF of `parts` x `chunk` bytes (bf16), or HBM -> HBM of `bytes_each` when `to_hbm`.
isa::Plan dma_plan(const std::string& name, int queues, int engines, int64_t parts,
                   int64_t chunk_bytes, bool to_hbm, bool transposed = false) {
  const int64_t cols = chunk_bytes / 2;
  Json tensors = {{{"name", "a"},
                   {"space", "hbm"},
                   {"dtype", "bf16"},
                   {"shape", transposed ? Json{cols, parts} : Json{queues * parts, cols}},
                   {"role", "input"}}};
  Json buffers = Json::array();
  if (to_hbm) {
    tensors.push_back({{"name", "b"},
                       {"space", "hbm"},
                       {"dtype", "bf16"},
                       {"shape", {queues * parts, cols}},
                       {"role", "output"}});
  } else {
    buffers.push_back(sbuf_buffer("s", parts, chunk_bytes));
  }
  Json streams = Json::array();
  for (int q = 0; q < queues; ++q) {
    const int64_t offset = int64_t{q} * parts * cols;
    Json src = transposed ? off_chip("a", "bf16", parts, 1, cols, parts)
                          : off_chip("a", "bf16", parts, cols, cols, 1, offset);
    Json dst = to_hbm ? off_chip("b", "bf16", parts, cols, cols, 1, offset)
                      : on_chip("s", "bf16", parts, cols);
    streams.push_back({{"engine", "dma"},
                       {"name", "q" + std::to_string(q)},
                       {"dma_engine", q % engines},
                       {"instructions", {{{"op", "dma_copy"}, {"dst", dst}, {"src", src}}}}});
  }
  return parse_plan(
      {{"name", name}, {"tensors", tensors}, {"buffers", buffers}, {"streams", streams}});
}

// A one-node graph compiled as one plan: GEMM, element-wise add, or a transpose (copy).
isa::Plan compiled(const std::string& name, const Json& graph, const isa::ArchSpec& arch,
                   const compiler_stub::LoweringOptions& options) {
  compiler_stub::Graph g = compiler_stub::graph_from_json(graph);
  compiler_stub::infer_types(g);
  auto r = compiler_stub::compile_graph(g, arch, compiler_stub::GroupPolicy::whole, {}, options);
  if (auto* e = std::get_if<compiler_stub::CompileError>(&r)) {
    throw std::runtime_error("validate: " + name + " did not compile: " + e->message());
  }
  isa::Plan p = std::get<compiler_stub::CompiledGraph>(r).plans.plans.at(0);
  p.name = name;
  return p;
}
Json input(int id, const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
           const std::string& role = "input") {
  return {{"id", id},       {"op", "input"},  {"name", name},
          {"dtype", dtype}, {"shape", shape}, {"role", role}};
}
Json graph(const std::string& name, Json nodes, int out) {
  return {{"format", "wallsim-graph"},
          {"version", 1},
          {"name", name},
          {"nodes", nodes},
          {"outputs", {out}}};
}

// ---- the run ----

struct ValidateArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string out = "out/validate";
  bool quick = false;
};

std::string fmt(double v, int precision = 4) {
  std::ostringstream s;
  s << std::setprecision(precision) << v;
  return s.str();
}

void run_validate(const ValidateArgs& a) {
  if (a.config.empty() && !a.overrides.empty()) {
    throw base::InputError("--set", "needs --config");
  }
  runtime::Config cfg;  // the defaults unless a config is named (not a ?: temporary: GCC 12 warns)
  if (!a.config.empty()) cfg = runtime::load_config(a.config, a.overrides);
  const sim::ChipConfig& chip = cfg.chip;
  const auto& t = chip.timing;
  const int64_t parts = chip.arch.sbuf.partitions;
  const int32_t rows = chip.arch.tensor.rows, cols = chip.arch.tensor.cols;
  const int64_t moving = std::min<int64_t>(chip.arch.tensor.moving_free_max, 512);
  const int engines_n = chip.arch.dma.engines;
  const int queues_max = std::min(chip.arch.dma.queues_max(), engines_n);
  std::vector<Kernel> kernels;
  auto add_kernel = [&](const std::string& kind, isa::Plan p) {
    for (const auto& d : isa::verify(p, chip.arch)) {
      throw std::runtime_error("validate: plan " + p.name + ": " + d.to_string());
    }
    Kernel k{kind, p.name, std::move(p), 0, 0, ""};
    kernels.push_back(std::move(k));
    return kernels.size() - 1;
  };

  // 1. Per-engine latency (one instruction) and throughput (n back to back).
  const int n = 16;
  struct EngineBench {
    std::string engine;
    size_t one, many;
  };
  std::vector<EngineBench> eb;
  for (const char* e : {"tensor", "vector", "scalar"}) {
    const int64_t tp = std::string(e) == "tensor" ? std::min<int64_t>(parts, rows) : parts;
    eb.push_back({e, add_kernel("engine", engine_plan(e, 1, tp, moving)),
                  add_kernel("engine", engine_plan(e, n, tp, moving))});
  }
  // 2. DMA bandwidth against chunk size (one queue) and number of queues (8 KiB chunks).
  std::vector<int64_t> chunks = {64, 256, 512, 1024, 2048, 4096, 8192, 16384};
  if (a.quick) chunks = {256, 4096};
  const int64_t max_chunk = chip.arch.sbuf.bytes_per_partition / 2;
  chunks.erase(
      std::remove_if(chunks.begin(), chunks.end(), [&](int64_t c) { return c > max_chunk; }),
      chunks.end());
  std::vector<size_t> chunk_k;
  for (int64_t c : chunks) {
    chunk_k.push_back(add_kernel(
        "dma", dma_plan("dma_chunk_" + std::to_string(c), 1, engines_n, parts, c, false)));
  }
  const int64_t qchunk = std::min<int64_t>(8192, max_chunk);
  std::vector<int> queue_counts;
  for (int q = 1; q <= queues_max; q *= 2) queue_counts.push_back(q);
  if (queue_counts.back() != queues_max) queue_counts.push_back(queues_max);
  std::vector<size_t> queue_k;
  for (int q : queue_counts) {
    queue_k.push_back(add_kernel(
        "dma", dma_plan("dma_queues_" + std::to_string(q), q, engines_n, parts, qchunk, false)));
  }
  // 3. HBM saturation: every queue copies HBM -> HBM (read and write).
  const int64_t copy_chunk = a.quick ? 4096 : 32768;  // bytes per row: 4 MiB per queue at 128 rows
  const size_t hbm_k = add_kernel("hbm", dma_plan("hbm_copy_x" + std::to_string(queues_max),
                                                  queues_max, engines_n, parts, copy_chunk, true));
  // 4. A transposing load: element-strided or by hardware DMA transpose.
  const size_t contiguous_k =
      add_kernel("copy", dma_plan("load_contiguous", 1, engines_n, parts, qchunk, false));
  const size_t transposed_k =
      add_kernel("copy", dma_plan("load_transposed", 1, engines_n, parts, qchunk, false, true));
  // 5. Compiled kernels: GEMMs, an element-wise add, a transpose.
  std::vector<std::array<int64_t, 3>> gemms = {{256, 256, 256}, {512, 1024, 512}};
  if (!a.quick) gemms.push_back({1024, 1024, 1024});
  for (const auto& g : gemms) {
    const std::string name =
        "gemm_" + std::to_string(g[0]) + "x" + std::to_string(g[1]) + "x" + std::to_string(g[2]);
    add_kernel("gemm",
               compiled(name,
                        graph(name,
                              {input(0, "x", "bf16", {g[0], g[1]}),
                               input(1, "w", "bf16", {g[1], g[2]}, "weight"),
                               {{"id", 2}, {"op", "matmul"}, {"inputs", {0, 1}}, {"name", "y"}}},
                              2),
                        chip.arch, cfg.compiler));
  }
  for (const char* dtype : {"bf16", "fp32"}) {
    const std::string name = std::string("add_512x512_") + dtype;
    add_kernel("elementwise",
               compiled(name,
                        graph(name,
                              {input(0, "a", dtype, {512, 512}),
                               input(1, "b", dtype, {512, 512}),
                               {{"id", 2}, {"op", "add"}, {"inputs", {0, 1}}, {"name", "c"}}},
                              2),
                        chip.arch, cfg.compiler));
  }
  add_kernel(
      "copy",
      compiled(
          "transpose_512x256",
          graph(
              "transpose_512x256",
              {input(0, "a", "bf16", {512, 256}),
               {{"id", 1}, {"op", "transpose"}, {"inputs", {0}}, {"perm", {1, 0}}, {"name", "b"}}},
              1),
          chip.arch, cfg.compiler));

  // Run every plan, one after another, on one device.
  traces::StatsRegistry stats;
  sim::CoreOptions o;
  o.stats = &stats;
  auto system = std::make_unique<sim::System>(chip, o);
  sim::Core* device = &system->core();
  for (const Kernel& k : kernels) device->launch(k.plan, {});
  wallsim::sim::simulate();
  if (auto e = device->error()) throw sim::SimulationError(*e);
  if (!device->all_drained()) throw sim::SimulationError("validate: a plan did not finish");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& l = device->launches()[i];
    kernels[i].span_ns = (l.end_time - l.start_time).to_seconds() * 1e9;
    roofline(kernels[i], chip);
  }

  // Compare.
  std::vector<Row> rows_out;
  for (const EngineBench& b : eb) {
    const bool tensor = b.engine == "tensor";
    const double f = tensor                 ? t.tensor.freq_mhz
                     : b.engine == "vector" ? t.vector.freq_mhz
                                            : t.scalar.freq_mhz;
    const double one = kernels[b.one].span_ns * f / 1e3, many = kernels[b.many].span_ns * f / 1e3;
    const double per = (many - one) / (n - 1);
    const auto& lane = b.engine == "vector" ? t.vector : t.scalar;
    // NKI cost model: multiply-moving max(N, 64) cycles; vector/scalar N cycles per input plus
    // ~100 fixed; the figures of the config, which cites them.
    const double thr =
        tensor ? double(std::max(moving, t.tensor.moving_min_cycles))
               : double(lane.fixed_overhead_cycles) +
                     (b.engine == "vector" ? 2.0 : 1.0) * double(moving) / lane.elements_per_cycle;
    const double lat = tensor ? double(std::max<int64_t>((std::min<int64_t>(parts, rows) +
                                                          t.tensor.load_stationary_speedup - 1) /
                                                             t.tensor.load_stationary_speedup,
                                                         t.tensor.load_stationary_min_cycles)) +
                                    thr + double(t.tensor.fill_cycles + t.tensor.drain_cycles)
                              : thr + double(lane.access_latency_cycles);
    rows_out.push_back({"engine", b.engine + " throughput (cycles/instruction)", per, thr, "cycles",
                        kPublic,
                        tensor ? "NKI: multiply-moving ~ max(N, 64) cycles"
                               : "NKI: ~N cycles per input + ~100 fixed",
                        0.5});
    rows_out.push_back({"engine", b.engine + " latency (one instruction)", one, lat, "cycles",
                        kInferred,
                        tensor ? "NKI load/multiply + inferred fill/drain"
                               : "NKI cost + ~60-cycle SBUF/PSUM access",
                        0.5});
  }
  auto transfer_ns = [&](const Kernel& k) {
    return k.span_ns - double(t.dma.descriptor_issue_ns) - double(t.hbm.latency_ns);
  };
  for (size_t i = 0; i < chunks.size(); ++i) {
    const double bytes = double(parts * chunks[i]);
    const double eff = double(chunks[i]) / double(chunks[i] + t.dma.chunk_overhead_bytes);
    rows_out.push_back(
        {"dma_chunk", std::to_string(chunks[i]) + " B per partition",
         bytes / transfer_ns(kernels[chunk_k[i]]),
         std::min(t.dma.bandwidth_gb_per_s * eff, t.hbm.bandwidth_gb_per_s), "GB/s", kInferred,
         "engine bandwidth x c / (c + chunk_overhead_bytes): NKI >= 4 KiB guidance", 1.0});
  }
  for (size_t i = 0; i < queue_counts.size(); ++i) {
    const int q = queue_counts[i];
    const double eff = double(qchunk) / double(qchunk + t.dma.chunk_overhead_bytes);
    const double bytes = double(q) * double(parts * qchunk);
    const int used_engines = std::min(q, engines_n);
    rows_out.push_back(
        {"dma_queues", std::to_string(q) + " queues", bytes / transfer_ns(kernels[queue_k[i]]),
         std::min(used_engines * t.dma.bandwidth_gb_per_s * eff, t.hbm.bandwidth_gb_per_s), "GB/s",
         kPublic, "min(queues x engine bandwidth x chunk efficiency, HBM bandwidth)", 1.0});
  }
  {
    const Kernel& k = kernels[hbm_k];
    const double bytes = 2.0 * queues_max * double(parts * copy_chunk);  // read + write
    Row r{"hbm",
          "HBM->HBM copies on " + std::to_string(queues_max) + " queues (read + write)",
          bytes / transfer_ns(k),
          t.hbm.bandwidth_gb_per_s,
          "GB/s",
          kPublic,
          "the configured HBM share (chip bandwidth / cores)",
          1e-6};
    r.upper_bound_only = true;
    rows_out.push_back(r);
  }
  {
    const double c = transfer_ns(kernels[contiguous_k]), tr = transfer_ns(kernels[transposed_k]);
    const double contiguous_w = 1.0 + double(t.dma.chunk_overhead_bytes) / double(qchunk);
    const double transposed_w =
        t.dma.transpose_chunk_bytes > 0
            ? 1.0 + double(t.dma.chunk_overhead_bytes) / double(t.dma.transpose_chunk_bytes)
            : 1.0 + double(t.dma.chunk_overhead_bytes) / 2.0;
    rows_out.push_back({"dma_transpose",
                        t.dma.transpose_chunk_bytes > 0 ? "hardware DMA transpose / contiguous"
                                                        : "element-strided transpose / contiguous",
                        tr / c, transposed_w / contiguous_w, "x", kInferred,
                        "configs/README.md: chunk weights", 0.5});
  }
  // SCALE-Sim's weight-stationary count, on the array configured like SCALE-Sim v2.
  auto model = engines::make_tensor_timing(engines::scalesim_like(t.tensor, rows, cols));
  std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1},         {128, 128, 128},    {127, 129, 1},  {4096, 128, 128}, {1, 4096, 4096},
      {300, 200, 100},   {1000, 1000, 1000}, {64, 256, 384}, {513, 129, 257},  {2048, 64, 2048},
      {100, 4000, 30},   {3000, 17, 999},    {7, 7, 4096},   {4095, 1, 4095},  {256, 1024, 512},
      {1536, 768, 3072}, {333, 555, 777},    {2, 3000, 130}, {129, 129, 129},  {4096, 4096, 4096}};
  if (a.quick) shapes.resize(6);
  for (const auto& s : shapes) {
    // SCALE-Sim reports the 0-based cycle of the last write; wallsim's span is a duration.
    const double last_cycle =
        double(engines::gemm_span_cycles(*model, s[0], s[1], s[2], rows, cols, moving) - 1);
    const double ref = double(
        ((s[1] + rows - 1) / rows) * ((s[2] + cols - 1) / cols) * (2 * rows + cols + s[0] - 2) - 1);
    rows_out.push_back(
        {"gemm_scalesim",
         "M=" + std::to_string(s[0]) + " K=" + std::to_string(s[1]) + " N=" + std::to_string(s[2]),
         last_cycle, ref, "cycle of the last PSUM write", kPublic,
         "SCALE-Sim v2 weight-stationary: ceil(K/R) ceil(N/C) (2R + C + M - 2) - 1", 1.0});
  }

  // Published NKI kernels against their measured latencies (validate_hardware.cpp).
  validate::real_hardware(cfg, *device, a.quick, rows_out, kernels);

  // Write.
  std::unique_ptr<traces::RunDirectory> dir = sim::open_run_directory(a.out);
  int failures = 0;
  std::ostringstream md, csv;
  csv << "section,name,measured,reference,unit,error_pct,reference_kind,ok\n";
  md << "# wallsim validate: " << chip.name << "\n\n"
     << "Each figure is measured on the simulated chip (or, for the SCALE-Sim table, on its "
        "tensor timing model configured like SCALE-Sim v2) and compared with a reference; the "
        "kind says where the reference comes from (docs/VALIDATION.md).\n";
  std::string section;
  for (const Row& r : rows_out) {
    if (r.section != section) {
      section = r.section;
      md << "\n## " << section
         << "\n\n| figure | measured | reference | unit | error | kind | "
            "source | ok |\n|---|---|---|---|---|---|---|---|\n";
    }
    failures += !r.ok();
    md << "| " << r.name << " | " << fmt(r.measured, 6) << " | " << fmt(r.reference, 6) << " | "
       << r.unit << " | " << fmt(r.error_pct(), 3) << " % | " << r.kind << " | " << r.source
       << " | " << (r.ok() ? "yes" : "**no**") << " |\n";
    csv << r.section << ",\"" << r.name << "\"," << std::setprecision(10) << r.measured << ","
        << r.reference << "," << r.unit << "," << r.error_pct() << "," << r.kind << ","
        << (r.ok() ? 1 : 0) << "\n";
  }
  md << "\n## roofline\n\nNo plan may finish faster than its busiest resource at full rate "
        "(tensor array at its dtype's peak, vector/scalar lanes streaming, HBM, host link, each "
        "DMA engine at its bandwidth; payload bytes, HBM read + write).\n\n"
        "| kernel | kind | span (ns) | bound (ns) | bound by | span / bound | ok |\n"
        "|---|---|---|---|---|---|---|\n";
  for (const Kernel& k : kernels) {
    const bool ok = k.span_ns >= k.bound_ns * (1 - 1e-9);
    failures += !ok;
    md << "| " << k.name << " | " << k.kind << " | " << fmt(k.span_ns, 7) << " | "
       << fmt(k.bound_ns, 7) << " | " << k.bound_by << " | "
       << fmt(k.bound_ns > 0 ? k.span_ns / k.bound_ns : 0.0, 4) << " | " << (ok ? "yes" : "**no**")
       << " |\n";
    csv << "roofline,\"" << k.name << "\"," << std::setprecision(10) << k.span_ns << ","
        << k.bound_ns << ",ns," << (k.bound_ns > 0 ? (k.span_ns / k.bound_ns - 1) * 100 : 0.0)
        << "," << k.kind << "," << (ok ? 1 : 0) << "\n";
  }
  md << "\n" << failures << " check(s) failed.\n";
  base::write_file_atomically(dir->file("validation.md"), md.str());
  base::write_file_atomically(dir->file("validation.csv"), csv.str());
  // stats.json (the whole validation run's device stats), stats.txt, config.resolved.json.
  device->finalize();
  sim::write_run_files(
      *dir, stats,
      {{"validation",
        {{"figures", rows_out.size()}, {"kernels", kernels.size()}, {"failed_checks", failures}}}},
      runtime::to_json(cfg));
  const std::string staging = fs::path(dir->file("validation.csv")).parent_path().string();
  const std::string cmd = "/usr/bin/python3 '" + project_file("tools/plot_validation.py") + "' '" +
                          staging + "' > '" + dir->file("plots.log") + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "wallsim: warning: the plots were not drawn (see " << a.out
              << "/plots.log; python3-matplotlib from Debian is needed)\n";
  }
  dir->commit();
  std::cout << a.out << ": validation.md, validation.csv, *.png: " << rows_out.size()
            << " figures, " << kernels.size() << " kernels, " << failures << " check(s) failed\n";
  if (failures > 0) throw Exit{kExitFailed};
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "microbenchmarks of the chip model against outside references and rooflines");
  cmd->add_option("--config,-c", a->config, "chip config (JSON; default: the built-in trn2)");
  cmd->add_option("--set", a->overrides, "override a config value: path.to.key=value");
  cmd->add_option(
      "--out,-o", a->out,
      "output directory (replaced only if it is an earlier wallsim output: .wallsim-output)");
  cmd->add_flag("--quick", a->quick, "fewer points (the test suite's version)");
  add_validate_shapes_command(*cmd);
  cmd->callback([a, cmd] {
    if (!cmd->got_subcommand("shapes")) run_validate(*a);
  });
}

}  // namespace wallsim::cli
