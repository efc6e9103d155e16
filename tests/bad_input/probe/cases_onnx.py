"""Issue 40 probe: ONNX models (wallsim import onnx), malformed protobufs and hostile graphs."""
import struct

import numpy as np
import onnx
from onnx import TensorProto as TP, helper as H, numpy_helper


def model(nodes, inputs, inits=(), opset=13, outputs=("y",), ir=8, domain="", out_type=TP.FLOAT,
          in_type=TP.FLOAT, extra_opsets=(), **kw):
    ins = [H.make_tensor_value_info(n, in_type, list(d) if d is not None else None)
           for n, d in inputs]
    outs = [H.make_tensor_value_info(n, out_type, None) for n in outputs]
    g = H.make_graph(nodes, "g", ins, outs, initializer=list(inits), **kw)
    ops = [H.make_opsetid(domain, opset)] + [H.make_opsetid(d, v) for d, v in extra_opsets]
    m = H.make_model(g, opset_imports=ops, ir_version=ir)
    return m.SerializeToString()


def node(op, ins, outs=("y",), name="n0", **attrs):
    return H.make_node(op, list(ins), list(outs), name=name, **attrs)


def f32(name, dims, vals=None):
    n = int(np.prod(dims)) if dims else 1
    return H.make_tensor(name, TP.FLOAT, list(dims), vals if vals is not None else [1.0] * n)


def i64(name, vals, dims=None):
    return H.make_tensor(name, TP.INT64, [len(vals)] if dims is None else dims, list(vals))


def one(op, dims=(2, 3), **attrs):
    return model([node(op, ["x"], **attrs)], [("x", dims)])


def conv(x=(1, 1, 4, 4), w=(1, 1, 2, 2), **attrs):
    return model([node("Conv", ["x", "w"], **attrs)], [("x", x)], [f32("w", w)])


def pool(op, x=(1, 1, 4, 4), **attrs):
    return model([node(op, ["x"], **attrs)], [("x", x)])


def binop(op, a, b, binit=None):
    inits = [binit] if binit is not None else []
    ins = [("a", a)] + ([("b", b)] if binit is None else [])
    return model([node(op, ["a", "b"])], ins, inits)


def with_init(op, init, xdims=(2, 3), extra_ins=(), **attrs):
    return model([node(op, ["x", init.name] + list(extra_ins), **attrs)], [("x", xdims)], [init])


def raw_init(name, dtype, dims, raw):
    t = onnx.TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def deep_if(levels):
    """An If node whose then_branch nests `levels` deep."""
    inner = H.make_graph([node("Relu", ["x"], ["z"], name="r")], "b", [],
                         [H.make_tensor_value_info("z", TP.FLOAT, None)])
    leaf = inner
    for k in range(levels):
        c = H.make_tensor("c%d" % k, TP.BOOL, [], [1])
        inner = H.make_graph([node("If", ["c%d" % k], ["z"], name="if%d" % k, then_branch=inner,
                                   else_branch=leaf)], "b%d" % k, [],
                             [H.make_tensor_value_info("z", TP.FLOAT, None)], initializer=[c])
    return inner


