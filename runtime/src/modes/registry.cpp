// The execution-mode registry: the list in modes.def, looked up by name.
#include "wallsim/base/params.h"
#include "wallsim/runtime/execution_mode.h"

namespace wallsim::runtime {

#define WALLSIM_MODE(id) const ExecutionMode& id##_mode();
#include "modes.def"
#undef WALLSIM_MODE

const std::vector<const ExecutionMode*>& all_modes() {
  static const std::vector<const ExecutionMode*> kModes = {
#define WALLSIM_MODE(id) &id##_mode(),
#include "modes.def"
#undef WALLSIM_MODE
  };
  return kModes;
}

const ExecutionMode* find_mode(std::string_view name) {
  for (const ExecutionMode* m : all_modes()) {
    if (m->name() == name) return m;
  }
  return nullptr;
}

std::string mode_list() {
  std::string out;
  for (const ExecutionMode* m : all_modes())
    out += (out.empty() ? "" : ", ") + std::string(m->name());
  return out;
}

const ExecutionMode& mode_named(std::string_view name, const std::string& path) {
  if (const ExecutionMode* m = find_mode(name)) return *m;
  throw base::InputError(path, "unknown mode '" + std::string(name) + "' (" + mode_list() + ")");
}

const ExecutionMode& default_mode() { return mode_named("fused"); }

std::vector<const ExecutionMode*> baseline_modes() {
  std::vector<const ExecutionMode*> out;
  for (const ExecutionMode* m : all_modes()) {
    if (m->is_baseline()) out.push_back(m);
  }
  return out;
}

std::vector<std::string> mode_names() {
  std::vector<std::string> out;
  for (const ExecutionMode* m : all_modes()) out.emplace_back(m->name());
  return out;
}

std::string mode_help() {
  std::string out;
  for (const ExecutionMode* m : all_modes()) {
    out += "\n  " + std::string(m->name()) + " - " + std::string(m->help());
  }
  return out;
}

}  // namespace wallsim::runtime
