// The `run` driver: elaborate the device, run the workload's steps in a host thread, report.
#include "wallsim/driver/run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>

#include "wallsim/chakra/export.h"
#include "wallsim/driver/compile_metrics.h"
#include "wallsim/driver/ranks.h"
#include "wallsim/driver/run_report.h"
#include "wallsim/driver/step_stream.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/system.h"
#include "wallsim/traces/run_directory.h"
#include "wallsim/traces/stats.h"

namespace wallsim::driver {

namespace {

using nlohmann::ordered_json;
using runtime::kNumHostStates;

int64_t host_ns(const runtime::Session& session, const std::string& op) {
  const auto it = session.host_ns_by_op().find(op);
  return it == session.host_ns_by_op().end() ? 0 : it->second;
}

// e0..e<engines - 1>, every row the same columns.
ordered_json dma_engine_bytes(const sim::Core::OpTotals& r, size_t engines) {
  ordered_json out = ordered_json::object();
  for (size_t e = 0; e < engines; ++e) {
    out["e" + std::to_string(e)] = e < r.dma_engine_bytes.size() ? r.dma_engine_bytes[e] : 0;
  }
  return out;
}

// Per op kind, over every plan the run launched (the device's op totals, from each
// instruction's provenance; ops the host ran without device work too): engine time, exposed
// time (the op's time on its launches' critical paths, Device::OpTotals::exposed_ns), host time of
// the op's calls, DMA bytes in all and per DMA engine, MACs, and the op's time `time_ns`: the
// longest of its compute engines' busy times and the time its DMA transfers were in flight as
// simulated (`dma_active_ns`: over every queue at once, contention and all; `bound` names the one
// that sets it). `achieved_tflops` is 2 x MACs / time_ns; `roofline_tflops` (min(peak, 2 x MACs /
// DMA bytes x HBM bandwidth)) is the op's bound had its bytes streamed at HBM bandwidth.
ordered_json op_table(sim::Core& device, const runtime::Session& session,
                      const sim::ChipConfig& chip) {
  device.retire_drained();
  const double peak = sim::peak_tensor_flops(chip);  // FLOP/s
  const double hbm = chip.timing.hbm.bandwidth_gb_per_s * 1e9;
  std::map<std::string, sim::Core::OpTotals> ops = device.op_totals();
  for (const auto& [op, ns] : session.host_ns_by_op()) ops[op];  // host-only ops get a row too
  size_t dma_engines = 0;
  for (const auto& [op, r] : ops) dma_engines = std::max(dma_engines, r.dma_engine_bytes.size());
  ordered_json out = ordered_json::array();
  for (const auto& [op, r] : ops) {
    std::string bound = "dma";
    double time_s = r.dma_active_ns * 1e-9;
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto engine = static_cast<isa::Engine>(e);
      const double s = r.busy[e].to_seconds();
      // DMA's busy time sums its parallel queues: the time in flight stands for it.
      if (engine != isa::Engine::dma && s > time_s) {
        time_s = s;
        bound = isa::name_of(engine);
      }
    }
    const double flops = 2 * r.macs;
    ordered_json row = {
        {"op", op},
        {"nodes", r.nodes},
        {"instructions", r.instructions},
        {"busy_ns", sim::busy_ns_json(r.busy)},
        {"dma_bytes", r.dma_bytes},
        {"macs", r.macs},
        {"exposed_ns", r.exposed_ns},
        {"dma_active_ns", r.dma_active_ns},
        {"host_ns", host_ns(session, op)},
        {"time_ns", time_s * 1e9},
        {"bound", time_s > 0 ? bound : "none"},
        {"hbm_bandwidth_fraction", time_s > 0 ? double(r.dma_bytes) / time_s / hbm : 0.0}};
    if (r.macs > 0) {
      const double achieved = time_s > 0 ? flops / time_s : 0.0;
      row["achieved_tflops"] = achieved / 1e12;
      row["roofline_tflops"] =
          (r.dma_bytes > 0 ? std::min(peak, flops / double(r.dma_bytes) * hbm) : peak) / 1e12;
      row["tensor_peak_fraction"] = achieved / peak;
    }
    row["dma_engine_bytes"] = dma_engine_bytes(r, dma_engines);
    out.push_back(row);
  }
  return out;
}

// Per layer, in order of first appearance: the device totals of every origin whose module is
// the layer (the nodes' engine time, exposed time, DMA bytes and MACs), from the origins each
// launch carried; a plan shared by many layers is counted in each layer that ran it. Empty
// when the workload set no origins.
ordered_json layer_table(const runtime::Session& session) {
  const auto& origins = session.origins();
  if (origins.empty()) return ordered_json::array();
  std::vector<std::string> order;
  std::map<std::string, sim::Core::OpTotals> by_layer;
  for (const runtime::Origin& o : origins) {
    if (!by_layer.count(o.module)) order.push_back(o.module);
    by_layer[o.module];
  }
  for (const auto& [id, t] : session.origin_totals()) {
    by_layer[origins.at(static_cast<size_t>(id)).module] += t;
  }
  ordered_json out = ordered_json::array();
  for (const std::string& layer : order) {
    const sim::Core::OpTotals& r = by_layer.at(layer);
    out.push_back({{"layer", layer},
                   {"nodes", r.nodes},
                   {"instructions", r.instructions},
                   {"exposed_ns", r.exposed_ns},
                   {"busy_ns", sim::busy_ns_json(r.busy)},
                   {"dma_bytes", r.dma_bytes},
                   {"macs", r.macs}});
  }
  return out;
}

double stat_value(const traces::StatsRegistry& stats, const std::string& name) {
  if (const auto* v = stats.find_as<traces::Value>(name)) return v->as_double();
  if (const auto* c = stats.find_as<traces::Counter>(name)) return double(c->value());
  return 0.0;
}

// The device's figures over the time it was busy (the union of every launch's span, copies
// included), next to device.*'s, which divide by the whole run (compile stalls and host time
// included); the part of the busy time whose critical path is in no op (copies), so that with
// ops[].exposed_ns it sums to busy_ns; and the plans launched, copies named apart from the plans
// compiled from ops.
ordered_json device_busy_section(sim::Core& device, const runtime::Session& session,
                                 const traces::StatsRegistry& stats, const std::string& scope) {
  device.retire_drained();
  const int64_t copies = session.totals().transfers;  // each a copy_ plan launch
  const double busy_ns = device.launch_busy_time().to_seconds() * 1e9;
  const double time_ns = stat_value(stats, "device.time_ns");
  const std::string d = scope + ".";
  const auto over_busy = [&](double ns) { return busy_ns > 0 ? ns / busy_ns : 0.0; };
  ordered_json engines = ordered_json::object();
  for (const char* e : {"tensor", "vector", "scalar"}) {
    const std::string prefix = d + "engines." + e;
    engines[e]["utilization"] = over_busy(stat_value(stats, prefix + ".busy_ns"));
  }
  // peak_fraction divides the MACs by what the array could do in device.time_ns.
  engines["tensor"]["peak_fraction"] =
      over_busy(stat_value(stats, d + "engines.tensor.peak_fraction") * time_ns);
  const double hbm_bytes =
      stat_value(stats, d + "hbm.read_bytes") + stat_value(stats, d + "hbm.write_bytes");
  const int64_t plans = static_cast<int64_t>(stat_value(stats, d + "plans_launched"));
  return {{"busy_ns", busy_ns},
          {"exposed_outside_ops_ns", device.critical_time_outside_ops().to_seconds() * 1e9},
          {"busy_fraction", time_ns > 0 ? busy_ns / time_ns : 0.0},
          {"engines", engines},
          {"hbm_achieved_gb_per_s", busy_ns > 0 ? hbm_bytes / busy_ns : 0.0},
          {"bound_fraction", over_busy(stat_value(stats, d + "bound.ns"))},
          {"plans_launched", {{"compiled", plans - copies}, {"copies", copies}}}};
}

// stats.txt after the device stats: the run report's sections (host breakdown, steps, per-op
// table, serving figures), and each host state's share of the steps' wall time; the steps
// (and their place in stats.json) from `steps`.
void append_report_text(const traces::RunDirectory& dir, const ordered_json& report,
                        StepStream& steps) {
  ordered_json sections;
  const ordered_json& totals = report.at("totals");
  const double wall = totals.value("wall_ns", 0.0);
  ordered_json share = ordered_json::object();
  for (const auto& [k, v] : totals.items()) {
    const bool host_state =
        k.size() > 3 && k.compare(k.size() - 3, 3, "_ns") == 0 && k != "wall_ns" && k != "idle_ns";
    if (host_state && wall > 0) share[k.substr(0, k.size() - 3)] = v.get<double>() / wall;
  }
  sections["share_of_step_wall"] = share;  // host states sum to 1; device_busy overlaps
  for (const auto& [k, v] : report.items()) sections[k] = v;
  steps.finish(dir.file("stats.json"), dir.file("stats.txt"), sections);
}

// The Chakra export of every rank (options.chakra_dir), recording each core's launches as they
// retire, and ASTRA-sim's configs for the run's system.
std::unique_ptr<chakra::Exporter> start_chakra(const traces::RunDirectory& out,
                                               const runtime::Config& config,
                                               const sim::SystemConfig& system_config,
                                               const workloads::WorkloadSpec& spec,
                                               const RunOptions& options,
                                               const std::optional<runtime::ProcessGroup>& group,
                                               const std::vector<runtime::Session*>& sessions) {
  const std::string dir = std::filesystem::path(out.file("chakra.json")).parent_path().string();
  const sim::SystemConfig& system = group ? system_config : config.system;
  chakra::ExportInfo info;
  info.name = spec.name;
  info.workload = spec.text;
  info.mode = std::string(options.mode->name());
  info.world = static_cast<int64_t>(sessions.size());
  std::map<std::pair<int, int>, int64_t> ranks;
  for (size_t r = 0; r < sessions.size(); ++r) {
    const runtime::RankContext& c = sessions[r]->rank();
    ranks[{static_cast<int>(c.chip), static_cast<int>(c.core)}] = static_cast<int64_t>(r);
  }
  info.rank_of = [ranks](int chip, int core) {
    const auto it = ranks.find({chip, core});
    return it == ranks.end() ? int64_t{-1} : it->second;
  };
  info.dims = chakra::network_dims(system, config.chip, info.world);
  chakra::write_astra_configs(dir, info.name, system, config.chip, info.dims, info.world);
  auto exporter = std::make_unique<chakra::Exporter>(dir, std::move(info));
  for (size_t r = 0; r < sessions.size(); ++r) {
    chakra::Exporter* e = exporter.get();
    const auto rank = static_cast<int64_t>(r);
    sessions[r]->device_core().on_retire(
        [e, rank](const engines::Launch& l) { e->record(rank, l); });
  }
  return exporter;
}

// Retires every rank's last launches into the export and closes its files.
void finish_chakra(chakra::Exporter& exporter, const std::vector<runtime::Session*>& sessions) {
  for (runtime::Session* s : sessions) s->device_core().retire_drained();
  exporter.finish();
  for (runtime::Session* s : sessions) s->device_core().on_retire(nullptr);
}

// What the tuning cache (compiler.tune.cache) answered the run's compiles, every rank's summed;
// nothing when the run names no cache. A run only reuses the cache: a miss takes the model's pick.
// `copies`: how many ranks each simulated session stands for (a folded run with a private
// cache: every rank compiles what rank 0 does).
void write_tuning_stats(traces::StatsRegistry& stats,
                        const std::vector<runtime::Session*>& sessions, int64_t copies) {
  runtime::TuningStats sum;
  bool any = false;
  for (const runtime::Session* s : sessions) {
    if (const runtime::TuningStats* t = s->tuning_stats()) {
      any = true;
      sum.queries += copies * t->queries;
      sum.hits += copies * t->hits;
      sum.misses += copies * t->misses;
      sum.changed += copies * t->changed;
    }
  }
  if (!any) return;
  traces::StatsScope scope(stats, "compiler.tuning");
  const auto count = [&](const char* name, int64_t v, const char* doc) {
    scope.add_counter(name, "", doc) += static_cast<uint64_t>(v);
  };
  count("queries", sum.queries, "tunable matmuls compiled (each compile of one counts)");
  count("hits", sum.hits, "of those, answered by the tuning cache");
  count("misses", sum.misses, "of those, not in the cache: the cost model's pick");
  count("changed", sum.changed, "of the hits, a point other than the cost model's pick");
}

}  // namespace