def cases(add):
    """add(name, data_bytes, expect, msg=None, extra='', then=True)."""
    good = one("Relu")
    rng = np.random.default_rng(40)
    # ---- bytes that are not an ONNX model
    for k in range(6):
        add("random_bytes_%d" % k, rng.integers(0, 256, 64 + 97 * k, dtype=np.uint8).tobytes(),
            "err")
    add("zeros_4k", b"\0" * 4096, "err")
    add("one_byte", b"\x08", "err")
    add("varint_overflow", b"\x08" + b"\xff" * 11, "err")
    add("length_2g", b"\x3a" + varint(2 ** 31 - 1) + b"\x0a", "err")
    add("length_huge", b"\x3a" + varint(2 ** 62) + b"\x0a", "err")
    add("wrong_wire_type_graph", b"\x3d\x00\x00\x00\x00", "err")  # field 7 as fixed32
    add("group_wire_type", b"\x3b\x3c", "err")
    add("trailing_junk", good + b"\xff\xff\xff", "err")
    add("good_twice", good + good, "any")  # protobuf merges concatenated messages
    add("json_text", b'{"ir_version": 8}', "err")
    add("text_proto", b"ir_version: 8\ngraph { }\n", "err")
    add("gzip_magic", b"\x1f\x8b\x08\x00" + b"\0" * 20, "err")
    add("utf16_bom", b"\xff\xfe" + good, "err")
    # ---- model-level fields
    m = onnx.ModelProto()
    m.ir_version = 8
    add("no_graph", m.SerializeToString(), "err")
    add("empty_graph", model([], [], outputs=()), "err")
    add("no_outputs", model([node("Relu", ["x"])], [("x", (2, 3))], outputs=()), "err")
    add("output_is_input", model([], [("y", (2, 3))]), "any")
    add("ir_version_0", model([node("Relu", ["x"])], [("x", (2, 3))], ir=0), "any")
    add("ir_version_99", model([node("Relu", ["x"])], [("x", (2, 3))], ir=99), "any")
    add("opset_0", one("Relu") and model([node("Relu", ["x"])], [("x", (2, 3))], opset=0), "err")
    add("opset_negative", model([node("Relu", ["x"])], [("x", (2, 3))], opset=-5), "err")
    add("opset_2_63", model([node("Relu", ["x"])], [("x", (2, 3))], opset=2 ** 63 - 1), "err")
    add("domain_ms_only", model([node("Relu", ["x"])], [("x", (2, 3))], domain="com.microsoft"),
        "err")
    add("node_domain_unknown", model([H.make_node("Relu", ["x"], ["y"], name="n0",
                                                  domain="evil.domain")], [("x", (2, 3))]), "err")
    add("duplicate_opset", model([node("Relu", ["x"])], [("x", (2, 3))],
                                 extra_opsets=[("", 11)]), "any")
    # ---- graph structure
    add("cycle_two", model([node("Relu", ["b"], ["a"], name="n0"), node("Relu", ["a"], ["b"],
                                                                         name="n1"),
                            node("Add", ["a", "x"], ["y"], name="n2")], [("x", (2, 3))]), "err")
    add("self_loop", model([node("Add", ["x", "y"])], [("x", (2, 3))]), "err")
    add("missing_input", model([node("Add", ["x", "nope"])], [("x", (2, 3))]), "err")
    add("output_not_produced", model([node("Relu", ["x"], ["z"])], [("x", (2, 3))]), "err")
    add("two_producers", model([node("Relu", ["x"], name="n0"), node("Neg", ["x"], name="n1")],
                               [("x", (2, 3))]), "err")
    add("node_no_outputs", model([node("Relu", ["x"], outs=()), node("Neg", ["x"], name="n1")],
                                 [("x", (2, 3))]), "any")  # a dead node: harmless
    add("empty_input_name", model([node("Relu", [""])], [("x", (2, 3))]), "err")
    add("input_shadowed_by_init", model([node("Relu", ["x"])], [("x", (2, 3))],
                                        [f32("x", (2, 3))]), "any")
    add("duplicate_initializer", model([node("Add", ["x", "w"])], [("x", (2, 3))],
                                       [f32("w", (2, 3)), f32("w", (2, 3))]), "err")
    add("duplicate_graph_input", model([node("Relu", ["x"])], [("x", (2, 3)), ("x", (2, 3))]),
        "err")
    add("unsorted_nodes", model([node("Neg", ["a"], ["y"], name="n1"), node("Relu", ["x"], ["a"])],
                                [("x", (2, 3))]), "any")
    # ---- tensor types and shapes
    add("input_no_type", model([node("Relu", ["x"])], [("x", None)]), "err")
    add("input_rank0", model([node("Relu", ["x"])], [("x", ())]), "any")
    add("input_dim0", model([node("Relu", ["x"])], [("x", (0, 3))]), "any")
    add("input_dim_negative", model([node("Relu", ["x"])], [("x", (-1, 3))]), "err")
    add("input_dim_2_40", model([node("Relu", ["x"])], [("x", (2 ** 40, 3))]), "err")
    add("input_dim_2_62", model([node("Relu", ["x"])], [("x", (2 ** 62, 2 ** 62))]), "err")
    add("input_rank_12", model([node("Relu", ["x"])], [("x", (1,) * 12)]), "any")
    add("input_string", model([node("Relu", ["x"])], [("x", (2, 3))], in_type=TP.STRING), "err")
    add("input_complex", model([node("Relu", ["x"])], [("x", (2, 3))], in_type=TP.COMPLEX64),
        "err")
    add("input_bool_relu", model([node("Relu", ["x"])], [("x", (2, 3))], in_type=TP.BOOL), "err")
    add("input_float64", model([node("Relu", ["x"])], [("x", (2, 3))], in_type=TP.DOUBLE), "any")
    add("input_undefined_type", model([node("Relu", ["x"])], [("x", (2, 3))], in_type=0), "err")
    seq = H.make_tensor_sequence_value_info("x", TP.FLOAT, [2])
    g = H.make_graph([node("Relu", ["x"])], "g", [seq], [H.make_tensor_value_info("y", TP.FLOAT,
                                                                                  None)])
    add("input_sequence", H.make_model(g, opset_imports=[H.make_opsetid("", 13)],
                                       ir_version=8).SerializeToString(), "err")
    add("dim_bind_unknown", model([node("Relu", ["x"])], [("x", ("n", 3))]), "err",
        extra=" --dim m=4")
    add("dim_bind_zero", model([node("Relu", ["x"])], [("x", ("n", 3))]), "err", extra=" --dim n=0")
    add("dim_bind_negative", model([node("Relu", ["x"])], [("x", ("n", 3))]), "err",
        extra=" --dim n=-4")
    add("dim_bind_huge", model([node("Relu", ["x"])], [("x", ("n", 3))]), "err",
        extra=" --dim n=99999999999999999999")
    add("dim_bind_2_40", model([node("Relu", ["x"])], [("x", ("n", "m"))]), "err",
        extra=" --dim n=1099511627776 --dim m=1099511627776")
    add("dim_bind_twice", model([node("Relu", ["x"])], [("x", ("n", 3))]), "any",
        extra=" --dim n=2 --dim n=3")
    add("dim_bind_empty_name", model([node("Relu", ["x"])], [("x", ("n", 3))]), "err",
        extra=" --dim =3")
    # ---- initializers
    add("init_raw_short", with_init("Add", raw_init("w", TP.FLOAT, [2, 3], b"\0" * 7)), "err")
    add("init_raw_long", with_init("Add", raw_init("w", TP.FLOAT, [2, 3], b"\0" * 100)), "err")
    add("init_no_data", with_init("Add", raw_init("w", TP.FLOAT, [2, 3], b"")), "err")
    add("init_dims_negative", with_init("Add", raw_init("w", TP.FLOAT, [-2, -3], b"\0" * 24)),
        "err")
    add("init_dims_2_40_no_data", with_init("Add", raw_init("w", TP.FLOAT, [2 ** 40, 3], b"")),
        "err")
    add("init_dims_overflow", with_init("Add", raw_init("w", TP.FLOAT, [2 ** 32, 2 ** 32, 4],
                                                       b"\0" * 16)), "err")
    t = raw_init("w", TP.FLOAT, [2, 3], b"")
    t.float_data.extend([1.0])
    add("init_float_data_short", with_init("Add", t), "err")
    t = raw_init("w", TP.FLOAT, [2, 3], b"")
    t.data_location = TP.EXTERNAL
    t.external_data.add(key="location", value="/etc/passwd")
    add("init_external_etc_passwd", with_init("Add", t), "err")
    t = raw_init("w", TP.FLOAT, [2, 3], b"")
    t.data_location = TP.EXTERNAL
    t.external_data.add(key="location", value="../../../../../../proc/self/environ")
    add("init_external_dotdot", with_init("Add", t), "err")
    for dt, nm in [(TP.STRING, "string"), (TP.COMPLEX64, "complex64"), (TP.FLOAT16, "float16"),
                   (TP.BFLOAT16, "bfloat16"), (TP.DOUBLE, "double"), (TP.INT8, "int8"),
                   (TP.UINT32, "uint32"), (TP.INT16, "int16"), (999, "dtype999")]:
        sz = {TP.STRING: 0, TP.COMPLEX64: 8, TP.FLOAT16: 2, TP.BFLOAT16: 2, TP.DOUBLE: 8,
              TP.INT8: 1, TP.UINT32: 4, TP.INT16: 2}.get(dt, 4)
        add("init_add_" + nm, with_init("Add", raw_init("w", dt, [2, 3], b"\x01" * (6 * sz))),
            "err" if nm in ("string", "complex64", "dtype999") else "any")
        add("init_matmul_" + nm, with_init("MatMul", raw_init("w", dt, [3, 2],
                                                              b"\x01" * (6 * sz))),
            "err" if nm in ("string", "complex64", "dtype999", "int8", "uint32", "int16") else
            "any")
    nan = raw_init("w", TP.FLOAT, [2, 3], struct.pack("<6f", *([float("nan")] * 6)))
    add("init_nan_values", with_init("Add", nan), "any")
    sp = H.make_sparse_tensor(H.make_tensor("w", TP.FLOAT, [1], [1.0]), i64("wi", [0]), [2, 3])
    add("sparse_initializer", model([node("Add", ["x", "w"])], [("x", (2, 3))],
                                    sparse_initializer=[sp]), "err")
    # ---- hostile names (--weights writes <name>.npy)
    for nm, label in [("../../../tmp/wallsim_probe_escape", "dotdot"), ("/tmp/wallsim_abs", "abs"),
                      ("a/b/c", "slash"), ("..", "dotdot_only"), (".", "dot_only"),
                      ("", "empty"), ("x" * 300, "long_300"), ("new\nline", "newline"),
                      ("nul\0byte", "nul"), ("\u00e9\u6f22", "unicode"),
                      (".wallsim-output", "marker")]:
        add("weights_name_" + label, with_init("Add", f32(nm, (2, 3))), "any",
            extra=" --weights")
    add("weights_names_collide", model([node("Add", ["x", "a/b"], ["t"], name="n0"),
                                        node("Add", ["t", "a_b"], ["y"], name="n1")],
                                       [("x", (2, 3))], [f32("a/b", (2, 3)), f32("a_b", (2, 3))]),
        "any", extra=" --weights")
    add("node_name_newline", model([node("FooBar", ["x"], name="a\nb")], [("x", (2, 3))]), "err")
    add("node_name_10k", model([node("FooBar", ["x"], name="n" * 10000)], [("x", (2, 3))]), "err")
    # ---- hostile attributes: Conv and pools
    add("conv_group_0", conv(group=0), "err")
    add("conv_group_3", conv(group=3), "err")
    add("conv_group_negative", conv(group=-1), "err")
    add("conv_kernel_mismatch", conv(kernel_shape=[3, 3]), "err")
    add("conv_dilations_0", conv(dilations=[0, 0]), "err")
    add("conv_dilations_huge", conv(dilations=[2 ** 40, 1]), "err")
    add("conv_pads_negative", conv(pads=[-3, -3, -3, -3]), "err")
    add("conv_pads_wrong_length", conv(pads=[1, 1, 1]), "err")
    add("conv_strides_wrong_length", conv(strides=[1]), "err")
    add("conv_strides_negative", conv(strides=[-1, -1]), "err")
    add("conv_strides_huge", conv(strides=[2 ** 33, 2 ** 33]), "err")
    add("conv_auto_pad_bogus", conv(auto_pad="BOGUS"), "err")
    add("conv_auto_pad_same", conv(auto_pad="SAME_UPPER"), "any")
    add("conv_kernel_bigger_than_input", conv(x=(1, 1, 2, 2), w=(1, 1, 5, 5)), "err")
    add("conv_weight_rank2", conv(w=(1, 4)), "err")
    add("conv_channels_mismatch", conv(x=(1, 3, 4, 4), w=(1, 2, 2, 2)), "err")
    add("conv_input_rank2", conv(x=(4, 4)), "err")
    add("conv_strides_float", conv(strides=[1.5, 1.5]), "err")
    add("conv_strides_string", conv(strides="11"), "err")
    add("conv_3d", conv(x=(1, 1, 4, 4, 4), w=(1, 1, 2, 2, 2)), "any")
    add("conv_1d", conv(x=(1, 1, 8), w=(1, 1, 3)), "any")
    add("conv_no_weight", model([node("Conv", ["x"])], [("x", (1, 1, 4, 4))]), "err")
    add("maxpool_no_kernel", pool("MaxPool"), "err")
    add("maxpool_kernel_0", pool("MaxPool", kernel_shape=[0, 0]), "err")
    add("maxpool_kernel_negative", pool("MaxPool", kernel_shape=[-2, -2]), "err")
    add("maxpool_kernel_huge", pool("MaxPool", kernel_shape=[2 ** 40, 2 ** 40]), "err")
    add("maxpool_kernel_too_big", pool("MaxPool", kernel_shape=[9, 9]), "err")
    add("maxpool_ceil_mode", pool("MaxPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        "any")
    add("maxpool_storage_order", pool("MaxPool", kernel_shape=[2, 2], storage_order=1), "any")
    add("maxpool_two_outputs", model([node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2])],
                                     [("x", (1, 1, 4, 4))]), "any")
    add("maxpool_pads_ge_kernel", pool("MaxPool", kernel_shape=[2, 2], pads=[5, 5, 5, 5]), "any")
    add("avgpool_count_include_pad", pool("AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                          count_include_pad=1), "any")
    add("avgpool_dilations_0", pool("AveragePool", kernel_shape=[2, 2], dilations=[0, 0]), "err")
    add("gap_rank2", pool("GlobalAveragePool", x=(4, 4)), "err")
    # ---- shapes and indices
    add("gemm_shape_mismatch", model([node("Gemm", ["a", "b"])], [("a", (2, 3)), ("b", (4, 5))]),
        "err")
    add("gemm_transA_mismatch", model([node("Gemm", ["a", "b"], transA=1)],
                                      [("a", (2, 3)), ("b", (2, 5))]), "any")
    add("gemm_alpha_nan", model([node("Gemm", ["a", "b"], alpha=float("nan"))],
                                [("a", (2, 3)), ("b", (3, 5))]), "any")
    add("gemm_alpha_inf", model([node("Gemm", ["a", "b"], alpha=float("inf"))],
                                [("a", (2, 3)), ("b", (3, 5))]), "any")
    add("gemm_rank3", model([node("Gemm", ["a", "b"])], [("a", (2, 2, 3)), ("b", (3, 5))]), "err")
    add("matmul_mismatch", binop("MatMul", (2, 3), (4, 5)), "err")
    add("matmul_rank1_both", binop("MatMul", (3,), (3,)), "any")
    add("matmul_batch_mismatch", binop("MatMul", (2, 2, 3), (3, 3, 5)), "err")
    add("add_broadcast_mismatch", binop("Add", (2, 3), (4, 3)), "err")
    add("where_mismatch", model([node("Where", ["c", "a", "b"])],
                                [("c", (2, 3)), ("a", (4, 3)), ("b", (2, 3))]), "err")
    add("softmax_axis_5", one("Softmax", axis=5), "err")
    add("softmax_axis_neg9", one("Softmax", axis=-9), "err")
    add("softmax_axis_2_40", one("Softmax", axis=2 ** 40), "err")
    add("concat_axis_7", model([node("Concat", ["a", "b"], axis=7)], [("a", (2, 3)), ("b", (2, 3))]),
        "err")
    add("concat_mismatch", model([node("Concat", ["a", "b"], axis=0)],
                                 [("a", (2, 3)), ("b", (2, 4))]), "err")
    add("concat_no_inputs", model([node("Concat", [], axis=0)], []), "err")
    add("concat_no_axis", model([node("Concat", ["a", "b"])], [("a", (2, 3)), ("b", (2, 3))]),
        "err")
    add("transpose_perm_dup", one("Transpose", perm=[0, 0]), "err")
    add("transpose_perm_short", one("Transpose", perm=[0]), "err")
    add("transpose_perm_range", one("Transpose", perm=[0, 5]), "err")
    add("transpose_perm_negative", one("Transpose", perm=[-1, 0]), "err")
    for nm, shp in [("two_minus1", [-1, -1]), ("zero_beyond_rank", [0, 0, 0]),
                    ("product_mismatch", [5, 5]), ("minus5", [-5, 6 * -1]),
                    ("huge", [2 ** 40, 2 ** 40]), ("minus1_nonint", [-1, 4]), ("empty", [])]:
        add("reshape_" + nm, with_init("Reshape", i64("s", shp)), "err")
    add("reshape_shape_float", with_init("Reshape", f32("s", (2,), [3.0, 2.0])), "err")
    add("reshape_shape_dynamic", model([node("Reshape", ["x", "s"])],
                                       [("x", (2, 3)), ("s", (2,))]), "err")
    sl = lambda nm, st, en, ax, sp, exp: add(  # noqa: E731
        "slice_" + nm, model([node("Slice", ["x", "st", "en", "ax", "sp"])], [("x", (4, 6))],
                             [i64("st", st), i64("en", en), i64("ax", ax), i64("sp", sp)]), exp)
    sl("step_0", [0], [4], [0], [0], "err")
    sl("starts_huge", [2 ** 62], [2 ** 63 - 1], [0], [1], "any")
    sl("axes_dup", [0, 0], [2, 2], [0, 0], [1, 1], "err")
    sl("axis_range", [0], [2], [5], [1], "err")
    sl("negative_step", [-1], [-2 ** 63], [1], [-1], "any")
    sl("step_huge_negative", [3], [0], [0], [-2 ** 63], "any")
    sl("length_mismatch", [0, 0], [2], [0], [1], "err")
    add("split_sum_wrong", model([node("Split", ["x", "s"], ["y", "z"], axis=0)], [("x", (4, 6))],
                                 [i64("s", [1, 1])], outputs=("y", "z")), "err")
    add("split_negative", model([node("Split", ["x", "s"], ["y", "z"], axis=0)], [("x", (4, 6))],
                                [i64("s", [-1, 5])], outputs=("y", "z")), "err")
    add("split_axis_range", model([node("Split", ["x"], ["y", "z"], axis=9)], [("x", (4, 6))],
                                  outputs=("y", "z")), "err")
    add("split_more_outputs_than_dim", model([node("Split", ["x"], ["y", "z", "w"], axis=0)],
                                             [("x", (2, 6))], outputs=("y", "z", "w")), "any")
    add("squeeze_non_one", with_init("Squeeze", i64("a", [0])), "err")
    add("squeeze_axis_range", model([node("Squeeze", ["x", "a"])], [("x", (1, 3))],
                                    [i64("a", [7])]), "err")
    add("unsqueeze_dup", with_init("Unsqueeze", i64("a", [0, 0])), "err")
    add("unsqueeze_range", with_init("Unsqueeze", i64("a", [40])), "err")
    add("gather_index_range", model([node("Gather", ["x", "i"], axis=0)], [("x", (4, 3))],
                                    [i64("i", [9])]), "err")
    add("gather_index_negative_huge", model([node("Gather", ["x", "i"], axis=0)], [("x", (4, 3))],
                                            [i64("i", [-2 ** 62])]), "err")
    add("gather_axis_range", model([node("Gather", ["x", "i"], axis=5)], [("x", (4, 3))],
                                   [i64("i", [0])]), "err")
    add("gather_float_indices", model([node("Gather", ["x", "i"], axis=0)], [("x", (4, 3))],
                                      [f32("i", (1,), [0.0])]), "err")
    add("expand_huge", with_init("Expand", i64("s", [2 ** 40, 2 ** 40, 3])), "err")
    add("expand_incompatible", with_init("Expand", i64("s", [5, 4])), "err")
    add("expand_negative", with_init("Expand", i64("s", [-2, 3])), "err")
    add("tile_negative", with_init("Tile", i64("r", [-1, 2])), "err")
    add("tile_huge", with_init("Tile", i64("r", [2 ** 31, 2 ** 31])), "err")
    add("tile_wrong_length", with_init("Tile", i64("r", [2])), "err")
    add("tile_zero", with_init("Tile", i64("r", [0, 1])), "any")
    add("pad_reflect_too_big", with_init("Pad", i64("p", [0, 9, 0, 9]), mode="reflect"), "err")
    add("pad_mode_bogus", with_init("Pad", i64("p", [0, 1, 0, 1]), mode="bogus"), "err")
    add("pad_negative_crop_all", with_init("Pad", i64("p", [-2, 0, -2, 0])), "err")
    add("pad_wrong_length", with_init("Pad", i64("p", [1, 1, 1])), "err")
    for nm, to in [("string", TP.STRING), ("999", 999), ("complex", TP.COMPLEX128),
                   ("undefined", 0), ("negative", -3)]:
        add("cast_to_" + nm, one("Cast", to=to), "err")
    add("cast_no_to", one("Cast"), "err")
    add("flatten_axis_range", one("Flatten", axis=9), "err")
    add("flatten_axis_negative", one("Flatten", axis=-9), "err")
    add("bn_wrong_sizes", model([node("BatchNormalization", ["x", "s", "b", "m", "v"])],
                                [("x", (1, 3, 2, 2))],
                                [f32("s", (5,)), f32("b", (3,)), f32("m", (3,)), f32("v", (3,))]),
        "err")
    add("bn_missing_inputs", model([node("BatchNormalization", ["x", "s"])], [("x", (1, 3, 2, 2))],
                                   [f32("s", (3,))]), "err")
    add("layernorm_axis_range", model([node("LayerNormalization", ["x", "s"], axis=4)],
                                      [("x", (2, 3))], [f32("s", (3,))], opset=17), "err")
    add("leakyrelu_alpha_nan", one("LeakyRelu", alpha=float("nan")), "any")
    add("clip_min_gt_max", model([node("Clip", ["x", "lo", "hi"])], [("x", (2, 3))],
                                 [f32("lo", (), [5.0]), f32("hi", (), [1.0])]), "any")
    add("clip_min_not_scalar", model([node("Clip", ["x", "lo"])], [("x", (2, 3))],
                                     [f32("lo", (2,), [5.0, 1.0])]), "any")
    add("range_delta_0", model([node("Range", ["a", "b", "d"], ["r"]),
                                node("Cast", ["r"], ["rf"], name="n1", to=TP.FLOAT),
                                node("Add", ["x", "rf"], name="n2")], [("x", (1,))],
                               [H.make_tensor(n, TP.INT64, [], [v])
                                for n, v in [("a", 0), ("b", 10), ("d", 0)]]), "err")
    add("range_float_huge", model([node("Range", ["a", "b", "d"], ["r"]),
                                   node("Add", ["x", "r"], name="n1")], [("x", (1,))],
                                  [H.make_tensor(n, TP.FLOAT, [], [v])
                                   for n, v in [("a", 0.0), ("b", 1e30), ("d", 1e-30)]]), "err")
    add("range_nan", model([node("Range", ["a", "b", "d"], ["r"]),
                            node("Add", ["x", "r"], name="n1")], [("x", (1,))],
                           [H.make_tensor(n, TP.FLOAT, [], [v])
                            for n, v in [("a", 0.0), ("b", float("nan")), ("d", 1.0)]]), "err")
    add("cos_value_string", model([node("ConstantOfShape", ["s"], ["c"],
                                        value=H.make_tensor("v", TP.STRING, [1], [b"a"])),
                                   node("Add", ["x", "c"], name="n1")], [("x", (1,))],
                                  [i64("s", [1])]), "err")
    add("cos_shape_float", model([node("ConstantOfShape", ["s"], ["c"]),
                                  node("Add", ["x", "c"], name="n1")], [("x", (1,))],
                                 [f32("s", (1,), [2.0])]), "err")
    add("constant_no_value", model([node("Constant", [], ["c"]), node("Add", ["x", "c"],
                                                                     name="n1")],
                                   [("x", (1,))]), "err")
    add("constant_two_values", model([node("Constant", [], ["c"], value_float=1.0,
                                           value_int=2),
                                      node("Add", ["x", "c"], name="n1")], [("x", (1,))]), "err")
    add("constant_sparse", model([node("Constant", [], ["c"], sparse_value=sp),
                                  node("Add", ["x", "c"], name="n1")], [("x", (2, 3))]), "err")
    add("constant_strings", model([node("Constant", [], ["c"], value_strings=[b"a"]),
                                   node("Add", ["x", "c"], name="n1")], [("x", (1,))]), "err")
    add("shape_start_range", model([node("Shape", ["x"], ["s"], start=9),
                                    node("Cast", ["s"], ["sf"], name="n1", to=TP.FLOAT),
                                    node("Add", ["x", "sf"], name="n2")], [("x", (2, 3))],
                                   opset=15), "any")
    add("reducemean_axes_range", one("ReduceMean", axes=[9]), "err")
    add("reducesum_axes_dup", model([node("ReduceSum", ["x", "a"])], [("x", (2, 3))],
                                    [i64("a", [1, 1])]), "any")
    add("attr_duplicate_name", model([H.make_node("Softmax", ["x"], ["y"], name="n0", axis=1)],
                                     [("x", (2, 3))]) and _dup_attr(), "err")
    add("attr_ref_attr_name", _ref_attr(), "err")
    add("if_node", model([node("If", ["c"], then_branch=deep_if(0), else_branch=deep_if(0))],
                         [("c", ())], in_type=TP.BOOL), "err")
    add("if_nested_300", model([node("If", ["c"], then_branch=deep_if(300),
                                     else_branch=deep_if(1))], [("c", ())], in_type=TP.BOOL), "err")
    add("loop_node", model([node("Loop", ["", ""], body=deep_if(0))], []), "err")
    add("local_function_op", _local_function(), "err")
    chain = [node("Relu", ["x"], ["t0"], name="r0")] + [
        node("Add", ["t%d" % k, "t%d" % k], ["t%d" % (k + 1)], name="a%d" % k) for k in range(60)]
    chain.append(node("Relu", ["t60"], name="end"))
    add("doubling_chain_60", model(chain, [("x", (2, 3))]), "any")
    fan = [node("Relu", ["x"], ["y"], name="r0")] + [node("Neg", ["x"], ["u%d" % k],
                                                          name="u%d" % k) for k in range(3000)]
    add("dead_nodes_3000", model(fan, [("x", (2, 3))]), "any")


def _dup_attr():
    n = H.make_node("Softmax", ["x"], ["y"], name="n0", axis=1)
    n.attribute.append(H.make_attribute("axis", 0))
    g = H.make_graph([n], "g", [H.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                     [H.make_tensor_value_info("y", TP.FLOAT, None)])
    return H.make_model(g, opset_imports=[H.make_opsetid("", 13)],
                        ir_version=8).SerializeToString()


def _ref_attr():
    n = H.make_node("Softmax", ["x"], ["y"], name="n0")
    a = onnx.AttributeProto()
    a.name, a.ref_attr_name, a.type = "axis", "outer_axis", onnx.AttributeProto.INT
    n.attribute.append(a)
    g = H.make_graph([n], "g", [H.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                     [H.make_tensor_value_info("y", TP.FLOAT, None)])
    return H.make_model(g, opset_imports=[H.make_opsetid("", 13)],
                        ir_version=8).SerializeToString()


def _local_function():
    f = H.make_function("local", "Relu", ["x"], ["y"], [H.make_node("Neg", ["x"], ["y"])],
                        [H.make_opsetid("", 13)])
    g = H.make_graph([H.make_node("Relu", ["x"], ["y"], name="n0", domain="local")], "g",
                     [H.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                     [H.make_tensor_value_info("y", TP.FLOAT, None)])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 13), H.make_opsetid("local", 1)],
                     ir_version=8, functions=[f])
    return m.SerializeToString()
