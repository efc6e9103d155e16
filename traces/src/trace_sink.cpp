// make_trace_sink: picks a TraceSink implementation by name at run time.
#include "wallsim/traces/trace_sink.h"

#include <stdexcept>

#include "wallsim/traces/chrome_trace.h"

namespace wallsim::traces {

std::unique_ptr<TraceSink> make_trace_sink(std::string_view kind, const std::string& path) {
  if (kind == "none") return std::make_unique<NullTraceSink>();
  if (kind == "chrome") return std::make_unique<ChromeTraceWriter>(path);
  throw std::invalid_argument("unknown trace sink kind '" + std::string(kind) +
                              "' (expected one of: none, chrome)");
}

}  // namespace wallsim::traces
