// ModelProtos built in the tests: float inputs and initializers, int64 initializers, nodes with
// attributes, outputs.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "wallsim/frontends/onnx.h"

namespace wallsim::frontends::onnx::test {

namespace pb = ::onnx;

struct ModelBuilder {
  pb::ModelProto m;
  pb::GraphProto* g;
  explicit ModelBuilder(int64_t opset = 13) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = m.mutable_graph();
    g->set_name("t");
  }
  void input(const std::string& name, std::vector<int64_t> dims) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(pb::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void ints(const std::string& name, std::vector<int64_t> v, bool scalar = false) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(pb::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  }
  void floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(pb::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  }
  pb::NodeProto* node(const std::string& op, std::vector<std::string> in, std::string out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out + "_node");
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void attr(pb::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(pb::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr(pb::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::FLOAT);
    a->set_f(v);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  Imported import() { return import_bytes(m.SerializeAsString(), "model.onnx"); }
};

}  // namespace wallsim::frontends::onnx::test
