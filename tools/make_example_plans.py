#!/usr/bin/env python3
"""Writes the hand-designed example plans in examples/plans/ (then canonicalised by
`wallsim plan format`). Each plan is small enough to read in full; docs/PLAN_FORMAT.md walks
through them."""
import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "examples" / "plans"


def onchip(buf, dtype, parts, offset=0, free=()):
    ap = {"buf": buf, "dtype": dtype, "partitions": list(parts)}
    if offset:
        ap["offset"] = offset
    if free:
        ap["free"] = [list(d) for d in free]
    return ap


def offchip(buf, dtype, rows, offset=0, free=()):
    ap = {"buf": buf, "dtype": dtype, "rows": list(rows)}
    if offset:
        ap["offset"] = offset
    if free:
        ap["free"] = [list(d) for d in free]
    return ap


def seq(*plans):
    return {"format": "wallsim-plan", "version": 1, "plans": list(plans)}


def matmul():
    """C[256, 512] (fp32) = A[256, 256] . B[256, 512] (bf16), A stored transposed (a_t = A^T),
    tiled as 2 (M) x 2 (K) matmuls with PSUM accumulation over K."""
    K, M, N, T = 256, 256, 512, 128
    kt_n, mt_n = K // T, M // T
    q_a, q_b, q_c, tensor, vector = [], [], [], [], []
    for kt in range(kt_n):
        q_a.append({"op": "dma_copy", "node": 0,
                    "dst": onchip("a_sb", "bf16", (0, T), kt * M, [(M, 1)]),
                    "src": offchip("a_t", "bf16", (T, M), kt * T * M, [(M, 1)]),
                    "signal": [["a_in", 1]]})
        q_b.append({"op": "dma_copy", "node": 0,
                    "dst": onchip("b_sb", "bf16", (0, T), kt * N, [(N, 1)]),
                    "src": offchip("b", "bf16", (T, N), kt * T * N, [(N, 1)]),
                    "signal": [["b_in", 1]]})
    for mt in range(mt_n):
        for kt in range(kt_n):
            ins = {"op": "matmul", "node": 0,
                   "dst": onchip("c_ps", "fp32", (0, T), mt * N, [(N, 1)]),
                   "stationary": onchip("a_sb", "bf16", (0, T), kt * M + mt * T, [(T, 1)]),
                   "moving": onchip("b_sb", "bf16", (0, T), kt * N, [(N, 1)]),
                   "start": kt == 0, "stop": kt == kt_n - 1}
            if mt == 0 and kt == 0:
                ins["wait"] = [["a_in", kt_n], ["b_in", kt_n]]
            if kt == kt_n - 1:
                ins["signal"] = [["mm_done", 1]]
            tensor.append(ins)
        vector.append({"op": "tensor_copy", "node": 1,
                       "dst": onchip("c_sb", "fp32", (0, T), mt * N, [(N, 1)]),
                       "src": onchip("c_ps", "fp32", (0, T), mt * N, [(N, 1)]),
                       "wait": [["mm_done", mt + 1]], "signal": [["copied", 1]]})
        q_c.append({"op": "dma_copy", "node": 1,
                    "dst": offchip("c", "fp32", (T, N), mt * T * N, [(N, 1)]),
                    "src": onchip("c_sb", "fp32", (0, T), mt * N, [(N, 1)]),
                    "wait": [["copied", mt + 1]]})
    return seq({
        "name": "matmul_256x256x512",
        "semaphores": ["a_in", "b_in", "mm_done", "copied"],
        "tensors": [
            {"name": "a_t", "space": "hbm", "dtype": "bf16", "shape": [K, M], "role": "input"},
            {"name": "b", "space": "hbm", "dtype": "bf16", "shape": [K, N], "role": "input"},
            {"name": "c", "space": "hbm", "dtype": "fp32", "shape": [M, N], "role": "output"}],
        "buffers": [
            {"name": "a_sb", "space": "sbuf", "partitions": [0, T], "bytes": kt_n * M * 2},
            {"name": "b_sb", "space": "sbuf", "partitions": [0, T], "offset": kt_n * M * 2,
             "bytes": kt_n * N * 2},
            {"name": "c_sb", "space": "sbuf", "partitions": [0, T],
             "offset": kt_n * (M + N) * 2, "bytes": mt_n * N * 4},
            {"name": "c_ps", "space": "psum", "partitions": [0, T], "bytes": mt_n * N * 4}],
        "nodes": [{"id": 0, "name": "c = a_t^T . b", "op": "matmul"},
                  {"id": 1, "name": "store c", "op": "copy"}],
        "streams": [
            {"engine": "dma", "name": "q_a", "dma_engine": 0, "instructions": q_a},
            {"engine": "dma", "name": "q_b", "dma_engine": 1, "instructions": q_b},
            {"engine": "tensor", "instructions": tensor},
            {"engine": "vector", "instructions": vector},
            {"engine": "dma", "name": "q_c", "dma_engine": 2, "instructions": q_c}]})


