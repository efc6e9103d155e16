"""Graph-op builders: a reduction over any axes and padding are the IR's composite ops (reduce,
pad: compiler_stub's composites.h expands them, for the ONNX importer too), an op along another
axis moves it last and back, constants are iota + affine (docs/PROGRAM_FORMAT.md). `c` is the capture: each
builder emits through `c.g.op` and returns the new SSA id (the input's when nothing changes)."""

import math

import torch

from .graph import MappingError

F32_MAX = 3.4028234663852886e38


def finite(v):
    v = float(v)
    if math.isnan(v):
        raise MappingError("NaN constant")
    return max(-F32_MAX, min(F32_MAX, v))


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
    """The last-axis reduction `op` (reduce_sum, reduce_max, reduce_mean) of x over `axes` (all
    when empty): the graph IR's composite `reduce`, which the compiler expands."""
    attrs = {"reduction": op[len("reduce_"):], "keepdim": 1 if keepdim else 0}
    if axes:
        attrs["axes"] = sorted(set(norm_axis(a, len(S(c, x))) for a in axes))
    return c.g.op("reduce", [x], attrs)


def on_last_axis(c, x, axis, f):
    r = len(S(c, x))
    axis = norm_axis(axis, r)
    if axis == r - 1:
        return f(x)
    perm = list(range(r))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return transpose(c, f(transpose(c, x, perm)), perm)


def pad(c, x, begin, end, value):
    """x padded with `value` by begin[k], end[k] along each axis k: the graph IR's composite
    `pad`, which the compiler expands."""
    if not any(begin) and not any(end):
        return x
    attrs = {"begin": list(begin), "end": list(end)}
    if value:
        attrs["value"] = finite(value)
    return c.g.op("pad", [x], attrs)
