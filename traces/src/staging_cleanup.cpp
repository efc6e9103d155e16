// Removing registered staging directories from a signal handler, with async-signal-safe calls
// only (openat, getdents64, unlinkat, lseek, close, signal, raise), then dying of the signal.
#include "staging_cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace wallsim::traces {
namespace {

constexpr int kSlots = 4;
constexpr size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
volatile sig_atomic_t g_armed[kSlots] = {};
bool g_installed = false;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

struct Dirent64 {  // the kernel's linux_dirent64
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

bool is_dot(const char* n) { return n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0)); }

// Removes `name` under `parent_fd` and, when it is a directory, everything in it. Each pass reads
// the directory from the start again until only . and .. are left, since removing entries while
// reading may skip some.
void remove_tree(int parent_fd, const char* name, int depth) {
  if (unlinkat(parent_fd, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
  if (depth < 32) {
    const int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      alignas(8) char buf[2048];
      for (int pass = 0; pass < 1000; ++pass) {
        if (lseek(fd, 0, SEEK_SET) != 0) break;
        bool removed = false;
        for (;;) {
          const long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
          if (n <= 0) break;
          for (long off = 0; off < n;) {
            const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
            off += d->d_reclen;
            if (is_dot(d->d_name)) continue;
            if (d->d_type == DT_DIR) {
              remove_tree(fd, d->d_name, depth + 1);
            } else if (unlinkat(fd, d->d_name, 0) != 0 && errno == EISDIR) {
              remove_tree(fd, d->d_name, depth + 1);
            }
            removed = true;
          }
        }
        if (!removed) break;
      }
      close(fd);
    }
  }
  unlinkat(parent_fd, name, AT_REMOVEDIR);
}

void on_signal(int sig) {
  const int saved = errno;
  for (int i = 0; i < kSlots; ++i) {
    if (g_armed[i]) remove_tree(AT_FDCWD, g_paths[i], 0);
  }
  errno = saved;
  signal(sig, SIG_DFL);
  raise(sig);  // delivered when the handler returns: the process dies of the signal
}

}  // namespace

int arm_staging(const std::string& path) {
  if (path.empty() || path.size() >= kPathMax) return -1;
  if (!g_installed) {
    g_installed = true;
    for (int sig : kSignals) {
      struct sigaction old {};
      if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
          (old.sa_flags & SA_SIGINFO))
        continue;
      struct sigaction sa {};
      sa.sa_handler = on_signal;
      sigfillset(&sa.sa_mask);  // no other of them interrupts the cleanup
      sigaction(sig, &sa, nullptr);
    }
  }
  for (int i = 0; i < kSlots; ++i) {
    if (g_armed[i]) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_armed[i] = 1;
    return i;
  }
  return -1;
}

void disarm_staging(int slot) {
  if (slot >= 0 && slot < kSlots) g_armed[slot] = 0;
}

}  // namespace wallsim::traces
