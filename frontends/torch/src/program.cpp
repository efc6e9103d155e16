// Reading program files: strict JSON (base::JsonObject), graph ops parsed as graph-file nodes,
// every op's type inferred as the runtime will and checked against the captured one.
#include "wallsim/torch/program.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "wallsim/base/json_object.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/memory/npy.h"

namespace wallsim::torch {
namespace {

namespace cs = compiler_stub;
using base::InputError;
using base::Json;
using Obj = base::JsonObject;

constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr double kMaxHostWork = double(int64_t{1} << 50);

// One event's problem, as a one-line error naming the event.
struct EventError {
  std::string where;  // "events[12] (op matmul)"
  [[noreturn]] void fail(const std::string& problem) const { throw InputError(where, problem); }
};

isa::DType read_dtype(const Json& v, const std::string& path) {
  const std::string s = Obj::as_str(v, path);
  auto t = isa::parse_dtype(s);
  if (!t) throw InputError(path, "unknown dtype \"" + s + "\"");
  return *t;
}

int32_t read_id(const Json& v, const std::string& path) {
  return static_cast<int32_t>(Obj::as_int(v, path, 0, INT32_MAX));
}

// dtype, shape and the optional dim_names of a tensor description.
ProgramTensor read_tensor(Obj& o, int32_t id) {
  ProgramTensor t;
  t.id = id;
  t.dtype = read_dtype(o.req("dtype"), o.at("dtype"));
  const Json& shape = o.array("shape");
  for (size_t i = 0; i < shape.size(); ++i) {
    t.shape.push_back(Obj::as_int(shape[i], base::json_index(o.at("shape"), i), 1, kMaxSize));
  }
  int64_t elements = 1;
  for (int64_t d : t.shape) {
    if (elements > kMaxSize / d) {
      throw InputError(o.at("shape"), "more than 2^40 elements");
    }
    elements *= d;
  }
  if (const Json* names = o.array_opt("dim_names")) {
    if (names->size() != t.shape.size()) {
      throw InputError(o.at("dim_names"), std::to_string(names->size()) + " names for " +
                                              std::to_string(t.shape.size()) + " axes");
    }
    for (size_t i = 0; i < names->size(); ++i) {
      const Json& n = (*names)[i];
      if (n.is_null()) {
        t.dim_names.emplace_back();
        continue;
      }
      const std::string s = Obj::as_str(n, base::json_index(o.at("dim_names"), i));
      if (s.empty()) throw InputError(base::json_index(o.at("dim_names"), i), "an empty name");
      if (const size_t star = s.find('*'); star != std::string::npos) {
        // a composite name: a named axis merged with others of F elements, F*NAME or NAME*F
        const auto digits = [](const std::string& d) {
          return !d.empty() && d.find_first_not_of("0123456789") == std::string::npos &&
                 d.size() < 12;
        };
        const std::string a = s.substr(0, star), b = s.substr(star + 1);
        if (b.find('*') != std::string::npos || digits(a) == digits(b) || a.empty() || b.empty())
          throw InputError(
              base::json_index(o.at("dim_names"), i),
              "a composite dim name is F*NAME or NAME*F (F a number), got '" + s + "'");
      }
      t.dim_names.push_back(s);
    }
  }
  return t;
}

class Reader {
 public:
  explicit Reader(std::string file) : m_file(std::move(file)) {}

