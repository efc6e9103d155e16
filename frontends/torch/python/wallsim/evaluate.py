"""A numpy evaluator of a program file's graph ops, checking every read against PyTorch's value.

    python3 -m wallsim.evaluate P.json      # needs a capture with values

It is the capture's own oracle (tests/frontends/torch): fp32 throughout, the graph IR's
semantics (compiler_stub reference.cpp), not a model of the chip.
"""

import json
import math
import os
import sys

import numpy as np

from .ops_def import OPS, of_kind


def _gelu(x):
    from math import sqrt
    v = np.vectorize(lambda t: 0.5 * t * (1.0 + math.erf(t / sqrt(2.0))), otypes=[np.float64])
    return v(x)


# The scalar engine's functions (isa::ActFn), by name: an activation op of ops.def is its `act`.
ACT_FNS = {"relu": lambda t: np.maximum(t, 0), "exp": np.exp, "tanh": np.tanh,
           "sigmoid": lambda t: 1 / (1 + np.exp(-t)), "rsqrt": lambda t: 1 / np.sqrt(t),
           "sqrt": np.sqrt, "log": np.log, "abs": np.abs, "reciprocal": lambda t: 1 / t,
           "square": np.square, "gelu": _gelu, "silu": lambda t: t / (1 + np.exp(-t))}
ACTIVATIONS = of_kind("activation")


def _pos(p, extents):
    return extents[p["dim"]] + p["offset"] if isinstance(p, dict) else p


def run_op(ev, ins, extents):
    op, a = ev["op"], ev["attrs"]
    x = ins[0] if ins else None
    if op == "iota":
        return np.broadcast_to(
            np.arange(ev["shape"][a["axis"]], dtype=np.float64).reshape(
                [-1 if k == a["axis"] else 1 for k in range(len(ev["shape"]))]),
            ev["shape"]).copy()
    simple = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "maximum": np.maximum, "minimum": np.minimum}
    if op in simple:
        return simple[op](ins[0], ins[1])
    if op == "bias_add":
        return x + ins[1]
    if op == "scale":
        return x * a["value"]
    if op == "affine":
        return x * a.get("value", 1.0) + a.get("offset", 0.0)
    if op == "clip":
        return np.clip(x, a.get("lo", -np.inf), a.get("hi", np.inf))
    if op in ACTIVATIONS:
        with np.errstate(all="ignore"):
            return ACT_FNS[OPS[op].act](x)
    if op == "matmul":
        return x @ ins[1]
    if op == "batch_matmul":
        b = np.swapaxes(ins[1], 1, 2) if a.get("transpose_b") else ins[1]
        return x @ b
    if op == "reduce_sum":
        return x.sum(-1, keepdims=True)
    if op == "reduce_max":
        return x.max(-1, keepdims=True)
    if op == "reduce_mean":
        return x.mean(-1, keepdims=True)
    if op == "reduce":
        f = {"sum": np.sum, "max": np.max, "mean": np.mean}[a["reduction"]]
        axes = a.get("axes")
        axes = tuple(k % x.ndim for k in axes) if axes is not None else tuple(range(x.ndim))
        return np.asarray(f(x, axis=axes, keepdims=bool(a.get("keepdim", 0)))).reshape(
            ev["shape"])
    if op == "pad":
        return np.pad(x, list(zip(a["begin"], a["end"])), constant_values=a.get("value", 0.0))
    if op in ("softmax", "log_softmax"):
        m = x - x.max(-1, keepdims=True)
        e = np.exp(m)
        return e / e.sum(-1, keepdims=True) if op == "softmax" else m - np.log(
            e.sum(-1, keepdims=True))
    if op == "layernorm":
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + a["eps"]) * ins[1] + ins[2]
    if op == "rmsnorm":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + a["eps"]) * ins[1]
    if op == "transpose":
        return np.transpose(x, a["perm"])
    if op == "reshape":
        return x.reshape(a["shape"])
    if op == "broadcast":
        return np.broadcast_to(x, a["shape"]).copy()
    if op == "slice":
        idx = [slice(None)] * x.ndim
        idx[a["axis"]] = slice(_pos(a["start"], extents), _pos(a["limit"], extents))
        return x[tuple(idx)]
    if op == "concat":
        return np.concatenate(ins, a["axis"])
    if op == "compare":
        f = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
             "gt": np.greater, "ge": np.greater_equal}[a["cmp"]]
        return f(ins[0], ins[1]).astype(np.float64)
    if op == "select":
        return np.where(ins[0] != 0, ins[1], ins[2])
    if op == "embedding":
        return x[ins[1].astype(np.int64)]
    if op == "im2col":
        kh, kw = a["kernel"]
        sh, sw = a.get("strides", [1, 1])
        dh, dw = a.get("dilations", [1, 1])
        n, c, h, w = x.shape
        oh, ow = ev["shape"][2], ev["shape"][3]
        out = np.empty([n, c, oh, ow, kh, kw], dtype=x.dtype)
        for i in range(kh):
            for j in range(kw):
                out[:, :, :, :, i, j] = x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                                          j * dw:j * dw + sw * (ow - 1) + 1:sw]
        return out
    if op == "attention":
        q, k, v = ins[:3]
        heads, L = a["heads"], q.shape[0]
        d = q.shape[1] // heads
        seq = a.get("seq", L)
        scale = a.get("scale", 1 / math.sqrt(d))
        out = np.zeros_like(q)
        for s0 in range(0, L, seq):
            for h in range(heads):
                cols = slice(h * d, (h + 1) * d)
                qs, ks, vs = q[s0:s0 + seq, cols], k[s0:s0 + seq, cols], v[s0:s0 + seq, cols]
                sc = qs @ ks.T * scale
                if a.get("causal"):
                    sc = sc + np.triu(np.full(sc.shape, -1e30), 1)
                sc = np.exp(sc - sc.max(-1, keepdims=True))
                out[s0:s0 + seq, cols] = (sc / sc.sum(-1, keepdims=True)) @ vs
        return out
    raise ValueError("no evaluator for graph op %s" % op)


