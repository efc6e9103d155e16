// Small helpers the commands that read specs and write tables share.
#pragma once

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "wallsim/base/params.h"

namespace wallsim::cli {

// A file of the source tree (a default spec or config, a plot script): found next to the binary
// (build/bin/wallsim -> ../../PATH), else relative to the working directory. The relative path is
// kept when both name the same file, so outputs that print it do not change.
inline std::string project_file(const std::string& rel) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return rel;
  const fs::path near = exe.parent_path().parent_path().parent_path() / rel;
  if (!fs::exists(near, ec)) return rel;
  if (fs::exists(rel, ec) && fs::equivalent(rel, near, ec)) return rel;
  return near.string();
}

// An option left at its default names a file of the source tree: find it with project_file. A
// path the user gives stays relative to the working directory.
inline void find_default_file(const CLI::App* cmd, const std::string& option, std::string* path) {
  if (cmd->get_option(option)->count() == 0) *path = project_file(*path);
}

// `--trace-window FROM_NS:TO_NS` as a pair; base::InputError otherwise.
inline std::pair<int64_t, int64_t> parse_window(const std::string& s) {
  auto colon = s.find(':');
  try {
    if (colon != std::string::npos) {
      size_t a = 0, b = 0;
      int64_t from = std::stoll(s.substr(0, colon), &a);
      int64_t to = std::stoll(s.substr(colon + 1), &b);
      if (a == colon && b == s.size() - colon - 1 && from >= 0 && to >= from) return {from, to};
    }
  } catch (const std::exception&) {
  }
  throw base::InputError("--trace-window " + s, "expected FROM_NS:TO_NS with 0 <= FROM <= TO");
}

// The output options `exec` and `run` share: the directory, the trace's level, and what keeps a
// trace small (a window, the CSV alternative).
inline void add_output_options(CLI::App* cmd, std::string* out, std::string* trace_level,
                               std::string* window, bool* csv) {
  cmd->add_option(
      "--out,-o", *out,
      "output directory (replaced only if it is an earlier wallsim output: .wallsim-output)");
  cmd->add_option("--trace-level", *trace_level, "none, plans or instructions")
      ->check(CLI::IsMember({"none", "plans", "instructions"}));
  cmd->add_option("--trace-window", *window,
                  "keep only the slices overlapping FROM_NS:TO_NS (simulated ns) in the trace");
  cmd->add_flag("--instruction-csv", *csv,
                "also write instructions.csv (one row per instruction, any trace level)");
}

// A fixed-point number for a table.
inline std::string fmt(double v, int precision = 3) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << v;
  return o.str();
}

// A spec's non-empty list of strings at JSON path `path`; base::InputError otherwise.
inline std::vector<std::string> string_list(const base::Json& j, const std::string& path) {
  if (!j.is_array() || j.empty())
    throw base::InputError(path, "expected a non-empty list of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string())
      throw base::InputError(path + "[" + std::to_string(i) + "]", "expected a string");
    out.push_back(j[i].get<std::string>());
  }
  return out;
}

// One CSV cell: JSON strings as text, other values as JSON, quoted when they need it.
inline std::string csv_cell(const base::Json& v) {
  if (v.is_null()) return "";
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n") != std::string::npos) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  }
  return s;
}

// The last non-empty line of a file (a child's log: its one-line error).
inline std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace wallsim::cli
