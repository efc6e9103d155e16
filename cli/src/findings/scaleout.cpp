// The scaleout study's findings: per series, where more instances make the step slower and how
// many break even with one, from the same rows.
#include <cmath>
#include <map>

#include "findings.h"

namespace wallsim::cli::findings {
namespace {

// A series' runs by instance count (the first run of each count, in spec order).
using Curve = std::map<int64_t, const Json*>;

std::string instances(int64_t n) {
  return std::to_string(n) + (n == 1 ? " instance" : " instances");
}

// "2 instances 11.4 ms (5.49x one's, 95 % of it exposed communication)".
std::string point(const Curve& c, int64_t n, double one) {
  const Json& r = *c.at(n);
  const double step = fig(r, "step_wall_ns"), comm = fig(r, "step_comm_exposed_ns");
  std::string s = instances(n) + " " + ms(step) + " (" + fmt(step / one, 2) + "x one's";
  if (!std::isnan(comm) && step > 0) s += ", " + percent(comm / step) + " exposed communication";
  return s + ")";
}

// The sentence of one series: the step on one instance, where two become slower than one, the
// smallest count that breaks even, and the fastest count.
std::string series_sentence(const std::string& name, const Curve& c) {
  const double one = fig(*c.at(1), "step_wall_ns");
  const double one_comm = fig(*c.at(1), "step_comm_exposed_ns");
  std::string s = name + ": one instance " + ms(one);
  if (!std::isnan(one_comm) && one > 0)
    s += " a step (" + percent(one_comm / one) + " exposed communication)";
  std::vector<std::string> slower, faster;
  int64_t even = 0, best = 1;
  double best_step = one;
  for (const auto& [n, r] : c) {
    if (n == 1) continue;
    const double step = fig(*r, "step_wall_ns");
    (step > one ? slower : faster).push_back(point(c, n, one));
    if (step <= one && even == 0) even = n;
    if (step < best_step) best = n, best_step = step;
  }
  const int64_t most = c.rbegin()->first;
  if (c.count(2)) {
    const double two = fig(*c.at(2), "step_wall_ns");
    s += two > one ? "; two instances are slower than one"
                   : "; two instances are not slower than one";
  }
  s += "; slower than one: " + join(slower, "none") + "; not slower: " + join(faster, "none");
  if (even > 0) {
    s += ". " + instances(even) + " break even (the fewest that are not slower than one)";
  } else {
    s += ". No count up to " + instances(most) + " breaks even";
  }
  if (best > 1) {
    s += "; the fastest is " + instances(best) + ", " + fmt(one / best_step, 2) +
         "x one's speed (" + fmt(double(best), 0) + "x the cores)";
  }
  return s + ".";
}

}  // namespace

// scaleout: per series (a mode and EFA state, or a variant), the curve of the step against the
// instance count; then, per instance count, EFA at its factor against healthy EFA where both
// series of a mode ran it.
std::vector<std::string> scaleout_findings(const Json& rows) {
  std::vector<std::string> out, order;
  std::map<std::string, Curve> curves;
  for (const Json* r : ok_rows(rows)) {
    const double n = fig(*r, "instances");
    if (std::isnan(n) || std::isnan(fig(*r, "step_wall_ns"))) continue;
    for (const std::string& s : series_of(*r)) {
      if (!curves.count(s)) order.push_back(s);
      curves[s].emplace(int64_t(n), r);
    }
  }
  for (const std::string& s : order) {
    const Curve& c = curves[s];
    if (c.count(1) && c.size() > 1) out.push_back(series_sentence(s, c));
  }
  // How the answer moves: two instances against one, and the fewest that break even, per series.
  std::vector<std::string> moves;
  for (const std::string& s : order) {
    const Curve& c = curves[s];
    if (!c.count(1) || !c.count(2)) continue;
    const double one = fig(*c.at(1), "step_wall_ns");
    int64_t even = 0;
    for (const auto& [n, r] : c) {
      if (n > 1 && even == 0 && fig(*r, "step_wall_ns") <= one) even = n;
    }
    moves.push_back(s + " " + fmt(fig(*c.at(2), "step_wall_ns") / one, 2) + "x (" +
                    (even ? "even at " + std::to_string(even)
                          : "no break-even up to " + std::to_string(c.rbegin()->first)) +
                    ")");
  }
  if (moves.size() > 1) {
    out.push_back("Two instances' step over one's, per series: " + join(moves, "none") + ".");
  }
  // Healthy against degraded EFA: series named "<mode>, EFA healthy" and "<mode>, EFA ...".
  for (const std::string& s : order) {
    const std::string healthy = ", EFA healthy";
    if (s.size() < healthy.size() || s.compare(s.size() - healthy.size(), healthy.size(), healthy))
      continue;
    const std::string mode = s.substr(0, s.size() - healthy.size());
    for (const std::string& d : order) {
      if (d == s || d.rfind(mode + ", EFA ", 0) != 0) continue;
      std::vector<std::string> ratios;
      for (const auto& [n, r] : curves[d]) {
        if (n == 1 || !curves[s].count(n)) continue;
        ratios.push_back(instances(n) + " " +
                         fmt(fig(*r, "step_wall_ns") / fig(*curves[s].at(n), "step_wall_ns"), 2) +
                         "x");
      }
      if (!ratios.empty()) {
        out.push_back(d + " against " + s + ", the step's time: " + join(ratios, "none") + ".");
      }
    }
  }
  return out;
}

}  // namespace wallsim::cli::findings