def vector_add():
    """z[128, 1024] = x + y in fp32."""
    P, F = 128, 1024
    full = [(F, 1)]
    return seq({
        "name": "vector_add_128x1024",
        "semaphores": ["x_in", "y_in", "added"],
        "tensors": [
            {"name": "x", "space": "hbm", "dtype": "fp32", "shape": [P, F], "role": "input"},
            {"name": "y", "space": "hbm", "dtype": "fp32", "shape": [P, F], "role": "input"},
            {"name": "z", "space": "hbm", "dtype": "fp32", "shape": [P, F], "role": "output"}],
        "buffers": [
            {"name": "x_sb", "space": "sbuf", "partitions": [0, P], "bytes": F * 4},
            {"name": "y_sb", "space": "sbuf", "partitions": [0, P], "offset": F * 4, "bytes": F * 4}],
        "nodes": [{"id": 0, "name": "z = x + y", "op": "add"}],
        "streams": [
            {"engine": "dma", "name": "q_x", "dma_engine": 0, "instructions": [
                {"op": "dma_copy", "dst": onchip("x_sb", "fp32", (0, P), 0, full),
                 "src": offchip("x", "fp32", (P, F), 0, full), "signal": [["x_in", 1]], "node": 0}]},
            {"engine": "dma", "name": "q_y", "dma_engine": 1, "instructions": [
                {"op": "dma_copy", "dst": onchip("y_sb", "fp32", (0, P), 0, full),
                 "src": offchip("y", "fp32", (P, F), 0, full), "signal": [["y_in", 1]], "node": 0}]},
            {"engine": "vector", "instructions": [
                {"op": "tensor_tensor", "alu": "add",
                 "dst": onchip("x_sb", "fp32", (0, P), 0, full),
                 "lhs": onchip("x_sb", "fp32", (0, P), 0, full),
                 "rhs": onchip("y_sb", "fp32", (0, P), 0, full),
                 "wait": [["x_in", 1], ["y_in", 1]], "signal": [["added", 1]], "node": 0}]},
            {"engine": "dma", "name": "q_z", "dma_engine": 2, "instructions": [
                {"op": "dma_copy", "dst": offchip("z", "fp32", (P, F), 0, full),
                 "src": onchip("x_sb", "fp32", (0, P), 0, full), "wait": [["added", 1]],
                 "node": 0}]}]})


