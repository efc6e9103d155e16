// The check a viewer's import makes of a Chrome trace: on every track (pid, tid), no complete
// ("X") slice may end after the next one starts, under both arithmetics viewers use:
//   - whole ns: `ts` and `dur` (microseconds) each rounded to whole nanoseconds, then added
//     (Perfetto's JSON importer);
//   - doubles: `ts + dur` added as parsed, in microseconds (chrome://tracing), and also after
//     subtracting the track's first `ts` from every time, as speedscope's importer does.
// Slices are taken in start order (stable for equal starts), as a viewer sorts them.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace wallsim::test {

struct TraceOverlap {
  std::string track;  // "pid/tid"
  std::string first, second;
  std::string arithmetic;  // "whole-ns", "double" or "rebased"
};

inline std::vector<TraceOverlap> trace_overlaps(const nlohmann::json& trace,
                                                std::size_t* slices_checked = nullptr) {
  struct Slice {
    double ts, dur;
    std::string name;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<Slice>> tracks;
  std::size_t count = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    tracks[{e.at("pid").get<std::int64_t>(), e.value("tid", std::int64_t{0})}].push_back(
        Slice{e.at("ts").get<double>(), e.at("dur").get<double>(), e.value("name", "")});
    ++count;
  }
  if (slices_checked) *slices_checked = count;
  const auto ns = [](double us) { return std::llround(us * 1000.0); };
  std::vector<TraceOverlap> out;
  for (auto& [key, slices] : tracks) {
    std::stable_sort(slices.begin(), slices.end(),
                     [](const Slice& a, const Slice& b) { return a.ts < b.ts; });
    const std::string track = std::to_string(key.first) + "/" + std::to_string(key.second);
    const double first = slices.empty() ? 0.0 : slices.front().ts;
    for (std::size_t i = 1; i < slices.size(); ++i) {
      const Slice& a = slices[i - 1];
      const Slice& b = slices[i];
      if (ns(a.ts) + ns(a.dur) > ns(b.ts)) out.push_back({track, a.name, b.name, "whole-ns"});
      if (a.ts + a.dur > b.ts) out.push_back({track, a.name, b.name, "double"});
      if ((a.ts - first) + a.dur > b.ts - first) {
        out.push_back({track, a.name, b.name, "rebased"});
      }
    }
  }
  return out;
}

inline std::string describe(const std::vector<TraceOverlap>& overlaps, std::size_t max = 5) {
  std::ostringstream os;
  os << overlaps.size() << " overlaps";
  for (std::size_t i = 0; i < overlaps.size() && i < max; ++i) {
    os << "; " << overlaps[i].track << ": '" << overlaps[i].first << "' passes '"
       << overlaps[i].second << "' (" << overlaps[i].arithmetic << ")";
  }
  return os.str();
}

}  // namespace wallsim::test
