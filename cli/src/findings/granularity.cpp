// The granularity study's findings: the sentences under its table, from the same rows.
#include "findings.h"

#include "wallsim/runtime/execution_mode.h"

#include <cmath>

namespace wallsim::cli::findings {

// granularity, per model: the groups and compiles of each heuristic alone and of the default set
// (series "alone"); along every other series (group sizes, in spec order), whether compiles,
// first step, warm step and HBM traffic fall as groups grow; the smallest groups against the
// whole step; the default set and AOT against the whole step (the run labelled "whole step").
std::vector<std::string> granularity_findings(const Json& rows) {
  std::vector<std::string> out;
  std::vector<std::string> models;
  for (const Json* r : ok_rows(rows)) {
    const std::string m = r->value("model", std::string());
    if (std::find(models.begin(), models.end(), m) == models.end()) models.push_back(m);
  }
  for (const std::string& model : models) {
    const std::string prefix = model.empty() ? "" : model + ": ";
    auto short_label = [&](const Json& r) {
      const std::string l = label_of(r);
      return l.rfind(prefix, 0) == 0 ? l.substr(prefix.size()) : l;
    };
    std::vector<std::string> series;
    std::map<std::string, std::vector<const Json*>> by_series;
    const Json *aot = nullptr, *whole = nullptr, *defaults = nullptr;
    for (const Json* r : ok_rows(rows)) {
      if (r->value("model", std::string()) != model) continue;
      if (runtime::mode_named((*r)["mode"].get<std::string>()).compiles_ahead()) aot = r;
      if (short_label(*r) == "whole step") whole = r;
      if (short_label(*r) == "default set") defaults = r;
      for (const std::string& sr : series_of(*r)) {
        if (!by_series.count(sr)) series.push_back(sr);
        by_series[sr].push_back(r);
      }
    }
    auto groups = [&](const Json& r) { return fmt(fig(r, "plans_per_step"), 0); };
    for (const std::string& sr : series) {
      const std::vector<const Json*>& v = by_series[sr];
      if (sr == "alone") {
        std::vector<std::string> parts;
        for (const Json* r : v) {
          parts.push_back(short_label(*r) + " " + groups(*r) + " groups per step, " +
                          fmt(fig(*r, "compiles"), 0) + " compiled, " +
                          fmt(fig(*r, "cache_hits"), 0) + " cache hits");
        }
        out.push_back(prefix + "one heuristic at a time: " + join(parts, "none") + ".");
        continue;
      }
      if (v.size() < 2) continue;
      std::vector<std::string> counts;
      for (const Json* r : v) counts.push_back(short_label(*r) + " " + fmt(fig(*r, "compiles"), 0));
      for (const auto& [key, what] : std::vector<std::pair<std::string, std::string>>{
               {"compiles", "compiles"},
               {"cold_ns", "first step"},
               {"warm_ns", "warm step"},
               {"hbm_bytes_per_step", "HBM traffic per step"}}) {
        std::vector<std::string> rises;
        for (size_t i = 1; i < v.size(); ++i) {
          if (fig(*v[i], key) > fig(*v[i - 1], key)) {
            rises.push_back(short_label(*v[i - 1]) + " → " + short_label(*v[i]));
          }
        }
        std::string line =
            prefix + sr + ": the " + what +
            (rises.empty()
                 ? " never rise" + std::string(key == "compiles" ? "" : "s") + " as groups grow"
                 : (key == "compiles" ? " rise" : " rises") + std::string(" at ") +
                       join(rises, ""));
        if (key == "compiles") line += " (" + join(counts, "") + ")";
        out.push_back(line + ".");
      }
      const Json& small = *v.front();
      const Json& big = whole ? *whole : *v.back();
      out.push_back(prefix + short_label(small) + " moves " +
                    fmt(fig(small, "hbm_bytes_per_step") / fig(big, "hbm_bytes_per_step"), 1) +
                    "x the HBM traffic of " + short_label(big) + ", and its warm step takes " +
                    fmt(fig(small, "warm_ns") / fig(big, "warm_ns"), 1) + "x as long.");
    }
    if (whole && defaults) {
      const Json &r = *defaults, &w = *whole;
      out.push_back(prefix + "the default set: first step " + ms(fig(r, "cold_ns")) +
                    " against the whole step's " + ms(fig(w, "cold_ns")) + ", warm step " +
                    ms(fig(r, "warm_ns")) + " against " + ms(fig(w, "warm_ns")) +
                    ", HBM per step " +
                    fmt(fig(r, "hbm_bytes_per_step") / fig(w, "hbm_bytes_per_step"), 2) + "x.");
    }
    if (aot && whole) {
      const double a = fig(*aot, "warm_ns"), b = fig(*whole, "warm_ns");
      out.push_back(prefix + "AOT's warm step (" + ms(a) + ") is " + percent(std::abs(b - a) / b) +
                    (a < b ? " faster" : " slower") + " than the whole step's under fused (" +
                    ms(b) + "); its compiles are at start-up (" + ms(fig(*aot, "startup_ns")) +
                    ").");
    }
  }
  return out;
}

}  // namespace wallsim::cli::findings
