"""ATen ops as graph ops (compiler_stub ops.def), composed exactly where the IR has no op of its own.

Each handler is `h(cap, args, kwargs, out) -> id | [id | None | callable]`: it emits graph ops
through `cap.g.op` for the ATen op's functional form and returns the SSA id of each output
(`None`: an output nobody can use; a callable: an output emitted only if it is used, e.g. batch
norm's saved statistics). In-place variants (`add_`) reuse the functional handler (`add`) and the
capture writes the result back. A handler raises MappingError for arguments it does not cover;
the op then goes through PyTorch's decomposition table or becomes a host_op.

The idioms are the ONNX importer's (frontends/onnx/src/onnx_ops.cpp): a convolution is im2col
(a strided view of the padded input) and a matmul per group, a depthwise one a multiply and a sum
over the window; pooling is im2col and a reduction; padding is a concat with constant blocks;
a reduction over any axes is transpose + reshape + a last-axis reduction; constants are iota +
affine (docs/PROGRAM_FORMAT.md).
"""

import math

import torch

from .dtypes import graph_dtype
from .graph import MappingError
from .ops_def import OPS

F32_MAX = 3.4028234663852886e38
HANDLERS = {}
RESHAPE_VIEWS = {"view", "_reshape_alias", "reshape", "unsqueeze", "squeeze", "alias", "detach",
                 "lift_fresh", "view_as", "flatten", "_unsafe_view"}
IDENTITY_VIEWS = {"alias", "detach", "lift_fresh"}
# Ops whose schema says they may alias their input but that are copies when they change anything.
ALIASING_COPIES = {"to", "contiguous", "type_as"}


class Lazy:
    """An output emitted only if something uses it; `deps` are ids it needs (kept alive till then)."""

    def __init__(self, fn, deps=()):
        self.fn = fn
        self.deps = list(deps)

    def __call__(self):
        return self.fn()


# Forms a handler declines before the op runs (so the decomposition table gets the op whole):
# batch norm in training mode also updates the running statistics.
DECLINE = {"native_batch_norm": lambda args, kwargs: bool(args[5])}


def handles(*names):
    def reg(f):
        for n in names:
            HANDLERS[n] = f
        return f
    return reg


def gdt(t):
    return graph_dtype(t.dtype if isinstance(t, torch.Tensor) else t)


def shp(t):
    return list(t.shape) or [1]


def finite(v):
    v = float(v)
    if math.isnan(v):
        raise MappingError("NaN constant")
    return max(-F32_MAX, min(F32_MAX, v))


# ---- builders ---------------------------------------------------------------------------------

def S(c, i):
    return c.g.shape[i]


def reshape(c, x, shape):
    shape = list(shape) or [1]
    if S(c, x) == shape:
        return x
    return c.g.op("reshape", [x], {"shape": shape})


def transpose(c, x, perm):
    perm = list(perm)
    if perm == list(range(len(perm))):
        return x
    return c.g.op("transpose", [x], {"perm": perm})


def bcast(c, x, shape):
    shape = list(shape)
    s = S(c, x)
    if s == shape:
        return x
    if len(s) < len(shape) and [1] * (len(shape) - len(s)) + s == shape:
        return reshape(c, x, shape)
    return c.g.op("broadcast", [x], {"shape": shape})


def cast(c, x, dtype):
    if c.g.dtype[x] == dtype:
        return x
    return c.g.op("scale", [x], {"value": 1.0}, dtype=dtype)


def const(c, shape, value, dtype="fp32", names=None):
    shape = list(shape) or [1]
    # the lowering makes iota along the last axis (or the row axis of 2-D) only
    i = c.g.op("iota", [], {"axis": len(shape) - 1}, shape=shape, dtype="fp32", names=names)
    i = c.g.op("affine", [i], {"value": 0.0, "offset": finite(value)})
    return cast(c, i, dtype)


def unary(c, op, x, **attrs):
    return c.g.op(op, [x], attrs)


def affine(c, x, value=1.0, offset=0.0):
    if offset == 0:
        return x if value == 1 else c.g.op("scale", [x], {"value": finite(value)})
    return c.g.op("affine", [x], {"value": finite(value), "offset": finite(offset)})


def tensor_or_const(c, x, dtype, shape, names=None):
    """Tensor x in `dtype`, or the Python number x as a constant of the full `shape` (the compiler
    does not broadcast a value made on the chip across partitions)."""
    if isinstance(x, torch.Tensor):
        return cast(c, c.id_of(x), dtype)
    return const(c, shape, x, dtype, names)


def slice_(c, x, axis, start, limit):
    s = S(c, x)
    if start == 0 and limit == s[axis]:
        return x
    return c.g.op("slice", [x], {"axis": axis, "start": start, "limit": limit})


