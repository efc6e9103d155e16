// The run report's `compile_metrics` section: the metrics users of lazy-tensor runtimes know —
// PyTorch/XLA's CompileTime, ExecuteTime, UncachedCompile and CachedCompile; TorchTPU-style
// cache requests, hits and a compilation duration per entry; and a recompile log naming the
// dimension that changed (as TORCH_LOGS=recompiles does).
#pragma once

#include "wallsim/base/params.h"
#include "wallsim/runtime/session.h"

namespace wallsim::driver {

// From a finished session: every figure is modelled (no wall-clock time), so the section is
// byte-identical between runs with the same seed.
// `steps_device_busy_ns`: the steps' device busy time summed (the session does not keep them).
base::Json compile_metrics_json(const runtime::Session& session, int64_t steps_device_busy_ns);

}  // namespace wallsim::driver
