// libFuzzer harness: workload strings (`-w NAME:key=value,...`): parsed and the workload made.
#include "fuzz_util.h"
#include "wallsim/workloads/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wallsim;
  fuzz::expect_input_error_only(
      [&] { (void)workloads::make_workload(workloads::parse_spec(fuzz::text_of(data, size))); });
  return 0;
}