def concat(c, xs, axis):
    xs = [x for x in xs if math.prod(S(c, x)) > 0]
    if len(xs) == 1:
        return xs[0]
    while len(xs) > 16:
        xs = [c.g.op("concat", xs[:16], {"axis": axis})] + xs[16:]
    return c.g.op("concat", xs, {"axis": axis})


def norm_axis(a, rank):
    a = int(a)
    return a + rank if a < 0 else a


def reduce(c, op, x, axes, keepdim):
    s = S(c, x)
    r = len(s)
    axes = sorted(set(norm_axis(a, r) for a in axes)) if axes else list(range(r))
    others = [k for k in range(r) if k not in axes]
    t = transpose(c, x, others + axes)
    inner = math.prod(s[k] for k in axes)
    t = reshape(c, t, [s[k] for k in others] + [inner])
    t = c.g.op(op, [t])
    if keepdim:
        out = [1 if k in axes else s[k] for k in range(r)]
    else:
        out = [s[k] for k in others] or [1]
    return reshape(c, t, out)


def on_last_axis(c, x, axis, f):
    r = len(S(c, x))
    axis = norm_axis(axis, r)
    if axis == r - 1:
        return f(x)
    perm = list(range(r))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return transpose(c, f(transpose(c, x, perm)), perm)


def pad(c, x, begin, end, value):
    """x padded with `value` by begin[k], end[k] along each axis k (concat with constants)."""
    for k in range(len(begin)):
        if begin[k] == 0 and end[k] == 0:
            continue
        s = S(c, x)
        if k == len(s) - 1 and len(s) > 2 and not any(c.g.nm(x)):
            # Along the last axis, as 2-D [rows, axis] (a reshape of a row-major value is
            # free): the compiler tiles a 4-D value's rows per innermost batch, so a padded
            # image's rows would load as 9-row tiles, one per channel (960 of them in
            # mobilenet_v2's last blocks), more than SBUF holds.
            outer, inner = math.prod(s[:k]), 1
            dt = c.g.dtype[x]
            parts = []
            if begin[k]:
                parts.append(const(c, [outer, begin[k] * inner], value, dt))
            parts.append(reshape(c, x, [outer, s[k] * inner]))
            if end[k]:
                parts.append(const(c, [outer, end[k] * inner], value, dt))
            x = reshape(c, concat(c, parts, 1), s[:k] + [s[k] + begin[k] + end[k]] + s[k + 1:])
            continue
        nm = c.g.nm(x)[:k] + [None] + c.g.nm(x)[k + 1:]
        parts = []
        if begin[k]:
            parts.append(const(c, s[:k] + [begin[k]] + s[k + 1:], value, c.g.dtype[x], nm))
        parts.append(x)
        if end[k]:
            parts.append(const(c, s[:k] + [end[k]] + s[k + 1:], value, c.g.dtype[x], nm))
        x = concat(c, parts, k)
    return x


# ---- element-wise -----------------------------------------------------------------------------

def binary(c, op, a, b, out_dtype, alpha=1):
    """a <op> alpha*b with PyTorch's broadcasting and promotion; scalars become immediates."""
    a_t, b_t = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
    if not b_t and a_t and op in ("add", "sub", "mul", "div"):
        x = cast(c, c.id_of(a), out_dtype)
        v = float(b) * (alpha if op in ("add", "sub") else 1)
        if op == "add":
            return affine(c, x, 1.0, v)
        if op == "sub":
            return affine(c, x, 1.0, -v)
        if op == "mul":
            return affine(c, x, v)
        if v == 0:
            raise MappingError("division by the constant 0")
        return affine(c, x, 1.0 / v)
    if not a_t and b_t and op in ("add", "sub", "mul"):
        y = cast(c, c.id_of(b), out_dtype)
        y = affine(c, y, alpha) if alpha != 1 else y
        v = float(a)
        if op == "add":
            return affine(c, y, 1.0, v)
        if op == "sub":
            return affine(c, y, -1.0, v)
        return affine(c, y, v)
    from .graph import aligned_names
    ts = [c.id_of(t) for t in (a, b) if isinstance(t, torch.Tensor)]
    full = list(torch.broadcast_shapes(*[S(c, i) for i in ts]))
    names = aligned_names(full, [(S(c, i), c.g.nm(i)) for i in ts])
    x = tensor_or_const(c, a, out_dtype, full or [1], names)
    y = tensor_or_const(c, b, out_dtype, full or [1], names)
    if alpha != 1:
        y = affine(c, y, float(alpha))
    return c.g.op(op, [x, y])


def out_dt(out):
    return gdt(out)


def binop(op):
    def h(c, args, kwargs, out):
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        return binary(c, op, args[0], args[1], out_dt(out), alpha)
    return h


