// The importer's driver: model checks, graph inputs and initializers, one op-table conversion
// per node in order, outputs; the values of constants kept as weights.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "onnx_internal.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::frontends::onnx {

using base::InputError;
namespace cs = compiler_stub;

namespace {

// Models beyond 2 GiB are split into external data files, which the importer does not read.
constexpr int64_t kMaxModelBytes = int64_t{2} << 30;

// Node names as error messages show them.
std::string describe(const pb::NodeProto& n, size_t index) {
  std::string s = "node " + std::to_string(index);
  if (!n.name().empty()) s += " '" + n.name() + "'";
  return s;
}

std::string supported_list() {
  std::string s;
  for (const std::string& op : supported_ops()) s += (s.empty() ? "" : " ") + op;
  return s;
}

}  // namespace

std::vector<std::string> supported_ops() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : op_table()) out.push_back(name);
  return out;
}

// ---- the node being converted ----------------------------------------------------------------

void Importer::fail(const std::string& why) const {
  if (!m_node) throw InputError("graph outputs", why);
  throw InputError(describe(*m_node, m_node_index) + " (" + m_node->op_type() + ")", why);
}

size_t Importer::num_inputs() const {
  size_t n = static_cast<size_t>(m_node->input_size());
  while (n > 0 && m_node->input(static_cast<int>(n - 1)).empty()) --n;
  return n;
}

bool Importer::has_input(size_t i) const {
  return i < num_inputs() && !m_node->input(static_cast<int>(i)).empty();
}

Val Importer::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  const std::string& name = m_node->input(static_cast<int>(i));
  auto it = m_values.find(name);
  if (it == m_values.end()) fail("input '" + name + "' is not produced by any earlier node");
  return it->second;
}

const Const& Importer::const_input(size_t i, const std::string& what) const {
  Val v = input(i);
  if (!v.is_const()) fail(what + " must be a constant (it is computed at run time)");
  return *v.c;
}

std::vector<int64_t> Importer::ints_input(size_t i, const std::string& what) const {
  const Const& c = const_input(i, what);
  if (!is_int_elem(c.elem)) fail(what + " must be an integer tensor, got " + elem_name(c.elem));
  std::vector<int64_t> out;
  for (double v : c.v) out.push_back(static_cast<int64_t>(v));
  return out;
}

