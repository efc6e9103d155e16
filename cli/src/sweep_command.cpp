// `wallsim sweep SPEC --out DIR [--jobs N] [--count | --list | --index I]` and
// `wallsim collect DIR [--csv FILE]`.
//
// A local pool of N workers, each running one point as a `wallsim run` child process; a line
// per finished point appended to DIR/results.jsonl with one write(2) on an O_APPEND file, so a
// killed sweep loses no finished point and leaves no torn line (a line torn anyway is skipped
// when read, and the next append starts on a fresh line). Children die with the sweep.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "subprocess.h"
#include "sweep.h"
#include "wallsim/base/file_write.h"

namespace wallsim::cli {
namespace {

namespace fs = std::filesystem;
using base::InputError;
using base::Json;
using Clock = std::chrono::steady_clock;

struct SweepArgs {
  std::string spec;
  std::string out;
  int64_t jobs = 1;
  bool count = false;
  bool list = false;
  int64_t index = -1;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Appends `line` and a newline with one write(2); a file left without a final newline (a line
// torn by a kill) gets one first.
void append_line(const std::string& path, const std::string& line) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(path, std::string("cannot append (") + std::strerror(errno) + ")");
  std::string text = line + "\n";
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    const int rfd = open(path.c_str(), O_RDONLY);
    char last = '\n';
    if (rfd >= 0) {
      if (pread(rfd, &last, 1, st.st_size - 1) != 1) last = '\n';
      close(rfd);
    }
    if (last != '\n') text = "\n" + text;
  }
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = n < 0 ? errno : ENOSPC;
  fsync(fd);
  close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw InputError(path, std::string("cannot append (") + std::strerror(err) + ")");
}

// results.jsonl absent or a regular file: never a symlink (appending through it would write
// elsewhere), a folder or a FIFO.
void check_results_file(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  const char* kind = S_ISLNK(st.st_mode)   ? "a symbolic link"
                     : S_ISDIR(st.st_mode) ? "a folder"
                                           : "not a regular file";
  throw InputError(path, std::string("is ") + kind + "; refusing to append to it");
}

void create_folder(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) throw InputError(path, "cannot create folder (" + ec.message() + ")");
}

Json result_line(const SweepPoint& p, const std::string& status, const std::string& error,
                 const Json& figures, double seconds) {
  Json j = Json::object();
  j["index"] = p.index;
  j["id"] = p.id;
  j["status"] = status;
  j["workload"] = p.workload;
  j["mode"] = p.mode;
  Json axes = Json::object();
  for (const auto& [path, value] : p.axes) axes[path] = value;
  j["axes"] = axes;
  j["figures"] = figures;
  if (!error.empty()) j["error"] = error;
  j["seconds"] = std::round(seconds * 1000) / 1000;
  return j;
}

// A finished child: its result line (the point's directory holds its full output).
Json finish_point(const SweepPoint& p, const std::string& dir, int code, double seconds) {
  const std::string point_dir = dir + "/points/" + p.id;
  const std::string log = dir + "/logs/" + p.id + ".log";
  if (code == kNotStarted) {
    return result_line(p, "error", "could not start a process", Json::object(), seconds);
  }
  if (code == kTimedOut) {
    return result_line(p, "error", "timed out after " + std::to_string(int64_t(seconds)) + " s",
                       Json::object(), seconds);
  }
  if (code != 0) {
    std::string why = last_line(log);
    if (why.empty()) why = "exit code " + std::to_string(code);
    return result_line(p, "error", why + " (exit code " + std::to_string(code) + ")",
                       Json::object(), seconds);
  }
  try {
    return result_line(p, "ok", "", key_figures(point_dir), seconds);
  } catch (const std::exception& e) {
    return result_line(p, "error", std::string("unreadable output: ") + e.what(), Json::object(),
                       seconds);
  }
}

std::string duration(double s) {
  const int64_t t = static_cast<int64_t>(std::llround(std::max(0.0, s)));
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  }
  return buf;
}

