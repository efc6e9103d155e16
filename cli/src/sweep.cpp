// Sweep specs, point identity, key figures and the results file.
#include "sweep.h"

#include "cli_util.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "wallsim/base/json_object.h"
#include "wallsim/driver/run_report.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/session.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::cli {

namespace {

namespace fs = std::filesystem;
using base::InputError;
using base::Json;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// One axis: a config path and its values.
struct Axis {
  std::string path;
  std::vector<Json> values;
};

Axis read_axis(const std::string& key, const Json& values, const std::string& where) {
  if (!values.is_array() || values.empty()) {
    throw InputError(where, "expected a non-empty list of values for config path '" + key + "'");
  }
  return {key, std::vector<Json>(values.begin(), values.end())};
}

}  // namespace

SweepSpec read_sweep(const std::string& file) {
  const Json j = base::read_json_file(file);
  base::JsonObject o(j, file);
  SweepSpec spec;
  spec.file = file;
  spec.base_config = o.str("base_config");
  const std::vector<std::string> workloads = string_list(o.req("workloads"), o.at("workloads"));
  const std::vector<std::string> modes = string_list(o.req("modes"), o.at("modes"));
  for (size_t i = 0; i < modes.size(); ++i) {
    runtime::mode_named(modes[i], o.at("modes") + "[" + std::to_string(i) + "]");
  }
  const int64_t steps = o.integer_or("steps", 1, 1000000, 0);  // 0: the workload's default
  const bool functional = o.boolean_or("functional", false);
  const int64_t seed = o.integer_or("seed", 0, int64_t{1} << 53, -1);
  spec.timeout_s = static_cast<double>(o.integer_or("timeout_s", 1, 7 * 24 * 3600, 3600));
  const std::string trace_level = o.opt("trace_level") ? o.str("trace_level") : "none";
  if (trace_level != "none" && trace_level != "plans" && trace_level != "instructions") {
    throw InputError(o.at("trace_level"), "expected none, plans or instructions");
  }
  // Axes: a grid over `axes`, times each zipped group (its lists advance together).
  std::vector<std::vector<std::vector<std::pair<std::string, Json>>>> factors;
  std::map<std::string, std::string> axis_at;  // config path -> where it is an axis
  auto claim = [&](const std::string& key, const std::string& where) {
    auto [it, fresh] = axis_at.emplace(key, where);
    if (!fresh) {
      throw InputError(where, "config path '" + key + "' is already an axis at " + it->second +
                                  "; name each path once");
    }
  };
  if (const Json* axes = o.opt("axes")) {
    base::JsonObject ax(*axes, o.at("axes"));
    for (const auto& [key, values] : axes->items()) {
      if (!key.empty() && key[0] == '_') continue;
      const Axis a = read_axis(key, values, ax.at(key));
      claim(key, ax.at(key));
      std::vector<std::vector<std::pair<std::string, Json>>> f;
      for (const Json& v : a.values) f.push_back({{a.path, v}});
      factors.push_back(f);
    }
  }
  if (const Json* zip = o.opt("zip")) {
    if (!zip->is_array()) throw InputError(o.at("zip"), "expected a list of groups");
    for (size_t g = 0; g < zip->size(); ++g) {
      const std::string where = o.at("zip") + "[" + std::to_string(g) + "]";
      if (!(*zip)[g].is_object() || (*zip)[g].empty())
        throw InputError(where, "expected an object of config path -> values");
      std::vector<Axis> group;
      for (const auto& [key, values] : (*zip)[g].items()) {
        group.push_back(read_axis(key, values, where + "." + key));
        claim(key, where + "." + key);
        if (group.back().values.size() != group.front().values.size()) {
          throw InputError(where + "." + key,
                           "has " + std::to_string(group.back().values.size()) +
                               " values; a zipped group's lists must have equal lengths (" +
                               group.front().path + " has " +
                               std::to_string(group.front().values.size()) + ")");
        }
      }
      std::vector<std::vector<std::pair<std::string, Json>>> f(group.front().values.size());
      for (const Axis& a : group) {
        for (size_t i = 0; i < a.values.size(); ++i) f[i].push_back({a.path, a.values[i]});
      }
      factors.push_back(f);
    }
  }
  o.finish();

  // Workloads are checked once (parameters, and whether --steps applies).
  std::map<std::string, bool> fixed_steps;
  for (size_t i = 0; i < workloads.size(); ++i) {
    try {
      fixed_steps[workloads[i]] =
          workloads::make_workload(workloads::parse_spec(workloads[i]))->fixed_steps();
    } catch (const InputError& e) {
      throw InputError(o.at("workloads") + "[" + std::to_string(i) + "]", e.what());
    }
  }
  // The size first: each point loads its config, so a grid too large to hold is refused before.
  uint64_t total = workloads.size() * modes.size();
  for (const auto& f : factors) {
    if (__builtin_mul_overflow(total, f.size(), &total)) total = UINT64_MAX;
  }
  if (total > kMaxSweepPoints) {
    throw InputError(
        file, "the sweep has " +
                  (total == UINT64_MAX ? std::string("more than 2^64") : std::to_string(total)) +
                  " points, more than the limit of " + std::to_string(kMaxSweepPoints) +
                  "; split it into several specs");
  }
  // The grid, in order: the first axis varies slowest.
  std::vector<std::vector<std::pair<std::string, Json>>> combos = {{}};
  for (const auto& f : factors) {
    std::vector<std::vector<std::pair<std::string, Json>>> next;
    for (const auto& c : combos) {
      for (const auto& choice : f) {
        auto n = c;
        n.insert(n.end(), choice.begin(), choice.end());
        next.push_back(n);
      }
    }
    combos = next;
  }
  for (const auto& combo : combos) {
    std::vector<std::string> overrides;
    for (const auto& [path, value] : combo) overrides.push_back(path + "=" + value.dump());
    if (seed >= 0) overrides.push_back("runtime.seed=" + std::to_string(seed));
    std::string resolved;
    try {
      resolved = runtime::to_json(runtime::load_config(spec.base_config, overrides)).dump();
    } catch (const InputError& e) {
      std::string where;
      for (const auto& [path, value] : combo) {
        where += (where.empty() ? "" : ", ") + path + "=" + value.dump();
      }
      throw InputError(file, "the point " + (where.empty() ? "(base)" : where) +
                                 " has a bad config: " + e.what());
    }
    for (const auto& workload : workloads) {
      for (const auto& mode : modes) {
        SweepPoint p;
        p.index = static_cast<int64_t>(spec.points.size());
        p.axes = combo;
        p.workload = workload;
        p.mode = mode;
        p.overrides = overrides;
        const bool use_steps = steps > 0 && !fixed_steps.at(workload);
        p.id = hex16(fnv1a(resolved + "\n" + workload + "\n" + mode + "\n" +
                           (use_steps ? std::to_string(steps) : "-") + "\n" +
                           (functional ? "functional" : "timing")));
        p.run_args = {"wallsim", "run",    "--config", spec.base_config, "--workload",
                      workload,  "--mode", mode,       "--trace-level",  trace_level};
        for (const auto& s : overrides) {
          p.run_args.push_back("--set");
          p.run_args.push_back(s);
        }
        if (use_steps) {
          p.run_args.push_back("--steps");
          p.run_args.push_back(std::to_string(steps));
        }
        if (functional) p.run_args.push_back("--functional");
        spec.points.push_back(p);
      }
    }
  }
  return spec;
}

