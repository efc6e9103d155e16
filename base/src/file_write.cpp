// Atomic whole-file writes (a temporary file renamed into place).
#include "wallsim/base/file_write.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "wallsim/base/params.h"

namespace wallsim::base {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "cannot write file");
    out << text;
    if (!out.flush()) {
      out.close();
      std::remove(tmp.c_str());
      throw InputError(path, "cannot write file");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw InputError(path, std::string("cannot write file (") + std::strerror(err) + ")");
  }
}

}  // namespace wallsim::base