// Progress: a redrawn bar on a terminal, one line per finished point otherwise.
class Progress {
 public:
  Progress(int64_t total, int64_t skipped)
      : m_total(total), m_done(skipped), m_tty(isatty(STDERR_FILENO)), m_start(Clock::now()) {}
  void finished(const Json& r) {
    ++m_done;
    ++m_ran;
    if (r["status"] != "ok") ++m_failed;
    const double elapsed = std::chrono::duration<double>(Clock::now() - m_start).count();
    const double eta = elapsed / double(m_ran) * double(m_total - m_done);
    std::ostringstream s;
    if (m_tty) {
      const int width = 30;
      const int filled = static_cast<int>(width * m_done / std::max<int64_t>(1, m_total));
      s << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << m_done
        << "/" << m_total << "  " << m_failed << " failed  ETA " << duration(eta) << "   ";
      if (m_done == m_total) s << "\n";
    } else {
      s << "sweep: " << m_done << "/" << m_total << " done, " << m_failed << " failed, eta "
        << duration(eta) << ": " << r["status"].get<std::string>() << " "
        << r["id"].get<std::string>() << " " << r["workload"].get<std::string>() << " "
        << r["mode"].get<std::string>() << "\n";
    }
    std::cerr << s.str() << std::flush;
  }
  int64_t failed() const { return m_failed; }

 private:
  int64_t m_total, m_done, m_ran = 0, m_failed = 0;
  bool m_tty;
  Clock::time_point m_start;
};

// $SLURM_ARRAY_TASK_ID: a decimal point index, nothing else.
int64_t parse_task_id(const std::string& text) {
  const bool digits =
      !text.empty() && text.size() <= 15 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    throw InputError("SLURM_ARRAY_TASK_ID",
                     "expected a point index (0, 1, ...), got \"" + text + "\"");
  }
  return std::stoll(text);
}

int run_sweep(const SweepArgs& a) {
  const SweepSpec spec = read_sweep(a.spec);
  const int64_t n = static_cast<int64_t>(spec.points.size());
  if (a.count) {
    std::cout << n << "\n";
    return kExitOk;
  }
  if (a.list) {
    for (const auto& p : spec.points) std::cout << p.id << "\n";
    return kExitOk;
  }
  if (a.out.empty()) throw InputError("--out", "the sweep needs an output directory");
  std::error_code ec;
  if (fs::exists(a.out, ec) && !fs::is_directory(a.out, ec))
    throw InputError(a.out, "exists and is not a directory");

  // The point to run alone, checked before anything is written.
  int64_t index = a.index;
  if (index < 0) {
    if (const char* env = std::getenv("SLURM_ARRAY_TASK_ID"); env && a.jobs == 1 && *env) {
      index = parse_task_id(env);
    }
  }
  const bool single = index >= 0;
  if (single && index >= n) {
    throw InputError(a.index >= 0 ? "--index" : "SLURM_ARRAY_TASK_ID",
                     std::to_string(index) + " is outside [0, " + std::to_string(n - 1) + "]");
  }
  // A directory of another spec's sweep is not merged into.
  const Json spec_json = base::read_json_file(a.spec);
  const std::string spec_file = a.out + "/spec.json";
  if (fs::exists(spec_file, ec)) {
    Json earlier;
    try {
      earlier = base::read_json_file(spec_file);
    } catch (const InputError&) {
      earlier = Json();
    }
    if (earlier != spec_json) {
      throw InputError(a.out, "holds a sweep of a different spec (" + spec_file + " differs from " +
                                  a.spec + "); use another --out or remove the directory");
    }
  }
  const std::string results = a.out + "/results.jsonl";
  check_results_file(results);
  create_folder(a.out + "/points");
  create_folder(a.out + "/logs");
  base::write_file_atomically(spec_file, spec_json.dump(2) + "\n");

  std::vector<const SweepPoint*> todo;
  if (single) {
    todo.push_back(&spec.points[static_cast<size_t>(index)]);
  } else {
    std::set<std::string> done;
    for (const Json& r : read_results(a.out)) {
      if (r.value("status", "") == "ok") done.insert(r["id"].get<std::string>());
    }
    for (const auto& p : spec.points) {
      if (!done.count(p.id)) todo.push_back(&p);
    }
    if (todo.size() < spec.points.size()) {
      std::cerr << "sweep: " << spec.points.size() - todo.size() << " point(s) already done in "
                << a.out << "\n";
    }
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);

  Progress progress(single ? 1 : n, single ? 0 : n - static_cast<int64_t>(todo.size()));
  auto record = [&](const Json& line, const SweepPoint& p) {
    if (single) {
      create_folder(a.out + "/points/" + p.id);
      base::write_file_atomically(a.out + "/points/" + p.id + "/result.json", line.dump() + "\n");
    } else {
      append_line(results, line.dump());
    }
    progress.finished(line);
  };
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> logs;
  for (const SweepPoint* p : todo) {
    commands.push_back(p->run_args);
    commands.back().push_back("--out");
    commands.back().push_back(a.out + "/points/" + p->id);
    logs.push_back(a.out + "/logs/" + p->id + ".log");
    std::error_code ec;
    fs::remove(logs.back(), ec);
  }
  PoolOptions pool;
  pool.jobs = single ? 1 : static_cast<int>(a.jobs);
  pool.timeout_s = spec.timeout_s;
  pool.stop = &g_stop;
  run_all(commands, logs, pool, [&](size_t i, int code, double seconds) {
    record(finish_point(*todo[i], a.out, code, seconds), *todo[i]);
  });
  if (g_stop) {
    std::cerr << "\nsweep: interrupted; finished points are kept in " << results
              << " (run the same command to go on)\n";
    return 130;
  }
  std::cerr << "sweep: " << a.out << ": " << (single ? "points/<id>/result.json" : "results.jsonl")
            << ", points/<id>/, logs/<id>.log" << (progress.failed() ? " (some points failed)" : "")
            << "\n";
  return progress.failed() ? kExitFailed : kExitOk;
}