base::Json key_figures(const std::string& run_dir) {
  return key_figures(driver::RunReport::read(run_dir),
                     base::read_json_file(run_dir + "/config.resolved.json"));
}

base::Json key_figures(const driver::RunReport& r, const base::Json& c) {
  const driver::RunTotals& t = r.totals;
  Json f = Json::object();
  f["total_ns"] = r.total_ns();
  f["startup_ns"] = r.startup_ns();
  f["steps"] = r.steps.size();
  f["steps_ns"] = t.wall_ns;
  f["cold_ns"] = r.cold_ns();
  f["warm_ns"] = r.warm_ns();
  for (int k = 0; k < runtime::kNumHostStates; ++k) {
    const auto state = static_cast<runtime::HostState>(k);
    if (!runtime::host_state_always_shown(state)) continue;  // a column of its own: not yet
    f[std::string(runtime::name_of(state)) + "_ns"] = t.host_ns[k];
  }
  f["device_busy_ns"] = t.device_busy_ns;
  f["idle_ns"] = t.idle_ns;
  f["compiles"] = t.counts.compiles;
  f["recompiles"] = t.counts.recompiles;
  f["compile_failures"] = t.counts.compile_failures;
  f["fallbacks"] = t.counts.fallbacks;
  f["cache_hits"] = t.counts.cache_hits;
  f["plans_launched"] = t.counts.plans_launched;
  f["padding_flop_fraction"] = t.padding_flop_fraction;
  f["masked_flop_fraction"] = t.masked_flop_fraction;
  f["hbm_read_bytes"] = t.hbm_read_bytes;
  f["hbm_write_bytes"] = t.hbm_write_bytes;
  f["startup_compiles"] = r.startup.counts.compiles;
  f["macs"] = r.macs();
  // The ops with MACs, from the op table: their DMA bytes and time (no host copies), so a
  // roofline point is 2 x macs / compute_dma_bytes against 2 x macs / compute_time_ns.
  double compute_bytes = 0, compute_ns = 0;
  for (const Json& op : r.ops) {
    if (op.value("macs", 0.0) <= 0) continue;
    compute_bytes += op.value("dma_bytes", 0.0);
    compute_ns += op.value("time_ns", 0.0);
  }
  f["compute_dma_bytes"] = compute_bytes;
  f["compute_time_ns"] = compute_ns;
  // Over the device's busy time (device_busy.*), not the run's span (device.*), which includes
  // modelled compile time and host gaps and so is near zero in every compiling mode.
  const Json& dev = r.device;
  const Json& busy = r.device_busy;
  if (busy.contains("engines") && busy["engines"].contains("tensor") &&
      busy["engines"]["tensor"].contains("peak_fraction")) {
    f["tensor_peak_fraction"] = busy["engines"]["tensor"]["peak_fraction"];
  }
  if (dev.contains("bound")) {
    f["bound_resource"] = dev["bound"].at("resource");
    if (busy.contains("bound_fraction")) f["bound_fraction"] = busy["bound_fraction"];
  }
  // The roofline's roof, from the point's own config.
  const Json& arch = c.at("arch");
  const Json& timing = c.at("timing");
  f["peak_tflops"] = sim::peak_tensor_flops(arch.at("tensor").at("rows").get<double>(),
                                            arch.at("tensor").at("cols").get<double>(),
                                            timing.at("tensor").at("freq_mhz").get<double>()) /
                     1e12;
  f["hbm_gb_per_s"] = timing.at("hbm").at("bandwidth_gb_per_s");
  if (dev.contains("host_link")) f["host_link_bytes"] = dev["host_link"].at("bytes");
  if (r.workload_section == "serving") {
    const Json& sv = r.workload_report;
    f["throughput_tokens_per_s"] = sv.at("throughput_tokens_per_s");
    for (const auto& [k, v] : sv.at("latency").items()) f[k] = v;
    f["kv_mean_utilization"] = sv.at("kv").at("mean_utilization");
    f["preemptions"] = sv.at("kv").at("preemptions");
    f["kv_peak_blocks"] = sv.at("kv").at("peak_blocks");
    f["kv_pool_blocks"] = sv.at("kv").at("pool_blocks");
    f["kv_peak_occupancy"] = sv.at("kv").at("peak_occupancy");
    f["mean_decode_batch"] = sv.at("iterations").at("mean_decode_batch");
  }
  // Padded (or masked) work by source: the run's measured fraction split by the workload's own
  // shares (serve, decode).
  if (r.workload_report.is_object() && r.workload_report.contains("padding_by_source")) {
    const Json& p = r.workload_report["padding_by_source"];
    const double waste = t.padding_flop_fraction + t.masked_flop_fraction;
    for (const char* k : {"batch", "prompt", "keys"}) {
      f[std::string("padding_") + k + "_fraction"] =
          waste * p.at(std::string(k) + "_share").get<double>();
    }
  }
  return f;
}

