#include "wallsim/sim/simulate.h"

#include <systemc>

#if defined(__SANITIZE_ADDRESS__)
#define WALLSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WALLSIM_ASAN 1
#endif
#endif

#ifdef WALLSIM_ASAN
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace wallsim::sim {

namespace {

#ifdef WALLSIM_ASAN
// Re-registers the calling thread's own stack (from pthread) as the one it runs on: a
// "switch" from wherever ASan believes the thread is to where it really is.
void reregister_thread_stack() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* bottom = nullptr;
  size_t size = 0;
  const bool ok = pthread_attr_getstack(&attr, &bottom, &size) == 0;
  pthread_attr_destroy(&attr);
  if (!ok) return;
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
}
#endif

}  // namespace

void simulate() {
#ifdef WALLSIM_ASAN
  // What the simulation's threads allocate is not leak-checked: a thread still suspended at
  // the end (a deadlock wallsim reports, a rank that never arrives) holds its objects on a
  // coroutine stack LeakSanitizer does not scan, so they would be reported as leaks.
  __lsan_disable();
#endif
  sc_core::sc_start();
#ifdef WALLSIM_ASAN
  reregister_thread_stack();
  __lsan_enable();
#endif
}

}  // namespace wallsim::sim
