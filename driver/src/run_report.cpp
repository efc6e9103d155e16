// The run report's JSON mapping and key figures.
#include "wallsim/driver/run_report.h"

#include <cmath>
#include <fstream>

#include "wallsim/driver/step_stream.h"
#include "wallsim/traces/stats.h"

namespace wallsim::driver {
namespace {

using base::Json;
using runtime::Counts;
using runtime::HostState;
using runtime::Shown;
using runtime::StepRecord;

const Json& at(const Json& j, const char* key, const std::string& path) {
  if (!j.is_object() || !j.contains(key))
    throw base::InputError(path, "missing \"" + std::string(key) + "\"");
  return j.at(key);
}

template <class T>
T get(const Json& j, const char* key, const std::string& path) {
  const Json& v = at(j, key, path);
  if (!v.is_number()) throw base::InputError(path + "." + key, "expected a number");
  return v.get<T>();
}

// Writes the figures of `x` (described in runtime/step_log.h) into `j`.
template <class T>
void put_figures(Json& j, const T& x) {
  T copy = x;
  runtime::for_each_figure(copy, [&](std::string_view k, int64_t& v, Shown shown) {
    if (shown == Shown::always || v != 0) j[std::string(k)] = v;
  });
}

// Reads them back: a figure shown only when nonzero may be absent.
template <class T>
void get_figures(const Json& j, T& x, const std::string& path) {
  runtime::for_each_figure(x, [&](std::string_view k, int64_t& v, Shown shown) {
    const std::string key(k);
    v = shown == Shown::when_nonzero && !j.contains(key) ? 0 : get<int64_t>(j, key.c_str(), path);
  });
}

Json record_json(const StepRecord& r) {
  Json j;
  if (r.index >= 0) j["index"] = r.index;
  put_figures(j, r);
  return j;
}

StepRecord record_from(const Json& j, const std::string& path) {
  StepRecord r;
  r.index = j.contains("index") ? get<int64_t>(j, "index", path) : -1;
  get_figures(j, r, path);
  return r;
}

}  // namespace

Json step_json(const StepRecord& r, const std::string& kind) {
  Json j = record_json(r);
  if (!kind.empty()) j["kind"] = kind;
  return j;
}

StepWallTimes RunReport::wall_times() const {
  StepWallTimes w;
  for (size_t i = 0; i < steps.size(); ++i) {
    w.add(step_kind(i), steps[i].wall_ns, steps[i].counts.compiles > 0);
  }
  return w;
}

Json RunReport::to_json() const { return to_json(wall_times()); }

Json RunReport::to_json(const StepWallTimes& walls) const {
  Json steps_json = Json::array();
  for (size_t i = 0; i < steps.size(); ++i) {
    steps_json.push_back(step_json(steps[i], i < step_kinds.size() ? step_kinds[i] : ""));
  }
  Json tot;
  tot["wall_ns"] = totals.wall_ns;
  put_figures(tot, totals.host_ns);
  tot["device_busy_ns"] = totals.device_busy_ns;
  tot["idle_ns"] = totals.idle_ns;
  put_figures(tot, totals.counts);
  tot["padding_flop_fraction"] = totals.padding_flop_fraction;
  tot["masked_flop_fraction"] = totals.masked_flop_fraction;
  tot["hbm_read_bytes"] = totals.hbm_read_bytes;
  tot["hbm_write_bytes"] = totals.hbm_write_bytes;
  Json j = {
      {"workload", {{"name", workload_name}, {"spec", workload_spec}, {"params", workload_params}}},
      {"mode", mode},
      {"compile_profile", compile_profile},
      {"startup", record_json(startup)},
      {"steps", steps_json},
      {"totals", tot},
      {"ops", ops},
      {"warm", walls.warm_json()}};
  if (!device_busy.empty()) j["device_busy"] = device_busy;
  if (!layers.empty()) j["layers"] = layers;
  if (!workload_section.empty()) j[workload_section] = workload_report;
  j["compile_metrics"] = compile_metrics;
  return j;
}

RunReport RunReport::from_json(const Json& s, const std::string& path) {
  RunReport r;
  const Json& w = at(s, "workload", path);
  r.workload_name = at(w, "name", path + ".workload").get<std::string>();
  r.workload_spec = at(w, "spec", path + ".workload").get<std::string>();
  r.workload_params = at(w, "params", path + ".workload");
  r.mode = at(s, "mode", path).get<std::string>();
  r.compile_profile = at(s, "compile_profile", path).get<std::string>();
  r.startup = record_from(at(s, "startup", path), path + ".startup");
  const Json& steps = at(s, "steps", path);
  for (size_t i = 0; i < steps.size(); ++i) {
    r.steps.push_back(record_from(steps[i], path + ".steps[" + std::to_string(i) + "]"));
    if (steps[i].contains("kind")) r.step_kinds.push_back(steps[i].at("kind").get<std::string>());
  }
  const Json& t = at(s, "totals", path);
  const std::string tp = path + ".totals";
  r.totals.wall_ns = get<int64_t>(t, "wall_ns", tp);
  get_figures(t, r.totals.host_ns, tp);
  r.totals.device_busy_ns = get<int64_t>(t, "device_busy_ns", tp);
  r.totals.idle_ns = get<int64_t>(t, "idle_ns", tp);
  get_figures(t, r.totals.counts, tp);
  r.totals.padding_flop_fraction = get<double>(t, "padding_flop_fraction", tp);
  r.totals.masked_flop_fraction = get<double>(t, "masked_flop_fraction", tp);
  r.totals.hbm_read_bytes = get<uint64_t>(t, "hbm_read_bytes", tp);
  r.totals.hbm_write_bytes = get<uint64_t>(t, "hbm_write_bytes", tp);
  r.ops = at(s, "ops", path);
  r.device = at(s, "device", path);
  if (s.contains("device_busy")) r.device_busy = s.at("device_busy");
  if (s.contains("compile_metrics")) r.compile_metrics = s.at("compile_metrics");
  if (s.contains("layers")) r.layers = s.at("layers");
  for (const char* section : {"serving", "decoding", "program"}) {
    if (s.contains(section)) {
      r.workload_section = section;
      r.workload_report = s.at(section);
    }
  }
  return r;
}

RunReport RunReport::read(const std::string& run_dir) {
  const std::string file = run_dir + "/stats.json";
  return from_json(base::read_json_file(file), file);
}

std::vector<size_t> RunReport::warm_steps(const std::string& kind) const {
  size_t first = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].counts.compiles > 0) first = i + 1;
  }
  std::vector<size_t> out;
  for (size_t i = first; i < steps.size(); ++i) {
    if (kind.empty() || step_kind(i) == kind) out.push_back(i);
  }
  return out;
}

