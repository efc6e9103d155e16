// Writing a whole file atomically: readers see the old file or the new one, never a part.
#pragma once

#include <string>

namespace wallsim::base {

// Writes `text` to `path` through a temporary file `path.tmp<pid>` renamed over it. Throws
// InputError(path, reason) when the file cannot be written or put in place (a missing parent
// directory, a parent that is a file, a directory at `path`); the temporary file is removed.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace wallsim::base
