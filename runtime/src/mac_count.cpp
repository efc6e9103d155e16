// Session::count_macs: a shape-only recording of workload code, counting its contractions'
// MACs (the MACs of a step at its real shapes are the MACs of the step recorded at them).
#include <stdexcept>

#include "session_util.h"

namespace wallsim::runtime {

using namespace session_detail;

// While count_macs runs: every op is checked and typed by compiler_stub's shape rules in a graph
// of its operands alone (holding the declared scalars), its MACs added, and its result a tensor
// with a type and nothing else.
class Session::MacCount {
 public:
  explicit MacCount(const std::vector<compiler_stub::ScalarParam>& scalars) {
    m_g.scalars = scalars;
  }
  Tensor op(Session& s, OpKind kind, const std::vector<Tensor>& inputs, Attrs attrs,
            std::optional<isa::DType> dtype) {
    m_g.nodes.clear();
    Node n;
    for (const Tensor& t : inputs) {
      Node in;
      in.id = static_cast<int32_t>(m_g.nodes.size());
      in.type = t.type();
      n.inputs.push_back(in.id);
      m_g.nodes.push_back(std::move(in));
    }
    n.id = static_cast<int32_t>(m_g.nodes.size());
    n.op = kind;
    type_node(m_g, n, std::move(attrs), dtype);
    m_macs += compiler_stub::node_macs(m_g, n);
    return value(s, n.type);
  }
  // A tensor of `type` with no value (an upload's, an op's).
  static Tensor value(Session& s, const TensorType& type) {
    auto t = s.new_tensor();
    t->type = type;
    return Tensor(t);
  }
  void declare(const std::string& name, int64_t min, int64_t max) {
    if (!m_g.find_scalar(name)) m_g.scalars.push_back({name, min, max});
  }
  double macs() const { return m_macs; }

 private:
  Graph m_g;
  double m_macs = 0;
};

double Session::count_macs(const std::function<void()>& record) {
  refuse_counting("count_macs");  // no nesting
  MacCount count(m_pending.scalars);
  m_count = &count;
  try {
    record();
  } catch (...) {
    m_count = nullptr;
    throw;
  }
  m_count = nullptr;
  return count.macs();
}

void Session::refuse_counting(const char* call) const {
  if (m_count) {
    throw std::logic_error(std::string(call) +
                           " inside Session::count_macs (a shape-only recording: no values, "
                           "no steps)");
  }
}

Tensor Session::count_op(OpKind kind, const std::vector<Tensor>& inputs, Attrs attrs,
                         std::optional<isa::DType> dtype) {
  return m_count->op(*this, kind, inputs, std::move(attrs), dtype);
}

Tensor Session::count_upload(const std::vector<int64_t>& shape, isa::DType dtype) {
  TensorType type;
  type.dtype = dtype;
  for (int64_t d : shape) type.dims.push_back(compiler_stub::Dim::of(d));
  return MacCount::value(*this, type);
}

void Session::count_scalar(const std::string& name, int64_t min, int64_t max) {
  m_count->declare(name, min, max);
}

}  // namespace wallsim::runtime