  Program read() {
    const Json root = base::read_json_file(m_file);
    Obj o(root, "(root)");
    const std::string format = o.str("format");
    if (format != "wallsim-program")
      throw InputError(o.at("format"), "expected \"wallsim-program\", got \"" + format + "\"");
    const int64_t version = o.integer("version", 0, INT32_MAX);
    if (version != kProgramFormatVersion) {
      throw InputError(o.at("version"), "unsupported program format version " +
                                            std::to_string(version) + " (this build reads " +
                                            std::to_string(kProgramFormatVersion) + ")");
    }
    m_p.file = m_file;
    m_p.name = o.str("name");
    if (const Json* s = o.opt("source"); s && !s->is_object())
      throw InputError(o.at("source"), "expected an object");
    if (const Json* v = o.opt("values")) {
      const std::string dir = Obj::as_str(*v, o.at("values"));
      const std::filesystem::path rel = std::filesystem::path(dir).lexically_normal();
      bool escapes = dir.empty() || rel.is_absolute();
      for (const auto& part : rel) escapes = escapes || part == "..";
      if (escapes) {
        throw InputError(o.at("values"), "\"" + dir +
                                             "\" is not a folder inside the program file's "
                                             "folder (a relative path without '..')");
      }
      m_p.values = (std::filesystem::path(m_file).parent_path() / rel).string();
      if (!std::filesystem::is_directory(m_p.values))
        throw InputError(o.at("values"), "no directory " + m_p.values);
    }
    if (const Json* d = o.opt("dims")) {
      if (!d->is_object()) throw InputError(o.at("dims"), "expected an object");
      for (auto it = d->begin(); it != d->end(); ++it) {
        add_dim_name(it.key());
        Obj dim(it.value(), o.at("dims") + "." + it.key());
        const Json& of = dim.array("axis_of");
        if (of.size() != 2) throw InputError(dim.at("axis_of"), "expected [tensor id, axis]");
        m_axis_of.push_back({it.key(), dim.at("axis_of"),
                             read_id(of[0], base::json_index(dim.at("axis_of"), 0)),
                             Obj::as_int(of[1], base::json_index(dim.at("axis_of"), 1), 0, 64)});
        dim.finish();
      }
    }
    const Json* setup = o.array_opt("setup");
    const Json& events = o.array("events");
    o.finish();
    // The set-up section first: its values are the ones every step may use without making them.
    m_in_setup = true;
    for (size_t i = 0; setup && i < setup->size(); ++i)
      m_p.events.push_back(read_event((*setup)[i], "setup", i));
    m_in_setup = false;
    m_p.setup = m_p.events.size();
    size_t step_begin = m_p.setup;
    for (size_t i = 0; i < events.size(); ++i) {
      Event e = read_event(events[i], "events", i);
      if (e.kind == EventKind::step) {
        m_p.steps.emplace_back(step_begin, e.index);
        step_begin = e.index + 1;
      }
      m_p.events.push_back(std::move(e));
    }
    if (step_begin < m_p.events.size() || m_p.steps.empty())
      m_p.steps.emplace_back(step_begin, m_p.events.size());
    check_axis_of();
    return std::move(m_p);
  }

