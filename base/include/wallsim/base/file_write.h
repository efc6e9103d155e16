// Writing a whole file atomically: readers see the old file or the new one, never a part.
#pragma once

#include <string>

namespace wallsim::base {

// Throws InputError(path, ...) unless `path` is absent or a regular file (a symlink is followed):
// an output never replaces a directory, a FIFO, a socket or a device node.
void check_output_file(const std::string& path);

// Writes `text` to `path` through a temporary file `path.tmpXXXXXX` renamed over it. Throws
// InputError(path, reason) when `path` is not a regular file or absent (check_output_file), or
// when the file cannot be written or put in place (a missing parent directory, a parent that is a
// file, a full disk: the reason names the system's error); the temporary file is removed.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace wallsim::base
