// The tuning cache file and the simulated tuner (schedule_tuner.h).
#include "wallsim/runtime/schedule_tuner.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "wallsim/base/file_write.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/signature.h"
#include "wallsim/sim/build_id.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim::runtime {

namespace {
constexpr const char* kFormat = "wallsim-tuning-cache";
constexpr int kVersion = 1;

std::string hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The value at `key` of entry `i`, of JSON type `T`, or an error naming both.
template <class T>
T field(const std::string& path, const base::Json& e, size_t i, const char* key) {
  const std::string where = "entries[" + std::to_string(i) + "]." + key;
  if (!e.contains(key)) throw base::InputError(path, where + " is missing");
  try {
    return e.at(key).get<T>();
  } catch (const base::Json::exception&) {
    throw base::InputError(path, where + " has the wrong type");
  }
}
}  // namespace

std::string TuningEntry::key() const {
  return family + "\n" + signature + "arch " + arch + "\ntiming " + timing + "\nbuild " + build +
         "\ncandidates " + std::to_string(candidates);
}

TuningCache TuningCache::load(const std::string& path) {
  TuningCache c;
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return c;
  const base::Json j = base::read_json_file(path);
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw base::InputError(path,
                           std::string("not a tuning cache (format is not \"") + kFormat + "\")");
  if (j.value("version", 0) != kVersion)
    throw base::InputError(path, "tuning cache version " + j.value("version", base::Json()).dump() +
                                     " (this wallsim reads version " + std::to_string(kVersion) +
                                     ")");
  if (!j.contains("entries") || !j["entries"].is_array())
    throw base::InputError(path, "entries is missing or not a list");
  const base::Json& entries = j["entries"];
  for (size_t i = 0; i < entries.size(); ++i) {
    const base::Json& e = entries[i];
    if (!e.is_object())
      throw base::InputError(path, "entries[" + std::to_string(i) + "] is not an object");
    TuningEntry t;
    t.family = field<std::string>(path, e, i, "family");
    t.signature = field<std::string>(path, e, i, "signature");
    t.arch = field<std::string>(path, e, i, "arch");
    t.timing = field<std::string>(path, e, i, "timing");
    t.build = field<std::string>(path, e, i, "build");
    t.candidates = field<int64_t>(path, e, i, "candidates");
    t.chosen = field<std::string>(path, e, i, "chosen");
    const auto measured = field<base::Json>(path, e, i, "measured");
    if (!measured.is_array() || measured.empty())
      throw base::InputError(path,
                             "entries[" + std::to_string(i) + "].measured is not a non-empty list");
    bool found = false;
    for (const base::Json& m : measured) {
      TuningEntry::Point p;
      p.point = field<std::string>(path, m, i, "point");
      p.predicted_ns = field<double>(path, m, i, "predicted_ns");
      p.simulated_ns = field<double>(path, m, i, "simulated_ns");
      found |= p.point == t.chosen;
      t.measured.push_back(p);
    }
    if (!found)
      throw base::InputError(
          path, "entries[" + std::to_string(i) + "].chosen is not one of its measured points");
    const std::string k = t.key();
    if (!c.m_entries.emplace(k, std::move(t)).second)
      throw base::InputError(path, "entries[" + std::to_string(i) + "] repeats an earlier key");
  }
  return c;
}

const TuningEntry* TuningCache::find(const std::string& key) const {
  auto it = m_entries.find(key);
  return it == m_entries.end() ? nullptr : &it->second;
}

void TuningCache::put(TuningEntry e) {
  std::string k = e.key();
  m_entries[k] = std::move(e);
}

void TuningCache::save(const std::string& path) const {
  base::Json entries = base::Json::array();
  for (const auto& [k, t] : m_entries) {
    base::Json measured = base::Json::array();
    for (const auto& p : t.measured)
      measured.push_back(
          {{"point", p.point}, {"predicted_ns", p.predicted_ns}, {"simulated_ns", p.simulated_ns}});
    const auto& model = t.measured.front();
    double chosen_ns = 0;
    for (const auto& p : t.measured)
      if (p.point == t.chosen) chosen_ns = p.simulated_ns;
    entries.push_back({{"family", t.family},
                       {"signature", t.signature},
                       {"arch", t.arch},
                       {"timing", t.timing},
                       {"build", t.build},
                       {"candidates", t.candidates},
                       {"chosen", t.chosen},
                       // Read by people, not by wallsim: the model's error at this op.
                       {"chosen_ns", chosen_ns},
                       {"model_pick", model.point},
                       {"model_predicted_ns", model.predicted_ns},
                       {"model_simulated_ns", model.simulated_ns},
                       {"measured", measured}});
  }
  base::Json j = {{"format", kFormat}, {"version", kVersion}, {"entries", entries}};
  base::write_file_atomically(path, j.dump(1) + "\n");
}

