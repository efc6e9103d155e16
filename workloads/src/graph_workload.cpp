// graph: any graph file (hand-written, or from `wallsim import onnx`) as the step of a workload.
// Weights are uploaded once: from <name>.npy in the weights directory when it holds one (by
// default G.weights/ beside G.json, what `import onnx --weights` writes), else seeded random.
// Each step uploads the graph's activation inputs (seeded random) and records every op through
// the session, so every mode runs it its own way (AOT compiles it whole, fused flushes at the
// step end, eager runs op by op); the first graph output is read back at the step end.
#include <filesystem>

#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/validate.h"
#include "workload_params.h"

namespace wallsim::workloads::detail {
namespace {

namespace cs = compiler_stub;
using runtime::Tensor;

std::vector<int64_t> sizes(const cs::TensorType& t) {
  std::vector<int64_t> s;
  for (const cs::Dim& d : t.dims) s.push_back(d.size);
  return s;
}

class GraphFile final : public Workload {
 public:
  explicit GraphFile(Params& p) : m_file(p.text("file")), m_weights(p.text("weights")) {
    p.finish();
    m_params = p.resolved();
    if (m_file.empty()) p.fail("file", "the graph file is required (graph:file=G.json)");
    m_graph = cs::read_graph_file(m_file);
    try {
      cs::infer_types(m_graph);
    } catch (const base::InputError& e) {
      throw base::InputError(m_file, e.what());
    }
    if (!m_graph.scalars.empty() || cs::has_unknown_dims(m_graph)) {
      throw base::InputError(m_file,
                             "the graph workload runs static graphs only (no run-time "
                             "scalars or unknown dims)");
    }
    for (const cs::Node& n : m_graph.nodes) {
      if (n.op == cs::OpKind::iota) {
        throw base::InputError(m_file, "the graph workload cannot record iota nodes");
      }
    }
    if (m_weights.empty()) {
      const std::filesystem::path f(m_file);
      m_weights = (f.parent_path() / (f.stem().string() + ".weights")).string();
    }
    m_params["weights"] = m_weights;
  }
  std::map<std::string, std::string> params() const override { return m_params; }
  void setup(runtime::Session& s) override {
    std::map<int32_t, std::vector<const cs::Node*>> readers;
    for (const cs::Node& n : m_graph.nodes) {
      for (int32_t id : n.inputs) readers[id].push_back(&n);
    }
    // A value between a weight and its transpose (a conv weight's reshape) is followed only
    // when it is not a graph output.
    const cs::ReadersOf readers_of = [&](int32_t id) -> const std::vector<const cs::Node*>* {
      for (int32_t o : m_graph.outputs) {
        if (o == id) return nullptr;
      }
      return &readers[id];
    };
    uint64_t k = 1;
    for (const cs::Node& n : m_graph.nodes) {
      if (n.op != cs::OpKind::input || n.role != cs::InputRole::weight) continue;
      const std::string npy = m_weights + "/" + n.name + ".npy";
      const cs::WeightLayout layout = s.weight_layout(n.type, readers[n.id], readers_of);
      m_values[n.id] = std::filesystem::exists(npy)
                           ? s.upload_npy(npy, n.type.dtype, layout)
                           : s.upload_random(sizes(n.type), n.type.dtype, seed(s, k), layout);
      ++k;
    }
  }
  std::vector<int64_t> buckets(const runtime::Session&) const override { return {1}; }
  Tensor step(runtime::Session& s, int64_t index) override {
    s.add_real_macs(s.count_macs([&] { forward(s, index); }));
    return forward(s, index);
  }
  void trace(runtime::Session& s, int64_t) override { s.to_host(forward(s, 0)); }
  int64_t default_steps() const override { return 1; }

 private:
  Tensor forward(runtime::Session& s, int64_t index) {
    std::map<int32_t, Tensor> v = m_values;
    uint64_t k = 0;
    for (const cs::Node& n : m_graph.nodes) {
      if (n.op == cs::OpKind::input) {
        if (n.role == cs::InputRole::input) {
          v[n.id] = s.upload_random(sizes(n.type), n.type.dtype,
                                    seed(s, 1000 + 100 * static_cast<uint64_t>(index) + k++));
        }
        continue;
      }
      std::vector<Tensor> in;
      for (int32_t id : n.inputs) in.push_back(v.at(id));
      v[n.id] = s.op(n.op, in, n.attrs, n.dtype);
    }
    return v.at(m_graph.outputs.at(0));
  }

  std::string m_file, m_weights;
  std::map<std::string, std::string> m_params;
  cs::Graph m_graph;
  std::map<int32_t, Tensor> m_values;  // the weights, by node id
};

}  // namespace

std::unique_ptr<Workload> make_graph_workload(Params& p) { return std::make_unique<GraphFile>(p); }

}  // namespace wallsim::workloads::detail