for _n, _op in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "div"),
                ("maximum", "maximum"), ("minimum", "minimum")]:
    HANDLERS[_n] = binop(_op)


@handles("div")
def div_h(c, args, kwargs, out):
    if kwargs.get("rounding_mode") or (len(args) > 2 and args[2]):
        raise MappingError("div with a rounding mode")
    if gdt(out) == "int32":
        raise MappingError("integer division")
    return binary(c, "div", args[0], args[1], out_dt(out))


@handles("rsub")
def rsub_h(c, args, kwargs, out):
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    # other - alpha * self
    x = binary(c, "mul", args[0], alpha, out_dt(out)) if alpha != 1 else \
        cast(c, c.id_of(args[0]), out_dt(out))
    if isinstance(args[1], torch.Tensor):
        return c.g.op("sub", [cast(c, c.id_of(args[1]), out_dt(out)), x])
    return affine(c, x, -1.0, float(args[1]))


def unop(op):
    def h(c, args, kwargs, out):
        return c.g.op(op, [cast(c, c.id_of(args[0]), out_dt(out))])
    return h


# An ATen op that is one graph op alone: ops.def's aten column.
for _n, _op in OPS.items():
    if _op.aten:
        HANDLERS[_op.aten] = unop(_n)


@handles("neg")
def neg_h(c, args, kwargs, out):
    return affine(c, c.id_of(args[0]), -1.0)


@handles("gelu")
def gelu_h(c, args, kwargs, out):
    approx = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    x = c.id_of(args[0])
    if approx == "none":
        return c.g.op("gelu", [x])
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    x3 = c.g.op("mul", [c.g.op("mul", [x, x]), x])
    inner = affine(c, c.g.op("add", [x, affine(c, x3, 0.044715)]), math.sqrt(2.0 / math.pi))
    return c.g.op("mul", [affine(c, x, 0.5), affine(c, c.g.op("tanh", [inner]), 1.0, 1.0)])


def phi(c, y):
    """The normal CDF Phi(y) = gelu(y) / y (0.5 at y = 0), from the erf-form gelu."""
    zero = c.g.op("compare", [y, const(c, S(c, y), 0.0, c.g.dtype[y], c.g.nm(y))], {"cmp": "eq"})
    safe = c.g.op("select", [zero, const(c, S(c, y), 1.0, c.g.dtype[y], c.g.nm(y)), y])
    ratio = c.g.op("div", [c.g.op("gelu", [y]), safe])
    return c.g.op("select", [zero, const(c, S(c, y), 0.5, c.g.dtype[y], c.g.nm(y)), ratio])


@handles("erf")
def erf_h(c, args, kwargs, out):
    # erf(x) = 2 Phi(x sqrt 2) - 1
    x = c.id_of(args[0])
    return affine(c, phi(c, affine(c, x, math.sqrt(2.0))), 2.0, -1.0)


@handles("gelu_backward")
def gelu_backward_h(c, args, kwargs, out):
    if kwargs.get("approximate", args[2] if len(args) > 2 else "none") != "none":
        raise MappingError("tanh-gelu backward")
    g, x = c.id_of(args[0]), c.id_of(args[1])
    # d/dx x Phi(x) = Phi(x) + x pdf(x), pdf(x) = exp(-x^2 / 2) / sqrt(2 pi)
    pdf = affine(c, c.g.op("exp", [affine(c, c.g.op("mul", [x, x]), -0.5)]),
                 1.0 / math.sqrt(2 * math.pi))
    return c.g.op("mul", [g, c.g.op("add", [phi(c, x), c.g.op("mul", [x, pdf])])])


@handles("pow")
def pow_h(c, args, kwargs, out):
    a, e = args[0], args[1]
    if not isinstance(a, torch.Tensor) or isinstance(e, torch.Tensor):
        raise MappingError("pow of a tensor exponent")
    x = cast(c, c.id_of(a), out_dt(out))
    e = float(e)
    if e == 1:
        return x
    if e == 2:
        return c.g.op("mul", [x, x])
    if e == 3:
        return c.g.op("mul", [c.g.op("mul", [x, x]), x])
    if e == 0.5:
        return c.g.op("sqrt", [x])
    if e == -0.5:
        return c.g.op("rsqrt", [x])
    if e == -1:
        return c.g.op("reciprocal", [x])
    return c.g.op("exp", [affine(c, c.g.op("log", [x]), e)])


