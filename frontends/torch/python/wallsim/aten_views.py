"""ATen's view ops as graph ops on the viewed value (reshape, transpose, broadcast, slices,
splits), and their inverses: a parent's new value after a write into its view."""

from .aten_table import handles
from .compose import S, bcast, cast, concat, norm_axis, reshape, slice_, transpose
from .graph import MappingError

RESHAPE_VIEWS = {"view", "_reshape_alias", "reshape", "unsqueeze", "squeeze", "alias", "detach",
                 "lift_fresh", "view_as", "flatten", "_unsafe_view"}
IDENTITY_VIEWS = {"alias", "detach", "lift_fresh"}


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
