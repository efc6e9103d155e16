"""ATen's matrix products, reductions, softmax, norms, convolution, pooling and attention as
graph ops: a convolution is im2col (a strided view of the padded input) and a matmul per group, a
depthwise one a multiply and a sum over the window; pooling is im2col and a reduction."""

import math

import torch

from .aten_table import HANDLERS, Lazy, handles, out_dt, shp
from .compose import (F32_MAX, S, affine, bcast, cast, concat, const, norm_axis, on_last_axis,
                      pad, reduce, reshape, slice_, transpose)
from .graph import MappingError


# ---- matrix products --------------------------------------------------------------------------

@handles("mm")
def mm_h(c, args, kwargs, out):
    return c.g.op("matmul", [c.id_of(args[0]), c.id_of(args[1])])


@handles("bmm")
def bmm_h(c, args, kwargs, out):
    return c.g.op("batch_matmul", [c.id_of(args[0]), c.id_of(args[1])])


@handles("addmm")
def addmm_h(c, args, kwargs, out):
    beta = kwargs.get("beta", 1)
    alpha = kwargs.get("alpha", 1)
    y = affine(c, c.g.op("matmul", [c.id_of(args[1]), c.id_of(args[2])]), float(alpha))
    if beta == 0:
        return y
    b = affine(c, c.id_of(args[0]), float(beta))
    if S(c, b) == [S(c, y)[-1]] and b in c.g.hbm:
        return c.g.op("bias_add", [y, b])
    return c.g.op("add", [y, b])


@handles("addbmm", "baddbmm")
def baddbmm_h(c, args, kwargs, out):
    if "addbmm" in c.aten_stack[-1] and "baddbmm" not in c.aten_stack[-1]:
        raise MappingError("addbmm")
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    y = affine(c, c.g.op("batch_matmul", [c.id_of(args[1]), c.id_of(args[2])]), float(alpha))
    return y if beta == 0 else c.g.op("add", [y, affine(c, c.id_of(args[0]), float(beta))])


# ---- reductions, softmax, norms ---------------------------------------------------------------

def reduction(op):
    def h(c, args, kwargs, out):
        if kwargs.get("dtype") is not None:
            raise MappingError("reduction with a dtype")
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        if isinstance(dims, int):
            dims = [dims]
        keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        x = cast(c, c.id_of(args[0]), out_dt(out))
        return reduce(c, op, x, list(dims) if dims else [], keep)
    return h


HANDLERS["sum"] = reduction("reduce_sum")
HANDLERS["mean"] = reduction("reduce_mean")
HANDLERS["amax"] = reduction("reduce_max")


@handles("var")
def var_h(c, args, kwargs, out):
    name = c.aten_stack[-1]
    x = cast(c, c.id_of(args[0]), out_dt(out))
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    if "correction" in name:
        corr = kwargs.get("correction", args[2] if len(args) > 2 else None)
        corr = 1 if corr is None else corr
        keep = kwargs.get("keepdim", args[3] if len(args) > 3 else False)
    else:
        unbiased = kwargs.get("unbiased", args[2] if len(args) > 2 else True)
        corr = 1 if unbiased else 0
        keep = kwargs.get("keepdim", args[3] if len(args) > 3 else False)
    s = S(c, x)
    n = math.prod(s[norm_axis(d, len(s))] for d in dims) if dims else math.prod(s)
    if n - corr <= 0:
        raise MappingError("variance of too few elements")
    d = c.g.op("sub", [x, reduce(c, "reduce_mean", x, dims, True)])
    return affine(c, reduce(c, "reduce_sum", c.g.op("mul", [d, d]), dims, keep),
                  1.0 / (n - corr))


@handles("amin")
def amin_h(c, args, kwargs, out):
    dims = args[1] if len(args) > 1 else []
    keep = args[2] if len(args) > 2 else False
    return affine(c, reduce(c, "reduce_max", affine(c, c.id_of(args[0]), -1.0), list(dims), keep),
                  -1.0)


def argmax_of(c, x, axis, keep):
    """Index of the first maximum along `axis`: -max(-(x == max ? iota : n))."""
    s = S(c, x)
    axis = norm_axis(axis, len(s))
    m = reduce(c, "reduce_max", x, [axis], True)
    hit = c.g.op("compare", [x, m], {"cmp": "eq"})
    idx = c.g.op("iota", [], {"axis": axis}, shape=s, dtype="fp32", names=c.g.nm(x))
    cand = c.g.op("select", [hit, idx, const(c, s, float(s[axis]), "fp32", c.g.nm(x))])
    first = affine(c, reduce(c, "reduce_max", affine(c, cand, -1.0), [axis], keep), -1.0)
    return m, first


