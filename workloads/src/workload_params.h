// Internal to wallsim_workloads: typed workload parameters and helpers the workloads share.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/runtime/ops.h"
#include "wallsim/runtime/session.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::workloads::detail {

using runtime::Session;

// Typed access to a spec's parameters; every parameter must be read (else it is unknown).
class Params {
 public:
  explicit Params(const WorkloadSpec& spec) : m_spec(spec) {}
  int64_t integer(const std::string& key, int64_t def, int64_t min, int64_t max) {
    m_known.insert(key);
    int64_t v = def;
    auto it = m_spec.params.find(key);
    if (it != m_spec.params.end()) {
      size_t used = 0;
      try {
        v = std::stoll(it->second, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != it->second.size()) fail(key, "expected an integer, got '" + it->second + "'");
    }
    if (v < min || v > max) {
      fail(key, std::to_string(v) + " is outside [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]");
    }
    m_resolved[key] = std::to_string(v);
    return v;
  }
  // As integer(), but in resolved() only when the spec gives it: a parameter added after the
  // workload's reports were settled (they do not change when it is left out).
  int64_t integer_if_given(const std::string& key, int64_t def, int64_t min, int64_t max) {
    const int64_t v = integer(key, def, min, max);
    if (!m_spec.params.count(key)) m_resolved.erase(key);
    return v;
  }
  double real(const std::string& key, double def, double min, double max) {
    m_known.insert(key);
    double v = def;
    auto it = m_spec.params.find(key);
    if (it != m_spec.params.end()) {
      size_t used = 0;
      try {
        v = std::stod(it->second, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != it->second.size() || !std::isfinite(v))
        fail(key, "expected a number, got '" + it->second + "'");
    }
    if (v < min || v > max) {
      fail(key, it->second + " is outside [" + fmt(min) + ", " + fmt(max) + "]");
    }
    m_resolved[key] = fmt(v);
    return v;
  }
  // Any text (a file path); empty when not given.
  std::string text(const std::string& key) {
    m_known.insert(key);
    auto it = m_spec.params.find(key);
    const std::string v = it == m_spec.params.end() ? "" : it->second;
    if (!v.empty()) m_resolved[key] = v;
    return v;
  }
  isa::DType dtype(const std::string& key, isa::DType def) {
    m_known.insert(key);
    auto it = m_spec.params.find(key);
    isa::DType v = def;
    if (it != m_spec.params.end()) {
      bool found = false;
      for (isa::DType d : {isa::DType::bf16, isa::DType::fp16, isa::DType::fp32}) {
        if (isa::name_of(d) == it->second) {
          v = d;
          found = true;
        }
      }
      if (!found) fail(key, "expected bf16, fp16 or fp32, got '" + it->second + "'");
    }
    m_resolved[key] = std::string(isa::name_of(v));
    return v;
  }
  std::string choice(const std::string& key, const std::string& def,
                     const std::vector<std::string>& choices) {
    m_known.insert(key);
    auto it = m_spec.params.find(key);
    const std::string v = it == m_spec.params.end() ? def : it->second;
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      fail(key, "expected one of " + list + ", got '" + v + "'");
    }
    m_resolved[key] = v;
    return v;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw base::InputError("--workload " + m_spec.text, m_spec.name + "." + key + ": " + problem);
  }
  // After every parameter was read: anything else is a typo.
  void finish() const {
    for (const auto& [key, value] : m_spec.params) {
      if (m_known.count(key)) continue;
      std::string known;
      for (const auto& k : m_known) known += (known.empty() ? "" : ", ") + k;
      throw base::InputError(
          "--workload " + m_spec.text,
          "unknown parameter '" + key + "' of " + m_spec.name + " (known: " + known + ")");
    }
  }
  std::map<std::string, std::string> resolved() const { return m_resolved; }

 private:
  static std::string fmt(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }
  const WorkloadSpec& m_spec;
  std::set<std::string> m_known;
  std::map<std::string, std::string> m_resolved;
};

inline constexpr int64_t kBig = int64_t{1} << 20;

// The seed of a workload's k-th random tensor: the run's seed, then k.
inline uint64_t seed(const Session& s, uint64_t k) {
  return static_cast<uint64_t>(s.config().runtime.seed) * 1000003u + k;
}

// Attention splits d_model evenly over the heads.
inline void check_heads(const Params& p, int64_t d_model, int64_t heads) {
  if (d_model % heads) {
    p.fail("heads", "d_model " + std::to_string(d_model) + " is not a multiple of heads " +
                        std::to_string(heads));
  }
}

// Megatron-LM's tensor-parallel split: each of `tp` ranks takes heads / tp heads and d_ff / tp
// of the MLP, so both must divide.
inline void check_tensor_parallel(const Params& p, int64_t heads, int64_t d_ff, int64_t tp) {
  if (heads % tp) {
    p.fail("tp", "heads " + std::to_string(heads) + " do not split over " + std::to_string(tp) +
                     " tensor-parallel ranks");
  }
  if (d_ff % tp) {
    p.fail("tp", "d_ff " + std::to_string(d_ff) + " does not split over " + std::to_string(tp) +
                     " tensor-parallel ranks");
  }
}

// Pipeline parallel: `layers` split into `pp` stages, a data-parallel rank's `items` (rows,
// sequences) into `micro` micro-batches.
inline void check_pipeline(const Params& p, int64_t layers, int64_t items, int64_t pp,
                           int64_t micro, const char* what) {
  if (layers % pp) {
    p.fail("pp", "layers " + std::to_string(layers) + " do not split over " + std::to_string(pp) +
                     " pipeline stages");
  }
  if (items % micro) {
    p.fail("microbatches", "the " + std::to_string(items) + " " + what +
                               " of a data-parallel rank do not split into " +
                               std::to_string(micro) + " micro-batches");
  }
}

// Tensors joined along axis 0, 16 at a time (concat's most inputs); one is itself.
inline runtime::Tensor join_rows(std::vector<runtime::Tensor> xs) {
  while (xs.size() > 1) {
    std::vector<runtime::Tensor> joined;
    for (size_t k = 0; k < xs.size(); k += 16) {
      const std::vector<runtime::Tensor> part(xs.begin() + long(k),
                                              xs.begin() + long(std::min(k + 16, xs.size())));
      joined.push_back(part.size() == 1 ? part[0] : runtime::concat(part, 0));
    }
    xs.swap(joined);
  }
  return xs.at(0);
}

// A workload's padded work by source, from its own MAC counts: each source's share of the padded
// MACs (rows of no live sequence, tokens past a prompt, keys past a sequence's length) and the
// padded fraction of all MACs.
inline nlohmann::ordered_json padding_by_source(double real, double batch, double prompt,
                                                double keys) {
  const double pad = batch + prompt + keys, all = pad + real;
  auto share = [&](double v) { return pad > 0 ? v / pad : 0.0; };
  return {{"padded_fraction", all > 0 ? pad / all : 0.0},
          {"batch_share", share(batch)},
          {"prompt_share", share(prompt)},
          {"keys_share", share(keys)}};
}

// A GPT-2-style decoder layer without linear biases (decode, serve): pre-norm attention and a
// gelu MLP.
struct GptWeights {
  runtime::Tensor ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, w1, w2;
};
// Uploads one layer's weights with seeds k, k+1, ... (k advances), in a fixed order. tp > 1
// (Megatron-LM): this tensor-parallel rank's shards of the same seeded weights, the column blocks
// of Wq, Wk, Wv and W1 (its heads, its share of the MLP) and the row blocks of Wo and W2; the
// norms whole. d and ff must divide by tp. `mine` false (a layer of another pipeline stage):
// nothing is uploaded, the seeds are only taken.
inline GptWeights upload_gpt_weights(Session& s, int64_t d, int64_t ff, isa::DType dtype,
                                     uint64_t& k, int64_t tp = 1, bool mine = true) {
  auto up = [&](std::vector<int64_t> shape) {
    const uint64_t sd = seed(s, k++);
    return mine ? s.upload_random(shape, dtype, sd) : runtime::Tensor();
  };
  // This rank's block along `axis` of a weight of shape `full` (whole when tp is 1).
  auto part = [&](std::vector<int64_t> full, int64_t axis) {
    if (tp == 1) return up(full);
    const int64_t block = full[static_cast<size_t>(axis)] / tp, at = s.rank().tp_rank * block;
    const uint64_t sd = seed(s, k++);
    return mine ? s.upload_random_slice(full, dtype, sd, axis, at, at + block) : runtime::Tensor();
  };
  GptWeights w;
  w.ln1_g = up({d});
  w.ln1_b = up({d});
  w.wq = part({d, d}, 1);  // column-parallel: this rank's heads
  w.wk = part({d, d}, 1);
  w.wv = part({d, d}, 1);
  w.wo = part({d, d}, 0);  // row-parallel
  w.ln2_g = up({d});
  w.ln2_b = up({d});
  w.w1 = part({d, ff}, 1);
  w.w2 = part({ff, d}, 0);
  return w;
}

// x + W2 gelu(W1 layernorm(x)): the layer's MLP with its residual. Under tensor parallel W1 is
// column- and W2 row-parallel, so W2's product is a partial sum, all-reduced over "tp" (the
// value itself in a group of one).
inline runtime::Tensor gpt_mlp(const runtime::Tensor& x, const GptWeights& w) {
  using namespace runtime;
  Tensor up = gelu(matmul(layernorm(x, w.ln2_g, w.ln2_b), w.w1));
  return add(x, all_reduce(matmul(up, w.w2), "tp"));
}

// One decoder layer: pre-norm attention, then the MLP, each with its residual. `attend(q, k, v)`
// writes the layer's KV cache as the caller keeps it and returns the attention context
// [rows, d_model / tp] of this rank's heads: the graph decode and serve share. Under tensor
// parallel the output projection's partial sums are all-reduced over "tp", as the MLP's.
template <class Attend>
runtime::Tensor gpt_layer(const runtime::Tensor& x, const GptWeights& w, Attend&& attend) {
  using namespace runtime;
  Tensor h = layernorm(x, w.ln1_g, w.ln1_b);
  Tensor q = matmul(h, w.wq), k = matmul(h, w.wk), v = matmul(h, w.wv);
  Tensor ctx = attend(q, k, v);
  return gpt_mlp(add(x, all_reduce(matmul(ctx, w.wo), "tp")), w);
}

std::unique_ptr<Workload> make_transformer(Params& p);  // transformer.cpp
std::unique_ptr<Workload> make_train(Params& p);        // train.cpp
// The serving workload (serve.cpp).
std::unique_ptr<Workload> make_serve(Params& p);
std::unique_ptr<Workload> make_graph_workload(Params& p);    // graph:file=G.json
std::unique_ptr<Workload> make_program_workload(Params& p);  // program:file=P.json

}  // namespace wallsim::workloads::detail
