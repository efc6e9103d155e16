// Erf, Resize and LSTM imported from models built in the test: the reference evaluator against
// each op's definition computed here, then the compiled plans on the chip against the reference;
// what the importer does not take is a one-line error naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "../compiler_stub/on_chip_run.h"
#include "model_builder.h"
#include "wallsim/compiler_stub/reference.h"

namespace wallsim::frontends::onnx {
namespace {

namespace cs = compiler_stub;
namespace pb = ::onnx;
using test::ModelBuilder;
using Floats = std::vector<float>;

Floats random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Floats v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The reference evaluator's outputs for input `x` (the model's only activation input).
std::vector<Floats> reference(const Imported& m, const Floats& x) {
  std::map<std::string, cs::HostTensor> in = m.weights;
  const cs::Node& xn = *m.graph.find(m.graph.nodes[0].id);
  cs::HostTensor t;
  for (const cs::Dim& d : xn.type.dims) t.shape.push_back(d.size);
  t.data = x;
  in[m.inputs.at(0).second] = t;
  auto values = cs::evaluate(m.graph, in, {});
  std::vector<Floats> out;
  for (int32_t id : m.graph.outputs) out.push_back(values.at(id).data);
  return out;
}

void expect_near(const Floats& got, const Floats& want, double atol, double rtol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << "element " << i;
  }
}

// Compiles the model and runs it on the chip with its imported weights; the worst output error
// against the reference, relative to the output's largest magnitude.
double on_chip_error(const Imported& m, const std::string& config = "trn2") {
  auto weights = [&](sim::Core& device, std::map<std::string, cs::HostTensor>& inputs) {
    for (const auto& [name, t] : m.weights) {
      auto* d = device.tensors().find(name);
      ASSERT_NE(d, nullptr) << name;
      ASSERT_EQ(d->bytes.size(), 4 * t.data.size()) << name;
      std::memcpy(d->bytes.data(), t.data.data(), d->bytes.size());
      inputs[name] = t;
    }
  };
  return cs::test::run_on_chip(m.graph, config, cs::GroupPolicy::whole, weights).max_error;
}

std::string error_of(ModelBuilder& b) {
  try {
    b.import();
  } catch (const base::InputError& e) {
    return e.what();
  }
  return "";
}

// ---- Erf -------------------------------------------------------------------------------------

TEST(OnnxOps, ErfMatchesStdErf) {
  ModelBuilder b;
  b.input("x", {4, 64});
  b.node("Erf", {"x"}, "y");
  b.output("y");
  const Imported m = b.import();
  Floats x = random_values(256, 1, 1.5f);
  x[0] = 0.0f;  // erf(0): the decomposition's one special point
  x[1] = 1e-4f;
  x[2] = -6.0f;
  x[3] = 9.0f;
  Floats want;
  for (float v : x) want.push_back(std::erf(v));
  expect_near(reference(m, x)[0], want, 2e-7, 1e-5);
  EXPECT_LT(on_chip_error(m), 1e-5);
}

// ---- Resize ----------------------------------------------------------------------------------

struct ResizeCase {
  const char* mode;
  const char* coords;
  const char* nearest;
  std::vector<int64_t> sizes;  // N, C, OH, OW
};

// Resize of x [N, C, H, W] by ONNX's definition, one output pixel at a time.
Floats resize_reference(const Floats& x, int64_t N, int64_t C, int64_t H, int64_t W,
                        const ResizeCase& c) {
  const int64_t OH = c.sizes[2], OW = c.sizes[3];
  const std::string coords = c.coords, nearest = c.nearest;
  auto src = [&](int64_t o, int64_t in, int64_t out) {
    const double s = double(out) / double(in);
    if (coords == "align_corners") return out == 1 ? 0.0 : double(o) * (in - 1) / (out - 1);
    if (coords == "asymmetric") return o / s;
    if (coords == "pytorch_half_pixel") return out > 1 ? (o + 0.5) / s - 0.5 : 0.0;
    return (o + 0.5) / s - 0.5;
  };
  auto pick = [&](double v, int64_t in) {
    int64_t i;
    if (nearest == "floor") {
      i = int64_t(std::floor(v));
    } else if (nearest == "ceil") {
      i = int64_t(std::ceil(v));
    } else if (v == std::floor(v) + 0.5) {
      i = int64_t(nearest == "round_prefer_ceil" ? std::ceil(v) : std::floor(v));
    } else {
      i = int64_t(std::round(v));
    }
    return std::min(std::max<int64_t>(i, 0), in - 1);
  };
  Floats y;
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const float* p = x.data() + nc * H * W;
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const double sh = src(oh, H, OH), sw = src(ow, W, OW);
        if (std::string(c.mode) == "nearest") {
          y.push_back(p[pick(sh, H) * W + pick(sw, W)]);
          continue;
        }
        const double h = std::clamp(sh, 0.0, double(H - 1)), w = std::clamp(sw, 0.0, double(W - 1));
        const int64_t h0 = int64_t(h), w0 = int64_t(w);
        const int64_t h1 = std::min(h0 + 1, H - 1), w1 = std::min(w0 + 1, W - 1);
        const double dh = h - h0, dw = w - w0;
        y.push_back(float((1 - dh) * ((1 - dw) * p[h0 * W + w0] + dw * p[h0 * W + w1]) +
                          dh * ((1 - dw) * p[h1 * W + w0] + dw * p[h1 * W + w1])));
      }
    }
  }
  return y;
}