 private:
  Event read_event(const Json& j, const char* section, size_t i) {
    const std::string path = base::json_index(section, i);
    Obj o(j, path);
    const std::string ev = o.str("ev");
    Event e;
    e.index = m_p.events.size();
    static const std::vector<std::pair<const char*, EventKind>> kKinds = {
        {"weight", EventKind::weight},   {"input", EventKind::input}, {"op", EventKind::op},
        {"host_op", EventKind::host_op}, {"read", EventKind::read},   {"free", EventKind::free},
        {"step", EventKind::step},       {"grad", EventKind::grad}};
    bool known = false;
    for (const auto& [name, kind] : kKinds) {
      if (ev == name) {
        e.kind = kind;
        known = true;
      }
    }
    if (!known) {
      std::vector<std::string_view> names;
      for (const auto& k : kKinds) names.emplace_back(k.first);
      throw InputError(o.at("ev"), "unknown event \"" + ev + "\"" + base::did_you_mean(ev, names));
    }
    EventError err{path + " (" + ev + ")"};
    switch (e.kind) {
      case EventKind::weight:
      case EventKind::input: {
        e.out = read_tensor(o, read_id(o.req("id"), o.at("id")));
        e.name = o.str("name");
        o.finish();
        define(e.out, err);
        if (!m_p.values.empty())
          need_file(value_file(m_p, e.kind == EventKind::weight ? 'w' : 'i', e.out.id), err);
        break;
      }
      case EventKind::op:
        read_op(o, e, err);
        break;
      case EventKind::host_op: {
        e.aten = o.str("aten");
        e.module = o.str("module");
        const Json& in = o.array("inputs");
        for (size_t k = 0; k < in.size(); ++k) {
          e.inputs.push_back(read_id(in[k], base::json_index(o.at("inputs"), k)));
          use(e.inputs.back(), err);
        }
        const Json& outs = o.array("outputs");
        for (size_t k = 0; k < outs.size(); ++k) {
          Obj t(outs[k], base::json_index(o.at("outputs"), k));
          e.outputs.push_back(read_tensor(t, read_id(t.req("id"), t.at("id"))));
          t.finish();
        }
        e.flops = o.real_or("flops", -1);
        e.bytes = o.real_or("bytes", -1);
        if (!o.opt("flops") || !o.opt("bytes")) err.fail("needs \"flops\" and \"bytes\"");
        if (e.flops < 0 || e.bytes < 0) err.fail("flops and bytes must be >= 0");
        // A host op's modelled time must fit the simulator's clock (picoseconds in 64 bits).
        if (e.flops > kMaxHostWork || e.bytes > kMaxHostWork)
          err.fail("flops and bytes must be at most 2^50");
        o.finish();
        for (const ProgramTensor& t : e.outputs) {
          define(t, err);
          if (!m_p.values.empty()) need_file(value_file(m_p, 'o', t.id), err);
        }
        break;
      }
      case EventKind::read: {
        e.out.id = read_id(o.req("id"), o.at("id"));
        e.reason = o.str("reason");
        static const std::vector<std::string_view> kReasons = {"item",  "bool", "tolist",
                                                               "numpy", "cpu",  "print"};
        if (std::find(kReasons.begin(), kReasons.end(), e.reason) == kReasons.end()) {
          throw InputError(o.at("reason"), "unknown read reason \"" + e.reason + "\"" +
                                               base::did_you_mean(e.reason, kReasons));
        }
        o.finish();
        e.out = use(e.out.id, err);
        e.read_index = m_reads++;
        if (!m_p.values.empty()) need_file(value_file(m_p, 'r', e.read_index), err);
        break;
      }
      case EventKind::free:
        e.out.id = read_id(o.req("id"), o.at("id"));
        o.finish();
        e.out = use(e.out.id, err);
        if (!m_in_setup && m_tensors.at(e.out.id).setup) {
          err.fail("id " + std::to_string(e.out.id) +
                   " is a set-up value, which stays live for every step: no step frees it");
        }
        m_tensors.at(e.out.id).freed = true;
        break;
      case EventKind::step:
        o.finish();
        if (m_in_setup) err.fail("a step boundary in the set-up section (set-up is not a step)");
        break;
      case EventKind::grad:
        e.out.id = read_id(o.req("id"), o.at("id"));
        e.name = o.str("name");
        o.finish();
        e.out = use(e.out.id, err);
        if (m_in_setup) err.fail("a gradient in the set-up section (set-up runs no backward)");
        break;
    }
    return e;
  }

