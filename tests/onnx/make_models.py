#!/usr/bin/env python3
"""Writes the small example models of docs/MODELS.md (models/*.onnx) with python3-onnx and
seeded numpy weights: a MobileNet-style CNN and a one-block ViT. Run with /usr/bin/python3;
the files are kept in git so that the tests do not depend on this script."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(22)


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.k = [], [], 0

    def w(self, *shape, scale=0.2):
        self.k += 1
        name = f"w{self.k}"
        self.inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(self, values, dtype=np.int64):
        self.k += 1
        name = f"c{self.k}"
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def op(self, op, inputs, **attrs):
        self.k += 1
        out = f"t{self.k}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op.lower()}{self.k}",
                                           **attrs))
        return out

    def save(self, name, inputs, output, out_shape):
        g = helper.make_graph(self.nodes, name, inputs,
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT,
                                                             out_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="wallsim tests/onnx/make_models.py")
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(HERE, "models", name + ".onnx"))


def cnn():
    b = Builder()
    x = "image"
    h = b.op("Conv", [x, b.w(16, 3, 3, 3), b.w(16)], pads=[1, 1, 1, 1], strides=[2, 2])
    h = b.op("BatchNormalization", [h, b.w(16, scale=1) , b.w(16), b.w(16),
                                    b.const(np.abs(rng.standard_normal(16)) + 0.5, np.float32)])
    h = b.op("Relu", [h])
    # An inverted residual: expand, depthwise, project.
    e = b.op("Conv", [h, b.w(32, 16, 1, 1)])
    e = b.op("HardSwish", [e])
    e = b.op("Conv", [e, b.w(32, 1, 3, 3)], group=32, pads=[1, 1, 1, 1])
    e = b.op("Clip", [e, b.const(0.0, np.float32), b.const(6.0, np.float32)])
    e = b.op("Conv", [e, b.w(16, 32, 1, 1)])
    h = b.op("Add", [h, e])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("GlobalAveragePool", [h])
    h = b.op("Flatten", [h])
    h = b.op("Gemm", [h, b.w(10, 16), b.w(10)], transB=1)
    y = b.op("Softmax", [h], axis=-1)
    b.save("tiny_cnn", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 16, 16])], y,
           [1, 10])


def vit():
    b = Builder()
    x = "image"
    d, heads, p = 64, 4, 4
    t = b.op("Conv", [x, b.w(d, 3, p, p), b.w(d)], strides=[p, p])  # [1, d, 8, 8]
    t = b.op("Reshape", [t, b.const([1, d, 64])])
    t = b.op("Transpose", [t], perm=[0, 2, 1])  # [1, 64 tokens, d]
    t = b.op("Add", [t, b.w(1, 64, d)])  # position embedding

    def ln(v):
        return b.op("LayerNormalization", [v, b.w(d, scale=1), b.w(d)], axis=-1)

    def split_heads(v):
        v = b.op("Reshape", [v, b.const([1, 64, heads, d // heads])])
        return b.op("Transpose", [v], perm=[0, 2, 1, 3])  # [1, heads, 64, hd]

    n = ln(t)
    q = split_heads(b.op("MatMul", [n, b.w(d, d)]))
    k = split_heads(b.op("MatMul", [n, b.w(d, d)]))
    v = split_heads(b.op("MatMul", [n, b.w(d, d)]))
    s = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    s = b.op("Mul", [s, b.const(1.0 / np.sqrt(d // heads), np.float32)])
    a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
    a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), b.const([1, 64, d])])
    t = b.op("Add", [t, b.op("MatMul", [a, b.w(d, d)])])
    # MLP with the tanh form of GELU, as exporters write it.
    h = b.op("Add", [b.op("MatMul", [ln(t), b.w(d, 4 * d)]), b.w(4 * d)])
    inner = b.op("Mul", [b.op("Add", [h, b.op("Mul", [b.op("Pow", [h, b.const(3.0, np.float32)]),
                                                       b.const(0.044715, np.float32)])]),
                         b.const(0.7978845608, np.float32)])
    g = b.op("Mul", [b.op("Mul", [h, b.const(0.5, np.float32)]),
                     b.op("Add", [b.op("Tanh", [inner]), b.const(1.0, np.float32)])])
    t = b.op("Add", [t, b.op("MatMul", [g, b.w(4 * d, d)])])
    pooled = b.op("ReduceMean", [ln(t)], axes=[1], keepdims=0)  # [1, d]
    y = b.op("Gemm", [pooled, b.w(d, 10), b.w(10)])
    b.save("tiny_vit", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 32, 32])], y,
           [1, 10])


cnn()
vit()
