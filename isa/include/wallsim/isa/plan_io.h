// The plan file: readable JSON that round-trips exactly and that a person can write by hand.
//
//   {"format": "wallsim-plan", "version": 1, "plans": [PLAN, ...]}
//
// docs/PLAN_FORMAT.md describes every field. Reading is strict: any malformed, truncated or
// hostile input throws InputError naming the file and JSON path; it never crashes.
#pragma once

#include <string>

#include "wallsim/base/params.h"
#include "wallsim/isa/plan.h"

namespace wallsim::isa {

inline constexpr int kPlanFormatVersion = 1;
inline constexpr int64_t kMaxPlanFileBytes = int64_t{1} << 30;

PlanSequence plan_sequence_from_json(const base::Json& j);
base::Json to_json(const PlanSequence& seq);
base::Json to_json(const AccessPattern& ap, const Plan& plan);

// Text form: objects and arrays on one line when they fit in `width` columns, else one member
// per line. Deterministic.
std::string format_json(const base::Json& j, int width = 100);

PlanSequence read_plan_file(const std::string& path);
// Writes to `path` atomically (a temporary file renamed into place).
void write_plan_file(const PlanSequence& seq, const std::string& path);

}  // namespace wallsim::isa