TEST(OnnxOps, ResizeNearestAndLinearInEveryCoordinateMode) {
  const std::vector<ResizeCase> cases = {
      {"nearest", "asymmetric", "floor", {1, 2, 8, 12}},
      {"nearest", "half_pixel", "round_prefer_floor", {1, 2, 12, 10}},
      {"nearest", "align_corners", "round_prefer_ceil", {1, 2, 7, 9}},
      {"nearest", "pytorch_half_pixel", "ceil", {1, 2, 3, 1}},
      {"linear", "asymmetric", "round_prefer_floor", {1, 2, 8, 12}},
      {"linear", "half_pixel", "round_prefer_floor", {1, 2, 9, 3}},
      {"linear", "align_corners", "round_prefer_floor", {1, 2, 8, 11}},
      {"linear", "pytorch_half_pixel", "round_prefer_floor", {1, 2, 1, 12}},
  };
  const Floats x = random_values(2 * 4 * 6, 2);
  for (const ResizeCase& c : cases) {
    SCOPED_TRACE(std::string(c.mode) + " " + c.coords + " " + c.nearest);
    ModelBuilder b;
    b.input("x", {1, 2, 4, 6});
    b.ints("sizes", c.sizes);
    auto* n = b.node("Resize", {"x", "", "", "sizes"}, "y");
    ModelBuilder::attr(n, "mode", std::string(c.mode));
    ModelBuilder::attr(n, "coordinate_transformation_mode", std::string(c.coords));
    ModelBuilder::attr(n, "nearest_mode", std::string(c.nearest));
    b.output("y");
    const Imported m = b.import();
    expect_near(reference(m, x)[0], resize_reference(x, 1, 2, 4, 6, c), 1e-6, 1e-5);
  }
}

// deeplabv3's upsampling, by scales: bilinear by 4 (half_pixel), and nearest. One device per
// process: one mode per test.
void resize_by_scales_on_chip(const char* mode) {
  ModelBuilder b;
  b.input("x", {1, 8, 6, 6});
  b.floats("scales", {4}, {1.0f, 1.0f, 4.0f, 4.0f});
  auto* n = b.node("Resize", {"x", "", "scales"}, "y");
  ModelBuilder::attr(n, "mode", std::string(mode));
  b.output("y");
  const Imported m = b.import();
  const Floats x = random_values(8 * 36, 3);
  const ResizeCase c{mode, "half_pixel", "round_prefer_floor", {1, 8, 24, 24}};
  expect_near(reference(m, x)[0], resize_reference(x, 1, 8, 6, 6, c), 1e-6, 1e-5);
  EXPECT_LT(on_chip_error(m), 1e-5) << mode;
}

TEST(OnnxOps, ResizeLinearByScalesRunsOnChip) { resize_by_scales_on_chip("linear"); }
TEST(OnnxOps, ResizeNearestByScalesRunsOnChip) { resize_by_scales_on_chip("nearest"); }

TEST(OnnxOps, ResizeRefusesWhatItDoesNotTake) {
  auto refused = [](const char* attr, const char* value) {
    ModelBuilder b;
    b.input("x", {1, 1, 2, 2});
    b.floats("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
    auto* n = b.node("Resize", {"x", "", "scales"}, "y");
    ModelBuilder::attr(n, attr, std::string(value));
    b.output("y");
    return error_of(b);
  };
  EXPECT_EQ(refused("mode", "cubic"),
            "node 0 'y_node' (Resize): Resize's mode 'cubic' is not supported "
            "(nearest, linear are)");
  EXPECT_EQ(refused("coordinate_transformation_mode", "tf_crop_and_resize"),
            "node 0 'y_node' (Resize): Resize's coordinate_transformation_mode "
            "'tf_crop_and_resize' is not supported (asymmetric, half_pixel, align_corners, "
            "pytorch_half_pixel are)");
}

// ---- LSTM ------------------------------------------------------------------------------------

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// One direction of ONNX's LSTM (gates i, o, f, c) over x [S, B, I]: Y [S, B, H], then Y_h, Y_c.
std::vector<Floats> lstm_reference(const Floats& x, int64_t S, int64_t B, int64_t I, int64_t H,
                                   const Floats& w, const Floats& r, const Floats& bias,
                                   const Floats& h0, const Floats& c0) {
  Floats h = h0, c = c0, y;
  for (int64_t t = 0; t < S; ++t) {
    Floats hn(B * H), cn(B * H);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        float g[4];
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t row = k * H + j;
          double s = bias[row] + bias[4 * H + row];
          for (int64_t q = 0; q < I; ++q) s += double(x[(t * B + b) * I + q]) * w[row * I + q];
          for (int64_t q = 0; q < H; ++q) s += double(h[b * H + q]) * r[row * H + q];
          g[k] = float(s);
        }
        const float cell = sigmoid(g[2]) * c[b * H + j] + sigmoid(g[0]) * std::tanh(g[3]);
        cn[b * H + j] = cell;
        hn[b * H + j] = sigmoid(g[1]) * std::tanh(cell);
      }
    }
    h = hn;
    c = cn;
    y.insert(y.end(), h.begin(), h.end());
  }
  return {y, h, c};
}