std::vector<std::string> figure_names() {
  std::vector<std::string> n = {"total_ns", "startup_ns", "steps",
                                "steps_ns", "cold_ns",    "warm_ns"};
  for (int k = 0; k < runtime::kNumHostStates; ++k) {
    const auto state = static_cast<runtime::HostState>(k);
    if (runtime::host_state_always_shown(state)) n.push_back(std::string(name_of(state)) + "_ns");
  }
  for (const char* k : {"device_busy_ns",
                        "idle_ns",
                        "compiles",
                        "recompiles",
                        "compile_failures",
                        "fallbacks",
                        "cache_hits",
                        "plans_launched",
                        "padding_flop_fraction",
                        "masked_flop_fraction",
                        "hbm_read_bytes",
                        "hbm_write_bytes",
                        "startup_compiles",
                        "macs",
                        "compute_dma_bytes",
                        "compute_time_ns",
                        "tensor_peak_fraction",
                        "bound_resource",
                        "bound_fraction",
                        "peak_tflops",
                        "hbm_gb_per_s",
                        "host_link_bytes",
                        "throughput_tokens_per_s",
                        "kv_mean_utilization",
                        "preemptions",
                        "kv_peak_blocks",
                        "kv_pool_blocks",
                        "kv_peak_occupancy",
                        "mean_decode_batch",
                        "padding_batch_fraction",
                        "padding_prompt_fraction",
                        "padding_keys_fraction"}) {
    n.push_back(k);
  }
  for (const char* l : {"ttft", "per_token", "latency"}) {
    n.push_back(std::string(l) + "_p50_ns");
    n.push_back(std::string(l) + "_p99_ns");
  }
  return n;
}

