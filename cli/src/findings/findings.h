// A study's findings: the sentences under its table, computed from the same rows (the study's
// runs as study.json holds them). One file per study holds its prose; studies.def names it.
#pragma once

#include <string>
#include <vector>

#include "../cli_util.h"
#include "wallsim/base/json_object.h"

namespace wallsim::cli::findings {

using base::Json;

// What every study's findings use.
double fig(const Json& row, const std::string& key);  // a figure of a row, or NaN
std::string ms(double ns);
std::string us_or_ms(double ns);
std::string percent(double fraction);
std::string join(const std::vector<std::string>& parts, const std::string& none);
std::vector<const Json*> ok_rows(const Json& rows);
std::string label_of(const Json& r);
std::vector<std::string> series_of(const Json& r);
double workload_param(const Json& row, const std::string& key);  // `key=` of its workload, or NaN

// One per study (studies.def); a study with nothing to find returns no sentence.
std::vector<std::string> decode_findings(const Json& rows);
std::vector<std::string> mask_findings(const Json& rows);
std::vector<std::string> granularity_findings(const Json& rows);
std::vector<std::string> serving_findings(const Json& rows);
std::vector<std::string> scaleout_findings(const Json& rows);
std::vector<std::string> tensor_parallel_findings(const Json& rows);
inline std::vector<std::string> no_findings(const Json&) { return {}; }

}  // namespace wallsim::cli::findings
