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
  return config_from_json(j);
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