namespace {

// A result as the sweep writes it: a 16-digit hex id, an integer index in [0, 2^40], a status
// string. Anything else (a torn line, a forged one) is not a result.
bool is_result(const Json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string()) return false;
  const std::string id = j["id"].get<std::string>();
  if (id.size() != 16 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  const Json* index = j.contains("index") ? &j["index"] : nullptr;
  if (!index || !index->is_number_integer() || index->get<int64_t>() < 0 ||
      index->get<int64_t>() > (int64_t{1} << 40))
    return false;
  return j.contains("status") && j["status"].is_string();
}

}  // namespace

std::vector<base::Json> read_results(const std::string& dir) {
  std::map<std::string, Json> latest;
  auto take = [&](const std::string& line) {
    try {
      Json j = Json::parse(line);
      if (is_result(j)) latest[j["id"].get<std::string>()] = j;
    } catch (const std::exception&) {
      // a torn line (the sweep was killed while writing): ignored
    }
  };
  std::ifstream in(dir + "/results.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) take(line);
  }
  std::error_code ec;
  std::vector<std::string> singles;
  for (fs::directory_iterator it(dir + "/points", ec), end; !ec && it != end; it.increment(ec)) {
    if (fs::exists(it->path() / "result.json")) singles.push_back(it->path() / "result.json");
  }
  std::sort(singles.begin(), singles.end());
  for (const auto& path : singles) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    const Json j = [&] {
      try {
        return Json::parse(ss.str());
      } catch (const std::exception&) {
        return Json();
      }
    }();
    if (!is_result(j)) continue;
    auto it = latest.find(j["id"].get<std::string>());
    // A single-point result counts unless the sweep's own line is an ok one.
    if (it == latest.end() || it->second.value("status", "") != "ok") latest[j["id"]] = j;
  }
  std::vector<Json> out;
  for (auto& [id, j] : latest) out.push_back(std::move(j));
  std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    return a.value("index", int64_t{0}) < b.value("index", int64_t{0});
  });
  return out;
}

}  // namespace wallsim::cli
