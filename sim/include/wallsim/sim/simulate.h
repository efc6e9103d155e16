// simulate(): runs the elaborated SystemC simulation until nothing is left to do (or
// sc_stop), the one call every wallsim program and test makes instead of sc_start.
#pragma once

namespace wallsim::sim {

// sc_core::sc_start(), then, in an AddressSanitizer build, tells the sanitizer that the
// thread is back on its own stack. libsystemc 2.3.4 annotates its coroutine switches for
// ASan but leaves the main thread registered on the last coroutine's stack when sc_start
// returns; LeakSanitizer then scans that (freed) stack at exit and dies on an unmapped page,
// or misses leaks. What the simulation's threads allocate is not leak-checked (a thread left
// suspended holds its objects on a coroutine stack LeakSanitizer cannot see); everything
// allocated outside the simulation is. Without ASan this is sc_start and nothing else.
void simulate();

}  // namespace wallsim::sim