// One device per process: one LSTM on the chip per test.
void lstm_forward(bool initial) {
  const int64_t S = 5, B = 2, I = 6, H = 8;
  const Floats w = random_values(4 * H * I, 4, 0.4f), r = random_values(4 * H * H, 5, 0.4f),
               bias = random_values(8 * H, 6, 0.3f), h0 = random_values(B * H, 7),
               c0 = random_values(B * H, 8), x = random_values(S * B * I, 9);
  {
    ModelBuilder b;
    b.input("x", {S, B, I});
    b.floats("W", {1, 4 * H, I}, w);
    b.floats("R", {1, 4 * H, H}, r);
    b.floats("B", {1, 8 * H}, bias);
    std::vector<std::string> in = {"x", "W", "R", "B"};
    if (initial) {
      b.floats("h0", {1, B, H}, h0);
      b.floats("c0", {1, B, H}, c0);
      in.insert(in.end(), {"", "h0", "c0"});
    }
    auto* n = b.g->add_node();
    n->set_op_type("LSTM");
    n->set_name("rnn.lstm");
    for (const auto& s : in) n->add_input(s);
    for (const char* o : {"Y", "Y_h", "Y_c"}) n->add_output(o);
    ModelBuilder::attr(n, "hidden_size", H);
    for (const char* o : {"Y", "Y_h", "Y_c"}) b.output(o);
    const Imported m = b.import();
    const Floats zeros(B * H, 0.0f);
    const auto want =
        lstm_reference(x, S, B, I, H, w, r, bias, initial ? h0 : zeros, initial ? c0 : zeros);
    const auto got = reference(m, x);
    ASSERT_EQ(got.size(), 3u);
    for (size_t k = 0; k < 3; ++k) expect_near(got[k], want[k], 1e-5, 1e-4);
    EXPECT_LT(on_chip_error(m), 1e-4);
  }
}

TEST(OnnxOps, LstmFromZerosMatchesItsDefinitionAndRunsOnChip) { lstm_forward(false); }
TEST(OnnxOps, LstmWithInitialStateMatchesItsDefinitionAndRunsOnChip) { lstm_forward(true); }

TEST(OnnxOps, LstmRefusesWhatItDoesNotTake) {
  auto refused = [](const std::function<void(ModelBuilder&, pb::NodeProto*)>& set) {
    ModelBuilder b;
    b.input("x", {2, 1, 3});
    b.floats("W", {1, 8, 3}, Floats(24, 0.1f));
    b.floats("R", {1, 8, 2}, Floats(16, 0.1f));
    auto* n = b.g->add_node();
    n->set_op_type("LSTM");
    n->set_name("rnn");
    for (const char* s : {"x", "W", "R"}) n->add_input(s);
    n->add_output("Y");
    ModelBuilder::attr(n, "hidden_size", int64_t{2});
    set(b, n);
    b.output("Y");
    return error_of(b);
  };
  const std::string at = "node 0 'rnn' (LSTM): ";
  EXPECT_EQ(refused([](ModelBuilder&, pb::NodeProto* n) { ModelBuilder::attr(n, "clip", 1.0f); }),
            at + "LSTM's clip is not supported");
  EXPECT_EQ(refused([](ModelBuilder& b, pb::NodeProto* n) {
              b.floats("P", {1, 6}, Floats(6, 0.0f));
              for (const char* s : {"", "", "", "", "P"}) n->add_input(s);
            }),
            at + "LSTM's peepholes (input P) are not supported");
  EXPECT_EQ(refused([](ModelBuilder&, pb::NodeProto* n) {
              auto* a = n->add_attribute();
              a->set_name("activations");
              a->set_type(pb::AttributeProto::STRINGS);
              for (const char* s : {"Relu", "Tanh", "Tanh"}) a->add_strings(s);
            }),
            at + "LSTM activations other than Sigmoid, Tanh, Tanh are not supported");
}

}  // namespace
}  // namespace wallsim::frontends::onnx
