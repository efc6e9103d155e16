// Atomic run directories via a staging directory and rename.
#include "wallsim/traces/run_directory.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "staging_cleanup.h"
#include "wallsim/traces/write_error.h"

namespace wallsim::traces {

namespace fs = std::filesystem;

namespace {

// The marker every run directory holds: only a directory with it is replaced by a later run.
constexpr const char* kMarkerText =
    "wallsim output directory: the next wallsim run with --out here replaces it\n";

bool has_marker(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(dir / kRunDirectoryMarker, ec));
}

// Removes `.NAME.partial-PID` and `.NAME.old-PID` left in `parent` by runs that died (kill -9)
// before committing or cleaning up: those whose process no longer exists.
void remove_stale_staging(const fs::path& parent, const std::string& name) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string f = e.path().filename().string();
    for (const char* kind : {".partial-", ".old-"}) {
      const std::string prefix = "." + name + kind;
      if (f.size() <= prefix.size() || f.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string pid_text = f.substr(prefix.size());
      if (pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
      if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
      std::error_code rm;
      fs::remove_all(e.path(), rm);
    }
  }
}

}  // namespace

RunDirectory::RunDirectory(std::string path) : m_path(std::move(path)) {
  while (m_path.size() > 1 && m_path.back() == '/') m_path.pop_back();
  if (m_path.empty()) throw std::runtime_error("the output directory path is empty");
  std::error_code ec;
  fs::path target(m_path);
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec))
      throw std::runtime_error(m_path + ": exists and is not a directory");
    if (!fs::is_empty(target, ec) && !has_marker(target)) {
      throw std::runtime_error(m_path + ": not empty and not an earlier wallsim output (no " +
                               kRunDirectoryMarker + " in it); refusing to replace it");
    }
  }
  fs::path parent = target.parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  remove_stale_staging(parent.empty() ? fs::path(".") : parent, target.filename().string());
  m_staging =
      (parent / ("." + target.filename().string() + ".partial-" + std::to_string(::getpid())))
          .string();
  fs::remove_all(m_staging, ec);
  if (!fs::create_directory(m_staging, ec)) {
    throw std::runtime_error(m_path + ": cannot create output directory (" + ec.message() + ")");
  }
  {
    std::ofstream marker(file(kRunDirectoryMarker), std::ios::binary);
    marker << kMarkerText;
    if (!marker.flush()) {
      marker.close();
      fs::remove_all(m_staging, ec);
      throw std::runtime_error(m_path + ": cannot write in the output directory's parent");
    }
  }
  m_signal_slot = arm_staging(m_staging);
}

RunDirectory::~RunDirectory() {
  if (!m_committed) {
    std::error_code ec;
    fs::remove_all(m_staging, ec);
  }
  disarm_staging(m_signal_slot);
}

std::string RunDirectory::file(const std::string& name) const { return m_staging + "/" + name; }

std::string RunDirectory::subdir(const std::string& name) const {
  std::string p = m_staging + "/" + name;
  std::error_code ec;
  fs::create_directories(p, ec);
  return p;
}

void RunDirectory::commit() {
  std::error_code ec;
  fs::path target(m_path);
  if (fs::exists(target, ec)) {
    fs::path old = target.parent_path() /
                   ("." + target.filename().string() + ".old-" + std::to_string(::getpid()));
    fs::rename(target, old, ec);
    if (ec) throw WriteError(m_path, ec.message());
    fs::rename(m_staging, target, ec);
    if (ec) {
      std::error_code restore;
      fs::rename(old, target, restore);  // put the earlier output back
      throw WriteError(m_path, ec.message());
    }
    fs::remove_all(old, ec);
    ec.clear();
  } else {
    fs::rename(m_staging, target, ec);
  }
  if (ec) throw WriteError(m_path, ec.message());
  m_committed = true;
  disarm_staging(m_signal_slot);  // after the rename: the handler finds nothing at m_staging
  m_signal_slot = -1;
}

}  // namespace wallsim::traces