// CSV: one row per point; the axes and figures as columns (their union, first seen first).
std::string to_csv(const std::vector<Json>& rows) {
  std::vector<std::string> axes, figures;
  auto add = [](std::vector<std::string>& cols, const std::string& k) {
    if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
  };
  for (const Json& r : rows) {
    const Json ax = r.value("axes", Json::object()), fg = r.value("figures", Json::object());
    for (const auto& [k, v] : ax.items()) add(axes, k);
    for (const auto& [k, v] : fg.items()) add(figures, k);
  }
  std::ostringstream out;
  out << "index,id,status,workload,mode";
  for (const auto& k : axes) out << "," << csv_cell(k);
  for (const auto& k : figures) out << "," << k;
  out << ",seconds,error\n";
  for (const Json& r : rows) {
    out << r.value("index", int64_t{0}) << "," << csv_cell(r["id"]) << "," << csv_cell(r["status"])
        << "," << csv_cell(r["workload"]) << "," << csv_cell(r["mode"]);
    const Json ax = r.value("axes", Json::object());
    const Json fg = r.value("figures", Json::object());
    for (const auto& k : axes) out << "," << csv_cell(ax.contains(k) ? ax[k] : Json());
    for (const auto& k : figures) out << "," << csv_cell(fg.contains(k) ? fg[k] : Json());
    out << "," << csv_cell(r.value("seconds", Json())) << "," << csv_cell(r.value("error", Json()))
        << "\n";
  }
  return out.str();
}

}  // namespace

void add_sweep_commands(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "run every point of a sweep spec (config axes x workloads x modes), resumably");
  cmd->add_option("spec", a->spec, "sweep spec (JSON)")->required();
  cmd->add_option("--out,-o", a->out, "output directory: results.jsonl, points/<id>/, logs/");
  cmd->add_option("--jobs,-j", a->jobs, "points run at once on this machine")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_flag("--count", a->count, "print the number of points and exit");
  cmd->add_flag("--list", a->list, "print one point id per line, in index order, and exit");
  cmd->add_option("--index", a->index,
                  "run only point I (0-based; default $SLURM_ARRAY_TASK_ID when set), writing "
                  "points/<id>/result.json")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->callback([a] {
    const int code = run_sweep(*a);
    if (code != kExitOk) throw Exit{code};
  });

  auto dir = std::make_shared<std::string>();
  auto csv = std::make_shared<std::string>();
  CLI::App* collect = app.add_subcommand("collect", "a sweep's results as CSV (one row per point)");
  collect->add_option("dir", *dir, "the sweep's output directory")->required();
  collect->add_option("--csv", *csv, "write the CSV here (default: standard output)");
  collect->callback([dir, csv] {
    if (!fs::exists(*dir + "/results.jsonl") && !fs::exists(*dir + "/points")) {
      throw InputError(*dir, "not a sweep directory (no results.jsonl or points/)");
    }
    // The sweep writes results.jsonl as a regular file: a folder or a FIFO (which would block
    // the read forever) is not its results.
    const std::string results = *dir + "/results.jsonl";
    struct stat st {};
    if (stat(results.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      throw InputError(results, S_ISDIR(st.st_mode)
                                    ? "is a folder, not a sweep's results"
                                    : "is not a regular file, not a sweep's results");
    }
    const std::string text = to_csv(read_results(*dir));
    if (csv->empty()) {
      std::cout << text;
    } else {
      base::write_file_atomically(*csv, text);
      std::cerr << *csv << ": " << std::count(text.begin(), text.end(), '\n') - 1 << " point(s)\n";
    }
  });
}

}  // namespace wallsim::cli