const pb::AttributeProto* Importer::attr(const std::string& name) const {
  for (const auto& a : m_node->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t Importer::attr_int(const std::string& name, int64_t fallback) const {
  const auto* a = attr(name);
  return a ? a->i() : fallback;
}

int64_t Importer::required_attr_int(const std::string& name) const {
  const auto* a = attr(name);
  if (!a) fail("the required attribute '" + name + "' is missing");
  return a->i();
}

double Importer::attr_float(const std::string& name, double fallback) const {
  const auto* a = attr(name);
  return a ? a->f() : fallback;
}

std::string Importer::attr_str(const std::string& name, const std::string& fallback) const {
  const auto* a = attr(name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> Importer::attr_ints(const std::string& name,
                                         std::vector<int64_t> fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  return {a->ints().begin(), a->ints().end()};
}

// ---- building the graph ----------------------------------------------------------------------

Shape Importer::shape_of(int32_t id) const {
  Shape s;
  for (const cs::Dim& d : m_out.graph.nodes[m_index.at(id)].type.dims) s.push_back(d.size);
  return s;
}

Shape Importer::shape(const Val& v) const { return v.is_const() ? v.c->shape : shape_of(v.id); }

isa::DType Importer::dtype_of(int32_t id) const {
  return m_out.graph.nodes[m_index.at(id)].type.dtype;
}

int32_t Importer::emit(OpKind op, std::vector<int32_t> inputs,
                       std::map<std::string, AttrValue> attrs, std::optional<isa::DType> dtype) {
  if (op == OpKind::matmul || op == OpKind::batch_matmul) {
    for (int32_t x : inputs) {
      if (dtype_of(x) == isa::DType::int32) {
        fail(
            "a matrix product of integer or bool values is not supported (the tensor engine "
            "multiplies float values)");
      }
    }
  }
  cs::Node n;
  n.id = m_next_id++;
  n.op = op;
  n.name = node_label();
  n.dtype = dtype;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  try {
    n.type = cs::infer_node(m_out.graph, n);
  } catch (const InputError& e) {
    fail(std::string("cannot map onto the graph IR: ") + e.what());
  }
  m_index[n.id] = m_out.graph.nodes.size();
  m_out.graph.nodes.push_back(std::move(n));
  return m_out.graph.nodes.back().id;
}

std::string Importer::unique_name(const std::string& onnx_name, bool output) {
  std::string s;
  for (char c : onnx_name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty()) s = "t";
  // "v<digits>" names the values of other nodes (value_name()).
  if (s[0] == 'v' && s.size() > 1 && std::all_of(s.begin() + 1, s.end(), ::isdigit))
    s = (output ? "out_" : "in_") + s;
  // An output's name is a tensor's only: it may equal a graph op's name, not an input's.
  auto taken = [&](const std::string& t) {
    return m_tensors.count(t) || (!output && m_names.count(t));
  };
  std::string name = s;
  for (int k = 1; taken(name); ++k) name = s + "_" + std::to_string(k);
  m_tensors.insert(name);
  if (!output) m_names[name] = 1;
  return name;
}

std::string Importer::node_label() {
  std::string base = "output";
  if (m_node) {
    base = m_node->name().empty() ? m_node->op_type() + "_" + std::to_string(m_node_index)
                                  : m_node->name();
  }
  int& k = m_label_count[base];
  std::string label = k == 0 ? base : base + "#" + std::to_string(k);
  while (m_names.count(label)) label = base + "#" + std::to_string(++k);
  ++k;
  m_names[label] = 1;
  return label;
}

int32_t Importer::id(const Val& v) {
  if (!v.is_const()) return v.id;
  auto it = m_weights.find(v.c.get());
  if (it != m_weights.end()) return it->second.second;
  const Const& c = *v.c;
  cs::Node n;
  n.id = m_next_id++;
  n.op = OpKind::input;
  n.role = cs::InputRole::weight;
  n.name = unique_name(m_node ? "c_" + (m_node->name().empty() ? m_node->op_type() : m_node->name())
                              : "const");
  n.type.dtype = is_int_elem(c.elem) ? isa::DType::int32 : isa::DType::fp32;
  Shape shape = c.shape.empty() ? Shape{1} : c.shape;
  for (int64_t d : shape) {
    if (d < 1) fail("a constant with an empty dim cannot be a graph value");
    n.type.dims.push_back(cs::Dim::of(d));
  }
  cs::HostTensor t;
  t.shape = shape;
  for (double x : c.v) t.data.push_back(static_cast<float>(x));
  m_out.weights[n.name] = std::move(t);
  m_index[n.id] = m_out.graph.nodes.size();
  m_out.graph.nodes.push_back(n);
  m_weights[v.c.get()] = {v.c, n.id};
  return n.id;
}

// ---- the model -------------------------------------------------------------------------------

void Importer::declare_inputs(const pb::GraphProto& g, const std::string& where) {
  std::set<std::string> initialized, declared;
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) throw InputError(where, "an initializer has no name");
    if (initialized.count(t.name()))
      throw InputError(where, "initializer '" + t.name() + "' is given twice");
    m_values[t.name()] = konst(const_from_proto(t, where + ": initializer '" + t.name() + "'"));
    initialized.insert(t.name());
  }
  for (const auto& in : g.input()) {
    if (!declared.insert(in.name()).second)
      throw InputError(where, "graph input '" + in.name() + "' is declared twice");
    if (initialized.count(in.name())) continue;  // an initializer with a default value
    const std::string at = where + ": input '" + in.name() + "'";
    auto fixed = m_options.constant_files.find(in.name());
    if (fixed != m_options.constant_files.end()) {
      pb::TensorProto t;
      if (!t.ParseFromString(base::read_input_file(fixed->second))) {
        throw InputError(fixed->second, "not a valid TensorProto");
      }
      m_values[in.name()] = konst(const_from_proto(t, fixed->second));
      continue;
    }
    if (!in.type().has_tensor_type()) throw InputError(at, "only tensor inputs are supported");
    const auto& tt = in.type().tensor_type();
    const int32_t elem = tt.elem_type();
    cs::Node n;
    n.id = m_next_id++;
    n.op = OpKind::input;
    n.role = cs::InputRole::input;
    n.name = unique_name(in.name());
    if (elem == pb::TensorProto::FLOAT) {
      n.type.dtype = isa::DType::fp32;
    } else if (elem == pb::TensorProto::INT64 || elem == pb::TensorProto::INT32) {
      n.type.dtype = isa::DType::int32;  // indices: int32 on the chip
    } else {
      throw InputError(
          at, "element type " + elem_name(elem) + " is not supported (float, int32 and int64 are)");
    }
    if (!tt.has_shape()) throw InputError(at, "has no shape: a dynamic shape needs a bound");
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 1) {
          throw InputError(at, "dim " + std::to_string(d.dim_value()) + " is not supported");
        }
        n.type.dims.push_back(cs::Dim::of(d.dim_value()));
        continue;
      }
      auto it = m_options.dims.find(d.dim_param());
      if (d.dim_param().empty() || it == m_options.dims.end()) {
        throw InputError(at, "dynamic dim '" + d.dim_param() + "' has no bound (give one: --dim " +
                                 (d.dim_param().empty() ? "NAME" : d.dim_param()) + "=N)");
      }
      n.type.dims.push_back(cs::Dim::of(it->second));
    }
    if (n.type.dims.empty()) n.type.dims.push_back(cs::Dim::of(1));
    m_out.inputs.emplace_back(in.name(), n.name);
    m_index[n.id] = m_out.graph.nodes.size();
    m_values[in.name()] = Val{n.id, nullptr};
    m_out.graph.nodes.push_back(std::move(n));
  }
}

