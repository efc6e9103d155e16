"""ATen's indexing, gathers, losses, their backwards and joins as graph ops: an embedding's
backward, a gather and nll loss take a one-hot of the ids (iota compared with them), cumsum is a
matmul with a triangular constant."""

import math

import torch

from .aten_elementwise import lazy_const
from .aten_table import gdt, handles, shp
from .aten_views import slice_pos
from .compose import (S, affine, cast, concat, const, norm_axis, on_last_axis, reduce, reshape,
                      transpose)
from .graph import MappingError


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
