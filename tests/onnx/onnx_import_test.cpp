// The importer on models built in the test: integer shape arithmetic folds away at import,
// constants become weights with their values, and what it cannot take is a one-line error.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "model_builder.h"
#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/lower.h"
#include "wallsim/compiler_stub/reference.h"
#include "wallsim/frontends/onnx.h"

namespace wallsim::frontends::onnx {
namespace {

namespace pb = ::onnx;
namespace cs = compiler_stub;

using test::ModelBuilder;

std::string error_of(ModelBuilder& b) {
  try {
    b.import();
  } catch (const base::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(OnnxImport, ShapeArithmeticFoldsToOneReshape) {
  // Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): [2, 3, 4] -> [2, 12].
  ModelBuilder b;
  b.input("x", {2, 3, 4});
  b.ints("zero", {0}, true);
  b.ints("axes", {0});
  b.ints("minus1", {-1});
  b.node("Shape", {"x"}, "s");
  b.node("Gather", {"s", "zero"}, "n");
  b.node("Unsqueeze", {"n", "axes"}, "n1");
  auto* c = b.node("Concat", {"n1", "minus1"}, "shape");
  auto* axis = c->add_attribute();
  axis->set_name("axis");
  axis->set_type(pb::AttributeProto::INT);
  axis->set_i(0);
  b.node("Reshape", {"x", "shape"}, "y");
  b.output("y");
  Imported m = b.import();
  ASSERT_EQ(m.graph.nodes.size(), 2u);  // the input and one reshape
  EXPECT_EQ(m.graph.nodes[1].op, cs::OpKind::reshape);
  EXPECT_EQ(*m.graph.nodes[1].ints_attr("shape"), (std::vector<int64_t>{2, 12}));
  EXPECT_TRUE(m.weights.empty());
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].second, "x");
}

TEST(OnnxImport, FloatConstantsBecomeWeightsWithTheirValues) {
  ModelBuilder b;
  b.input("x", {2, 3});
  auto* w = b.g->add_initializer();
  w->set_name("w");
  w->set_data_type(pb::TensorProto::FLOAT);
  w->add_dims(3);
  for (float v : {1.0f, -2.0f, 0.5f}) w->add_float_data(v);
  b.node("Mul", {"x", "w"}, "y");
  b.output("y");
  Imported m = b.import();
  ASSERT_EQ(m.weights.size(), 1u);
  const auto& [name, value] = *m.weights.begin();
  EXPECT_EQ(value.data, (std::vector<float>{1.0f, -2.0f, 0.5f}));
  cs::HostTensor x{{2, 3}, {1, 2, 3, 4, 5, 6}};
  auto out = cs::evaluate(m.graph, {{"x", x}, {name, value}}, {});
  EXPECT_EQ(out.at(m.graph.outputs[0]).data, (std::vector<float>{1, -4, 1.5f, 4, -10, 3}));
}

TEST(OnnxImport, UnsupportedOpNamesOpNodeAndTheSupportedList) {
  ModelBuilder b;
  b.input("x", {4});
  b.node("Det", {"x"}, "y");
  b.output("y");
  const std::string e = error_of(b);
  EXPECT_NE(e.find("node 0 'y_node' (Det): ONNX op 'Det' is not supported (supported: Abs Add"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(OnnxImport, OpsetsOutsideTheSupportedRangeAreRejected) {
  ModelBuilder b(18);
  b.input("x", {4});
  b.node("Relu", {"x"}, "y");
  b.output("y");
  EXPECT_EQ(error_of(b), "model.onnx: ai.onnx opset 18 is not supported (1 to 17)");
}

TEST(OnnxImport, SymbolicDimsNeedABound) {
  ModelBuilder b;
  b.input("x", {4});
  b.g->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("n");
  b.node("Relu", {"x"}, "y");
  b.output("y");
  EXPECT_EQ(error_of(b),
            "model.onnx: input 'x': dynamic dim 'n' has no bound (give one: --dim n=N)");
  ImportOptions o;
  o.dims["n"] = 7;
  Imported m = import_bytes(b.m.SerializeAsString(), "model.onnx", o);
  EXPECT_EQ(m.graph.nodes[0].type.dims[0].size, 7);
}

TEST(OnnxImport, TruncatedModelIsOneLine) {
  ModelBuilder b;
  b.input("x", {4});
  b.node("Relu", {"x"}, "y");
  b.output("y");
  const std::string bytes = b.m.SerializeAsString();
  EXPECT_THROW(import_bytes(bytes.substr(0, bytes.size() / 2), "m.onnx"), base::InputError);
}

TEST(OnnxImport, GraphOutputsKeepTheirNames) {
  // An output's tensor (and exec's outputs/NAME.npy) takes its ONNX name, made a file name and
  // kept apart from the inputs' names; a value that is two outputs, or an input passed through,
  // is copied so each output names its own tensor.
  ModelBuilder b;
  b.input("x", {2, 3});
  b.node("Relu", {"x"}, "y");
  b.output("y");
  b.output("y");
  b.node("Sigmoid", {"x"}, "out/1:a");
  b.output("out/1:a");
  b.node("Tanh", {"x"}, "v7");
  b.output("v7");
  b.output("x");
  Imported m = b.import();
  ASSERT_EQ(m.graph.outputs.size(), 5u);
  std::vector<std::string> names;
  for (int32_t id : m.graph.outputs) names.push_back(cs::value_name(m.graph, id));
  EXPECT_EQ(names, (std::vector<std::string>{"y", "y_1", "out_1_a", "out_v7", "x_1"}));
  EXPECT_EQ(m.outputs, (std::vector<std::string>{"y", "y", "out/1:a", "v7", "x"}));
}

TEST(OnnxImport, GraphOpsAreNamedAfterTheirOnnxNode) {
  // A node's first graph op takes its name (the exporter's module path), later ones #1, #2...;
  // an unnamed node is op_type_<index>. Compile errors name the op by it.
  ModelBuilder b;
  b.input("x", {2, 3});
  b.node("Relu", {"x"}, "r")->set_name("/features/features.1/Relu");
  b.node("HardSigmoid", {"r"}, "h")->set_name("/features/features.1/act");
  b.node("Sigmoid", {"h"}, "y")->clear_name();
  b.output("y");
  Imported m = b.import();
  std::vector<std::string> names;
  for (const cs::Node& n : m.graph.nodes) names.push_back(n.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"x", "/features/features.1/Relu", "/features/features.1/act",
                                      "/features/features.1/act#1", "Sigmoid_2"}));
}

}  // namespace
}  // namespace wallsim::frontends::onnx
