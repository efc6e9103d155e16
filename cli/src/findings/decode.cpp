// The decode study's findings: the sentences under its table, from the same rows.
#include "findings.h"

#include "wallsim/runtime/execution_mode.h"

#include <cmath>

namespace wallsim::cli::findings {

// decode: which runs' token steps beat native's (p50 over every token step).
std::vector<std::string> decode_findings(const Json& rows) {
  const std::vector<const Json*> ok = ok_rows(rows);
  const Json* native = nullptr;
  for (const Json* r : ok) {
    const bool baseline = runtime::mode_named((*r)["mode"].get<std::string>()).is_baseline();
    if (baseline && !std::isnan(fig(*r, "token_p50_ns"))) native = r;
  }
  if (!native) return {};
  const double base = fig(*native, "token_p50_ns");
  std::vector<std::string> faster, slower;
  for (const Json* r : ok) {
    const double t = fig(*r, "token_p50_ns");
    if (r == native || std::isnan(t)) continue;
    (t < base ? faster : slower).push_back(label_of(*r) + " " + ms(t));
  }
  return {"Per token (p50 over every token step, compiles included), against " + label_of(*native) +
          "'s " + ms(base) + ": faster: " + join(faster, "none") +
          "; slower: " + join(slower, "none") + "."};
}

}  // namespace wallsim::cli::findings