@handles("clamp", "hardtanh", "clip")
def clamp_h(c, args, kwargs, out):
    name = c.aten_stack[-1]
    lo = args[1] if len(args) > 1 else kwargs.get("min", kwargs.get("min_val"))
    hi = args[2] if len(args) > 2 else kwargs.get("max", kwargs.get("max_val"))
    if "hardtanh" in name:
        lo = -1.0 if lo is None else lo
        hi = 1.0 if hi is None else hi
    if isinstance(lo, torch.Tensor) or isinstance(hi, torch.Tensor):
        raise MappingError("clamp by tensors")
    attrs = {}
    if lo is not None:
        attrs["lo"] = finite(lo)
    if hi is not None:
        attrs["hi"] = finite(hi)
    return c.g.op("clip", [cast(c, c.id_of(args[0]), out_dt(out))], attrs)


CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def compare_h(cmp):
    def h(c, args, kwargs, out):
        dt = gdt(torch.result_type(args[0], args[1]))
        x = cast(c, c.id_of(args[0]), dt)
        y = tensor_or_const(c, args[1], dt, S(c, x), c.g.nm(x))
        return c.g.op("compare", [x, y], {"cmp": cmp})
    return h


for _n in CMP:
    HANDLERS[_n] = compare_h(_n)


@handles("where")
def where_h(c, args, kwargs, out):
    dt = out_dt(out)
    p = c.id_of(args[0])
    from .graph import aligned_names
    names = aligned_names(shp(out), [(S(c, p), c.g.nm(p))])
    a = tensor_or_const(c, args[1], dt, shp(out), names)
    b = tensor_or_const(c, args[2], dt, shp(out), names)
    return c.g.op("select", [p, a, b])


@handles("masked_fill")
def masked_fill_h(c, args, kwargs, out):
    dt = out_dt(out)
    x = cast(c, c.id_of(args[0]), dt)
    fill = tensor_or_const(c, args[2], dt, S(c, x), c.g.nm(x))
    return c.g.op("select", [c.id_of(args[1]), fill, x])


@handles("logical_not")
def logical_not_h(c, args, kwargs, out):
    x = c.id_of(args[0])
    return c.g.op("compare", [x, const(c, S(c, x), 0.0, c.g.dtype[x], c.g.nm(x))], {"cmp": "eq"})


@handles("addcmul", "addcdiv")
def addc_h(c, args, kwargs, out):
    op = "mul" if "addcmul" in c.aten_stack[-1] else "div"
    v = kwargs.get("value", args[3] if len(args) > 3 else 1)
    dt = out_dt(out)
    t = c.g.op(op, [cast(c, c.id_of(args[1]), dt), cast(c, c.id_of(args[2]), dt)])
    return c.g.op("add", [cast(c, c.id_of(args[0]), dt), affine(c, t, float(v))])


@handles("lerp")
def lerp_h(c, args, kwargs, out):
    # self + weight * (end - self)
    dt = out_dt(out)
    s, e = cast(c, c.id_of(args[0]), dt), cast(c, c.id_of(args[1]), dt)
    d = c.g.op("sub", [e, s])
    w = args[2]
    d = affine(c, d, float(w)) if not isinstance(w, torch.Tensor) else \
        c.g.op("mul", [d, c.id_of(w)])
    return c.g.op("add", [s, d])


# ---- copies, casts and constants --------------------------------------------------------------

@handles("clone", "contiguous", "_to_copy", "to", "type_as")
def clone_h(c, args, kwargs, out):
    return cast(c, c.id_of(args[0]), gdt(out))


@handles("copy_")
def copy_h(c, args, kwargs, out):
    src = args[1]
    dst = c.info(args[0])
    names = c.g.nm(dst.id) if dst is not None and dst.lazy is None else None
    return bcast(c, tensor_or_const(c, src, gdt(args[0]), shp(args[0]), names), shp(args[0]))


def lazy_const(c, out, value, like=None):
    """A constant made only if used; named as tensor `like` (zeros_like) or, sized by Python
    ints (torch.ones(T, T)), by its extents (docs/PROGRAM_FORMAT.md)."""
    shape, dt = shp(out), gdt(out)
    info = c.info(like) if isinstance(like, torch.Tensor) else None
    names = c.g.nm(info.id) if info is not None and info.lazy is None and \
        S(c, info.id) == shape else "guess"
    return Lazy(lambda: const(c, shape, value, dt, names))


def like_arg(c, args):
    """The tensor a *_like / new_* factory or an in-place fill takes its shape from, if any."""
    name = c.aten_stack[-1]
    if "_like" in name or ".new_" in name or "fill_" in name or "zero_" in name:
        return args[0]
    return None


@handles("zeros", "zeros_like", "new_zeros", "empty", "empty_like", "new_empty",
         "empty_strided", "zero_", "zero")
def zeros_h(c, args, kwargs, out):
    return lazy_const(c, out, 0.0, like_arg(c, args))


@handles("ones", "ones_like", "new_ones")
def ones_h(c, args, kwargs, out):
    return lazy_const(c, out, 1.0, like_arg(c, args))