Imported Importer::run(const pb::ModelProto& model, const std::string& where) {
  if (!model.has_graph()) throw InputError(where, "the model has no graph");
  if (model.ir_version() < 3) {
    throw InputError(where, "IR version " + std::to_string(model.ir_version()) +
                                " is not supported (3 or later)");
  }
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") m_opset = op.version();
  }
  if (m_opset == 0) throw InputError(where, "the model imports no ai.onnx opset");
  if (m_opset < kMinOpset || m_opset > kMaxOpset) {
    throw InputError(where, "ai.onnx opset " + std::to_string(m_opset) + " is not supported (" +
                                std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                                ")");
  }
  const pb::GraphProto& g = model.graph();
  m_out.opset = m_opset;
  m_out.graph.name = m_options.name.empty() ? g.name() : m_options.name;
  declare_inputs(g, where);
  const auto& table = op_table();
  for (int i = 0; i < g.node_size(); ++i) {
    m_node = &g.node(i);
    m_node_index = static_cast<size_t>(i);
    const pb::NodeProto& n = *m_node;
    if (!n.domain().empty() && n.domain() != "ai.onnx") {
      fail("ONNX op '" + n.domain() + "." + n.op_type() +
           "' is not supported (only the ai.onnx domain is; supported: " + supported_list() + ")");
    }
    auto it = table.find(n.op_type());
    if (it == table.end()) {
      fail("ONNX op '" + n.op_type() + "' is not supported (supported: " + supported_list() + ")");
    }
    std::set<std::string> attr_names;
    for (const auto& a : n.attribute()) {
      if (!attr_names.insert(a.name()).second) fail("attribute '" + a.name() + "' is given twice");
      if (!a.ref_attr_name().empty()) {
        fail("attribute '" + a.name() + "' refers to a function's attribute '" + a.ref_attr_name() +
             "' outside a function");
      }
    }
    std::vector<Val> outs = it->second(*this);
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty()) continue;
      if (m_values.count(n.output(k))) {
        fail("output '" + n.output(k) +
             "' is already a graph input, an initializer or an earlier node's output (ONNX "
             "values are assigned once)");
      }
      if (static_cast<size_t>(k) >= outs.size())
        fail("output " + std::to_string(k) + " is not supported");
      m_values[n.output(k)] = outs[static_cast<size_t>(k)];
    }
  }
  m_node = nullptr;
  if (g.output_size() == 0) throw InputError(where, "the graph has no outputs");
  for (const auto& o : g.output()) {
    auto it = m_values.find(o.name());
    if (it == m_values.end()) {
      throw InputError(where, "output '" + o.name() + "' is not produced by any node");
    }
    int32_t out = id(it->second);
    // A graph output must be computed: an input or weight passed straight through is copied, as
    // is a value that is already another output (each output names its own tensor).
    const cs::Node& produced = m_out.graph.nodes[m_index.at(out)];
    if (produced.op == OpKind::input || !produced.output_name.empty()) {
      out = emit(OpKind::reshape, {out}, {{"shape", shape_of(out)}});
    }
    // Its tensor, and exec's outputs/<name>.npy, take the output's name (made a file name).
    m_out.graph.nodes[m_index.at(out)].output_name = unique_name(o.name(), true);
    m_out.graph.outputs.push_back(out);
    m_out.outputs.push_back(o.name());
  }
  try {
    cs::infer_types(m_out.graph);
  } catch (const InputError& e) {
    throw InputError(where, std::string("imported graph is invalid: ") + e.what());
  }
  return std::move(m_out);
}

Imported import_bytes(const std::string& bytes, const std::string& where,
                      const ImportOptions& options) {
  pb::ModelProto model;
  if (bytes.empty()) throw InputError(where, "empty file: not an ONNX model");
  if (!model.ParseFromString(bytes)) {
    throw InputError(where, "not a valid ONNX model (malformed or truncated protobuf)");
  }
  Importer importer(options);
  return importer.run(model, where);
}

std::vector<std::string> input_names(const std::string& path) {
  pb::ModelProto model;
  if (!model.ParseFromString(base::read_input_file(path, kMaxModelBytes))) {
    throw InputError(path, "not a valid ONNX model");
  }
  std::set<std::string> init;
  for (const auto& t : model.graph().initializer()) init.insert(t.name());
  std::vector<std::string> out;
  for (const auto& i : model.graph().input()) {
    if (!init.count(i.name())) out.push_back(i.name());
  }
  return out;
}

Imported import_file(const std::string& path, const ImportOptions& options) {
  const std::string bytes = base::read_input_file(path, kMaxModelBytes);
  ImportOptions o = options;
  if (o.name.empty()) {
    std::string stem = path.substr(path.find_last_of('/') + 1);
    o.name = stem.substr(0, stem.rfind('.'));
  }
  try {
    return import_bytes(bytes, path, o);
  } catch (const InputError& e) {
    if (e.path().rfind(path, 0) == 0) throw;
    throw InputError(path, e.what());  // a node's error names the model file too
  }
}

}  // namespace wallsim::frontends::onnx
