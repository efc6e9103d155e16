// The example graphs in examples/graphs: they load, validate, round-trip and evaluate to what a
// direct computation gives.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/reference.h"
#include "wallsim/compiler_stub/validate.h"

#if defined(__SANITIZE_ADDRESS__)
#define WALLSIM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WALLSIM_TEST_ASAN 1
#endif
#endif

namespace wallsim::compiler_stub {
namespace {

using base::Json;

std::string example_path(const std::string& name) {
  return std::string(WALLSIM_SOURCE_DIR) + "/examples/graphs/" + name + ".json";
}

Graph load(const std::string& name) {
  Graph g = read_graph_file(example_path(name));
  infer_types(g);
  return g;
}

Json without_comments(const Json& j) {
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& v : j) out.push_back(without_comments(v));
    return out;
  }
  if (!j.is_object()) return j;
  Json out = Json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key().empty() || it.key()[0] != '_') out[it.key()] = without_comments(it.value());
  }
  return out;
}

int32_t id_of(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes) {
    if (n.name == name) return n.id;
  }
  ADD_FAILURE() << "no node named " << name;
  return -1;
}

// Weights scaled by 1/sqrt(fan-in), layernorm gains near 1, everything else in [-1, 1].
std::map<std::string, HostTensor> random_inputs(const Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::map<std::string, HostTensor> inputs;
  for (const Node& n : g.nodes) {
    if (n.op != OpKind::input) continue;
    HostTensor t;
    for (const Dim& d : n.type.dims) t.shape.push_back(d.size);
    int64_t count = n.type.elements();
    float scale = 1.0f, offset = 0.0f;
    if (n.role == InputRole::weight && t.shape.size() == 2) {
      scale = 1.0f / std::sqrt(static_cast<float>(t.shape[0]));
    } else if (n.role == InputRole::weight) {
      bool gain = n.name.find("gamma") != std::string::npos;
      scale = 0.1f;
      offset = gain ? 1.0f : 0.0f;
    }
    for (int64_t i = 0; i < count; ++i) t.data.push_back(offset + scale * u(rng));
    inputs[n.name] = std::move(t);
  }
  return inputs;
}

float bf16(double v) { return round_to_dtype(isa::DType::bf16, static_cast<float>(v)); }

TEST(Examples, LoadValidateAndRoundTrip) {
  const std::pair<const char*, const char*> expected[] = {
      {"gemm_4096", "bf16[4096, 4096]"},
      {"mlp", "bf16[512, 768]"},
      {"transformer_block", "bf16[512, 768]"},
      {"decode_attention", "fp32[1, 64]"},
  };
  for (const auto& [name, type] : expected) {
    SCOPED_TRACE(name);
    Graph g = load(name);
    EXPECT_EQ(g.name, name);
    EXPECT_FALSE(has_unknown_dims(g));
    ASSERT_EQ(g.outputs.size(), 1u);
    EXPECT_EQ(to_string(g.find(g.outputs[0])->type), type);
    EXPECT_EQ(to_json(g), without_comments(base::read_json_file(example_path(name))));
  }
}

TEST(Examples, TransformerBlockShapes) {
  Graph g = load("transformer_block");
  EXPECT_EQ(to_string(g.find(id_of(g, "q_t"))->type), "bf16[12, 512, 64]");
  EXPECT_EQ(to_string(g.find(id_of(g, "k_t"))->type), "bf16[12, 64, 512]");
  EXPECT_EQ(to_string(g.find(id_of(g, "scores"))->type), "bf16[12, 512, 512]");
  EXPECT_EQ(to_string(g.find(id_of(g, "mask_bias"))->type), "int32[512, 512]");
  EXPECT_EQ(to_string(g.find(id_of(g, "context_merged"))->type), "bf16[512, 768]");
  EXPECT_EQ(to_string(g.find(id_of(g, "fc1_bias"))->type), "bf16[512, 3072]");
  int weights = 0;
  for (const Node& n : g.nodes) weights += n.op == OpKind::input && n.role == InputRole::weight;
  EXPECT_EQ(weights, 16);
}

TEST(Examples, GemmMatchesDotProducts) {
  Graph g = load("gemm_4096");
  int64_t n = 4096;
#if WALLSIM_TEST_ASAN
  // Eigen's GEMM under AddressSanitizer takes over a minute at 4096: the same graph at 512.
  n = 512;
  for (Node& node : g.nodes) {
    if (node.op == OpKind::input) node.type.dims = {Dim::of(n), Dim::of(n)};
  }
  infer_types(g);
#endif
  auto inputs = random_inputs(g, 1);
  auto out = evaluate(g, inputs, {});
  const HostTensor& y = out.at(id_of(g, "y"));
  const HostTensor& x = out.at(id_of(g, "x"));  // rounded to bf16
  const HostTensor& w = out.at(id_of(g, "w"));
  ASSERT_EQ(y.shape, (std::vector<int64_t>{n, n}));
  for (auto [r, c] :
       {std::pair<int64_t, int64_t>{0, 0}, {n - 1, n - 1}, {n / 3, n / 7}, {17, n - 9}}) {
    double want = 0;
    for (int64_t k = 0; k < n; ++k) want += double(x.data[r * n + k]) * w.data[k * n + c];
    EXPECT_NEAR(y.data[r * n + c], want, std::fabs(want) / 128 + 1e-4) << r << ", " << c;
  }
  for (float v : x.data) ASSERT_EQ(v, bf16(v));
}

