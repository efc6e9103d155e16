// libFuzzer harness: .npy files (the reader takes a path: each input is written to a file).
#include <unistd.h>

#include <cstdio>

#include "fuzz_util.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/memory/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wallsim;
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/wallsim_npy_fuzz_" +
           std::to_string(::getpid()) + ".npy";
  }();
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    fuzz::expect_input_error_only([&] { (void)memory::read_npy(path); });
  } catch (const memory::MemoryError&) {  // also exit code 2 in the CLI
  }
  return 0;
}
