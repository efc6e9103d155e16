// Reading and writing graph files: strict JSON with paths in every error, exact round trips.
#include "wallsim/compiler_stub/graph_io.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "wallsim/base/file_write.h"
#include "wallsim/base/json_object.h"
#include "wallsim/isa/plan_io.h"

namespace wallsim::compiler_stub {
namespace {

using base::abbreviate;
using base::InputError;
using base::Json;

// Bounds that keep all later arithmetic far from overflow.
constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr int64_t kMaxGraphFileBytes = int64_t{1} << 30;

using Obj = base::JsonObject;

std::string idx(const std::string& path, size_t i) { return base::json_index(path, i); }

// Ops whose `shape` and `dtype` keys declare the output type instead of being attributes.
bool declares_type(OpKind op) {
  return op == OpKind::input || op == OpKind::iota || op == OpKind::recv;
}

// ---- reading ---------------------------------------------------------------------------------

Dim read_dim(const Json& v, const std::string& path) {
  if (v.is_number()) return Dim::of(Obj::as_int(v, path, 1, kMaxSize));
  if (v.is_string() && v.get<std::string>() == "?") return Dim::unknown();
  if (v.is_object()) {
    Obj o(v, path);
    int64_t max = o.integer("max", 1, kMaxSize);
    std::string scalar = o.str("scalar");
    o.finish();
    if (scalar.empty()) throw InputError(o.at("scalar"), "expected a scalar name");
    return Dim::bounded(max, std::move(scalar));
  }
  throw InputError(
      path, "expected an integer, {\"max\": N, \"scalar\": NAME} or \"?\", got " + abbreviate(v));
}

AttrValue read_attr(AttrKind kind, const Json& v, const std::string& path) {
  switch (kind) {
    case AttrKind::integer:
      return Obj::as_int(v, path, -kMaxSize, kMaxSize);
    case AttrKind::real:
      if (!v.is_number()) throw InputError(path, "expected a number, got " + abbreviate(v));
      return v.get<double>();
    case AttrKind::text:
      return Obj::as_str(v, path);
    case AttrKind::ints: {
      if (!v.is_array()) {
        throw InputError(path, "expected an array of integers, got " + abbreviate(v));
      }
      std::vector<int64_t> out;
      for (size_t i = 0; i < v.size(); ++i) {
        out.push_back(Obj::as_int(v[i], idx(path, i), -kMaxSize, kMaxSize));
      }
      return out;
    }
  }
  return int64_t{0};
}

isa::DType read_dtype(const Json& v, const std::string& path) {
  std::string s = Obj::as_str(v, path);
  auto t = isa::parse_dtype(s);
  if (!t) throw InputError(path, "unknown dtype \"" + s + "\"");
  return *t;
}

ScalarParam read_scalar(const Json& j, const std::string& path) {
  Obj o(j, path);
  ScalarParam s;
  s.name = o.str("name");
  s.min = o.integer("min", 0, kMaxSize);
  s.max = o.integer("max", 0, kMaxSize);
  o.finish();
  if (s.name.empty()) throw InputError(o.at("name"), "expected a non-empty name");
  if (s.min > s.max) {
    o.fail("min " + std::to_string(s.min) + " exceeds max " + std::to_string(s.max));
  }
  return s;
}

Node read_node(const Json& j, const std::string& path) {
  Obj o(j, path);
  Node n;
  n.id = static_cast<int32_t>(o.integer("id", 0, INT32_MAX));
  std::string op = o.str("op");
  auto kind = parse_op(op);
  if (!kind) throw InputError(o.at("op"), "unknown op \"" + op + "\"");
  n.op = *kind;
  if (const Json* a = o.array_opt("inputs")) {
    for (size_t i = 0; i < a->size(); ++i) {
      n.inputs.push_back(
          static_cast<int32_t>(Obj::as_int((*a)[i], idx(o.at("inputs"), i), 0, INT32_MAX)));
    }
  }
  if (const Json* v = o.opt("name")) n.name = Obj::as_str(*v, o.at("name"));
  if (const Json* v = o.opt("output_name")) {
    n.output_name = Obj::as_str(*v, o.at("output_name"));
  }
  if (declares_type(n.op)) {
    n.type.dtype = read_dtype(o.req("dtype"), o.at("dtype"));
    const Json& shape = o.array("shape");
    for (size_t i = 0; i < shape.size(); ++i) {
      n.type.dims.push_back(read_dim(shape[i], idx(o.at("shape"), i)));
    }
    if (n.op == OpKind::input) {
      if (const Json* v = o.opt("role")) {
        std::string s = Obj::as_str(*v, o.at("role"));
        auto role = parse_role(s);
        if (!role) {
          throw InputError(o.at("role"), "expected \"input\" or \"weight\", got " + abbreviate(*v));
        }
        n.role = *role;
      }
    }
  } else if (const Json* v = o.opt("dtype")) {
    n.dtype = read_dtype(*v, o.at("dtype"));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (n.attrs.count(key) || !accepts_attr(n.op, key)) continue;
    if (declares_type(n.op) && (key == "shape" || key == "dtype" || key == "role")) continue;
    auto kind_of = attr_kind(key);
    if (!kind_of) continue;  // left for finish() to reject
    o.opt(key);
    n.attrs[key] = read_attr(*kind_of, *it, o.at(key));
  }
  o.finish();
  return n;
}

// ---- writing ---------------------------------------------------------------------------------

Json dim_json(const Dim& d) {
  switch (d.kind) {
    case Dim::Kind::fixed:
      return d.size;
    case Dim::Kind::bounded:
      return Json{{"max", d.size}, {"scalar", d.scalar}};
    case Dim::Kind::unknown:
      return "?";
  }
  return "?";
}

Json attr_json(const AttrValue& v) {
  return std::visit([](const auto& x) { return Json(x); }, v);
}

Json node_json(const Node& n) {
  Json j = Json::object();
  j["id"] = n.id;
  j["op"] = std::string(info(n.op).name);
  if (!n.inputs.empty()) j["inputs"] = n.inputs;
  if (!n.name.empty()) j["name"] = n.name;
  if (!n.output_name.empty()) j["output_name"] = n.output_name;
  if (declares_type(n.op)) {
    j["dtype"] = std::string(isa::name_of(n.type.dtype));
    Json shape = Json::array();
    for (const Dim& d : n.type.dims) shape.push_back(dim_json(d));
    j["shape"] = std::move(shape);
    if (n.op == OpKind::input) j["role"] = std::string(name_of(n.role));
  } else if (n.dtype) {
    j["dtype"] = std::string(isa::name_of(*n.dtype));
  }
  for (const auto& [key, value] : n.attrs) j[key] = attr_json(value);
  return j;
}

}  // namespace

Graph graph_from_json(const Json& j) {
  Obj o(j, "(root)");
  std::string format = o.str("format");
  if (format != "wallsim-graph") {
    throw InputError(o.at("format"), "expected \"wallsim-graph\", got " + abbreviate(format));
  }
  int64_t version = o.integer("version", 0, INT32_MAX);
  if (version != kGraphFormatVersion) {
    throw InputError(o.at("version"), "unsupported graph format version " +
                                          std::to_string(version) + " (this build reads version " +
                                          std::to_string(kGraphFormatVersion) + ")");
  }
  Graph g;
  g.name = o.str("name");
  const Json* scalars = o.array_opt("scalars");
  const Json& nodes = o.array("nodes");
  const Json& outputs = o.array("outputs");
  o.finish();
  if (scalars) {
    for (size_t i = 0; i < scalars->size(); ++i) {
      std::string path = idx("scalars", i);
      ScalarParam s = read_scalar((*scalars)[i], path);
      if (g.find_scalar(s.name)) throw InputError(path, "duplicate scalar \"" + s.name + "\"");
      g.scalars.push_back(std::move(s));
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) g.nodes.push_back(read_node(nodes[i], idx("nodes", i)));
  for (size_t i = 0; i < outputs.size(); ++i) {
    g.outputs.push_back(
        static_cast<int32_t>(Obj::as_int(outputs[i], idx("outputs", i), 0, INT32_MAX)));
  }
  return g;
}

Json to_json(const Graph& g) {
  Json j = Json::object();
  j["format"] = "wallsim-graph";
  j["version"] = kGraphFormatVersion;
  j["name"] = g.name;
  if (!g.scalars.empty()) {
    Json a = Json::array();
    for (const auto& s : g.scalars) a.push_back({{"name", s.name}, {"min", s.min}, {"max", s.max}});
    j["scalars"] = std::move(a);
  }
  Json nodes = Json::array();
  for (const Node& n : g.nodes) nodes.push_back(node_json(n));
  j["nodes"] = std::move(nodes);
  j["outputs"] = g.outputs;
  return j;
}

Graph read_graph_file(const std::string& path) {
  try {
    return graph_from_json(base::read_json_file(path, kMaxGraphFileBytes));
  } catch (const InputError& e) {
    if (e.path() == path) throw;
    throw InputError(path, e.what());
  }
}

void write_graph_file(const Graph& g, const std::string& path) {
  base::write_file_atomically(path, isa::format_json(to_json(g)));
}

}  // namespace wallsim::compiler_stub
