// The graph IR: tensors whose dimensions are static, bounded (<= max, the real value a run-time
// scalar) or unknown, and nodes from the table in ops.def. Plain data; no SystemC.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "wallsim/isa/instruction.h"
#include "wallsim/isa/types.h"

namespace wallsim::compiler_stub {

enum class OpKind : uint8_t {
#define WALLSIM_GRAPH_OP(name, min_in, max_in, attrs, window, result, kind, act, fill, onnx, aten, \
                         summary)                                                                  \
  name,
#include "wallsim/compiler_stub/ops.def"
#undef WALLSIM_GRAPH_OP
};

// Whether and how an op runs a window of row tiles at a time, and its footprint rule (the
// row_window column of ops.def, described there).
enum class RowWindow : uint8_t { none, operands, gather, softmax, norm, matmul, batch_matmul };
// What an op's result is: a new value, or input 0's HBM tensor written in place.
enum class OpResult : uint8_t { fresh, in_place };
// What an op does to its operands' elements (the kind column of ops.def, described there).
enum class OpClass : uint8_t {
  source,
  contraction,
  binary,
  unary,
  activation,
  elementwise,
  reduction,
  row,
  layout,
  indirect,
  attention,
  collective,
  composite
};

struct OpInfo {
  std::string_view name;
  int min_inputs;
  int max_inputs;
  std::string_view attrs;  // space-separated attribute names
  RowWindow row_window;
  OpResult result;
  OpClass kind;
  isa::ActFn act;         // an activation's scalar-engine function (identity otherwise)
  std::string_view fill;  // "" or a number: the padding that keeps a reduction exact
  std::string_view onnx;  // the ONNX op mapped to this op alone, or ""
  std::string_view aten;  // the ATen op (aten.NAME) mapped to this op alone, or ""
  std::string_view summary;
  // Whether each output element reads only the same-position elements of its operands
  // (binary, unary, activation, elementwise).
  bool elementwise() const;
  // The fill column as a number, when it has one.
  std::optional<float> bounded_fill() const;
};
inline constexpr int kNumOps = 0
#define WALLSIM_GRAPH_OP(name, min_in, max_in, attrs, window, result, kind, act, fill, onnx, aten, \
                         summary)                                                                  \
  +1
#include "wallsim/compiler_stub/ops.def"
#undef WALLSIM_GRAPH_OP
    ;
const OpInfo& info(OpKind op);
inline std::string_view name_of(OpKind op) { return info(op).name; }
std::optional<OpKind> parse_op(std::string_view name);
// Whether `attr` is in the op's attribute list.
bool accepts_attr(OpKind op, std::string_view attr);

// The value kind of each attribute name of ops.def other than the type-giving `shape` of input
// and iota and `dtype`/`role` (which live in Node::type, Node::dtype and Node::role). An
// attribute name means the same thing in every op that accepts it.
enum class AttrKind : uint8_t { integer, real, text, ints };
std::optional<AttrKind> attr_kind(std::string_view attr);
std::string_view name_of(AttrKind kind);

// A dimension. Static: `size`. Bounded: at most `size`, the real extent is the run-time scalar
// `scalar`; compiled once at `size`. Unknown: no bound (size -1); a static compile rejects it.
struct Dim {
  enum class Kind : uint8_t { fixed, bounded, unknown };
  Kind kind = Kind::fixed;
  int64_t size = 0;
  std::string scalar;
  static Dim of(int64_t n) { return {Kind::fixed, n, {}}; }
  static Dim bounded(int64_t max, std::string scalar) {
    return {Kind::bounded, max, std::move(scalar)};
  }
  static Dim unknown() { return {Kind::unknown, -1, {}}; }
  bool operator==(const Dim& o) const {
    return kind == o.kind && size == o.size && scalar == o.scalar;
  }
};

struct TensorType {
  isa::DType dtype = isa::DType::fp32;
  std::vector<Dim> dims;
  int64_t elements() const;  // at the bounds; -1 when a dim is unknown
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
};

// For messages: "512", "len<=256", "?"; "[512, len<=256]"; "bf16[512, 768]".
std::string to_string(const Dim& d);
std::string to_string(const std::vector<Dim>& dims);
std::string to_string(const TensorType& t);

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

enum class InputRole : uint8_t { input, weight };
std::string_view name_of(InputRole role);
std::optional<InputRole> parse_role(std::string_view s);

// One operation. A node produces one value, named by the node's id.
struct Node {
  int32_t id = 0;
  OpKind op = OpKind::input;
  std::string name;
  // The name of this node's value as a graph output (the output's name in the model it was
  // imported from): its HBM tensor in plans and its file in exec's outputs/ (value_name()).
  // Empty: v<id>. Only on a graph output that is not an input or an in-place result.
  std::string output_name;
  std::vector<int32_t> inputs;  // ids of earlier nodes
  std::map<std::string, AttrValue> attrs;
  // The output. For input and iota it is the declaration (`shape`, `dtype`); for every other op
  // validation infers it, taking the dtype from `dtype` when that is set.
  TensorType type;
  std::optional<isa::DType> dtype;    // an explicit output dtype (ops other than input and iota)
  InputRole role = InputRole::input;  // input only

  const int64_t* int_attr(const std::string& key) const;
  const double* real_attr(const std::string& key) const;
  const std::string* text_attr(const std::string& key) const;
  const std::vector<int64_t>* ints_attr(const std::string& key) const;
};

// The `eps` attribute of layernorm and rmsnorm, or the default 1e-5 when absent.
inline constexpr double kDefaultNormEps = 1e-5;
double norm_eps(const Node& n);
// The `scale` attribute of decode_attention, or 1 / sqrt(head width) when absent.
double attention_scale(const Node& n);

struct ScalarParam {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
};

// Nodes in topological order (every input id refers to an earlier node).
struct Graph {
  std::string name;
  std::vector<ScalarParam> scalars;
  std::vector<Node> nodes;
  std::vector<int32_t> outputs;

  const Node* find(int32_t id) const;  // nullptr when no node has `id`
  Node* find(int32_t id);
  const ScalarParam* find_scalar(const std::string& name) const;
};

// The multiply-accumulates of a contraction (kind `contraction` in ops.def: matmul,
// batch_matmul) from its types: the result's elements times the contracted length, the last dim
// of its first operand `a` (bounded dims at their bound).
double contraction_macs(const TensorType& a, const TensorType& out);
// The multiply-accumulates of node `n` of `g` (its inputs' types in `g`): contraction_macs, or
// for `attention` and `decode_attention` q.k and p.v of each query row against the keys it may
// see (masks are data, not subtracted); 0 for any other op. The one count: plans', workloads'.
double node_macs(const Graph& g, const Node& n);

}  // namespace wallsim::compiler_stub