SimulatedTuner::SimulatedTuner(const Config& config, TuningCache& cache, bool measure,
                               sim::Core* core)
    : m_config(config),
      m_cache(cache),
      m_measure(measure),
      m_core(core),
      m_arch(hex(compiler_stub::arch_fingerprint(config.chip.arch))),
      m_timing(hex(compiler_stub::fnv1a64(base::write_params(config.chip.timing).dump()))) {}

SimulatedTuner::~SimulatedTuner() = default;

// The candidate compiled alone at `point` and run on the core in timing-only mode: its time in
// ns, 0 when the op's one-op space holds no such point or it does not compile or run.
double SimulatedTuner::simulate(const compiler_stub::TuningQuery& q, const std::string& point) {
  compiler_stub::LoweringOptions o = m_config.compiler;
  o.tuner = nullptr;
  o.forced_point = point;
  auto r = compiler_stub::compile_graph(q.graph, m_config.chip.arch,
                                        compiler_stub::GroupPolicy::whole, {}, o);
  auto* cg = std::get_if<compiler_stub::CompiledGraph>(&r);
  if (!cg) return 0;
  for (const auto& s : cg->groups)
    if (s.matmul_forced_missed > 0) return 0;
  if (!m_core) {
    sim::init_systemc();
    m_system = std::make_unique<sim::System>(m_config.chip, sim::CoreOptions{}, "tuning_device");
    m_core = &m_system->core();
  }
  // Every plan compile_graph returns has passed the verifier.
  auto plans = std::make_shared<isa::PlanSequence>(std::move(cg->plans));
  const size_t first = m_core->launch_count();
  for (const isa::Plan& p : plans->plans) m_core->launch(p, {}, {}, plans);
  sim::simulate();
  if (m_core->error() || !m_core->all_drained()) return 0;
  const auto a = m_core->launch_times(first), b = m_core->launch_times(m_core->launch_count() - 1);
  m_core->retire_drained();
  ++m_stats.simulations;
  // Whole ns: the same plan launched at another absolute time on the shared core can end a
  // picosecond apart (time is quantised from the launch's start), and the cache must not.
  const double ns = std::max(1.0, std::round((b.end - a.start).to_seconds() * 1e9));
  m_stats.device_ns += ns;
  return ns;
}

std::string SimulatedTuner::choose(const compiler_stub::TuningQuery& q) {
  ++m_stats.queries;
  TuningEntry e;
  e.family = q.family;
  e.signature = q.signature;
  e.arch = m_arch;
  e.timing = m_timing;
  e.build = std::string(compiler_stub::build_id()) + "/" + sim::build_id();
  e.candidates = m_config.compiler.tune.candidates;
  const std::string model = q.candidates.empty() ? std::string() : q.candidates.front().point;
  if (const TuningEntry* hit = m_cache.find(e.key())) {
    ++m_stats.hits;
    m_stats.changed += hit->chosen != model;
    return hit->chosen;
  }
  if (!m_measure || q.candidates.empty()) {
    ++m_stats.misses;
    return "";
  }
  const auto t0 = std::chrono::steady_clock::now();
  double best = 0;
  for (const auto& c : q.candidates) {
    const double ns = simulate(q, c.point);
    e.measured.push_back({c.point, c.predicted_ns, ns});
    // Faster by more than kTie: within it (the rounding above) the earlier candidate, the
    // model's pick first, stays.
    constexpr double kTie = 1e-4;
    if (ns > 0 && (best == 0 || ns < best * (1 - kTie))) best = ns, e.chosen = c.point;
  }
  m_stats.wall_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (e.chosen.empty()) {  // nothing ran: no entry, the model's pick
    ++m_stats.misses;
    return "";
  }
  ++m_stats.tuned;
  m_stats.changed += e.chosen != model;
  const std::string chosen = e.chosen;
  m_cache.put(std::move(e));
  return chosen;
}

void TuningSetup::save() const {
  if (!path.empty() && tuner && tuner->stats().tuned > 0) cache.save(path);
}

std::string TuningSetup::summary() const {
  const TuningStats& s = tuner->stats();
  std::ostringstream o;
  o << "tuning: " << s.queries << " op(s): " << s.hits << " from the cache, " << s.tuned
    << " measured (" << s.simulations << " candidate(s) simulated, " << s.device_ns / 1e6
    << " ms of simulated device time), " << s.misses << " neither (the model's pick); " << s.changed
    << " differ from the model's pick";
  return o.str();
}

std::unique_ptr<TuningSetup> setup_tuning(const Config& config,
                                          compiler_stub::LoweringOptions& options, bool measure,
                                          sim::Core* core) {
  const auto& t = config.compiler.tune;
  if (!t.enabled && t.cache.empty()) return nullptr;
  auto s = std::make_unique<TuningSetup>();
  s->path = t.cache;
  s->cache = TuningCache::load(t.cache);
  s->tuner = std::make_unique<SimulatedTuner>(config, s->cache, measure && t.enabled, core);
  options.tuner = s->tuner.get();
  return s;
}

}  // namespace wallsim::runtime
