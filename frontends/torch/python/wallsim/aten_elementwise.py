"""ATen's element-wise ops, copies, casts and constants as graph ops: scalars become immediates
(affine), ops.def's aten column maps the ops that are one graph op alone, and a factory's constant
is made only if used (Lazy)."""

import math

import torch

from .aten_table import HANDLERS, Lazy, gdt, handles, out_dt, shp
from .compose import S, affine, bcast, cast, const, finite, reshape, tensor_or_const
from .graph import MappingError, aligned_names
from .ops_def import OPS


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
    ts = [c.id_of(t) for t in (a, b) if isinstance(t, torch.Tensor)]
    full = list(torch.broadcast_shapes(*[S(c, i) for i in ts]))
    names = aligned_names(full, [(S(c, i), c.g.nm(i)) for i in ts])
    x = tensor_or_const(c, a, out_dtype, full or [1], names)
    y = tensor_or_const(c, b, out_dtype, full or [1], names)
    if alpha != 1:
        y = affine(c, y, float(alpha))
    return c.g.op(op, [x, y])


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
