// ProgramDp: gradient buckets and input rows of a data-parallel program replay (program_dp.h).
#include "program_dp.h"

#include <algorithm>
#include <set>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/runtime/ops.h"

namespace wallsim::workloads::detail {
namespace {

namespace cs = compiler_stub;
namespace pt = wallsim::torch;
using pt::EventKind;
using runtime::Tensor;

// The ids event `e` reads.
std::vector<int32_t> uses(const pt::Event& e) {
  if (e.kind == EventKind::op) return e.node.inputs;
  if (e.kind == EventKind::host_op) return e.inputs;
  if (e.kind == EventKind::read) return {e.out.id};
  return {};
}

}  // namespace

ProgramDp::ProgramDp(const pt::Program& program, int64_t dp, double bucket_bytes, std::string dim,
                     const std::string& where)
    : m_program(program), m_dp(dp), m_bucket_bytes(bucket_bytes), m_dim(std::move(dim)) {
  if (std::find(program.dim_names.begin(), program.dim_names.end(), m_dim) ==
      program.dim_names.end()) {
    throw base::InputError(where, "program.dp: the program names no dim '" + m_dim +
                                      "' to split (mark the batch axis of each batch input with "
                                      "wallsim.mark_dynamic(x, 0, \"" +
                                      m_dim + "\"))");
  }
  std::map<int32_t, size_t> defs;
  bool grads = false, updates = false;
  std::set<int32_t> weights;
  for (const pt::Event& e : program.events) {
    if (e.kind == EventKind::weight) weights.insert(e.out.id);
    if (e.kind == EventKind::op || e.kind == EventKind::input) defs[e.out.id] = e.index;
    for (const auto& o : e.outputs) defs[o.id] = e.index;
    if (e.kind == EventKind::op && e.inplace_of >= 0 && weights.count(e.inplace_of)) {
      weights.insert(e.out.id);
      updates = true;
    }
    grads = grads || e.kind == EventKind::grad;
  }
  if (updates && !grads) {
    throw base::InputError(where,
                           "program.dp: the program updates its weights but marks no "
                           "gradients (captured before grad events): capture it again");
  }
  m_buckets.resize(program.steps.size());
  for (size_t si = 0; si < program.steps.size(); ++si) plan_step(si, defs);
  count_batch_coupled();
}

void ProgramDp::plan_step(size_t step, const std::map<int32_t, size_t>& defs) {
  const auto [begin, end] = m_program.steps[step];
  std::map<std::string, const pt::Event*> last;  // each parameter's last grad in the step
  for (size_t i = begin; i < end; ++i) {
    const pt::Event& e = m_program.events[i];
    if (e.kind == EventKind::grad) last[e.name] = &e;
  }
  std::vector<DpGradient> grads;
  for (const auto& [name, e] : last) {
    DpGradient g;
    g.id = e->out.id;
    g.name = name;
    g.def = defs.at(g.id);
    g.bytes = pt::elements(e->out.shape) * isa::dtype_bytes(e->out.dtype);
    g.shape = e->out.shape;
    g.first_use = m_program.events.size();
    for (size_t i = g.def + 1;
         i < m_program.events.size() && g.first_use == m_program.events.size(); ++i) {
      for (int32_t id : uses(m_program.events[i])) {
        if (id == g.id) g.first_use = i;
      }
    }
    grads.push_back(g);
  }
  // The order the backward made them: the last layer's first, as DDP's buckets go.
  std::sort(grads.begin(), grads.end(),
            [](const DpGradient& a, const DpGradient& b) { return a.def < b.def; });
  std::vector<DpBucket>& out = m_buckets[step];
  DpBucket b;
  size_t read_at = m_program.events.size();  // the bucket's first read of a member
  const auto close = [&] {
    if (b.grads.empty()) return;
    b.after = b.grads.back().def;
    out.push_back(b);
    b = DpBucket{};
    read_at = m_program.events.size();
  };
  for (const DpGradient& g : grads) {
    if (g.def >= read_at) close();  // no member is read before its bucket is reduced
    b.grads.push_back(g);
    b.bytes += g.bytes;
    read_at = std::min(read_at, g.first_use);
    if (m_bucket_bytes <= 0 || double(b.bytes) >= m_bucket_bytes) close();
  }
  close();
}

// Row ops and means over a split axis on a gradient's backward slice: per rank they see only
// its rows (BatchNorm's statistics), so the replay is DDP's, not the unsharded step's.
void ProgramDp::count_batch_coupled() {
  std::map<int32_t, const pt::ProgramTensor*> tensors;
  for (const pt::Event& e : m_program.events) {
    if (e.kind == EventKind::op || e.kind == EventKind::input) tensors[e.out.id] = &e.out;
    for (const auto& o : e.outputs) tensors[o.id] = &o;
  }
  std::set<int32_t> need;
  for (const auto& step : m_buckets)
    for (const DpBucket& b : step)
      for (const DpGradient& g : b.grads) need.insert(g.id);
  for (size_t i = m_program.events.size(); i-- > 0;) {
    const pt::Event& e = m_program.events[i];
    if (e.kind != EventKind::op || !need.count(e.out.id)) continue;
    for (int32_t id : e.node.inputs) need.insert(id);
    const cs::OpClass kind = cs::info(e.node.op).kind;
    const bool mean = e.node.op == cs::OpKind::reduce_mean;
    if (!mean && kind != cs::OpClass::row) continue;
    const auto it = tensors.find(e.node.inputs.at(0));  // over its last axis
    const auto& names = it == tensors.end() ? std::vector<std::string>{} : it->second->dim_names;
    if (names.empty() || names.back().find(m_dim) == std::string::npos) continue;
    ++m_coupled;
    m_first_coupled = pt::event_place(m_program, e) + " (" + e.aten + ")";
  }
}

int64_t ProgramDp::split_axis(const pt::ProgramTensor& t) const {
  for (size_t a = 0; a < t.dim_names.size(); ++a) {
    if (t.dim_names[a] == m_dim) return static_cast<int64_t>(a);
  }
  return -1;
}

void ProgramDp::after_event(runtime::Session& s, size_t step, size_t i,
                            std::map<int32_t, Tensor>& live) const {
  for (const DpBucket& b : m_buckets.at(step)) {
    if (b.after != i) continue;
    s.set_origin({"", "wallsim.dp_all_reduce"});
    if (b.grads.size() == 1) {
      Tensor& g = live.at(b.grads[0].id);
      g = runtime::all_reduce(g, "dp");
      continue;
    }
    std::vector<Tensor> flat;
    for (const DpGradient& g : b.grads) {
      const Tensor& t = live.at(g.id);
      flat.push_back(t.shape().size() == 1 ? t : runtime::reshape(t, {pt::elements(t.shape())}));
    }
    const Tensor sum = runtime::all_reduce(runtime::concat(flat, 0), "dp");
    int64_t at = 0;
    for (const DpGradient& g : b.grads) {
      Tensor& t = live.at(g.id);
      const int64_t n = pt::elements(t.shape());
      Tensor part = runtime::slice(sum, 0, at, at + n);
      t = t.shape().size() == 1 ? part : runtime::reshape(part, t.shape());
      at += n;
    }
  }
}

std::pair<int64_t, int64_t> ProgramDp::calls(size_t step) const {
  int64_t ops = 0;
  for (const DpBucket& b : m_buckets.at(step)) {
    ops += 1;  // the all-reduce
    if (b.grads.size() == 1) continue;
    ops += 1;  // the concat
    for (const DpGradient& g : b.grads) {
      ops += g.shape.size() == 1 ? 1 : 3;  // its slice, and its reshapes to 1-D and back
    }
  }
  return {int64_t(m_buckets.at(step).size()), ops};
}

nlohmann::ordered_json ProgramDp::report(int64_t rows_per_rank) const {
  using nlohmann::ordered_json;
  ordered_json steps = ordered_json::array();
  int64_t grads = 0, bytes = 0;
  for (const auto& step : m_buckets) {
    ordered_json bs = ordered_json::array();
    for (const DpBucket& b : step) {
      ordered_json names = ordered_json::array();
      for (const DpGradient& g : b.grads) names.push_back(g.name);
      bs.push_back({{"grads", names},
                    {"bytes", b.bytes},
                    {"after_event", pt::event_place(m_program, m_program.events[b.after])}});
      grads += int64_t(b.grads.size());
      bytes += b.bytes;
    }
    steps.push_back(bs);
  }
  return {{"dp", m_dp},
          {"dim", m_dim},
          {"rows_per_rank", rows_per_rank},
          {"gradients", grads},
          {"gradient_bytes", bytes},
          {"bucket_mb", m_bucket_bytes / 1e6},
          {"buckets", steps},
          {"batch_coupled",
           {{"ops", m_coupled},
            {"first", m_coupled ? ordered_json(m_first_coupled) : ordered_json(nullptr)}}},
          {"reads_checked_note", "reads are not compared under dp (a rank reads its share)"}};
}

std::vector<float> ProgramDp::rows(const std::vector<float>& v, const std::vector<int64_t>& shape,
                                   size_t axis, int64_t first, int64_t last) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<float> out;
  out.reserve(static_cast<size_t>(outer * (last - first) * inner));
  for (int64_t o = 0; o < outer; ++o) {
    const auto at = v.begin() + (o * shape[axis] + first) * inner;
    out.insert(out.end(), at, at + (last - first) * inner);
  }
  return out;
}

std::vector<int32_t> latest_weight_ids(const pt::Program& program) {
  std::map<int32_t, int32_t> next;  // id -> the op result that replaces it in place
  std::vector<int32_t> out;
  for (const pt::Event& e : program.events) {
    if (e.kind == EventKind::weight) out.push_back(e.out.id);
    if (e.kind == EventKind::op && e.inplace_of >= 0) next[e.inplace_of] = e.out.id;
  }
  for (int32_t& id : out) {
    for (auto it = next.find(id); it != next.end(); it = next.find(id)) id = it->second;
  }
  return out;
}

}  // namespace wallsim::workloads::detail
