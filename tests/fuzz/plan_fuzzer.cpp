// libFuzzer harness: plan files (JSON reading, plan reading, the verifier and its deadlock check).
#include "fuzz_util.h"
#include "wallsim/isa/plan_io.h"
#include "wallsim/isa/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wallsim;
  fuzz::expect_input_error_only([&] {
    const isa::PlanSequence seq =
        isa::plan_sequence_from_json(base::parse_json(fuzz::text_of(data, size), "fuzz"));
    const isa::ArchSpec arch;
    for (const auto& d : isa::verify(seq, arch)) (void)d.to_string();
    (void)isa::format_json(isa::to_json(seq));
  });
  return 0;
}
