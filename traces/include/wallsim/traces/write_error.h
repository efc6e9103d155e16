// WriteError: an output file or directory that could not be written or put in place (a full
// disk, a read-only filesystem, a file size limit); the CLI reports it as one line, exit code 2.
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace wallsim::traces {

class WriteError : public std::runtime_error {
 public:
  // "PATH: cannot write file (REASON)"; `reason` is usually std::strerror(errno).
  WriteError(const std::string& path, const std::string& reason)
      : std::runtime_error(path + ": cannot write file (" + reason + ")") {}
};

// The reason of the last failed system call, for a WriteError ("No space left on device").
inline std::string errno_reason(int err) { return err != 0 ? std::strerror(err) : "an I/O error"; }

}  // namespace wallsim::traces
