// Streamed step records and the warm section's wall times.
#include "wallsim/driver/step_stream.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "wallsim/traces/stats.h"
#include "wallsim/traces/write_error.h"

namespace wallsim::driver {

using base::Json;

namespace {

double percentile_of(const std::vector<int64_t>& v, size_t from, double p) {
  return traces::percentile(std::vector<double>(v.begin() + from, v.end()), p);
}

// A steps-table cell, as stats.txt writes a section value (steps hold integers and strings).
std::string cell(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

void StepWallTimes::add(const std::string& kind, int64_t wall_ns, bool compiled) {
  size_t k = std::find(m_kinds.begin(), m_kinds.end(), kind) - m_kinds.begin();
  if (k == m_kinds.size()) {
    m_kinds.push_back(kind);
    m_walls.emplace_back();
    m_warm_from.push_back(0);
  }
  m_walls[k].push_back(wall_ns);
  ++m_steps;
  if (compiled) {
    m_first_warm = m_steps;
    for (size_t j = 0; j < m_kinds.size(); ++j) m_warm_from[j] = m_walls[j].size();
  }
}

Json StepWallTimes::warm_json() const {
  std::vector<double> warm;
  for (size_t k = 0; k < m_kinds.size(); ++k) {
    warm.insert(warm.end(), m_walls[k].begin() + m_warm_from[k], m_walls[k].end());
  }
  const size_t n = m_steps - m_first_warm;
  Json j = {{"definition", "steps after the last step that compiled; p50 and p99 nearest rank"},
            {"first_step", n == 0 ? Json(nullptr) : Json(m_first_warm)},
            {"steps", n},
            {"p50_ns", n == 0 ? Json(nullptr) : Json(traces::percentile(warm, 50))},
            {"p99_ns", n == 0 ? Json(nullptr) : Json(traces::percentile(warm, 99))}};
  Json kinds = Json::object();
  for (size_t k = 0; k < m_kinds.size(); ++k) {
    const std::vector<int64_t>& v = m_walls[k];
    // no warm step (each compiled, as --steps 1 does): absent (null), not a 0 ns step
    const bool none = m_warm_from[k] == v.size();
    kinds[m_kinds[k]] = {
        {"steps", v.size()},
        {"p50_ns", percentile_of(v, 0, 50)},
        {"p99_ns", percentile_of(v, 0, 99)},
        {"warm_steps", v.size() - m_warm_from[k]},
        {"warm_p50_ns", none ? Json(nullptr) : Json(percentile_of(v, m_warm_from[k], 50))},
        {"warm_p99_ns", none ? Json(nullptr) : Json(percentile_of(v, m_warm_from[k], 99))}};
  }
  j["by_kind"] = kinds;
  return j;
}

StepStream::StepStream(std::string spool)
    : m_spool_path(std::move(spool)), m_spool(m_spool_path, std::ios::binary | std::ios::trunc) {
  if (!m_spool) throw traces::WriteError(m_spool_path, traces::errno_reason(errno));
}

void StepStream::add(const runtime::StepRecord& r, const std::string& kind) {
  const Json j = step_json(r, kind);
  m_spool << j.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
  if (!m_spool) throw traces::WriteError(m_spool_path, traces::errno_reason(errno));
  ++m_steps;
  m_walls.add(kind, r.wall_ns, r.counts.compiles > 0);
  wall_ns += r.wall_ns;
  for (int k = 0; k < runtime::kNumHostStates; ++k) host_ns[k] += r.host_ns[k];
  device_busy_ns += r.device_busy_ns;
  counts.add(r.counts);
  padded_macs += r.padded_macs;
  real_macs += r.real_macs;
  for (const auto& [key, v] : j.items()) {
    size_t c = std::find(m_columns.begin(), m_columns.end(), key) - m_columns.begin();
    if (c == m_columns.size()) {
      m_columns.push_back(key);
      m_widths.push_back(key.size());
    }
    m_widths[c] = std::max(m_widths[c], cell(v).size());
  }
}

template <class F>
void StepStream::for_each_spooled(F&& f) {
  std::ifstream in(m_spool_path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) f(Json::parse(line));
}

namespace {

// The sections' tables only (`tables`) or all but their tables: stats.txt writes every line
// before every table, so the two halves written one after the other give the whole.
Json split_tables(const Json& v, bool tables) {
  Json out = Json::object();
  for (const auto& [k, sub] : v.items()) {
    const bool table = sub.is_array() && !sub.empty() && sub.front().is_object();
    if (sub.is_object() && !sub.empty()) {
      Json part = split_tables(sub, tables);
      if (!tables || !part.empty()) out[k] = part;
    } else if (table == tables) {
      out[k] = sub;
    }
  }
  return out;
}

void write_file(const std::string& path, const std::string& text, std::ios::openmode mode) {
  std::ofstream out(path, std::ios::binary | mode);
  out << text;
  if (!out.flush()) throw traces::WriteError(path, traces::errno_reason(errno));
}

}  // namespace

void StepStream::finish(const std::string& stats_json, const std::string& stats_txt,
                        const Json& sections) {
  m_spool.close();
  // stats.json: the spooled steps in place of the empty array, indented as the writer would.
  std::ostringstream whole;
  whole << std::ifstream(stats_json, std::ios::binary).rdbuf();
  std::string text = whole.str();
  const std::string key = "\n  \"steps\": []";
  const size_t at = text.find(key);
  if (m_steps > 0 && at != std::string::npos) {
    std::ofstream out(stats_json + ".steps", std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(at + key.size() - 2));
    out << "[\n";
    bool first = true;
    for_each_spooled([&](const Json& step) {
      std::string s = step.dump(2, ' ', false, Json::error_handler_t::replace);
      out << (first ? "" : ",\n") << "    ";
      for (char c : s) out << c << (c == '\n' ? "    " : "");
      first = false;
    });
    out << "\n  ]";
    out.write(text.data() + at + key.size(),
              static_cast<std::streamsize>(text.size() - at - key.size()));
    if (!out.flush()) throw traces::WriteError(stats_json, traces::errno_reason(errno));
    out.close();
    text.clear();
    if (std::rename((stats_json + ".steps").c_str(), stats_json.c_str()) != 0)
      throw traces::WriteError(stats_json, traces::errno_reason(errno));
  }

  // stats.txt: the lines, the tables before "steps", the steps table, the tables after it.
  Json before = Json::object(), after = Json::object();
  bool seen = false;
  for (const auto& [k, v] : sections.items()) {
    if (k == "steps") {
      seen = true;
    } else {
      (seen ? after : before)[k] = v;
    }
  }
  Json lines = split_tables(sections, false);
  if (m_steps > 0) lines.erase("steps");
  std::ostringstream txt;
  txt << "\n# run report: the sections of stats.json after `device` (RUNTIME.md)\n";
  traces::write_sections_text(lines, txt, {"schema"});
  traces::write_sections_text(split_tables(before, true), txt, {"schema"});
  write_file(stats_txt, txt.str(), std::ios::app);
  if (m_steps > 0) {
    std::ofstream out(stats_txt, std::ios::binary | std::ios::app);
    out << "\n# steps: " << m_steps << " rows\n";
    const auto row = [&](const auto& value_of) {
      std::string text;
      for (size_t i = 0; i < m_columns.size(); ++i) {
        const std::string v = value_of(i);
        if (i > 0) text.append(2, ' ');
        text.append(m_widths[i] - std::min(m_widths[i], v.size()), ' ');  // right-aligned
        text += v;
      }
      out << text << "\n";
    };
    row([&](size_t i) { return m_columns[i]; });
    for_each_spooled([&](const Json& step) {
      row([&](size_t i) { return step.contains(m_columns[i]) ? cell(step[m_columns[i]]) : ""; });
    });
    if (!out.flush()) throw traces::WriteError(stats_txt, traces::errno_reason(errno));
  }
  std::ostringstream rest;
  traces::write_sections_text(split_tables(after, true), rest, {"schema"});
  write_file(stats_txt, rest.str(), std::ios::app);
  std::remove(m_spool_path.c_str());
}

}  // namespace wallsim::driver