@handles("argmax")
def argmax_h(c, args, kwargs, out):
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    x = cast(c, c.id_of(args[0]), "fp32")
    if dim is None:
        x = reshape(c, x, [math.prod(S(c, x))])
        dim = 0
    _, first = argmax_of(c, x, dim, keep)
    return cast(c, reshape(c, first, shp(out)), "int32")


@handles("max")
def max_h(c, args, kwargs, out):
    x = c.id_of(args[0])
    if len(args) == 1:
        return reshape(c, reduce(c, "reduce_max", x, [], False), [1])
    if isinstance(args[1], torch.Tensor):
        return c.g.op("maximum", [x, c.id_of(args[1])])
    dim = args[1]
    keep = args[2] if len(args) > 2 else False
    xf = cast(c, x, "fp32")
    m, first = argmax_of(c, xf, dim, keep)
    vals = reduce(c, "reduce_max", x, [dim], keep)
    return [vals, cast(c, first, "int32")]


def softmax_like(op):
    def h(c, args, kwargs, out):
        x = cast(c, c.id_of(args[0]), out_dt(out))
        return on_last_axis(c, x, args[1], lambda t: c.g.op(op, [t]))
    return h


HANDLERS["_softmax"] = softmax_like("softmax")
HANDLERS["_log_softmax"] = softmax_like("log_softmax")
HANDLERS["softmax"] = HANDLERS["_softmax"]
HANDLERS["log_softmax"] = HANDLERS["_log_softmax"]


def per_channel(c, p, shape):
    """A [C] parameter of a channel-first [N, C, ...] tensor, broadcast to it."""
    return bcast(c, reshape(c, p, [1, shape[1]] + [1] * (len(shape) - 2)), shape)


@handles("native_batch_norm", "_native_batch_norm_legit_no_training")
def batch_norm_h(c, args, kwargs, out):
    x, w, b, rm, rv = args[:5]
    name = c.aten_stack[-1]
    training = False if "no_training" in name else args[5]
    eps = args[-1]
    if training or rm is None or rv is None:
        raise MappingError("batch norm in training mode")
    xi = c.id_of(x)
    s = S(c, xi)
    C = s[1]
    inv = c.g.op("rsqrt", [affine(c, c.id_of(rv), 1.0, float(eps))])
    scale = c.g.op("mul", [inv, c.id_of(w)]) if w is not None else inv
    shift = affine(c, c.g.op("mul", [c.id_of(rm), scale]), -1.0)
    if b is not None:
        shift = c.g.op("add", [shift, c.id_of(b)])
    y = c.g.op("add", [c.g.op("mul", [xi, per_channel(c, scale, s)]), per_channel(c, shift, s)])
    assert S(c, scale) == [C]
    return [y, None, None]


@handles("native_layer_norm")
def layer_norm_h(c, args, kwargs, out):
    x, normalized, w, b, eps = args[:5]
    xi = c.id_of(x)
    s = S(c, xi)
    inner = math.prod(normalized)
    outer = math.prod(s) // inner
    x2 = reshape(c, xi, [outer, inner])
    wi = c.id_of(w) if w is not None else None
    bi = c.id_of(b) if b is not None else None
    if wi in c.g.hbm and bi in c.g.hbm:
        g, bb = reshape(c, wi, [inner]), reshape(c, bi, [inner])
        y = reshape(c, c.g.op("layernorm", [x2, g, bb], {"eps": float(eps)}), s)
    else:
        # gamma or beta made on the chip (or absent): the lowering's layernorm reads them from
        # HBM only, so the norm is written out
        d = c.g.op("sub", [x2, c.g.op("reduce_mean", [x2])])
        var = c.g.op("reduce_mean", [c.g.op("mul", [d, d])])
        y = c.g.op("mul", [d, c.g.op("rsqrt", [affine(c, var, 1.0, float(eps))])])
        if wi is not None:
            y = c.g.op("mul", [y, reshape(c, wi, [inner])])
        if bi is not None:
            y = c.g.op("add", [y, reshape(c, bi, [inner])])
        y = reshape(c, y, s)
    stat_shape = s[:len(s) - len(normalized)] + [1] * len(normalized)

    def mean():
        return reshape(c, c.g.op("reduce_mean", [x2]), stat_shape)

    def rstd():
        m = c.g.op("reduce_mean", [x2])
        d = c.g.op("sub", [x2, m])
        var = c.g.op("reduce_mean", [c.g.op("mul", [d, d])])
        return reshape(c, c.g.op("rsqrt", [affine(c, var, 1.0, float(eps))]), stat_shape)

    return [y, Lazy(mean, [x2]), Lazy(rstd, [x2])]