@handles("full", "full_like", "new_full", "fill_", "fill", "scalar_tensor")
def full_h(c, args, kwargs, out):
    name = c.aten_stack[-1]
    if "scalar_tensor" in name:
        v = args[0]
    elif "new_full" in name or name.startswith("aten.full.") or "full_like" in name:
        v = args[1] if "full.default" not in name else args[1]
    else:
        v = args[1]
    if isinstance(v, torch.Tensor):
        x = cast(c, c.id_of(v), gdt(out))
        return bcast(c, reshape(c, x, [1] * len(shp(out))) if len(S(c, x)) == 1 and
                     len(shp(out)) > 1 else x, shp(out))
    return lazy_const(c, out, v, like_arg(c, args))


@handles("arange")
def arange_h(c, args, kwargs, out):
    name = c.aten_stack[-1]
    if name.endswith(".default"):
        start, step = 0, 1
    else:
        start = args[0]
        step = args[2] if len(args) > 2 else kwargs.get("step", 1)
    n = out.numel()
    if n == 0:
        raise MappingError("empty arange")
    i = c.g.op("iota", [], {"axis": 0}, shape=[n], dtype="fp32", names="guess")
    i = cast(c, affine(c, i, float(step), float(start)), gdt(out))
    c.g.arange[i] = (start, step, n)
    return i


@handles("tril", "triu")
def tri_h(c, args, kwargs, out):
    x = c.id_of(args[0])
    s = S(c, x)
    k = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
    h, w = s[-2], s[-1]
    names = c.g.nm(x)[-2:]
    row = c.g.op("iota", [], {"axis": 0}, shape=[h, w], dtype="fp32", names=names)
    col = c.g.op("iota", [], {"axis": 1}, shape=[h, w], dtype="fp32", names=names)
    # tril keeps col - row <= k, triu keeps col - row >= k
    diff = affine(c, c.g.op("sub", [col, row]), 1.0, -float(k))
    keep = c.g.op("compare", [diff, const(c, [h, w], 0.0, "fp32", names)],
                  {"cmp": "le" if "tril" in c.aten_stack[-1] else "ge"})
    keep = cast(c, keep, c.g.dtype[x])
    return c.g.op("mul", [x, keep])


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


# ---- indexing, joining ------------------------------------------------------------------------

@handles("embedding")
def embedding_h(c, args, kwargs, out):
    w, ids = args[0], args[1]
    i = c.id_of(ids)
    start, step, n = c.g.arange.get(i, (0, 0, 0))
    if step == 1 and isinstance(start, int) and start >= 0 and start + n <= shp(w)[0]:
        # a position embedding of torch.arange(T): rows [start, start + T) of the table, a slice
        # (the compiler takes embedding ids only from the host)
        rows = slice_pos(c, c.id_of(w), 0, start, start + n)
        return reshape(c, rows, shp(out))
    return c.g.op("embedding", [c.id_of(w), cast(c, i, "int32")])


def one_hot(c, ids, classes):
    """ids [..] int -> [.., classes] fp32 with a 1 at each id: iota compared with the ids."""
    s = S(c, ids)
    idx = c.g.op("iota", [], {"axis": len(s)}, shape=s + [classes], dtype="fp32",
                 names=c.g.nm(ids) + [None])
    col = reshape(c, cast(c, ids, "fp32"), s + [1])
    return cast(c, c.g.op("compare", [idx, col], {"cmp": "eq"}), "fp32")


@handles("embedding_dense_backward")
def embedding_backward_h(c, args, kwargs, out):
    grad, ids, num_weights, padding_idx = args[:4]
    g = c.id_of(grad)
    i = c.id_of(ids)
    n = math.prod(S(c, i))
    D = S(c, g)[-1]
    oh = reshape(c, one_hot(c, reshape(c, i, [n]), num_weights), [n, num_weights])
    if padding_idx is not None and padding_idx >= 0:
        keep = c.g.op("compare", [reshape(c, cast(c, i, "fp32"), [n, 1]),
                                  const(c, [n, 1], float(padding_idx))], {"cmp": "ne"})
        oh = c.g.op("mul", [oh, cast(c, keep, "fp32")])
    return c.g.op("matmul", [transpose(c, oh, [1, 0]), reshape(c, cast(c, g, "fp32"), [n, D])])


