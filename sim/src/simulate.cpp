// simulate(): checks the elaborated threads against the host's memory-map limit, then sc_start.
#include "wallsim/sim/simulate.h"

#include <systemc>

#include "wallsim/base/host_memory.h"

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

// SystemC threads (SC_THREAD, SC_CTHREAD and spawned) under `objects`, at any depth.
int64_t count_threads(const std::vector<sc_core::sc_object*>& objects) {
  int64_t n = 0;
  for (const sc_core::sc_object* o : objects) {
    const std::string kind = o->kind();
    if (kind == "sc_thread_process" || kind == "sc_cthread_process") ++n;
    n += count_threads(o->get_child_objects());
  }
  return n;
}

}  // namespace

void simulate() {
  // Each thread's stack is allocated when the simulation starts; past vm.max_map_count the
  // allocation fails and the run would end in std::bad_alloc (a 512-rank run: issue 39).
  // DMA queues spawn their threads on first use, from what the elaborated ones leave.
  const int64_t threads = count_threads(sc_core::sc_get_top_level_objects());
  const int64_t maps = base::memory_maps_now(), limit = base::memory_maps_limit();
  base::check_memory_maps(threads, maps, limit, "simulation");
  base::set_thread_budget(
      limit < 0 || maps < 0 ? -1 : (limit - base::memory_maps_needed(threads, maps)) / 2, limit);
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
