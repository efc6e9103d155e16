// libFuzzer harness: config files and `--set` overrides. The input is a config file; its first
// line, when it contains '=', is also applied as an override to the tiny config.
#include "fuzz_util.h"
#include "wallsim/runtime/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wallsim;
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_input_error_only([&] {
    (void)runtime::to_json(runtime::config_from_json(base::parse_json(text, "fuzz"))).dump();
  });
  const std::string first = text.substr(0, text.find('\n'));
  if (first.find('=') == std::string::npos) return 0;
  fuzz::expect_input_error_only([&] {
    const runtime::Config defaults;  // named: GCC 12 warns (-Wmaybe-uninitialized) on a temporary
    base::Json j = runtime::to_json(defaults);
    base::apply_override(j, first);
    (void)runtime::config_from_json(j);
  });
  return 0;
}