  void read_op(Obj& o, Event& e, EventError& err) {
    const int32_t id = read_id(o.req("id"), o.at("id"));
    const std::string op = o.str("op");
    err.where.insert(err.where.size() - 1, " " + op);  // "events[i] (op matmul)"
    const Json& in = o.array("inputs");
    const Json* attrs = o.opt("attrs");
    if (attrs && !attrs->is_object()) throw InputError(o.at("attrs"), "expected an object");
    e.out = read_tensor(o, id);
    e.aten = o.str("aten");
    e.module = o.str("module");
    if (const Json* v = o.opt("inplace_of")) e.inplace_of = read_id(*v, o.at("inplace_of"));
    o.finish();
    // The node as a graph file writes it, inputs by their position in m_graph.
    Json node = Json::object();
    node["id"] = static_cast<int64_t>(m_graph.nodes.size());
    node["op"] = op;
    Json inputs = Json::array();
    std::vector<const ProgramTensor*> in_tensors;
    for (size_t k = 0; k < in.size(); ++k) {
      const int32_t x = read_id(in[k], base::json_index(o.at("inputs"), k));
      in_tensors.push_back(&use(x, err));
      inputs.push_back(m_pos.at(x));
    }
    node["inputs"] = inputs;
    if (attrs) {
      for (auto it = attrs->begin(); it != attrs->end(); ++it) {
        if (!it->is_object()) {
          node[it.key()] = *it;
          continue;
        }
        // {"dim": NAME, "offset": K}: extent + K of the first input axis named NAME.
        Obj rel(*it, o.at("attrs") + "." + it.key());
        RelativeAttr r{it.key(), rel.str("dim"), rel.integer("offset", -kMaxSize, kMaxSize)};
        rel.finish();
        // The named dimension's current extent: its extent at its latest definition.
        auto cur = m_extent.find(r.dim);
        const int64_t extent = cur == m_extent.end() ? -1 : cur->second;
        if (extent < 0)
          err.fail("attribute " + r.key + " is relative to \"" + r.dim +
                   "\", which no tensor defined so far names");
        node[it.key()] = extent + r.offset;
        e.relative.push_back(r);
      }
    }
    const bool iota = op == "iota";
    if (iota) node["shape"] = e.out.shape;
    node["dtype"] = std::string(isa::name_of(e.out.dtype));
    const Json graph = {{"format", "wallsim-graph"},
                        {"version", cs::kGraphFormatVersion},
                        {"name", "event"},
                        {"nodes", Json::array({node})},
                        {"outputs", Json::array()}};
    cs::Node n;
    try {
      n = cs::graph_from_json(graph).nodes.at(0);
      if (n.op == cs::OpKind::input) err.fail("\"input\" is not an op event (use ev \"input\")");
      if (!iota) n.type = cs::infer_node(m_graph, n);
    } catch (const InputError& x) {
      // graph_from_json and infer_node name the node itself ("nodes[0]...", "op '...'"): keep
      // only the problem.
      std::string msg = x.what();
      if (msg.rfind("nodes[0].", 0) == 0) {
        msg = "attrs." + msg.substr(9);
      } else if (const size_t c = msg.find(": "); c != std::string::npos) {
        msg = msg.substr(c + 2);
      }
      err.fail(msg);
    }
    const cs::TensorType want = e.out.type();
    if (!(n.type == want)) {
      err.fail("the graph op's inferred type " + cs::to_string(n.type) +
               " disagrees with the captured " + cs::to_string(want));
    }
    e.node = n;
    e.node.id = id;
    e.node.inputs.clear();
    for (size_t k = 0; k < in.size(); ++k) e.node.inputs.push_back(in_tensors[k]->id);
    m_graph.nodes.push_back(std::move(n));
    define(e.out, err, /*in_graph=*/true);
  }

  void define(const ProgramTensor& t, const EventError& err, bool in_graph = false) {
    if (m_tensors.count(t.id)) err.fail("id " + std::to_string(t.id) + " is defined twice");
    for (size_t a = 0; a < t.dim_names.size(); ++a) {
      if (t.dim_names[a].empty() || t.dim_names[a].find('*') != std::string::npos) continue;
      add_dim_name(t.dim_names[a]);
      m_extent[t.dim_names[a]] = t.shape[a];
    }
    if (!in_graph) {
      cs::Node n;
      n.id = static_cast<int32_t>(m_graph.nodes.size());
      n.op = cs::OpKind::input;
      n.type = t.type();
      m_graph.nodes.push_back(std::move(n));
    }
    m_pos[t.id] = static_cast<int32_t>(m_graph.nodes.size() - 1);
    m_tensors[t.id] = {t, false, m_in_setup};
  }

  const ProgramTensor& use(int32_t id, const EventError& err) {
    auto it = m_tensors.find(id);
    if (it == m_tensors.end() && m_in_setup) {
      err.fail("id " + std::to_string(id) +
               " is not made by the set-up section (set-up events use only set-up values)");
    }
    if (it == m_tensors.end())
      err.fail("id " + std::to_string(id) + " is used before it is defined");
    if (it->second.freed) err.fail("id " + std::to_string(id) + " is used after it was freed");
    return it->second.t;
  }

  void need_file(const std::string& f, const EventError& err) const {
    if (!std::filesystem::is_regular_file(f)) err.fail("missing values file " + f);
  }