namespace {

template <class F>
double warm_median(const RunReport& r, F&& value) {
  std::vector<double> v;
  for (size_t i : r.warm_steps()) v.push_back(double(value(r.steps[i])));
  return traces::percentile(v, 50);
}

}  // namespace

double RunReport::warm_ns() const {
  return warm_median(*this, [](const StepRecord& s) { return s.wall_ns; });
}

double RunReport::warm_host_ns(HostState state) const {
  return warm_median(*this,
                     [&](const StepRecord& s) { return s.host_ns[static_cast<int>(state)]; });
}

double RunReport::warm_device_ns() const {
  return warm_median(*this, [](const StepRecord& s) { return s.device_busy_ns; });
}

double RunReport::warm_percentile_ns(double p, const std::string& kind) const {
  std::vector<double> warm;
  for (size_t i : warm_steps(kind)) warm.push_back(double(steps[i].wall_ns));
  return traces::percentile(warm, p);
}

double RunReport::kind_percentile_ns(double p, const std::string& kind) const {
  std::vector<double> v;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (step_kind(i) == kind) v.push_back(double(steps[i].wall_ns));
  }
  return traces::percentile(v, p);
}

Json RunReport::warm_json() const { return wall_times().warm_json(); }

double RunReport::macs() const {
  double macs = 0;
  for (const auto& op : ops) macs += op.at("macs").get<double>();
  return macs;
}

RunReport::CostLine RunReport::cost_line() const {
  if (!warm_steps().empty()) {
    const double warm = warm_ns();
    return {double(startup_ns() + cold_ns()) - warm, warm};
  }
  // No warm step (every step compiled, e.g. exact shapes): no steady state to reach, so each
  // further step is taken to cost the mean of the steps run.
  const double mean = steps.empty() ? 0.0 : double(totals.wall_ns) / double(steps.size());
  return {double(startup_ns()), mean};
}

std::string RunReport::overtakes(const RunReport& other) const {
  const CostLine a = cost_line(), b = other.cost_line();
  const double warm_a = a.per_step_ns, warm_b = b.per_step_ns;
  const double fixed_a = a.fixed_ns, fixed_b = b.fixed_ns;
  if (fixed_a <= fixed_b && warm_a <= warm_b) return "always";
  if (warm_a >= warm_b) return "never";
  return std::to_string(static_cast<int64_t>(std::ceil((fixed_a - fixed_b) / (warm_b - warm_a))));
}

}  // namespace wallsim::driver
