// The serving study's findings: the sentences under its table, from the same rows.
#include "findings.h"

#include <cmath>

namespace wallsim::cli::findings {

// serving, per series (a controlled comparison: one factor varies, its first run the baseline):
// each run's throughput against the baseline's; per run, the KV pool (peak blocks of the pool,
// preemptions, mean decode batch) and the padded work by source.
std::vector<std::string> serving_findings(const Json& rows) {
  std::vector<std::string> out, series;
  std::map<std::string, std::vector<const Json*>> by;
  for (const Json& r : rows) {
    for (const std::string& sr : series_of(r)) {
      if (!by.count(sr)) series.push_back(sr);
      by[sr].push_back(&r);
    }
  }
  for (const std::string& sr : series) {
    const std::vector<const Json*>& v = by[sr];
    const Json& base = *v.front();
    if (base["status"] != "ok") {
      out.push_back(sr + ": the baseline " + label_of(base) + " stopped (" +
                    base.value("error", std::string()) + "), so nothing is compared.");
      continue;
    }
    const double t0 = fig(base, "throughput_tokens_per_s");
    std::vector<std::string> parts;
    for (size_t i = 1; i < v.size(); ++i) {
      const Json& r = *v[i];
      if (r["status"] != "ok") {
        parts.push_back(label_of(r) + " stopped");
        continue;
      }
      const double t = fig(r, "throughput_tokens_per_s");
      parts.push_back(label_of(r) + " " + fmt(t, 0) + " tokens/s, " + fmt(t / t0, 2) + "x");
    }
    out.push_back(sr + ": against " + label_of(base) + "'s " + fmt(t0, 0) +
                  " tokens/s: " + join(parts, "nothing else ran") + ".");
  }
  for (const Json* r : ok_rows(rows)) {
    const double peak = fig(*r, "kv_peak_blocks"), pool = fig(*r, "kv_pool_blocks");
    if (std::isnan(peak)) continue;
    const double pad = fig(*r, "padding_batch_fraction") + fig(*r, "padding_prompt_fraction") +
                       fig(*r, "padding_keys_fraction");
    out.push_back(label_of(*r) + ": the KV pool peaks at " + fmt(peak, 0) + " of " + fmt(pool, 0) +
                  " blocks (" + (peak >= pool ? "it binds" : "it never binds") + "), " +
                  fmt(fig(*r, "preemptions"), 0) + " preemptions, " +
                  fmt(fig(*r, "mean_decode_batch"), 1) + " sequences per decode step; " +
                  percent(pad) + " of the work is padded or masked (batch rows " +
                  percent(fig(*r, "padding_batch_fraction")) + ", prompt tokens " +
                  percent(fig(*r, "padding_prompt_fraction")) + ", keys " +
                  percent(fig(*r, "padding_keys_fraction")) + ").");
  }
  return out;
}

}  // namespace wallsim::cli::findings
