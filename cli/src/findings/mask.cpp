// The mask study's findings: the sentences under its table, from the same rows.
#include "findings.h"

#include <cmath>

namespace wallsim::cli::findings {

// mask: per host-mask run and its chip-mask twin (the same workload with mask=chip), the mask's
// own bytes and transfer time at the host link's achieved rate, then per forward the transfer,
// device and end-to-end (warm step) time of both.
std::vector<std::string> mask_findings(const Json& rows) {
  std::vector<std::string> out;
  const std::vector<const Json*> ok = ok_rows(rows);
  for (const Json* host : ok) {
    const std::string w = (*host)["workload"].get<std::string>();
    const size_t at = w.find("mask=host");
    if (at == std::string::npos) continue;
    std::string chip_w = w;
    chip_w.replace(at, 9, "mask=chip");
    const Json* chip = nullptr;
    for (const Json* c : ok) {
      if ((*c)["workload"] == chip_w) chip = c;
    }
    if (!chip) continue;
    const double L = workload_param(*host, "seq"), steps = fig(*host, "steps");
    const double rate = fig(*host, "host_link_bytes") / fig(*host, "host_link_busy_ns");  // B/ns
    // The dense bias is L^2 bf16 values, the ids L int32: the runs' byte difference per forward.
    const double dense =
        (fig(*host, "host_link_bytes") - fig(*chip, "host_link_bytes")) / steps + 4 * L;
    const double ids = 4 * L;
    const double e2e_h = fig(*host, "warm_ns"), e2e_c = fig(*chip, "warm_ns");
    out.push_back(label_of(*host) + ": the dense mask is " + fmt(dense / double(1 << 20), 1) +
                  " MiB per forward, " + us_or_ms(dense / rate) +
                  " on the host link at its achieved " + fmt(rate, 1) +
                  " GB/s; the segment ids are " + fmt(ids / 1024, 0) + " KiB, " +
                  us_or_ms(ids / rate) + ". Per forward, host mask against chip mask: transfer " +
                  ms(fig(*host, "transfer_per_step_ns")) + " against " +
                  ms(fig(*chip, "transfer_per_step_ns")) + " (activations included), device " +
                  ms(fig(*host, "device_per_step_ns")) + " against " +
                  ms(fig(*chip, "device_per_step_ns")) + ", end to end " + ms(e2e_h) + " against " +
                  ms(e2e_c) + ": the chip mask is " + percent(std::abs(e2e_h - e2e_c) / e2e_h) +
                  (e2e_c < e2e_h ? " faster" : " slower") + " end to end.");
  }
  return out;
}

}  // namespace wallsim::cli::findings
