"""Graph-op emission for the capture: each op event with its shape, dtype and dim names.

The rules here are the graph IR's (compiler_stub ops.def, validate.cpp) written again in Python,
so the capture can check every ATen op's mapping against PyTorch's result shape as it writes it,
and propagate named dimensions (docs/PROGRAM_FORMAT.md, "Named dimensions").
"""

import math

from .ops_def import of_kind

# The shape rules by ops.def's kinds; bias_add (binary) has a rule of its own, as do the norms.
UNARY = of_kind("unary", "activation")
BINARY = of_kind("binary") - {"bias_add"}
REDUCE = of_kind("reduction")
ROWWISE = of_kind("row") - {"layernorm", "rmsnorm"}


class MappingError(Exception):
    """An ATen op whose arguments the mapping does not cover (it becomes a host_op)."""


def bcast_shape(a, b):
    out = []
    for k in range(max(len(a), len(b))):
        x = a[len(a) - 1 - k] if k < len(a) else 1
        y = b[len(b) - 1 - k] if k < len(b) else 1
        if x != y and x != 1 and y != 1:
            raise MappingError("cannot broadcast %s with %s" % (a, b))
        out.append(max(x, y) if x != 1 and y != 1 else (y if x == 1 else x))
    return list(reversed(out))


def aligned_names(out_shape, operands):
    """Names of a broadcast result: each axis from an aligned operand axis of the same extent."""
    names = [None] * len(out_shape)
    for shape, nm in operands:
        if not nm:
            continue
        off = len(out_shape) - len(shape)
        for k, n in enumerate(nm):
            if n and shape[k] == out_shape[off + k] and names[off + k] is None:
                names[off + k] = n
    return names


def reshape_names(in_shape, in_names, out_shape):
    names = [None] * len(out_shape)
    if not in_names:
        return names
    prefix_in = {}
    p = 1
    for k, e in enumerate(in_shape):
        prefix_in[(p, e)] = in_names[k]
        p *= e
    p = 1
    for k, e in enumerate(out_shape):
        n = prefix_in.get((p, e))
        if n:
            names[k] = n
        p *= e
    for i0, i1, j0, j1 in _reshape_groups(in_shape, out_shape):
        _composite_names(in_shape[i0:i1], in_names[i0:i1], out_shape[j0:j1], names, j0)
    return names