@handles("cumsum")
def cumsum_h(c, args, kwargs, out):
    """torch._decomp's own form (a sum over a triangular mask), as a matmul with the constant
    upper-triangular ones U[i, j] = (i <= j) along the axis; fp32 (exact for integers < 2^24)."""
    x = c.id_of(args[0])
    s = S(c, x)
    if out.dim() == 0:
        raise MappingError("cumsum of a scalar")
    dim = norm_axis(args[1] if len(args) > 1 else kwargs["dim"], len(s))
    n = s[dim]

    def along_last(t):
        st = S(c, t)
        rows = math.prod(st[:-1])
        row = c.g.op("iota", [], {"axis": 0}, shape=[n, n], dtype="fp32")
        col = c.g.op("iota", [], {"axis": 1}, shape=[n, n], dtype="fp32")
        upper = cast(c, c.g.op("compare", [col, row], {"cmp": "ge"}), "fp32")
        y = c.g.op("matmul", [reshape(c, cast(c, t, "fp32"), [rows, n]), upper])
        return reshape(c, y, st)
    return cast(c, on_last_axis(c, x, dim, along_last), gdt(out))


@handles("gather")
def gather_h(c, args, kwargs, out):
    """y[.., j] = x[.., index[.., j]] along `dim`: a one-hot of the index (iota == index) times
    x, summed (as embedding's backward); exact, index.numel() x extent multiply-adds."""
    x, dim, index = args[0], args[1], args[2]
    if kwargs.get("sparse_grad") or (len(args) > 3 and args[3]):
        raise MappingError("sparse gather")
    r = x.dim()
    if r == 0 or list(index.shape[:-1]) != list(x.shape[:-1]) and norm_axis(dim, r) == r - 1 \
            or index.dim() != r:
        raise MappingError("gather with an index not shaped as x")
    dim = norm_axis(dim, r)
    if any(index.shape[k] != x.shape[k] for k in range(r) if k != dim):
        raise MappingError("gather with an index smaller than x off its axis")
    perm = list(range(r))
    perm[dim], perm[-1] = perm[-1], perm[dim]
    xt = transpose(c, cast(c, c.id_of(x), "fp32"), perm)  # [.., n]
    it = transpose(c, c.id_of(index), perm)  # [.., k]
    lead, n, k = S(c, xt)[:-1], S(c, xt)[-1], S(c, it)[-1]
    oh = one_hot(c, it, n)  # [.., k, n]
    xs = c.g.op("broadcast", [reshape(c, xt, lead + [1, n])], {"shape": lead + [k, n]})
    y = reshape(c, c.g.op("reduce_sum", [c.g.op("mul", [oh, xs])]), lead + [k])
    return cast(c, transpose(c, y, perm), gdt(out))


@handles("nll_loss_forward")
def nll_forward_h(c, args, kwargs, out):
    x, target, weight, reduction, ignore = args[:5]
    if weight is not None or x.dim() != 2:
        raise MappingError("weighted or non-2-D nll_loss")
    N, C = shp(x)
    picked = c.g.op("mul", [c.id_of(x), one_hot(c, c.id_of(target), C)])
    per = reshape(c, c.g.op("reduce_sum", [picked]), [N])
    if reduction == 0:
        return [affine(c, per, -1.0), lazy_const(c, out[1], float(N))]
    total = reduce(c, "reduce_sum", per, [0], False)
    return [affine(c, total, -1.0 / N if reduction == 1 else -1.0),
            lazy_const(c, out[1], float(N))]


@handles("nll_loss_backward")
def nll_backward_h(c, args, kwargs, out):
    grad, x, target, weight, reduction, ignore, total = args[:7]
    if weight is not None or x.dim() != 2:
        raise MappingError("weighted or non-2-D nll_loss")
    N, C = shp(x)
    oh = one_hot(c, c.id_of(target), C)
    g = c.id_of(grad)
    if reduction != 0:
        g = reshape(c, g, [1, 1])
    else:
        g = reshape(c, g, [N, 1])
    scale = -1.0 / N if reduction == 1 else -1.0
    return c.g.op("mul", [affine(c, oh, scale), g])


@handles("_softmax_backward_data")
def softmax_backward_h(c, args, kwargs, out):
    g, y, dim = c.id_of(args[0]), c.id_of(args[1]), args[2]
    s = c.g.op("mul", [g, y])
    tot = reduce(c, "reduce_sum", s, [dim], True)
    return c.g.op("mul", [y, c.g.op("sub", [g, tot])])


@handles("_log_softmax_backward_data")
def log_softmax_backward_h(c, args, kwargs, out):
    g, y, dim = c.id_of(args[0]), c.id_of(args[1]), args[2]
    tot = reduce(c, "reduce_sum", g, [dim], True)
    return c.g.op("sub", [g, c.g.op("mul", [c.g.op("exp", [y]), tot])])


@handles("threshold_backward")
def threshold_backward_h(c, args, kwargs, out):
    g, x, th = c.id_of(args[0]), c.id_of(args[1]), args[2]
    keep = cast(c, c.g.op("compare", [x, const(c, S(c, x), float(th), c.g.dtype[x], c.g.nm(x))],
                          {"cmp": "gt"}),
                c.g.dtype[g])
    return c.g.op("mul", [g, keep])