def softmax():
    """y[128, 512] = softmax(x) along each row, fp32: max, subtract (broadcast), exp with a
    fused row sum, reciprocal, multiply (broadcast)."""
    P, F = 128, 512
    row = [(F, 1)]
    bcast = [(F, 0)]  # stride 0: one value per partition, repeated along the row
    x = lambda: onchip("x_sb", "fp32", (0, P), 0, row)
    col = lambda off: onchip("stats", "fp32", (0, P), off)
    return seq({
        "name": "softmax_128x512",
        "semaphores": ["x_in", "shifted", "exp_done", "scaled"],
        "tensors": [
            {"name": "x", "space": "hbm", "dtype": "fp32", "shape": [P, F], "role": "input"},
            {"name": "y", "space": "hbm", "dtype": "fp32", "shape": [P, F], "role": "output"}],
        "buffers": [
            {"name": "x_sb", "space": "sbuf", "partitions": [0, P], "bytes": F * 4},
            {"name": "stats", "space": "sbuf", "partitions": [0, P], "offset": F * 4, "bytes": 12}],
        "nodes": [{"id": 0, "name": "y = softmax(x)", "op": "softmax"}],
        "streams": [
            {"engine": "dma", "name": "q_in", "dma_engine": 0, "instructions": [
                {"op": "dma_copy", "dst": x(), "src": offchip("x", "fp32", (P, F), 0, row),
                 "signal": [["x_in", 1]], "node": 0}]},
            {"engine": "vector", "instructions": [
                {"op": "tensor_reduce", "alu": "max", "dst": col(0), "src": x(),
                 "wait": [["x_in", 1]], "node": 0},
                {"op": "tensor_tensor", "alu": "sub", "dst": x(), "lhs": x(),
                 "rhs": onchip("stats", "fp32", (0, P), 0, bcast), "signal": [["shifted", 1]],
                 "node": 0},
                {"op": "tensor_scalar", "alu": "div", "scalar": 1.0, "reverse": True,
                 "dst": col(2), "src": col(1), "wait": [["exp_done", 1]], "node": 0},
                {"op": "tensor_tensor", "alu": "mul", "dst": x(), "lhs": x(),
                 "rhs": onchip("stats", "fp32", (0, P), 2, bcast), "signal": [["scaled", 1]],
                 "node": 0}]},
            {"engine": "scalar", "instructions": [
                {"op": "activation_reduce", "act": "exp", "dst": x(), "src": x(), "accum": col(1),
                 "wait": [["shifted", 1]], "signal": [["exp_done", 1]], "node": 0}]},
            {"engine": "dma", "name": "q_out", "dma_engine": 1, "instructions": [
                {"op": "dma_copy", "dst": offchip("y", "fp32", (P, F), 0, row), "src": x(),
                 "wait": [["scaled", 1]], "node": 0}]}]})


def gather():
    """out[128, 64] = table[idx[p], :] — an embedding lookup: the index vector is loaded to
    SBUF, then one gather descriptor fetches the rows it names."""
    R, D, P = 1000, 64, 128
    return seq({
        "name": "gather_128_of_1000x64",
        "semaphores": ["idx_in", "rows_in"],
        "tensors": [
            {"name": "table", "space": "hbm", "dtype": "fp32", "shape": [R, D], "role": "input"},
            {"name": "idx", "space": "hbm", "dtype": "int32", "shape": [P], "role": "input"},
            {"name": "out", "space": "hbm", "dtype": "fp32", "shape": [P, D], "role": "output"}],
        "buffers": [
            {"name": "idx_sb", "space": "sbuf", "partitions": [0, P], "bytes": 4},
            {"name": "rows_sb", "space": "sbuf", "partitions": [0, P], "offset": 4, "bytes": D * 4}],
        "nodes": [{"id": 0, "name": "out = table[idx]", "op": "embedding"}],
        "streams": [
            {"engine": "dma", "name": "q0", "dma_engine": 0, "instructions": [
                {"op": "dma_copy", "dst": onchip("idx_sb", "int32", (0, P)),
                 "src": offchip("idx", "int32", (P, 1)), "signal": [["idx_in", 1]], "node": 0},
                {"op": "dma_gather", "dst": onchip("rows_sb", "fp32", (0, P), 0, [(D, 1)]),
                 "table": offchip("table", "fp32", (R, D), 0, [(D, 1)]),
                 "index": onchip("idx_sb", "int32", (0, P)), "wait": [["idx_in", 1]],
                 "signal": [["rows_in", 1]], "node": 0},
                {"op": "dma_copy", "dst": offchip("out", "fp32", (P, D), 0, [(D, 1)]),
                 "src": onchip("rows_sb", "fp32", (0, P), 0, [(D, 1)]),
                 "wait": [["rows_in", 1]], "node": 0}]}]})


def main():
    wallsim = sys.argv[1] if len(sys.argv) > 1 else "build/bin/wallsim"
    for name, make in [("matmul", matmul), ("vector_add", vector_add), ("softmax", softmax),
                       ("gather", gather)]:
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(make()))
        subprocess.run([wallsim, "plan", "format", str(path), "--out", str(path)], check=True)
        print(path)


if __name__ == "__main__":
    main()
