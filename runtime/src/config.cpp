// Loading, resolving and describing the config file.
#include "wallsim/runtime/config.h"

namespace wallsim::runtime {

Config config_from_json(const isa::Json& j) {
  Config c;
  isa::read_params(j, c, "");
  sim::check_consistency(c.chip);
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  isa::Json j = isa::read_json_file(path);
  for (const auto& o : overrides) isa::apply_override(j, o);
  try {
    return config_from_json(j);
  } catch (const isa::InputError& e) {
    // Blame the last override that set this path or a parent of it, else the file.
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
      std::string key = it->substr(0, it->find('='));
      if (e.path() == key || e.path().rfind(key + ".", 0) == 0) {
        throw isa::InputError("--set " + *it, e.what());
      }
    }
    throw isa::InputError(path, e.what());
  }
}

isa::Json to_json(const Config& c) { return isa::write_params(c); }

isa::Json config_schema() {
  isa::Json s = {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
                 {"title", "wallsim config"}};
  s.update(isa::schema_of(Config{}));
  return s;
}

std::vector<isa::KeyRow> config_keys() { return isa::key_rows(Config{}); }

}  // namespace wallsim::runtime