@handles("cat")
def cat_h(c, args, kwargs, out):
    ts = [t for t in args[0] if t.numel() > 0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    dt = gdt(out)
    xs = [cast(c, c.id_of(t), dt) for t in ts]
    return concat(c, xs, norm_axis(dim, out.dim()))


@handles("stack")
def stack_h(c, args, kwargs, out):
    dim = norm_axis(args[1] if len(args) > 1 else 0, out.dim())
    xs = [c.id_of(t) for t in args[0]]
    xs = [reshape(c, x, shp(t)[:dim] + [1] + shp(t)[dim:]) for x, t in zip(xs, args[0])]
    return concat(c, xs, dim)


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


@handles("index")
def index_h(c, args, kwargs, out):
    """x[idx] with one index tensor on dim 0: the rows it names, an embedding gather."""
    x, indices = args[0], args[1]
    if len(indices) != 1 or indices[0] is None or indices[0].dtype == torch.bool:
        raise MappingError("index other than one integer tensor on dim 0")
    s = shp(x)
    table = reshape(c, c.id_of(x), [s[0], math.prod(s[1:])])
    ids = cast(c, c.id_of(indices[0]), "int32")
    return reshape(c, c.g.op("embedding", [table, ids]), shp(out))


# ---- views ------------------------------------------------------------------------------------

def view_outputs(c, func, x, args, kwargs, out_shapes, only=None):
    """The graph ops of a view op on value x: one id per output (only output `only` if given)."""
    p = func.overloadpacket.__name__
    s = S(c, x)
    r = len(s)
    if p in IDENTITY_VIEWS:
        return [x]
    if p in RESHAPE_VIEWS:
        return [reshape(c, x, out_shapes[0])]
    if p in ("t", "transpose", "swapaxes", "swapdims", "permute", "numpy_T", "movedim"):
        if p == "permute":
            perm = [norm_axis(a, r) for a in args[1]]
        elif p == "t" or p == "numpy_T":
            perm = list(range(r))[::-1]
        elif p == "movedim":
            raise MappingError("movedim")
        else:
            a, b = norm_axis(args[1], r), norm_axis(args[2], r)
            perm = list(range(r))
            perm[a], perm[b] = perm[b], perm[a]
        if r < 2:
            return [x]
        return [transpose(c, x, perm)]
    if p in ("expand", "expand_as", "broadcast_to"):
        return [bcast(c, x, out_shapes[0])]
    if p == "slice":
        dim = norm_axis(args[1] if len(args) > 1 else 0, r)
        start = args[2] if len(args) > 2 else None
        end = args[3] if len(args) > 3 else None
        step = args[4] if len(args) > 4 else 1
        if step != 1:
            return [strided_slice(c, x, dim, start, step, out_shapes[0][dim])]
        return [slice_pos(c, x, dim, start, end)]
    if p == "narrow":
        dim, start, length = norm_axis(args[1], r), args[2], args[3]
        if not isinstance(start, int):
            raise MappingError("narrow at a tensor position")
        start = start + s[dim] if start < 0 else start
        return [slice_(c, x, dim, start, start + length)]
    if p == "select":
        dim = norm_axis(args[1], r)
        idx = args[2]
        if not isinstance(idx, int):
            raise MappingError("select by a symbolic index")
        end = None if idx == -1 else (idx + 1 if idx >= 0 else idx + 1)
        y = slice_pos(c, x, dim, idx, end)
        return [reshape(c, y, out_shapes[0])]
    if p in ("split", "split_with_sizes", "unbind", "chunk", "unsafe_split"):
        if p == "unbind":
            dim = norm_axis(args[1] if len(args) > 1 else 0, r)
        else:
            dim = norm_axis(args[2] if len(args) > 2 else kwargs.get("dim", 0), r)
        res = []
        at = 0
        for k, shape in enumerate(out_shapes):
            n = 1 if p == "unbind" else shape[dim]
            if only is None or only == k:
                y = slice_(c, x, dim, at, at + n)
                res.append(reshape(c, y, shape) if p == "unbind" else y)
            else:
                res.append(None)
            at += n
        return res
    raise MappingError("view op %s" % p)


def strided_slice(c, x, dim, start, step, m):
    """x[..., start::step, ...] with m elements (swin's patch merging, issue 40): the m * step
    positions from start (the last step's unselected tail filled with copies when the axis ends
    first), reshaped [m, step], and the first of each step."""
    s = S(c, x)
    n = s[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    if step < 1 or start < 0 or start + (m - 1) * step >= n:
        raise MappingError("strided slice past the axis's end")
    y = slice_(c, x, dim, start, min(n, start + m * step))
    short = start + m * step - n  # < step: positions never selected, filled with copies
    if short > 0:
        y = concat(c, [y, slice_(c, y, dim, 0, short)], dim)
    y = reshape(c, y, s[:dim] + [m, step] + s[dim + 1:])
    y = slice_(c, y, dim + 1, 0, 1)
    return reshape(c, y, s[:dim] + [m] + s[dim + 1:])


def slice_pos(c, x, dim, start, end):
    """slice with PyTorch's start/end; positions from a named axis's end are written relative."""
    s = S(c, x)
    n = s[dim]
    named = c.g.nm(x)[dim]
    big = 1 << 62
    start = 0 if start is None else start
    end = big if end is None else end

    def pos(p, is_end):
        rel = p < 0 or (is_end and p >= n)
        val = max(0, min(n, p + n if p < 0 else p))
        if named and rel and "*" not in named:  # (a merged axis has no extent of its own)
            return {"dim": named, "offset": val - n}, val
        return val, val

    a, av = pos(start, False)
    b, bv = pos(end, True)
    if bv <= av:
        raise MappingError("empty slice")
    if not isinstance(b, dict) and av == 0 and 1 < bv < n:
        # x[:T] with T a Python int equal to a named extent (a mask cut to the sequence length)
        hits = [nm for nm, ext in c.g.dim_extent.items() if ext == bv]
        if len(hits) == 1:
            b = {"dim": hits[0], "offset": 0}
    if av == 0 and bv == n:
        return x
    return c.g.op("slice", [x], {"axis": dim, "start": a, "limit": b})


@handles("unsafe_split", "unsafe_split_with_sizes")
def unsafe_split(c, args, kwargs, out):
    """split's copying form (an RNN's gates, issue 40): slices, as split's views are."""
    x = c.id_of(args[0])
    dim = norm_axis(args[2] if len(args) > 2 else kwargs.get("dim", 0), len(S(c, x)))
    res, at = [], 0
    for o in out:
        res.append(slice_(c, x, dim, at, at + o.shape[dim]))
        at += o.shape[dim]
    return res


def view_op(c, func, x, args, kwargs, out_shapes, k):
    return view_outputs(c, func, x, args, kwargs, out_shapes, only=k)[k]


def unview(c, entry, parent_old, new):
    """The parent's new value after `new` was written into its view `entry` (a view recipe step)."""
    func, args, kwargs, shapes, k = entry
    p = func.overloadpacket.__name__
    ps = S(c, parent_old)
    r = len(ps)
    if p in IDENTITY_VIEWS:
        return new
    if p in RESHAPE_VIEWS:
        return reshape(c, new, ps)
    if p in ("t", "transpose", "swapaxes", "swapdims", "permute", "numpy_T"):
        if r < 2:
            return new
        if p == "permute":
            perm = [norm_axis(a, r) for a in args[1]]
        elif p in ("t", "numpy_T"):
            perm = list(range(r))[::-1]
        else:
            a, b = norm_axis(args[1], r), norm_axis(args[2], r)
            perm = list(range(r))
            perm[a], perm[b] = perm[b], perm[a]
        inv = [perm.index(j) for j in range(r)]
        return transpose(c, new, inv)
    if p in ("slice", "select", "split", "split_with_sizes", "unbind", "chunk"):
        if p == "slice":
            dim = norm_axis(args[1] if len(args) > 1 else 0, r)
            n = ps[dim]
            start = args[2] if len(args) > 2 and args[2] is not None else 0
            start = max(0, min(n, start + n if start < 0 else start))
            if (args[4] if len(args) > 4 else 1) != 1:
                raise MappingError("write through a strided slice")
            length = shapes[0][dim]
        elif p == "select":
            dim = norm_axis(args[1], r)
            n = ps[dim]
            start = args[2] + n if args[2] < 0 else args[2]
            length = 1
            new = reshape(c, new, ps[:dim] + [1] + ps[dim + 1:])
        else:
            dim = norm_axis((args[1] if len(args) > 1 else 0) if p == "unbind" else
                            (args[2] if len(args) > 2 else kwargs.get("dim", 0)), r)
            sizes = [1 if p == "unbind" else s[dim] for s in shapes]
            start, length = sum(sizes[:k]), sizes[k]
            if p == "unbind":
                new = reshape(c, new, ps[:dim] + [1] + ps[dim + 1:])
        parts = []
        if start > 0:
            parts.append(slice_(c, parent_old, dim, 0, start))
        parts.append(cast(c, new, c.g.dtype[parent_old]))
        if start + length < ps[dim]:
            parts.append(slice_(c, parent_old, dim, start + length, ps[dim]))
        return concat(c, parts, dim)
    raise MappingError("write through a %s view" % p)
