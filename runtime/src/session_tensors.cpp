// The Session's tensors: uploads from the host, reads back to it, and pre-laid weights' views.
#include <cmath>
#include <memory>

#include "session_util.h"
#include "wallsim/isa/dtype_convert.h"
#include "wallsim/memory/npy.h"
#include "wallsim/memory/tensor_store.h"

namespace wallsim::runtime {

using namespace session_detail;
using sc_core::sc_time;

compiler_stub::WeightLayout Session::weight_layout(
    const TensorType& type, const std::vector<const Node*>& consumers,
    const compiler_stub::ReadersOf& readers_of) const {
  if (!m_options.mode->pre_lays_constants()) return {};
  return compiler_stub::choose_weight_layout(type, consumers, readers_of);
}

Tensor Session::upload(const std::vector<int64_t>& shape, isa::DType dtype,
                       const std::vector<float>& values,
                       const compiler_stub::WeightLayout& layout) {
  if (m_count) return count_upload(shape, dtype);
  TensorType type;
  type.dtype = dtype;
  for (int64_t d : shape) type.dims.push_back(compiler_stub::Dim::of(d));
  const TensorType stored = compiler_stub::stored_type(type, layout);
  auto t = new_tensor();
  t->type = type;
  t->layout = layout;
  t->device = m_device.allocate(stored, "t");
  if (m_options.keep_reference) {
    Node in;
    in.id = static_cast<int32_t>(m_ref.nodes.size());
    in.op = OpKind::input;
    in.name = "u" + std::to_string(in.id);
    in.type = type;
    t->ref = in.id;
    compiler_stub::HostTensor v{shape, values};
    for (float& x : v.data) x = compiler_stub::round_to_dtype(dtype, x);
    m_ref_inputs[in.name] = std::move(v);
    m_ref.nodes.push_back(std::move(in));
  }
  if (m_tracing) return Tensor(t);
  const std::string host = "host_" + t->device;
  if (!layout.as_given()) {
    // The host permutes the values as it stages them: every byte read and written once.
    const double bytes = 2.0 * double(type.elements()) * double(isa::dtype_bytes(dtype));
    m_host.charge(
        HostState::other,
        static_cast<int64_t>(std::ceil(bytes / m_config.runtime.host_cpu.memory_gb_per_s)));
  }
  if (m_options.functional) {
    auto& h = m_device.core().tensors().put(host, isa::MemSpace::host, dtype, dims_of(stored));
    if (static_cast<int64_t>(values.size()) != h.elements()) {
      throw RuntimeError("upload: " + std::to_string(values.size()) + " values for " +
                         std::to_string(h.elements()) + " elements");
    }
    const std::vector<float> laid =
        layout.as_given() ? std::vector<float>{}
                          : compiler_stub::lay_out({shape, values}, dtype, layout).data;
    const std::vector<float>& v = layout.as_given() ? values : laid;
    const int64_t eb = isa::dtype_bytes(dtype);
    for (size_t i = 0; i < v.size(); ++i) {
      isa::store_element(h.bytes.data() + static_cast<int64_t>(i) * eb, dtype, v[i]);
    }
  }
  const sim::LaunchHandle l = m_device.transfer(host, isa::MemSpace::host, t->device,
                                                isa::MemSpace::hbm, stored, record().counts);
  m_host.wait_drained(l, HostState::transfer);
  if (m_options.functional) m_device.core().tensors().erase(host);
  return Tensor(t);
}

Tensor Session::upload_npy(const std::string& path, isa::DType dtype,
                           const compiler_stub::WeightLayout& layout) {
  const memory::NpyArray a = memory::read_npy(path);
  memory::TensorStore::Tensor tmp;
  tmp.space = isa::MemSpace::host;
  tmp.dtype = dtype;
  tmp.shape = a.shape;
  tmp.bytes.resize(static_cast<size_t>(tmp.elements() * isa::dtype_bytes(dtype)));
  memory::load_npy_into(a, tmp, path);
  return upload(a.shape, dtype, memory::to_floats(tmp), layout);
}

Tensor Session::upload_random(const std::vector<int64_t>& shape, isa::DType dtype, uint64_t seed,
                              const compiler_stub::WeightLayout& layout) {
  // Timing only: the values are never read, so none are drawn (the transfer is the same).
  if (m_count || (!m_options.functional && !m_options.keep_reference))
    return upload(shape, dtype, {}, layout);
  memory::TensorStore::Tensor tmp;
  tmp.space = isa::MemSpace::host;
  tmp.dtype = dtype;
  tmp.shape = shape;
  tmp.bytes.resize(static_cast<size_t>(tmp.elements() * isa::dtype_bytes(dtype)));
  memory::fill_random(tmp, seed);
  return upload(shape, dtype, memory::to_floats(tmp), layout);
}

Tensor Session::upload_random_slice(const std::vector<int64_t>& full, isa::DType dtype,
                                    uint64_t seed, int64_t axis, int64_t start, int64_t limit) {
  std::vector<int64_t> shape = full;
  shape.at(static_cast<size_t>(axis)) = limit - start;
  if (m_count || (!m_options.functional && !m_options.keep_reference))
    return upload(shape, dtype, {});
  memory::TensorStore::Tensor tmp;
  tmp.space = isa::MemSpace::host;
  tmp.dtype = dtype;
  tmp.shape = full;
  tmp.bytes.resize(static_cast<size_t>(tmp.elements() * isa::dtype_bytes(dtype)));
  memory::fill_random(tmp, seed);
  const std::vector<float> all = memory::to_floats(tmp);
  // Row-major: outer blocks before the axis, the axis, inner elements after it.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= full[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < full.size(); ++d) inner *= full[d];
  const int64_t n = full.at(static_cast<size_t>(axis));
  std::vector<float> part;
  part.reserve(static_cast<size_t>(outer * (limit - start) * inner));
  for (int64_t o = 0; o < outer; ++o) {
    const auto from = all.begin() + (o * n + start) * inner;
    part.insert(part.end(), from, from + (limit - start) * inner);
  }
  return upload(shape, dtype, part);
}

namespace {

// A view's node in the reference graph: the logical op it stands for.
int32_t add_ref_node(compiler_stub::Graph& ref, OpKind op, int32_t input, const char* key,
                     const std::vector<int64_t>& ints, const TensorType& type) {
  Node r;
  r.id = static_cast<int32_t>(ref.nodes.size());
  r.op = op;
  r.inputs = {input};
  r.attrs[key] = ints;
  r.type = type;
  ref.nodes.push_back(std::move(r));
  return ref.nodes.back().id;
}

}  // namespace

Tensor Session::stored_view(const Tensor& t) {
  const auto& p = t.impl();
  if (!p->layout.reshape.empty()) return stored_view(reshaped_view(t));
  auto v = new_tensor();
  v->type = compiler_stub::stored_type(p->type, p->layout);
  v->alias_of = p->alias_of ? p->alias_of : p;  // the tensor that owns the storage
  v->producer = p->producer;
  if (m_options.keep_reference && !m_tracing) {
    v->ref = add_ref_node(m_ref, OpKind::transpose, p->ref, "perm", p->layout.perm, v->type);
  }
  return Tensor(v);
}

Tensor Session::reshaped_view(const Tensor& t) {
  const auto& p = t.impl();
  auto v = new_tensor();
  v->type = compiler_stub::reshaped_type(p->type, p->layout);
  v->layout = {p->layout.perm, {}};
  v->alias_of = p->alias_of ? p->alias_of : p;  // the tensor that owns the storage
  v->producer = p->producer;
  if (m_options.keep_reference && !m_tracing) {
    v->ref = add_ref_node(m_ref, OpKind::reshape, p->ref, "shape", p->layout.reshape, v->type);
  }
  return Tensor(v);
}

Tensor Session::undo_layout(const Tensor& t) {
  const compiler_stub::WeightLayout& l = t.impl()->layout;
  Tensor u = op(OpKind::transpose, {stored_view(t)}, {{"perm", compiler_stub::inverse(l)}});
  if (l.reshape.empty()) return u;
  return op(OpKind::reshape, {u}, {{"shape", dims_of(t.impl()->type)}});
}

compiler_stub::HostTensor Session::to_host(const Tensor& t) {
  refuse_counting("to_host");
  require_value(*t.impl());
  if (!t.impl()->layout.as_given()) {
    return to_host(undo_layout(t));
  }
  const auto& p = t.impl();
  compiler_stub::HostTensor out;
  out.shape = dims_of(p->type);
  int64_t n = 1;
  for (int64_t d : out.shape) n *= d;
  if (p->pending >= 0) flush("value read");
  if (m_tracing) {
    out.data.assign(static_cast<size_t>(n), 0.0f);
    return out;
  }
  wait_launched(p.get());
  m_host.wait_drained(p->producer, HostState::sync_wait);
  const std::string& dev = p->storage();
  const std::string host = "host_" + dev;
  if (m_options.functional)
    m_device.core().tensors().put(host, isa::MemSpace::host, p->type.dtype, out.shape);
  const sim::LaunchHandle l = m_device.transfer(dev, isa::MemSpace::hbm, host, isa::MemSpace::host,
                                                p->type, record().counts);
  m_host.wait_drained(l, HostState::transfer);
  if (m_options.functional) {
    out.data = memory::to_floats(*m_device.core().tensors().find(host));
    m_device.core().tensors().erase(host);
  } else {
    out.data.assign(static_cast<size_t>(n), 0.0f);
  }
  return out;
}

}  // namespace wallsim::runtime