  // `dims.NAME.axis_of` names the first tensor axis that carried NAME: that tensor must be
  // defined somewhere in the file and name the axis so.
  void check_axis_of() const {
    for (const AxisOf& a : m_axis_of) {
      auto it = m_tensors.find(a.id);
      if (it == m_tensors.end())
        throw InputError(a.path, "tensor " + std::to_string(a.id) + " is defined by no event");
      const ProgramTensor& t = it->second.t;
      if (a.axis >= static_cast<int64_t>(t.shape.size())) {
        throw InputError(a.path, "axis " + std::to_string(a.axis) + " of tensor " +
                                     std::to_string(a.id) + ", which has " +
                                     std::to_string(t.shape.size()) + " axes");
      }
      if (t.dim_names.empty() || t.dim_names[a.axis] != a.name) {
        throw InputError(a.path, "axis " + std::to_string(a.axis) + " of tensor " +
                                     std::to_string(a.id) + " is not named \"" + a.name + "\"");
      }
    }
  }

  void add_dim_name(const std::string& n) {
    for (const auto& d : m_p.dim_names) {
      if (d == n) return;
    }
    m_p.dim_names.push_back(n);
  }

  struct Live {
    ProgramTensor t;
    bool freed = false;
    bool setup = false;  // made by the set-up section
  };
  struct AxisOf {
    std::string name, path;
    int32_t id;
    int64_t axis;
  };
  std::vector<AxisOf> m_axis_of;
  std::string m_file;
  Program m_p;
  std::unordered_map<int32_t, Live> m_tensors;
  std::unordered_map<int32_t, int32_t> m_pos;  // program id -> node position in m_graph
  std::map<std::string, int64_t> m_extent;     // named dim -> extent at its latest definition
  cs::Graph m_graph;                           // every tensor so far, ids = positions
  int64_t m_reads = 0;
  bool m_in_setup = false;  // reading the `setup` section
};

}  // namespace

cs::TensorType ProgramTensor::type() const {
  cs::TensorType t;
  t.dtype = dtype;
  for (int64_t d : shape) t.dims.push_back(cs::Dim::of(d));
  return t;
}

std::string_view name_of(EventKind k) {
  switch (k) {
    case EventKind::weight:
      return "weight";
    case EventKind::input:
      return "input";
    case EventKind::op:
      return "op";
    case EventKind::host_op:
      return "host_op";
    case EventKind::read:
      return "read";
    case EventKind::free:
      return "free";
    case EventKind::step:
      return "step";
    case EventKind::grad:
      return "grad";
  }
  return "?";
}

int64_t elements(const std::vector<int64_t>& shape, size_t from) {
  int64_t n = 1;
  for (size_t i = from; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::string value_file(const Program& p, char kind, int64_t n) {
  return (std::filesystem::path(p.values) / (std::string(1, kind) + std::to_string(n) + ".npy"))
      .string();
}

std::vector<float> read_values(const std::string& npy, const ProgramTensor& t) {
  const memory::NpyArray a = memory::read_npy(npy);
  if (a.shape != t.shape) {
    std::string s;
    for (int64_t d : a.shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
    throw InputError(npy, "shape [" + s + "] disagrees with tensor " + std::to_string(t.id) +
                              "'s " + cs::to_string(t.type()));
  }
  memory::TensorStore::Tensor tmp;
  tmp.space = isa::MemSpace::host;
  tmp.dtype = t.dtype;
  tmp.shape = a.shape;
  tmp.bytes.resize(static_cast<size_t>(tmp.elements() * isa::dtype_bytes(t.dtype)));
  memory::load_npy_into(a, tmp, npy);
  return memory::to_floats(tmp);
}

Program read_program_file(const std::string& path) {
  try {
    return Reader(path).read();
  } catch (const InputError& e) {
    if (e.path() == path) throw;
    throw InputError(path, e.what());
  }
}

std::string event_place(const Program& p, const Event& e) {
  return e.index < p.setup ? base::json_index("setup", e.index)
                           : base::json_index("events", e.index - p.setup);
}

base::InputError event_error(const Program& p, const Event& e, const std::string& problem) {
  std::string what = event_place(p, e) + " (" + std::string(name_of(e.kind));
  if (e.kind == EventKind::op) what += " " + std::string(compiler_stub::name_of(e.node.op));
  if (!e.aten.empty()) what += ", " + e.aten;
  return base::InputError(p.file, what + "): " + problem);
}

}  // namespace wallsim::torch
