// Atomic run directories via a staging directory and rename.
#include "wallsim/traces/run_directory.h"

#include <unistd.h>

#include <filesystem>
#include <stdexcept>

namespace wallsim::traces {

namespace fs = std::filesystem;

RunDirectory::RunDirectory(std::string path) : m_path(std::move(path)) {
  while (m_path.size() > 1 && m_path.back() == '/') m_path.pop_back();
  std::error_code ec;
  fs::path target(m_path);
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec))
      throw std::runtime_error(m_path + ": exists and is not a directory");
    if (!fs::is_empty(target, ec) && !fs::exists(target / "stats.json", ec)) {
      throw std::runtime_error(
          m_path + ": not empty and not an earlier wallsim output; refusing to replace it");
    }
  }
  fs::path parent = target.parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  m_staging =
      (parent / ("." + target.filename().string() + ".partial-" + std::to_string(::getpid())))
          .string();
  fs::remove_all(m_staging, ec);
  if (!fs::create_directory(m_staging, ec)) {
    throw std::runtime_error(m_path + ": cannot create output directory (" + ec.message() + ")");
  }
}

RunDirectory::~RunDirectory() {
  if (!m_committed) {
    std::error_code ec;
    fs::remove_all(m_staging, ec);
  }
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
    if (ec) throw std::runtime_error(m_path + ": cannot replace (" + ec.message() + ")");
    fs::rename(m_staging, target, ec);
    if (ec) {
      std::error_code restore;
      fs::rename(old, target, restore);  // put the earlier output back
      throw std::runtime_error(m_path + ": cannot create (" + ec.message() + ")");
    }
    fs::remove_all(old, ec);
    ec.clear();
  } else {
    fs::rename(m_staging, target, ec);
  }
  if (ec) throw std::runtime_error(m_path + ": cannot create (" + ec.message() + ")");
  m_committed = true;
}

}  // namespace wallsim::traces