# ---- convolution and pooling ------------------------------------------------------------------

def pair(v):
    v = list(v)
    return v * 2 if len(v) == 1 else v


@handles("convolution", "_convolution")
def conv_h(c, args, kwargs, out):
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    if transposed or x.dim() != 4:
        raise MappingError("transposed or non-2-D convolution")
    stride, padding, dilation = pair(stride), pair(padding), pair(dilation)
    xi = pad(c, c.id_of(x), [0, 0, padding[0], padding[1]], [0, 0, padding[0], padding[1]], 0.0)
    wi = c.id_of(w)
    N, C = shp(x)[:2]
    OC, Cg, KH, KW = shp(w)
    G = groups
    _, _, OH, OW = shp(out)
    attrs = {"kernel": [KH, KW], "strides": stride, "dilations": dilation}
    if Cg == 1 and OC == C and G == C:
        cols = reshape(c, c.g.op("im2col", [xi], attrs), [N, C, OH, OW, KH * KW])
        k = bcast(c, reshape(c, wi, [C, 1, 1, KH * KW]), [N, C, OH, OW, KH * KW])
        y = reshape(c, c.g.op("reduce_sum", [c.g.op("mul", [cols, k])]), [N, C, OH, OW])
    else:
        OCg = OC // G
        parts = []
        for g in range(G):
            xg = slice_(c, xi, 1, g * Cg, (g + 1) * Cg)
            a = transpose(c, c.g.op("im2col", [xg], attrs), [0, 2, 3, 1, 4, 5])
            a = reshape(c, a, [N * OH * OW, Cg * KH * KW])
            b = reshape(c, slice_(c, wi, 0, g * OCg, (g + 1) * OCg), [OCg, Cg * KH * KW])
            parts.append(c.g.op("matmul", [a, transpose(c, b, [1, 0])]))
        y = reshape(c, concat(c, parts, 1), [N, OH, OW, OC])
        y = transpose(c, y, [0, 3, 1, 2])
    if bias is not None:
        y = c.g.op("add", [y, per_channel(c, c.id_of(bias), S(c, y))])
    return y


def pool_args(args):
    """kernel, stride, padding and the 5th argument (dilation or ceil_mode) of a 2-D pool."""
    kernel = pair(args[1])
    stride = pair(args[2]) if len(args) > 2 and args[2] else kernel
    padding = pair(args[3]) if len(args) > 3 else [0, 0]
    return kernel, stride, padding, (args[4] if len(args) > 4 else None)


def window_reduce(c, x, op, kernel, stride, out_shape, dilation=(1, 1)):
    """`op` (reduce_max, reduce_mean) over each window of x: im2col and a last-axis reduction."""
    N, C, OH, OW = out_shape
    cols = c.g.op("im2col", [x], {"kernel": list(kernel), "strides": list(stride),
                                  "dilations": list(dilation)})
    cols = reshape(c, cols, [N, C, OH, OW, kernel[0] * kernel[1]])
    return reshape(c, c.g.op(op, [cols]), [N, C, OH, OW])


@handles("max_pool2d_with_indices")
def max_pool_h(c, args, kwargs, out):
    x = args[0]
    kernel, stride, padding, dilation = pool_args(args)
    dilation = pair(dilation) if dilation else [1, 1]
    H, W = shp(x)[2:]
    OH, OW = shp(out[0])[2:]
    # ceil mode: extra end padding so every window PyTorch counts is inside the padded input
    end = [max(padding[a], (o - 1) * stride[a] + dilation[a] * (kernel[a] - 1) + 1 - padding[a] -
               (H, W)[a]) for a, o in enumerate((OH, OW))]
    xi = pad(c, c.id_of(x), [0, 0] + padding, [0, 0] + end, -F32_MAX)
    return [window_reduce(c, xi, "reduce_max", kernel, stride, shp(out[0]), dilation), None]


