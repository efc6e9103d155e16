// Staging directories removed when the process is killed by SIGINT, SIGTERM or SIGHUP, so an
// interrupted run leaves nothing behind (kill -9 cannot be caught: the next RunDirectory for the
// same path removes those).
#pragma once

#include <string>

namespace wallsim::traces {

// Registers `path` for removal by the signal handler; returns a slot for disarm_staging(), or
// -1 when none is free (the directory is then only cleaned by a later run). Installs the handler
// for each of the three signals whose disposition is still the default: a program that handles
// a signal itself (sweep, with its own stop flag) keeps its handler and cleans up on return.
int arm_staging(const std::string& path);
// The directory is committed or removed: the handler leaves it alone. -1 is ignored.
void disarm_staging(int slot);

}  // namespace wallsim::traces