def _reshape_groups(a, b):
    """Runs of axes [i0, i1) of a and [j0, j1) of b holding the same elements."""
    groups, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        i0, j0, pa, pb = i, j, a[i], b[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb and i < len(a):
                pa, i = pa * a[i], i + 1
            elif pb < pa and j < len(b):
                pb, j = pb * b[j], j + 1
            else:
                return groups
        groups.append((i0, i, j0, j))
    return groups


def _composite_names(ins, in_nm, outs, names, j0):
    """A named axis merged with unnamed others of F elements in all becomes "F*name" (it is the
    inner one) or "name*F" (the outer one), and splits back to the name: nn.Linear's
    [B, T, D] -> [B*T, D] -> [B, T, N] keeps "seq" for a bounded replay."""
    big_in = [k for k, e in enumerate(ins) if e > 1]
    big_out = [k for k, e in enumerate(outs) if e > 1]
    if len(big_in) > 1 and len(big_out) == 1:  # a merge
        named = [k for k in big_in if in_nm[k]]
        if len(named) != 1 or "*" in in_nm[named[0]]:
            return
        k = named[0]
        f = math.prod(ins) // ins[k]
        name = ("%d*%s" % (f, in_nm[k]) if k == big_in[-1] else
                "%s*%d" % (in_nm[k], f) if k == big_in[0] else None)
        if name and names[j0 + big_out[0]] is None:
            names[j0 + big_out[0]] = name
    elif len(big_in) == 1 and len(big_out) == 2 and in_nm[big_in[0]] and "*" in in_nm[big_in[0]]:
        a, b = in_nm[big_in[0]].split("*", 1)
        if a.isdigit() and outs[big_out[0]] == int(a):  # F*name: the inner axis is the name
            names[j0 + big_out[1]] = names[j0 + big_out[1]] or b
        elif b.isdigit() and outs[big_out[1]] == int(b):
            names[j0 + big_out[0]] = names[j0 + big_out[0]] or a


def _or_given(names, given):
    """Inferred names, an unnamed axis taking the name `given` has for it (broadcast_all's)."""
    if not isinstance(given, list):
        return names
    return [n or g for n, g in zip(names, given)]


class Graph:
    """Holds the shape, dtype and names of every SSA id and appends op events to `events`."""

    def __init__(self, events, ids, provenance):
        self.events = events
        self.ids = ids  # callable: next SSA id
        self.provenance = provenance  # callable: (aten, module)
        self.shape = {}
        self.dtype = {}
        self.names = {}
        self.dim_extent = {}  # name -> latest extent
        self.scratch = None  # list collecting ids made inside one ATen op, or None
        self.arange = {}  # id -> (start, step, n) of a torch.arange result
        self.hbm = set()  # ids of weights and inputs (uploaded, so in HBM, never made on chip)

    def declare(self, i, shape, dtype, names=None):
        self.shape[i] = list(shape)
        self.dtype[i] = dtype
        if names and any(names):
            self.names[i] = list(names)
            for k, n in enumerate(names):
                if n and "*" not in n:  # a composite name has no extent of its own
                    self.dim_extent[n] = shape[k]

    def nm(self, i):
        return self.names.get(i) or [None] * len(self.shape[i])

    def op(self, op, inputs=(), attrs=None, shape=None, dtype=None, names=None):
        """Appends one op event; `shape`, `dtype` declare an iota, `names` its dim names (a list,
        or "guess": by extent, for a factory sized by Python ints; default: none)."""
        attrs = dict(attrs or {})
        inputs = list(inputs)
        for x in inputs:
            if x not in self.shape:
                raise MappingError("operand %r is not defined" % (x,))
        if op in BINARY or op == "select" or (op == "compare" and len(inputs) == 2):
            inputs = self.broadcast_all(inputs)
        ishp = [self.shape[x] for x in inputs]
        idt = [self.dtype[x] for x in inputs]
        out_shape, out_dtype, names = self._infer(op, inputs, ishp, idt, attrs, shape, dtype,
                                                  names)
        if dtype is not None:
            out_dtype = dtype
        i = self.ids()
        aten, module = self.provenance()
        ev = {"ev": "op", "id": i, "op": op, "inputs": inputs, "attrs": attrs,
              "dtype": out_dtype, "shape": out_shape, "aten": aten, "module": module}
        if any(names):
            ev["dim_names"] = names
        self.events.append(ev)
        self.declare(i, out_shape, out_dtype, names)
        if self.scratch is not None:
            self.scratch.append(i)
        return i

    def broadcast_all(self, inputs):
        """Operands broadcast explicitly to the result's shape (a reshape when only leading 1s
        differ, else a stride-0 `broadcast` view): the lowering broadcasts a row vector across
        partitions only from HBM, and an operand may have been made on the chip."""
        full = self.shape[inputs[0]]
        for x in inputs[1:]:
            full = bcast_shape(full, self.shape[x])
        # the result's names from every operand: a [1, 1] operand broadcast to [batch, C] runs
        # at the batch's run extent (a bounded or sharded replay), as the other operand does
        names = aligned_names(full, [(self.shape[x], self.nm(x)) for x in inputs])
        out = []
        for x in inputs:
            s = self.shape[x]
            if s == full:
                out.append(x)
            elif [1] * (len(full) - len(s)) + s == full:
                out.append(self.op("reshape", [x], {"shape": list(full)}, names=names))
            else:
                out.append(self.op("broadcast", [x], {"shape": list(full)}, names=names))
        return out

    # ---- shape inference (validate.cpp's rules) ----
    def _infer(self, op, inputs, s, dt, a, shape, dtype, given):
        nm = [self.nm(x) for x in inputs]
        if op == "iota":
            if given != "guess":
                return list(shape), dtype, list(given) if given else [None] * len(shape)
            names = [None] * len(shape)
            for k, e in enumerate(shape):
                hits = [n for n, ext in self.dim_extent.items() if ext == e and e > 1]
                if len(hits) == 1:
                    names[k] = hits[0]
            return list(shape), dtype, names
        if op in UNARY:
            return list(s[0]), dt[0], list(nm[0])
        if op in BINARY or op == "compare" and len(s) == 2:
            out = bcast_shape(s[0], s[1])
            return out, dt[0], aligned_names(out, zip(s, nm))
        if op == "compare":
            return list(s[0]), dt[0], list(nm[0])
        if op == "select":
            out = bcast_shape(bcast_shape(s[0], s[1]), s[2])
            return out, dt[1], aligned_names(out, zip(s, nm))
        if op == "bias_add":
            if len(s[1]) != 1 or s[1][0] != s[0][-1]:
                raise MappingError("bias_add %s + %s" % (s[0], s[1]))
            return list(s[0]), dt[0], list(nm[0])
        if op == "matmul":
            if len(s[1]) != 2 or s[0][-1] != s[1][0]:
                raise MappingError("matmul %s x %s" % (s[0], s[1]))
            return s[0][:-1] + [s[1][1]], dt[0], nm[0][:-1] + [nm[1][1]]
        if op == "batch_matmul":
            tb = a.get("transpose_b", 0)
            if len(s[0]) != 3 or len(s[1]) != 3 or s[0][0] != s[1][0] or \
                    s[0][2] != (s[1][2] if tb else s[1][1]):
                raise MappingError("batch_matmul %s x %s" % (s[0], s[1]))
            n = s[1][1] if tb else s[1][2]
            return [s[0][0], s[0][1], n], dt[0], [nm[0][0], nm[0][1], nm[1][1 if tb else 2]]
        if op in REDUCE:
            return s[0][:-1] + [1], dt[0], nm[0][:-1] + [None]
        if op == "reduce":
            r = len(s[0])
            axes = a.get("axes")
            red = {k % r for k in axes} if axes is not None else set(range(r))
            keep = a.get("keepdim", 0)
            out = [(1 if k in red else s[0][k], None if k in red else nm[0][k])
                   for k in range(r) if keep or k not in red] or [(1, None)]
            return [e for e, _ in out], dt[0], [n for _, n in out]
        if op == "pad":
            b, e = a["begin"], a["end"]
            if len(b) != len(s[0]) or len(e) != len(s[0]) or min(b + e) < 0:
                raise MappingError("pad %s by %s, %s" % (s[0], b, e))
            return ([x + b[k] + e[k] for k, x in enumerate(s[0])], dt[0],
                    [n if not b[k] and not e[k] else None for k, n in enumerate(nm[0])])
        if op in ROWWISE or op in ("layernorm", "rmsnorm"):
            return list(s[0]), dt[0], list(nm[0])
        if op == "transpose":
            p = a["perm"]
            if sorted(p) != list(range(len(s[0]))):
                raise MappingError("perm %s of %s" % (p, s[0]))
            return [s[0][k] for k in p], dt[0], [nm[0][k] for k in p]
        if op == "reshape":
            if math.prod(a["shape"]) != math.prod(s[0]) or min(a["shape"]) < 1:
                raise MappingError("reshape %s to %s" % (s[0], a["shape"]))
            out = reshape_names(s[0], nm[0], a["shape"])
            return list(a["shape"]), dt[0], _or_given(out, given)
        if op == "broadcast":
            out = list(a["shape"])
            if bcast_shape(s[0], out) != out:
                raise MappingError("broadcast %s to %s" % (s[0], out))
            return out, dt[0], _or_given(aligned_names(out, [(s[0], nm[0])]), given)
        if op == "slice":
            ax = a["axis"]
            start, limit = self.position(a["start"]), self.position(a["limit"])
            if not 0 <= start < limit <= s[0][ax]:
                raise MappingError("slice [%d, %d) of %s axis %d" % (start, limit, s[0], ax))
            out = list(s[0])
            out[ax] = limit - start
            names = list(nm[0])
            # the sliced axis is named only when it runs from 0 (or a relative start) to a
            # position relative to a named extent, and is longer than 1
            lim = a["limit"]
            if isinstance(lim, dict) and (start == 0 or isinstance(a["start"], dict)) and \
                    out[ax] > 1 and not (isinstance(a["start"], dict) and
                                         a["start"]["dim"] == lim["dim"]):
                names[ax] = lim["dim"]
            else:
                names[ax] = None
            return out, dt[0], names
        if op == "concat":
            ax = a["axis"]
            out = list(s[0])
            out[ax] = sum(x[ax] for x in s)
            names = [None] * len(out)
            for k in range(len(out)):
                for x, n in zip(s, nm):
                    if n[k] and (k == ax or x[k] == out[k]):
                        names[k] = n[k]
                        break
            return out, dt[0], names
        if op == "im2col":
            kh, kw = a["kernel"]
            sh, sw = a.get("strides", [1, 1])
            dh, dw = a.get("dilations", [1, 1])
            n, c, h, w = s[0]
            oh = (h - (dh * (kh - 1) + 1)) // sh + 1
            ow = (w - (dw * (kw - 1) + 1)) // sw + 1
            if oh < 1 or ow < 1:
                raise MappingError("im2col window larger than %s" % (s[0],))
            return [n, c, oh, ow, kh, kw], dt[0], [nm[0][0], nm[0][1], None, None, None, None]
        if op == "embedding":
            if len(s[0]) != 2 or dt[1] != "int32":
                raise MappingError("embedding table %s ids %s" % (s[0], dt[1]))
            return s[1] + [s[0][1]], dt[0], nm[1] + [None]
        if op == "attention":
            return list(s[0]), dt[0], list(nm[0])
        raise MappingError("no shape rule for graph op %s" % op)

    def position(self, p):
        """A slice position: an int, or {"dim": name, "offset": k} = the named extent + k."""
        if isinstance(p, dict):
            return self.dim_extent[p["dim"]] + p["offset"]
        return p
