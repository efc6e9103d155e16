// Atomic whole-file writes (a temporary file renamed into place).
#include "wallsim/base/file_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "wallsim/base/params.h"

namespace wallsim::base {

namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

void check_output_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  throw InputError(path, "exists and is " + kind_of(st.st_mode) +
                             ", not a regular file; refusing to replace it");
}

void write_file_atomically(const std::string& path, const std::string& text) {
  check_output_file(path);
  std::string tmp = path + ".tmpXXXXXX";
  auto fail = [&](int err, bool remove) {
    if (remove) ::unlink(tmp.c_str());
    throw InputError(path, std::string("cannot write file (") + std::strerror(err) + ")");
  };
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(errno, false);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);  // as a file the user created (mkstemp's is 0600)
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail(err, true);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail(errno, true);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(errno, true);
}

}  // namespace wallsim::base
