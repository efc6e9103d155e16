// The run report's compile_metrics section.
#include "wallsim/driver/compile_metrics.h"

namespace wallsim::driver {

using base::Json;

Json compile_metrics_json(const runtime::Session& session, int64_t steps_device_busy_ns) {
  runtime::Counts all = session.startup_record().counts;
  all.add(session.totals());
  const int64_t device_ns = session.startup_record().device_busy_ns + steps_device_busy_ns;

  int64_t compile_ns = 0;
  Json entries = Json::array();
  for (const auto& e : session.cache_entries()) {
    compile_ns += e.compile_ns;
    entries.push_back({{"signature", e.signature},
                       {"plan", e.plan},
                       {"step", e.step},
                       {"nodes", e.work.nodes},
                       {"instructions", e.work.instructions},
                       {"spill_bytes", e.work.spill_bytes},
                       {"compilation_duration_ns", e.compile_ns},
                       {"num_cache_reqs", e.requests},
                       {"num_cache_hits", e.hits}});
  }
  Json recompiles = Json::array();
  for (const auto& r : session.recompile_log()) {
    recompiles.push_back({{"step", r.step},
                          {"plan", r.plan},
                          {"signature", r.signature},
                          {"previous", r.previous},
                          {"reason", r.reason}});
  }
  const int64_t requests = all.cache_hits + all.cache_misses;
  Json j;
  j["CompileTime"] = {{"total_ns", compile_ns},
                      {"samples", static_cast<int64_t>(session.cache_entries().size())}};
  j["ExecuteTime"] = {{"total_ns", device_ns}, {"samples", all.plans_launched}};
  j["UncachedCompile"] = all.compiles - all.compile_failures;
  j["CachedCompile"] = all.cache_hits;
  j["num_cache_reqs"] = requests;
  j["num_cache_hits"] = all.cache_hits;
  j["cache_hit_rate"] = requests > 0 ? double(all.cache_hits) / double(requests) : 0.0;
  j["unique_graphs"] = static_cast<int64_t>(session.cache_entries().size());
  j["entries"] = entries;
  j["recompiles"] = recompiles;
  // Groups that failed to compile and fell back (only when some did).
  if (!session.fallback_log().empty()) {
    Json fallbacks = Json::array();
    for (const auto& f : session.fallback_log()) {
      fallbacks.push_back(
          {{"step", f.step}, {"ops", f.ops}, {"policy", f.policy}, {"reason", f.reason}});
    }
    j["fallbacks"] = fallbacks;
  }
  return j;
}

}  // namespace wallsim::driver
