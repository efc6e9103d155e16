// RunDirectory: a run's output directory that appears complete or not at all. Files are written
// into a sibling staging directory, which commit() renames into place.
#pragma once

#include <string>

namespace wallsim::traces {

// The file every run directory holds (written first): a later RunDirectory replaces a non-empty
// directory only when it holds this file, so a folder of the user's is never deleted.
inline constexpr const char* kRunDirectoryMarker = ".wallsim-output";

class RunDirectory {
 public:
  // Throws std::runtime_error when `path` is empty, exists and is not a directory, or is a
  // non-empty directory without kRunDirectoryMarker (not an earlier run's output): wallsim never
  // deletes a directory it did not write. Staging directories of dead runs for the same
  // `path` (left by kill -9) are removed first. SIGINT, SIGTERM or SIGHUP before commit() removes
  // the staging directory and kills the process with that signal (when the program has no
  // handler of its own for it).
  explicit RunDirectory(std::string path);
  ~RunDirectory();  // without commit(), the staging directory is removed
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  // Path of a file (or subdirectory, created on demand) inside the staging directory.
  std::string file(const std::string& name) const;
  std::string subdir(const std::string& name) const;
  // Replaces any earlier output at `path` with the staging directory.
  void commit();
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
  std::string m_staging;
  bool m_committed = false;
  int m_signal_slot = -1;  // the staging directory's slot in the signal handler's list
};

}  // namespace wallsim::traces