TEST(Examples, MlpMatchesADirectComputation) {
  Graph g = load("mlp");
  auto in = random_inputs(g, 2);
  auto out = evaluate(g, in, {});
  const HostTensor& y = out.at(id_of(g, "fc2_bias"));
  ASSERT_EQ(y.shape, (std::vector<int64_t>{512, 768}));
  auto at = [&](const char* name, int64_t i) { return bf16(in.at(name).data[i]); };
  for (int64_t r : {0, 300, 511}) {
    std::vector<double> h(3072);
    for (int64_t j = 0; j < 3072; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 768; ++k) s += double(at("x", r * 768 + k)) * at("w1", k * 3072 + j);
      double b = bf16(bf16(s) + at("b1", j));
      h[j] = bf16(0.5 * b * (1 + std::erf(b / std::sqrt(2.0))));
    }
    for (int64_t c : {0, 100, 767}) {
      double s = 0;
      for (int64_t j = 0; j < 3072; ++j) s += h[j] * at("w2", j * 768 + c);
      double want = bf16(s) + at("b2", c);
      EXPECT_NEAR(y.data[r * 768 + c], want, std::fabs(want) / 64 + 1e-3) << r << ", " << c;
    }
  }
}

TEST(Examples, TransformerBlockIsCausalAndFinite) {
  Graph g = load("transformer_block");
  auto in = random_inputs(g, 3);
  auto out = evaluate(g, in, {});
  const int32_t y = g.outputs[0];
  for (float v : out.at(y).data) ASSERT_TRUE(std::isfinite(v));
  const HostTensor& probs = out.at(id_of(g, "probs"));
  ASSERT_EQ(probs.shape, (std::vector<int64_t>{12, 512, 512}));
  for (int64_t h : {0, 11}) {
    for (int64_t i : {0, 1, 255, 511}) {
      double sum = 0;
      for (int64_t j = 0; j < 512; ++j) {
        float p = probs.data[(h * 512 + i) * 512 + j];
        if (j > i) {
          ASSERT_EQ(p, 0.0f) << h << ", " << i << ", " << j;
        }
        sum += p;
      }
      EXPECT_NEAR(sum, 1.0, 0.02);  // bf16 probabilities
    }
  }
  // Changing later tokens leaves the first tokens' outputs alone.
  for (int64_t i = 8 * 768; i < 512 * 768; ++i) in.at("x").data[i] *= -2.0f;
  auto changed = evaluate(g, in, {});
  for (int64_t i = 0; i < 8 * 768; ++i) ASSERT_EQ(changed.at(y).data[i], out.at(y).data[i]) << i;
  EXPECT_NE(changed.at(y).data[511 * 768], out.at(y).data[511 * 768]);
}

TEST(Examples, DecodeAttentionMatchesDirectAttentionForEachLength) {
  Graph g = load("decode_attention");
  for (int64_t len : {1, 7, 200, 256}) {
    SCOPED_TRACE(len);
    auto in = random_inputs(g, 4);
    // What lies past `len` must not matter.
    for (const char* cache : {"k_cache", "v_cache"}) {
      for (int64_t i = len * 64; i < 256 * 64; ++i) in.at(cache).data[i] = 1000.0f;
    }
    auto out = evaluate(g, in, {{"len", len}});
    const HostTensor& o = out.at(g.outputs[0]);
    ASSERT_EQ(o.shape, (std::vector<int64_t>{1, 64}));
    const auto& q = in.at("q").data;
    const auto& k = in.at("k_cache").data;
    const auto& v = in.at("v_cache").data;
    std::vector<double> s(len);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < len; ++j) {
      s[j] = 0;
      for (int64_t c = 0; c < 64; ++c) s[j] += double(q[c]) * k[j * 64 + c];
      s[j] *= 0.125;
      mx = std::max(mx, s[j]);
    }
    for (int64_t j = 0; j < len; ++j) sum += s[j] = std::exp(s[j] - mx);
    for (int64_t c = 0; c < 64; ++c) {
      double want = 0;
      for (int64_t j = 0; j < len; ++j) want += s[j] / sum * v[j * 64 + c];
      EXPECT_NEAR(o.data[c], want, 1e-5) << c;
    }
  }
}

}  // namespace
}  // namespace wallsim::compiler_stub
