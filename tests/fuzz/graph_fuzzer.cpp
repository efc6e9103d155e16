// libFuzzer harness: graph files (reading and validation; small graphs are also compiled).
#include "../support/chip_arch.h"
#include "fuzz_util.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wallsim;
  fuzz::expect_input_error_only([&] {
    compiler_stub::Graph g =
        compiler_stub::graph_from_json(base::parse_json(fuzz::text_of(data, size), "fuzz"));
    compiler_stub::infer_types(g);
    int64_t elements = 0;
    for (const auto& n : g.nodes) {
      const int64_t e = n.type.elements();
      if (e < 0 || e > (1 << 16)) return;  // compiling large graphs is slow, not interesting
      elements += e;
    }
    if (elements > (1 << 18) || g.nodes.size() > 64) return;
    (void)compiler_stub::compile_graph(g, wallsim::test::trn2_arch(),
                                       compiler_stub::GroupPolicy::whole, {}, {});
  });
  return 0;
}
