// Private to the Session's files: small helpers and the group a flush cuts.
#pragma once

#include <unordered_map>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/validate.h"
#include "wallsim/runtime/session.h"

namespace wallsim::runtime::session_detail {

using compiler_stub::Graph;
using compiler_stub::Node;
using compiler_stub::OpKind;
using compiler_stub::TensorType;

inline std::vector<int64_t> dims_of(const TensorType& t) {
  std::vector<int64_t> out;
  for (const auto& d : t.dims) out.push_back(d.size);
  return out;
}

inline int64_t bytes_of(const TensorType& t) {
  int64_t n = 1;
  for (const auto& d : t.dims) n *= d.size;
  return n * isa::dtype_bytes(t.dtype);
}

inline int64_t now_ps() { return static_cast<int64_t>(sc_core::sc_time_stamp().value()); }

// MACs of the contractions in `nodes` of `g`, from their types.
inline double macs_of(const Graph& g, const std::vector<int32_t>& nodes) {
  double macs = 0;
  for (int32_t id : nodes) macs += compiler_stub::node_macs(g, *g.find(id));
  return macs;
}

// Throws std::logic_error for a tensor of Session::count_macs (a type, no value) outside it.
inline void require_value(const TensorImpl& t) {
  if (t.pending < 0 && t.storage().empty())
    throw std::logic_error("a tensor of Session::count_macs (a type, no value) read outside it");
}

// Types node `n` of a recorded op (its op, id and inputs set; the inputs nodes of `g`) with
// `attrs` and `dtype`: iota and recv declare theirs (the `shape` attribute, `dtype` or int32),
// every other op's is inferred and checked by compiler_stub's shape rules (recv's against its
// declaration). Session::op and count_macs type every op by it.
inline void type_node(const Graph& g, Node& n, Attrs attrs, std::optional<isa::DType> dtype) {
  const bool declares = n.op == OpKind::iota || n.op == OpKind::recv;  // shape attr, dtype
  n.dtype = declares ? std::nullopt : dtype;
  if (declares) {
    const auto* shape = std::get_if<std::vector<int64_t>>(&attrs.at("shape"));
    n.type.dtype = dtype.value_or(isa::DType::int32);
    for (int64_t d : *shape) n.type.dims.push_back(compiler_stub::Dim::of(d));
    attrs.erase("shape");
  }
  n.attrs = std::move(attrs);
  if (n.op != OpKind::iota) n.type = compiler_stub::infer_node(g, n);
}

// A plan's name from the ops of its group (`nodes` of `g`, inputs skipped): the op itself for
// one op ("matmul"), else "fused<N>_" and its first three distinct ops in order
// ("fused12_matmul_add_gelu"). The same group always gets the same name, so a cached plan keeps
// the name it was compiled under.
inline std::string group_name(const Graph& g, const std::vector<int32_t>& nodes) {
  std::vector<std::string_view> ops;
  size_t count = 0;
  for (int32_t id : nodes) {
    const OpKind op = g.find(id)->op;
    if (op == OpKind::input) continue;
    ++count;
    const std::string_view name = compiler_stub::name_of(op);
    if (ops.size() < 3 && std::find(ops.begin(), ops.end(), name) == ops.end()) {
      ops.push_back(name);
    }
  }
  if (count == 1) return std::string(ops.front());
  std::string out = "fused" + std::to_string(count);
  for (std::string_view op : ops) out += "_" + std::string(op);
  return out;
}

// The ops of `ids` in `g`, "id:op" comma-separated (a compile slice's `ops` argument).
inline std::string op_list(const Graph& g, const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id) + ":" + std::string(compiler_stub::name_of(g.find(id)->op));
  }
  return out;
}

// The position of the group input named `name` in `sub`'s inputs, if one is.
inline std::optional<size_t> input_position(const Graph& sub, const std::string& name) {
  size_t k = 0;
  for (const Node& n : sub.nodes) {
    if (n.op != OpKind::input) continue;
    if (n.name == name) return k;
    ++k;
  }
  return std::nullopt;
}

}  // namespace wallsim::runtime::session_detail

namespace wallsim::runtime {

// A group cut from the pending graph, as a standalone graph with canonical names.
struct Session::Group {
  compiler_stub::Graph sub;
  std::vector<std::string> input_devices;          // device tensor of input "in<k>"
  std::vector<int32_t> outputs;                    // pending node ids produced for outside
  std::unordered_map<int32_t, int32_t> origin_of;  // sub node id -> origin index (set ones)
};

}  // namespace wallsim::runtime
