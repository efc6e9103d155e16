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

std::string_view name_of(AsyncCollectives a) { return a == AsyncCollectives::on ? "on" : "off"; }

namespace {
void check_runtime(const RuntimeConfig& r) {
  auto pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  if (!pow2(r.aot.bucket_min))
    throw base::InputError("runtime.aot.bucket_min", "must be a power of two");
  if (!pow2(r.aot.bucket_max))
    throw base::InputError("runtime.aot.bucket_max", "must be a power of two");
  if (r.lazy.repeat_max_ops < r.lazy.repeat_min_ops)
    throw base::InputError("runtime.lazy.repeat_max_ops",
                           "is smaller than runtime.lazy.repeat_min_ops");
  if (r.aot.bucket_max < r.aot.bucket_min)
    throw base::InputError("runtime.aot.bucket_max", "is smaller than runtime.aot.bucket_min");
}
// Whether the dotted path names a value in j.
bool has_path(const base::Json& j, const std::string& path) {
  const base::Json* node = &j;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object()) return false;
    auto it = node->find(key);
    if (it == node->end()) return false;
    if (dot == std::string::npos) return true;
    node = &*it;
    start = dot + 1;
  }
}
}  // namespace

Config config_from_json(const base::Json& j) {
  Config c;
  base::read_params(j, c, "");
  sim::resolve(c.system, c.chip, has_path(j, "arch.hbm.bytes"),
               has_path(j, "timing.hbm.bandwidth_gb_per_s"));
  sim::resolve_dma_transpose(c.chip, has_path(j, "arch.dma.hardware_transpose"),
                             has_path(j, "timing.dma.transpose_chunk_bytes"));
  sim::check_consistency(c.chip);
  c.chip.arch.costs = sim::cost_hints(c.chip.timing);
  check_runtime(c.runtime);
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  const base::Json file = base::read_json_file(path);
  base::Json j = file;
  for (const auto& o : overrides) base::apply_override(j, o);
  try {
    return config_from_json(j);
  } catch (const base::InputError& e) {
    // Blame the last override that set this path or a parent of it, else the file.
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
      std::string key = it->substr(0, it->find('='));
      // An override blamed for its own path or one inside it, and for a parent that only the
      // override created (`--set arch.sbufx.partitions=1`: "arch.sbufx: unknown key").
      bool created = key.rfind(e.path() + ".", 0) == 0 && !has_path(file, e.path());
      if (e.path() == key || e.path().rfind(key + ".", 0) == 0 || created || e.mentions(key)) {
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
  const Config defaults;  // named: GCC 12 warns (-Wmaybe-uninitialized) on the temporary
  s.update(base::schema_of(defaults));
  return s;
}

std::vector<base::KeyRow> config_keys() {
  const Config defaults;
  return base::key_rows(defaults);
}

}  // namespace wallsim::runtime
