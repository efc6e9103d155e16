// The importer's internals: constants known at import, values, and the converter state the op
// table (onnx_ops.cpp) builds graph nodes through.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/frontends/onnx.h"

namespace wallsim::frontends::onnx {

namespace pb = ::onnx;
using compiler_stub::AttrValue;
using compiler_stub::OpKind;
using Shape = std::vector<int64_t>;

int64_t count_of(const Shape& s);
Shape strides_of(const Shape& s);

// A tensor whose value is known at import (an initializer, a Constant, or folded), in doubles
// (int64 shape arithmetic stays exact up to 2^53).
struct Const {
  int32_t elem = pb::TensorProto::FLOAT;
  Shape shape;
  std::vector<double> v;
  int64_t count() const { return count_of(shape); }
};
using ConstPtr = std::shared_ptr<const Const>;

// A TensorProto's value. Throws base::InputError(where, reason) for external data, a size
// that does not match the shape, or an element type without a numeric value.
Const const_from_proto(const pb::TensorProto& t, const std::string& where);
std::string elem_name(int32_t elem);
bool is_float_elem(int32_t elem);
bool is_int_elem(int32_t elem);  // int8..int64, uint8..uint64, bool

// An ONNX value during import: a graph node, or a constant (materialized as a weight the first
// time a graph op reads it).
struct Val {
  int32_t id = -1;
  ConstPtr c;
  bool is_const() const { return c != nullptr; }
};

class Importer {
 public:
  explicit Importer(const ImportOptions& options) : m_options(options) {}
  Imported run(const pb::ModelProto& model, const std::string& where);

  // ---- the node being converted ----
  const pb::NodeProto& node() const { return *m_node; }
  int64_t opset() const { return m_opset; }
  [[noreturn]] void fail(const std::string& why) const;
  size_t num_inputs() const;  // trailing empty names dropped
  bool has_input(size_t i) const;
  Val input(size_t i) const;
  // Input i as a constant (fails naming `what` when it is computed at run time).
  const Const& const_input(size_t i, const std::string& what) const;
  std::vector<int64_t> ints_input(size_t i, const std::string& what) const;
  const pb::AttributeProto* attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  // An attribute the op's schema requires: fails naming it when the node lacks it.
  int64_t required_attr_int(const std::string& name) const;
  double attr_float(const std::string& name, double fallback) const;
  std::string attr_str(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback) const;

  // ---- building the graph ----
  Shape shape(const Val& v) const;
  int32_t id(const Val& v);  // the graph node of v (a constant becomes a weight input)
  // A graph node; `dtype` sets its output dtype (else the first input's).
  int32_t emit(OpKind op, std::vector<int32_t> inputs, std::map<std::string, AttrValue> attrs = {},
               std::optional<isa::DType> dtype = std::nullopt);
  isa::DType dtype_of(int32_t id) const;
  Shape shape_of(int32_t id) const;
  Val konst(Const c) const { return Val{-1, std::make_shared<const Const>(std::move(c))}; }

 private:
  void declare_inputs(const pb::GraphProto& g, const std::string& where);
  // onnx_name made a tensor name (letters, digits, '_'; in_ or out_ before v<digits>) that no
  // input, weight or earlier output has, nor, for an input or weight, any graph op.
  std::string unique_name(const std::string& onnx_name, bool output = false);
  const ImportOptions& m_options;
  Imported m_out;
  std::map<std::string, Val> m_values;
  std::map<const Const*, std::pair<ConstPtr, int32_t>> m_weights;  // materialized (kept alive)
  // A graph op's name: its ONNX node's (with the exporter's module path), or op_type_<index>;
  // the node's second and later graph ops add #1, #2...
  std::string node_label();
  std::map<std::string, int> m_names;        // node names taken (inputs, weights, graph ops)
  std::map<std::string, int> m_label_count;  // graph ops named after each ONNX node so far
  std::set<std::string> m_tensors;           // tensor names taken (inputs, weights, outputs)
  std::map<int32_t, size_t> m_index;         // node id -> index in graph.nodes
  const pb::NodeProto* m_node = nullptr;
  size_t m_node_index = 0;
  int64_t m_opset = 0;
  int32_t m_next_id = 0;
};

// The most elements a constant folded at import may hold (held as doubles: 1 GiB).
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 27;
// The element count of a constant of shape `s` that node `m` is about to fold; fails (naming
// the node) for a negative dim or more than kMaxFoldedElements, before anything is allocated.
int64_t folded_count(const Importer& m, const Shape& s);

// One ONNX op's conversion: its outputs, in order.
using OpFn = std::function<std::vector<Val>(Importer&)>;
const std::map<std::string, OpFn>& op_table();

// The oldest and newest ai.onnx opsets the importer accepts.
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 17;

}  // namespace wallsim::frontends::onnx
