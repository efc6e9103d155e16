// Helpers for the compiler_stub tests: graphs from JSON snippets, error messages as strings.
#pragma once

#include <string>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/graph_io.h"

namespace wallsim::compiler_stub::test {

// A graph from the JSON text of its nodes array, outputs array and scalars array.
inline Graph make_graph(const std::string& nodes, const std::string& outputs,
                        const std::string& scalars = "[]") {
  return graph_from_json(
      base::Json::parse(R"({"format": "wallsim-graph", "version": 1, "name": "t", "scalars": )" +
                        scalars + R"(, "nodes": )" + nodes + R"(, "outputs": )" + outputs + "}"));
}

// The message of the base::InputError `f` throws, or "no error".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const base::InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace wallsim::compiler_stub::test
