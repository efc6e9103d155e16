// Loading, resolving and describing the config file.
#include "wallsim/runtime/config.h"

namespace wallsim::runtime {

std::string_view name_of(Fallback f) {
  switch (f) {
    case Fallback::split:
      return "split";
    case Fallback::eager:
      return "eager";
    case Fallback::fail:
      return "fail";
  }
  return "?";
}

std::string_view name_of(BeyondBuckets b) {
  return b == BeyondBuckets::error ? "error" : "recompile";
}

namespace {
void check_runtime(const RuntimeConfig& r) {
  auto pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  if (!pow2(r.aot.bucket_min))
    throw base::InputError("runtime.aot.bucket_min", "must be a power of two");
  if (!pow2(r.aot.bucket_max))
    throw base::InputError("runtime.aot.bucket_max", "must be a power of two");
  if (r.aot.bucket_max < r.aot.bucket_min)
    throw base::InputError("runtime.aot.bucket_max", "is smaller than runtime.aot.bucket_min");
}
}  // namespace

Config config_from_json(const base::Json& j) {
  Config c;
  base::read_params(j, c, "");
  sim::check_consistency(c.chip);
  check_runtime(c.runtime);
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  base::Json j = base::read_json_file(path);
  for (const auto& o : overrides) base::apply_override(j, o);
  try {
    return config_from_json(j);
  } catch (const base::InputError& e) {
    // Blame the last override that set this path or a parent of it, else the file.
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
      std::string key = it->substr(0, it->find('='));
      if (e.path() == key || e.path().rfind(key + ".", 0) == 0) {
        throw base::InputError("--set " + *it, e.what());
      }
    }
    throw base::InputError(path, e.what());
  }
}

base::Json to_json(const Config& c) { return base::write_params(c); }

base::Json config_schema() {
  base::Json s = {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
                  {"title", "wallsim config"}};
  s.update(base::schema_of(Config{}));
  return s;
}

std::vector<base::KeyRow> config_keys() { return base::key_rows(Config{}); }

}  // namespace wallsim::runtime
