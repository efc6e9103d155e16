// The tensor-parallel study's findings: per model and mode, the prefill's and a token's time
// against the TP degree, where more cores stop helping, and the exposed communication's share.
#include <cmath>
#include <map>

#include "findings.h"

namespace wallsim::cli::findings {
namespace {

// A series' runs by TP degree (the first run of each degree, in spec order).
using Curve = std::map<int64_t, const Json*>;

// The sentence of one step kind ("prefill" or "token") of a series: its time at TP 1 (or the
// smallest degree run), each larger degree's speed-up and exposed-communication share, the
// fastest degree, and the degrees past it that are slower.
std::string kind_sentence(const std::string& series, const std::string& kind, const Curve& c) {
  const std::string key = kind + "_ns", comm = kind + "_comm_fraction";
  const int64_t base = c.begin()->first;
  const double t0 = fig(*c.begin()->second, key);
  std::string s = series + ", " + (kind == "token" ? "a token step" : "the prefill") + ": TP " +
                  std::to_string(base) + " " + us_or_ms(t0) + " (" +
                  percent(fig(*c.begin()->second, comm)) + " exposed communication)";
  std::vector<std::string> points;
  int64_t best = base;
  double best_t = t0;
  for (const auto& [tp, r] : c) {
    if (tp == base) continue;
    const double t = fig(*r, key);
    points.push_back("TP " + std::to_string(tp) + " " + us_or_ms(t) + " (" + fmt(t0 / t, 2) +
                     "x, " + percent(fig(*r, comm)) + " exposed)");
    if (t < best_t) best = tp, best_t = t;
  }
  s += "; " + join(points, "no other degree");
  if (best == base) {
    s += ". No larger degree is faster than TP " + std::to_string(base);
  } else {
    s += ". The fastest is TP " + std::to_string(best) + ", " + fmt(t0 / best_t, 2) + "x TP " +
         std::to_string(base) + "'s speed on " + fmt(double(best) / double(base), 0) +
         "x the cores (" + percent(t0 / best_t / (double(best) / double(base))) +
         " parallel efficiency)";
  }
  std::vector<std::string> worse;
  for (const auto& [tp, r] : c) {
    if (tp > best)
      worse.push_back("TP " + std::to_string(tp) + " " + fmt(fig(*r, key) / best_t, 2) + "x");
  }
  if (!worse.empty()) {
    s += "; more cores stop helping there: past it, " + join(worse, "none") + " its time";
  }
  return s + ".";
}

}  // namespace

// tensor-parallel: per series (a model under a mode), the prefill's and a token step's curves
// against the TP degree (the workload's tp=; a prefill that compiled has no figure), then how
// the exposed-communication share moves from the smallest to the largest degree.
std::vector<std::string> tensor_parallel_findings(const Json& rows) {
  std::vector<std::string> out, order;
  std::map<std::string, std::map<std::string, Curve>> curves;  // by series, then step kind
  for (const Json* r : ok_rows(rows)) {
    const double tp = workload_param(*r, "tp");
    if (std::isnan(tp)) continue;
    for (const std::string& s : series_of(*r)) {
      if (!curves.count(s)) order.push_back(s);
      for (const char* kind : {"prefill", "token"}) {
        if (!std::isnan(fig(*r, std::string(kind) + "_ns")))
          curves[s][kind].emplace(int64_t(tp), r);
      }
    }
  }
  for (const std::string& s : order) {
    std::vector<std::string> moves;
    for (const char* kind : {"prefill", "token"}) {
      const Curve& c = curves[s][kind];
      if (c.size() < 2) continue;
      out.push_back(kind_sentence(s, kind, c));
      const std::string comm = std::string(kind) + "_comm_fraction";
      moves.push_back(std::string(kind == std::string("token") ? "a token step" : "the prefill") +
                      " " + percent(fig(*c.begin()->second, comm)) + " at TP " +
                      std::to_string(c.begin()->first) + " to " +
                      percent(fig(*c.rbegin()->second, comm)) + " at TP " +
                      std::to_string(c.rbegin()->first));
    }
    if (!moves.empty()) {
      out.push_back(s + ", exposed communication's share of the step, smallest to largest " +
                    "degree: " + join(moves, "none") + ".");
    }
  }
  return out;
}

}  // namespace wallsim::cli::findings
