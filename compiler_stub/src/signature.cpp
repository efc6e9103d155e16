// Canonical group signatures.
#include "wallsim/compiler_stub/signature.h"

#include <cstdio>
#include <map>

namespace wallsim::compiler_stub {
namespace {

std::string dims_text(const TensorType& t) {
  std::string s = std::string(isa::name_of(t.dtype)) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const Dim& d = t.dims[i];
    if (i) s += ",";
    if (d.kind == Dim::Kind::bounded) s += "<=";
    s += d.kind == Dim::Kind::unknown ? "?" : std::to_string(d.size);
  }
  return s + "]";
}

std::string attr_text(const AttrValue& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", *d);
    return buf;
  }
  if (auto* s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
  std::string out = "[";
  const auto& list = std::get<std::vector<int64_t>>(v);
  for (size_t i = 0; i < list.size(); ++i) out += (i ? "," : "") + std::to_string(list[i]);
  return out + "]";
}

std::string build(const Graph& g, const std::vector<int32_t>& group, uint64_t arch, bool shapes) {
  std::string s = "arch " + std::to_string(arch) + "\n";
  std::map<int32_t, size_t> position;
  std::map<int32_t, size_t> external;
  for (size_t i = 0; i < group.size(); ++i) position[group[i]] = i;
  for (size_t i = 0; i < group.size(); ++i) {
    const Node* n = g.find(group[i]);
    if (!n) continue;
    s += "%" + std::to_string(i) + " = " + std::string(info(n->op).name) + "(";
    for (size_t k = 0; k < n->inputs.size(); ++k) {
      if (k) s += ", ";
      const int32_t in = n->inputs[k];
      if (position.count(in)) {
        s += "%" + std::to_string(position[in]);
      } else {
        auto [it, fresh] = external.emplace(in, external.size());
        const Node* src = g.find(in);
        s += "$" + std::to_string(it->second);
        if (src)
          s += ":" + (shapes ? dims_text(src->type) : std::string(isa::name_of(src->type.dtype)));
      }
    }
    s += ")";
    for (const auto& [key, value] : n->attrs) {
      // Extents in attributes (a reshape's shape, a slice's bounds) are shapes too.
      if (!shapes && (key == "shape" || key == "start" || key == "limit")) continue;
      s += " " + key + "=" + attr_text(value);
    }
    s += " -> " + (shapes ? dims_text(n->type) : std::string(isa::name_of(n->type.dtype))) + "\n";
  }
  // Which values leave the group: the same ops with other live results are another plan (it
  // writes other HBM tensors).
  std::string outs;
  for (int32_t id : g.outputs) {
    if (auto it = position.find(id); it != position.end())
      outs += " %" + std::to_string(it->second);
  }
  if (!outs.empty()) s += "out" + outs + "\n";
  return s;
}

}  // namespace

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string GroupSignature::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

uint64_t arch_fingerprint(const isa::ArchSpec& arch) {
  return fnv1a64(base::write_params(arch).dump());
}

GroupSignature group_signature(const Graph& g, const std::vector<int32_t>& group, uint64_t arch) {
  GroupSignature sig;
  sig.text = build(g, group, arch, true);
  sig.hash = fnv1a64(sig.text);
  sig.shape_free = fnv1a64(build(g, group, arch, false));
  return sig;
}

}  // namespace wallsim::compiler_stub
