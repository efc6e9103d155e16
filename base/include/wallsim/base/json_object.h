// JsonObject: a strict view of one JSON object for hand-written input files (plans, graphs):
// typed getters, the JSON path in every error, unknown keys rejected, `_` keys as comments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wallsim/base/params.h"

namespace wallsim::base {

// Keys passed to opt()/req() are remembered as views until finish(): pass string literals or
// keys of the viewed JSON, which outlive the JsonObject.
class JsonObject {
 public:
  JsonObject(const Json& j, std::string path) : m_j(j), m_path(std::move(path)) {
    if (!j.is_object()) fail("expected an object, got " + abbreviate(j));
  }
  [[noreturn]] void fail(const std::string& problem) const { throw InputError(m_path, problem); }
  std::string at(std::string_view key) const { return m_path + "." + std::string(key); }
  const Json& json() const { return m_j; }

  const Json* opt(std::string_view key) {
    m_known.emplace_back(key);
    auto it = m_j.find(std::string(key));
    return it == m_j.end() ? nullptr : &*it;
  }
  const Json& req(std::string_view key) {
    const Json* v = opt(key);
    if (!v) fail("missing key \"" + std::string(key) + "\"");
    return *v;
  }
  std::string str(std::string_view key) { return as_str(req(key), at(key)); }
  int64_t integer(std::string_view key, int64_t lo, int64_t hi) {
    return as_int(req(key), at(key), lo, hi);
  }
  int64_t integer_or(std::string_view key, int64_t lo, int64_t hi, int64_t dflt) {
    const Json* v = opt(key);
    return v ? as_int(*v, at(key), lo, hi) : dflt;
  }
  double real_or(std::string_view key, double dflt) {
    const Json* v = opt(key);
    if (!v) return dflt;
    if (!v->is_number()) throw InputError(at(key), "expected a number, got " + abbreviate(*v));
    return v->get<double>();
  }
  bool boolean_or(std::string_view key, bool dflt) {
    const Json* v = opt(key);
    if (!v) return dflt;
    if (!v->is_boolean())
      throw InputError(at(key), "expected true or false, got " + abbreviate(*v));
    return v->get<bool>();
  }
  const Json& array(std::string_view key) {
    const Json& v = req(key);
    if (!v.is_array()) throw InputError(at(key), "expected an array, got " + abbreviate(v));
    return v;
  }
  const Json* array_opt(std::string_view key) {
    const Json* v = opt(key);
    if (v && !v->is_array()) throw InputError(at(key), "expected an array, got " + abbreviate(*v));
    return v;
  }
  void finish() const {
    for (auto it = m_j.begin(); it != m_j.end(); ++it) {
      if (!it.key().empty() && it.key()[0] == '_') continue;
      if (std::find(m_known.begin(), m_known.end(), it.key()) == m_known.end()) {
        throw InputError(at(it.key()), "unknown key");
      }
    }
  }

  static std::string as_str(const Json& v, const std::string& path) {
    if (!v.is_string()) throw InputError(path, "expected a string, got " + abbreviate(v));
    return v.get<std::string>();
  }
  static int64_t as_int(const Json& v, const std::string& path, int64_t lo, int64_t hi) {
    bool ok = v.is_number_integer() &&
              !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX));
    if (ok) {
      int64_t x = v.get<int64_t>();
      if (x >= lo && x <= hi) return x;
    }
    throw InputError(path, "expected an integer in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "], got " + abbreviate(v));
  }

 private:
  const Json& m_j;
  std::string m_path;
  std::vector<std::string_view> m_known;  // keys are string literals of the reader
};

// "path[i]": the JSON path of an array element.
inline std::string json_index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

}  // namespace wallsim::base
