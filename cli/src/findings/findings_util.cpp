// What every study's findings use: a figure of a row, times and fractions as text, the rows that
// ran.
#include "findings.h"

#include <cmath>

namespace wallsim::cli::findings {

double fig(const Json& row, const std::string& key) {
  const Json& f = row["figures"];
  return f.contains(key) && f[key].is_number() ? f[key].get<double>() : std::nan("");
}

std::string ms(double ns) {
  const double v = ns / 1e6;
  return fmt(v, v >= 100 ? 0 : v >= 10 ? 1 : 2) + " ms";
}

std::string percent(double fraction) { return fmt(fraction * 100, fraction < 0.1 ? 1 : 0) + " %"; }

std::string join(const std::vector<std::string>& parts, const std::string& none) {
  if (parts.empty()) return none;
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

std::vector<const Json*> ok_rows(const Json& rows) {
  std::vector<const Json*> out;
  for (const Json& r : rows) {
    if (r["status"] == "ok") out.push_back(&r);
  }
  return out;
}

std::string label_of(const Json& r) { return r["label"].get<std::string>(); }

std::vector<std::string> series_of(const Json& r) {
  return r.value("series", std::vector<std::string>());
}

// The value of `key=` in a workload spec, or NaN.
double workload_param(const Json& row, const std::string& key) {
  const std::string w = row["workload"].get<std::string>();
  for (const char* sep : {":", ","}) {
    const size_t at = w.find(sep + key + "=");
    if (at != std::string::npos) return std::atof(w.c_str() + at + key.size() + 2);
  }
  return std::nan("");
}

std::string us_or_ms(double ns) { return ns < 1e6 ? fmt(ns / 1e3, 1) + " µs" : ms(ns); }

}  // namespace wallsim::cli::findings