def _round(v, dtype):
    if dtype == "int32":
        return np.trunc(v)
    return v.astype(np.float32).astype(np.float64)


def evaluate(path):
    """Evaluates the program; returns (max_rel_error over reads, number of reads, the errors)."""
    with open(path) as f:
        doc = json.load(f)
    vdir = os.path.join(os.path.dirname(os.path.abspath(path)), doc["values"])
    vals = {}
    errors = []
    reads = 0
    extents = {}  # named dimension -> its extent at its latest definition
    for ev in doc.get("setup", []) + doc["events"]:  # the set-up first, once
        kind = ev["ev"]
        if kind == "op":
            v = run_op(ev, [vals[i] for i in ev["inputs"]], extents)
        for n, e in zip(ev.get("dim_names") or [], ev.get("shape", [])):
            if n:
                extents[n] = e
        if kind in ("weight", "input"):
            vals[ev["id"]] = np.load(os.path.join(vdir, "%s%d.npy" % (kind[0], ev["id"]))).astype(
                np.float64)
        elif kind == "host_op":
            for o in ev["outputs"]:
                vals[o["id"]] = np.load(os.path.join(vdir, "o%d.npy" % o["id"])).astype(np.float64)
        elif kind == "op":
            if list(v.shape) != ev["shape"]:
                raise ValueError("op %d (%s, %s): shape %s, event says %s" % (
                    ev["id"], ev["op"], ev["aten"], list(v.shape), ev["shape"]))
            vals[ev["id"]] = _round(np.asarray(v, dtype=np.float64), ev["dtype"])
        elif kind == "read":
            want = np.load(os.path.join(vdir, "r%d.npy" % reads)).astype(np.float64)
            got = vals[ev["id"]]
            denom = max(np.abs(want).max(initial=0.0), 1e-30)
            errors.append(float(np.abs(got.reshape(want.shape) - want).max(initial=0.0) / denom)
                          if want.size else 0.0)
            reads += 1
        elif kind == "free":
            vals.pop(ev["id"], None)
    return (max(errors) if errors else 0.0), reads, errors


if __name__ == "__main__":
    err, n, _ = evaluate(sys.argv[1])
    print("reads %d max_rel_error %.3g" % (n, err))
