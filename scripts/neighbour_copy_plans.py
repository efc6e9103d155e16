#!/usr/bin/env python3
"""A plan file for `wallsim exec` on a system: every core of a torus_x x torus_y instance copies N
16 KiB tiles (double-buffered through SBUF) to the same core of its x+ neighbour chip.

    scripts/neighbour_copy_plans.py TORUS_X TORUS_Y CORES N > plans.json
"""
import json, sys
chips_x, chips_y, cores, n = map(int, sys.argv[1:5])
rows, cols = 128, 32  # 16 KiB fp32 tiles
plans = []
for c in range(chips_x * chips_y):
    x, y = c % chips_x, c // chips_x
    nb = y * chips_x + (x + 1) % chips_x
    for k in range(cores):
        t = f"t_c{c}_k{k}"
        loads, stores = [], []
        for i in range(n):
            slot = {"buf": "tile", "dtype": "fp32", "partitions": [0, rows], "offset": (i % 2) * cols, "free": [[cols, 1]]}
            ld = {"op": "dma_copy", "dst": slot, "src": {"buf": t, "dtype": "fp32", "rows": [rows, cols * n], "offset": i * cols, "free": [[cols, 1]]}, "signal": [["in", 1]], "node": 0}
            if i >= 2: ld["wait"] = [["out", i - 1]]
            loads.append(ld)
            stores.append({"op": "dma_copy", "wait": [["in", i + 1]], "src": slot, "signal": [["out", 1]],
                           "dst": {"buf": f"chip{nb}:{t}", "dtype": "fp32", "rows": [rows, cols * n], "offset": i * cols, "free": [[cols, 1]]}, "node": 0})
        plans.append({"name": f"copy_c{c}_k{k}", "core": [c, k], "semaphores": ["in", "out"],
            "tensors": [{"name": t, "space": "hbm", "dtype": "fp32", "shape": [rows, cols * n], "role": "input"},
                        {"name": f"chip{nb}:{t}", "space": "hbm", "dtype": "fp32", "shape": [rows, cols * n], "role": "output"}],
            "buffers": [{"name": "tile", "space": "sbuf", "partitions": [0, rows], "bytes": 2 * cols * 4}],
            "nodes": [{"id": 0, "name": "neighbour copy", "op": "copy"}],
            "streams": [{"engine": "dma", "name": "load", "dma_engine": 0, "instructions": loads},
                        {"engine": "dma", "name": "store", "dma_engine": 1, "instructions": stores}]})
print(json.dumps({"format": "wallsim-plan", "version": 1, "plans": plans}))