@handles("avg_pool2d")
def avg_pool_h(c, args, kwargs, out):
    kernel, stride, padding, ceil = pool_args(args)
    if ceil or any(padding):
        raise MappingError("padded or ceil-mode average pooling")
    return window_reduce(c, c.id_of(args[0]), "reduce_mean", kernel, stride, shp(out))


@handles("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def adaptive_avg_h(c, args, kwargs, out):
    x = args[0]
    H, W = shp(x)[2:]
    OH, OW = shp(out)[-2:]
    if H % OH or W % OW:
        raise MappingError("adaptive pooling with uneven windows")
    if OH == 1 and OW == 1:
        return reduce(c, "reduce_mean", c.id_of(x), [2, 3], True)
    kernel = [H // OH, W // OW]
    return window_reduce(c, c.id_of(x), "reduce_mean", kernel, kernel, shp(out))


# ---- attention ----------------------------------------------------------------------------------

def linear(c, x, w, b):
    """x [.., K] @ w[N, K]^T + b[N] on 2-D rows."""
    y = c.g.op("matmul", [x, transpose(c, c.id_of(w), [1, 0])])
    if b is None:
        return y
    bi = c.id_of(b)
    return c.g.op("bias_add", [y, bi]) if bi in c.g.hbm else c.g.op("add", [y, bi])


def self_attention(c, x, B, L, E, H, qkv_w, qkv_b, proj_w, proj_b):
    """Multi-head self-attention of rows x [B*L, E] (B sequences of L) -> [B*L, E]."""
    qkv = linear(c, x, qkv_w, qkv_b)
    parts = [slice_(c, qkv, 1, j * E, (j + 1) * E) for j in range(3)]
    attrs = {"heads": H, "scale": 1.0 / math.sqrt(E // H)}
    if B > 1:
        attrs["seq"] = L
    return linear(c, c.g.op("attention", parts, attrs), proj_w, proj_b)


@handles("_native_multi_head_attention")
def mha_h(c, args, kwargs, out):
    q, k, v, E, H, qkv_w, qkv_b, proj_w, proj_b = args[:9]
    mask = args[9] if len(args) > 9 else kwargs.get("mask")
    need_weights = args[10] if len(args) > 10 else kwargs.get("need_weights", True)
    if mask is not None or need_weights or q is not k or k is not v or q.dim() != 3:
        raise MappingError("multi-head attention with a mask, weights or distinct q/k/v")
    B, L, _ = shp(q)
    x = reshape(c, c.id_of(q), [B * L, E])
    y = self_attention(c, x, B, L, E, H, qkv_w, qkv_b, proj_w, proj_b)
    return [reshape(c, y, [B, L, E]), None]


@handles("_transformer_encoder_layer_fwd")
def encoder_layer_h(c, args, kwargs, out):
    """nn.TransformerEncoderLayer's eval fast path: attention and a 2-layer MLP, pre or post norm."""
    (src, E, H, qkv_w, qkv_b, proj_w, proj_b, use_gelu, norm_first, eps, ln1_w, ln1_b, ln2_w,
     ln2_b, w1, b1, w2, b2) = args[:18]
    mask = args[18] if len(args) > 18 else kwargs.get("mask")
    if mask is not None or src.dim() != 3:
        raise MappingError("encoder layer with a mask")
    B, L, _ = shp(src)
    x = reshape(c, c.id_of(src), [B * L, E])

    def ln(t, w, b):
        return c.g.op("layernorm", [t, c.id_of(w), c.id_of(b)], {"eps": float(eps)})

    def attn(t):
        return self_attention(c, t, B, L, E, H, qkv_w, qkv_b, proj_w, proj_b)

    def ffn(t):
        h = linear(c, t, w1, b1)
        return linear(c, c.g.op("gelu" if use_gelu else "relu", [h]), w2, b2)

    if norm_first:
        x = c.g.op("add", [x, attn(ln(x, ln1_w, ln1_b))])
        x = c.g.op("add", [x, ffn(ln(x, ln2_w, ln2_b))])
    else:
        x = ln(c.g.op("add", [x, attn(x)]), ln1_w, ln1_b)
        x = ln(c.g.op("add", [x, ffn(x)]), ln2_w, ln2_b)
    return reshape(c, x, [B, L, E])
