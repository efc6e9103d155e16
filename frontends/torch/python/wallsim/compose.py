"""Graph-op builders and the composites the IR has no op for, the ONNX importer's idioms
(frontends/onnx/src/onnx_ops.cpp): a reduction over any axes is transpose + reshape + a
last-axis reduction, an op along another axis moves it last and back, padding is a concat with
constant blocks, constants are iota + affine (docs/PROGRAM_FORMAT.md). `c` is the capture: each
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