std::optional<std::string> large_trace_warning(const std::string& path, engines::TraceLevel level) {
  std::error_code ec;
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec || bytes <= kLargeTraceBytes) return std::nullopt;
  const char* lower =
      level == engines::TraceLevel::instructions ? "--trace-level plans, " : "--trace-level none, ";
  return "wallsim: warning: trace.json is " + std::to_string(bytes >> 20) +
         " MiB, more than a trace viewer opens comfortably; keep it smaller with " + lower +
         "--trace-window FROM_NS:TO_NS or fewer steps "
         "(--instruction-csv logs every instruction without a trace)";
}

RunSummary run_workload(const runtime::Config& config, const base::Json& resolved_config,
                        const workloads::WorkloadSpec& spec, const RunOptions& options,
                        const std::string& out_dir) {
  sim::init_systemc();
  const auto wall_start_progress = std::chrono::steady_clock::now();
  std::unique_ptr<workloads::Workload> workload = workloads::make_workload(spec);
  if (options.steps && workload->fixed_steps()) {
    throw base::InputError("--steps", spec.name + " fixes its own steps");
  }
  const int64_t steps = options.steps.value_or(workload->default_steps());
  // A distributed run (tp=, dp= above 1): one rank per core of the system, each with its own
  // workload, session and host thread.
  const runtime::ParallelSizes sizes = workload->parallel();
  const int64_t world = sizes.world();
  std::optional<runtime::ProcessGroup> group;
  sim::SystemConfig system_config;
  if (world > 1) {
    system_config = system_for_ranks(config.system, world);
    group.emplace(sizes, system_config.chips(), system_config.chip.cores,
                  "--workload " + spec.text);
  }
  // Which ranks are one SPMD class, and whether the run folds them: then only rank 0 is
  // simulated (its workload, session and host thread), standing for every rank.
  runtime::FoldDecision fold;
  FoldPlan fold_plan;
  if (group) {
    runtime::FoldFacts facts;
    facts.functional = options.functional;
    facts.chakra = !options.chakra_dir.empty();
    facts.workload_asymmetry = workload->rank_asymmetry();
    facts.background_shared_compiles =
        config.runtime.compile_in_background && config.runtime.shared_compile_cache;
    fold = runtime::decide_fold(*group, system_config, facts);
    fold_plan = plan_fold(options.fold, fold, *group);
  }
  std::unique_ptr<traces::RunDirectory> dir = sim::open_run_directory(out_dir);
  std::unique_ptr<traces::RunDirectory> chakra_dir;
  if (!options.chakra_dir.empty()) {
    try {
      chakra_dir = std::make_unique<traces::RunDirectory>(options.chakra_dir);
    } catch (const std::runtime_error& e) {
      throw base::InputError("--chakra", e.what());
    }
  }
  traces::StatsRegistry stats;
  sim::DeviceTimeStats device_time(stats, config.chip);

  sim::RunTrace run_trace(*dir, options.trace_level, options.trace_window_ns, config.chip.name);
  traces::TraceSink* trace = run_trace.sink();
  if (trace) {
    trace->set_metadata("workload", spec.text);
    trace->set_metadata("mode", std::string(options.mode->family()));
  }
  sim::CoreOptions dev;
  dev.functional = options.functional;
  dev.stats = &stats;
  std::unique_ptr<traces::CsvLog> csv;
  if (options.instruction_csv) {
    csv = std::make_unique<traces::CsvLog>(dir->file("instructions.csv"),
                                           traces::instruction_csv_columns());
  }
  dev.trace = trace;
  dev.trace_level = options.trace_level;
  dev.instruction_log = csv.get();
  std::unique_ptr<sim::System> system_owned =
      group ? std::make_unique<sim::System>(config.chip, system_config, dev)
            : std::make_unique<sim::System>(config.chip, dev);
  sim::System& system = *system_owned;
  if (fold_plan.folded) {
    try {
      system.fold(static_cast<int>(world), world_communicators(*group));
    } catch (const std::invalid_argument& e) {
      // A communicator the simulator cannot fold (CollectiveEngine::set_fold; it leaves the
      // system unfolded): every rank is simulated, and the report says why.
      fold_plan.folded = false;
      fold_plan.why_unfolded = e.what();
    }
    if (fold_plan.folded && options.fold_test_unbalance)
      unbalance_chip_for_test(system, *options.fold_test_unbalance);
  }
  const bool folded = fold_plan.folded;
  const int64_t simulated = fold_plan.simulated_ranks();
  std::vector<std::unique_ptr<workloads::Workload>> rank_workloads;
  for (int64_t r = 1; r < simulated; ++r) rank_workloads.push_back(workloads::make_workload(spec));
  const runtime::RankContext rank0 = group ? group->context(0) : runtime::RankContext{};
  sim::Core& device = system.core(static_cast<size_t>(rank0.chip), static_cast<size_t>(rank0.core));
  const std::string device_scope =
      group ? "chip" + std::to_string(rank0.chip) + ".core" + std::to_string(rank0.core)
            : std::string("device");

  runtime::SessionOptions so;
  so.mode = options.mode;
  so.functional = options.functional;
  so.plan_memory_bytes = options.plan_memory_bytes;
  // Each step's record goes to the spool as it finishes: memory does not grow with the steps.
  so.keep_steps = false;
  so.memory_check = options.memory_check;
  StepStream step_stream(dir->file(".steps.jsonl"));
  std::vector<RankSums> rank_sums(static_cast<size_t>(world));
  auto last_progress = std::chrono::steady_clock::now();
  so.on_step_end = [&](const runtime::StepRecord& r) {
    step_stream.add(r, workload->step_kind(r.index));
    if (group) rank_sums[0].add(r);
    if (options.progress_seconds > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(now - last_progress).count() < options.progress_seconds)
        return;
      last_progress = now;
      std::cerr << "wallsim: run: step " << r.index + 1;
      if (!workload->fixed_steps()) std::cerr << "/" << steps;  // decode, serve: their own
      std::cerr << " done, " << (r.start_ns + r.wall_ns) / 1e6 << " ms simulated, "
                << std::chrono::duration<double>(now - wall_start_progress).count() << " s real\n";
    }
  };
  std::shared_ptr<runtime::SharedPlans> shared_plans;
  if (group && config.runtime.shared_compile_cache)
    shared_plans = std::make_shared<runtime::SharedPlans>();
  // Rank r's options: its place, communicators, tensor names and host trace process.
  auto rank_options = [&](runtime::SessionOptions o, int64_t r) {
    o.rank = group->context(r);
    o.shared_plans = shared_plans;
    o.collectives = system.collectives();
    o.name_prefix = "r" + std::to_string(r) + "_";
    o.trace_pid = 1000000 + static_cast<int>(r);
    o.trace_process = "rank" + std::to_string(r) + ".host (chip" + std::to_string(o.rank.chip) +
                      ".core" + std::to_string(o.rank.core) + ")";
    return o;
  };
  runtime::Session session(config, device, group ? rank_options(so, 0) : so, trace);
  std::vector<std::unique_ptr<runtime::Session>> rank_sessions;
  for (int64_t r = 1; r < simulated; ++r) {
    runtime::SessionOptions o = so;
    RankSums* sums = &rank_sums[static_cast<size_t>(r)];
    o.on_step_end = [sums](const runtime::StepRecord& rec) { sums->add(rec); };
    o = rank_options(o, r);
    rank_sessions.push_back(std::make_unique<runtime::Session>(
        config, system.core(static_cast<size_t>(o.rank.chip), static_cast<size_t>(o.rank.core)), o,
        trace));
  }
  std::vector<runtime::Session*> sessions = {&session};
  std::vector<workloads::Workload*> rank_workload = {workload.get()};
  for (auto& s : rank_sessions) sessions.push_back(s.get());
  for (auto& w : rank_workloads) rank_workload.push_back(w.get());
  if (group) {  // folded: rank 0's workload stands for every rank's
    std::vector<workloads::Workload*> all = rank_workload;
    if (folded) all.assign(static_cast<size_t>(world), workload.get());
    for (workloads::Workload* w : rank_workload) w->join(all);
  }

  std::unique_ptr<chakra::Exporter> chakra_export;
  if (chakra_dir) {
    chakra_export =
        start_chakra(*chakra_dir, config, system_config, spec, options, group, sessions);
  }
  const auto wall_start = std::chrono::steady_clock::now();
  std::vector<runtime::HostRank> hosts;
  for (size_t r = 0; r < sessions.size(); ++r) {
    runtime::Session& s = *sessions[r];
    workloads::Workload& w = *rank_workload[r];
    hosts.push_back({&s.device_core(), [&s, &w, steps] {
                       w.setup(s);
                       s.startup(w.buckets(s), [&](int64_t bucket) { w.trace(s, bucket); });
                       w.run(s, steps);
                     }});
  }
  try {
    runtime::run_hosts(hosts);
  } catch (...) {
    // A mirror chip that fell out of step stops the run at its next transfer: say what broke.
    if (folded) check_fold_exact(system);
    throw;
  }
  if (folded) check_fold_exact(system);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  sc_core::sc_time end = device.end_time();
  if (group) {
    system.finalize();
    for (runtime::Session* s : sessions) end = std::max(end, s->device_core().end_time());
    if (folded) copy_folded_core_stats(stats, *group);
  } else {
    device.finalize();
  }
  for (runtime::Session* s : sessions) s->finish_trace();
  device_time.set(end);
  if (chakra_export) finish_chakra(*chakra_export, sessions);

  // The report: the compilation wall per step.
  RunReport report;
  report.workload_name = spec.name;
  report.workload_spec = spec.text;
  for (const auto& [k, v] : workload->params()) report.workload_params[k] = v;
  report.mode = std::string(options.mode->name());
  report.compile_profile = std::string(compiler_stub::name_of(config.runtime.compile_cost.profile));
  report.startup = session.startup_record();
  RunTotals& tot = report.totals;
  tot.wall_ns = step_stream.wall_ns;
  for (int k = 0; k < kNumHostStates; ++k) tot.host_ns[k] = step_stream.host_ns[k];
  tot.device_busy_ns = step_stream.device_busy_ns;
  tot.counts = step_stream.counts;
  const double padded = step_stream.padded_macs, real = step_stream.real_macs;
  tot.idle_ns = session.idle_ns();
  const double waste = padded > 0 ? std::max(0.0, (padded - real) / padded) : 0.0;
  const bool masked = workload->masks_instead_of_padding();
  tot.padding_flop_fraction = masked ? 0.0 : waste;
  tot.masked_flop_fraction = masked ? waste : 0.0;
  tot.hbm_read_bytes = stats.find_as<traces::Counter>(device_scope + ".hbm.read_bytes")->value();
  tot.hbm_write_bytes = stats.find_as<traces::Counter>(device_scope + ".hbm.write_bytes")->value();
  report.ops = op_table(device, session, config.chip);
  report.device_busy = device_busy_section(device, session, stats, device_scope);
  report.layers = layer_table(session);
  report.compile_metrics = compile_metrics_json(session, step_stream.device_busy_ns);
  std::optional<std::pair<std::string, nlohmann::ordered_json>> own = workload->report();
  if (group && (sizes.dp > 1 || sizes.pp > 1)) {  // the whole run's, from each replica's last stage
    std::vector<const workloads::Workload*> replicas;
    for (int64_t d = 0; d < sizes.dp; ++d) {
      const int64_t r = sizes.rank_of(0, sizes.pp - 1, d);
      replicas.push_back(r == 0 || folded ? workload.get()
                                          : rank_workloads[static_cast<size_t>(r - 1)].get());
    }
    if (auto whole = workload->replicas_report(replicas)) own = whole;
  }
  if (own) {
    report.workload_section = own->first;
    report.workload_report = own->second;
  }
  ordered_json extra = report.to_json(step_stream.wall_times());
  if (group) {
    std::vector<RankFigures> figures;
    if (folded) {  // every rank reports rank 0's figures under its own identity
      const RankFigures first = rank_figures(session, rank_sums[0]);
      for (int64_t r = 0; r < world; ++r) {
        RankFigures f = first;
        f.rank = group->context(r);
        if (r > 0 && shared_plans) {
          f.startup = as_shared_cache_hits(f.startup);
          f.sums.sum = as_shared_cache_hits(f.sums.sum);
        }
        figures.push_back(std::move(f));
      }
    } else {
      for (size_t r = 0; r < sessions.size(); ++r)
        figures.push_back(rank_figures(*sessions[r], rank_sums[r]));
    }
    extra["distributed"] =
        distributed_section(*group, figures, system, shared_plans != nullptr, fold, fold_plan);
  }
  double compiler_seconds = 0;
  int64_t bodies_rebuilt = 0;
  for (runtime::Session* s : sessions) {
    compiler_seconds += s->compiler_seconds();
    bodies_rebuilt += s->bodies_rebuilt();
  }
  write_tuning_stats(stats, sessions, folded && !shared_plans ? world : 1);
  traces::StatsScope measured(stats, "measured");
  measured.add_value("sim_wall_seconds", "s", "real time the run took (varies run to run)")
      .set(wall);
  measured
      .add_value("compiler_stub_seconds", "s",
                 "real time compiler_stub spent compiling (not the modelled latency)")
      .set(compiler_seconds);
  measured.add_counter(
      "plans_rebuilt", "",
      "plan bodies rebuilt after --plan-memory dropped them (simulator, not model)") +=
      static_cast<uint64_t>(bodies_rebuilt);
  // Each core's lazily registered stats (first used in SystemC's run order) next to its others.
  if (group) stats.group_scopes(2);
  sim::write_run_files(*dir, stats, extra, resolved_config);
  append_report_text(*dir, extra, step_stream);
  if (trace) {
    trace->finish();
    if (auto warning = large_trace_warning(dir->file("trace.json"), options.trace_level))
      std::cerr << *warning << "\n";
  }
  if (csv) csv->finish();
  dir->commit();
  if (chakra_dir) chakra_dir->commit();
  if (const auto& f = session.fallback_log(); !f.empty()) {
    std::cerr << "wallsim: run: " << f.size() << " group(s) failed to compile and fell back ("
              << f.front().policy << "); the first: " << f.front().reason
              << " (stats.json compile_metrics.fallbacks lists them)\n";
  }
  const runtime::Counts totals = session.totals();
  RunSummary r;
  r.wall_ns = session.now_ns();  // every rank's host thread ends at the same simulated time
  r.steps = step_stream.steps();
  r.totals = totals;
  r.sim_wall_seconds = wall;
  return r;
}

}  // namespace wallsim::driver
