#!/usr/bin/python3
"""Plots a wallsim sweep: tools/plot_sweep.py DIR --out PLOTDIR [--metric total_ns] [--axis PATH]

Reads DIR/results.jsonl (and DIR/points/*/result.json from --index runs), the latest line per
point, ok points only, and writes PNGs (matplotlib, Agg backend):

  metric_vs_<axis>.png   the metric against each swept config path, one line per mode
                         (mean over the other axes and the workloads)
  breakdown.png          stacked host time per mode: dispatch, compile, transfer, sync wait,
                         other (mean over points)
  roofline.png           GEMM points: arithmetic intensity (FLOP per HBM byte) against achieved
                         TFLOP/s while the device was busy, under each config's roof
"""
import argparse
import collections
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_results(d):
    latest = {}
    path = os.path.join(d, "results.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a torn line
                latest[r["id"]] = r
    for p in sorted(glob.glob(os.path.join(d, "points", "*", "result.json"))):
        try:
            with open(p) as f:
                r = json.load(f)
        except ValueError:
            continue
        if latest.get(r["id"], {}).get("status") != "ok":
            latest[r["id"]] = r
    return sorted(latest.values(), key=lambda r: r.get("index", 0))


def save(fig, name):
    fig.tight_layout()
    fig.savefig(name, dpi=100)
    plt.close(fig)
    return name


def label(metric):
    return metric.replace("_ns", " (ms)") if metric.endswith("_ns") else metric


def value(r, metric):
    v = r["figures"].get(metric)
    if v is None:
        return None
    return v / 1e6 if metric.endswith("_ns") else v


def plot_axis(rows, axis, metric, out):
    series = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        if axis not in r["axes"]:
            continue
        v = value(r, metric)
        if v is not None:
            series[r["mode"]][r["axes"][axis]].append(v)
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode, points in sorted(series.items()):
        xs = sorted(points)
        ax.plot(xs, [sum(points[x]) / len(points[x]) for x in xs], marker="o", label=mode)
    ax.set_xlabel(axis)
    ax.set_ylabel(label(metric))
    if metric.endswith("_ns"):
        ax.set_yscale("log")
    ax.set_title(f"{label(metric)} vs {axis}")
    ax.legend()
    return save(fig, os.path.join(out, f"{metric}_vs_{axis.replace('.', '_')}.png"))


def plot_breakdown(rows, out):
    states = ["host_dispatch_ns", "compile_ns", "transfer_ns", "sync_wait_ns", "host_other_ns"]
    by_mode = collections.defaultdict(list)
    for r in rows:
        by_mode[r["mode"]].append(r)
    modes = sorted(by_mode)
    fig, ax = plt.subplots(figsize=(6, 4))
    bottom = [0.0] * len(modes)
    for s in states:
        vals = [sum(r["figures"].get(s, 0) for r in by_mode[m]) / len(by_mode[m]) / 1e6 for m in modes]
        ax.bar(modes, vals, bottom=bottom, label=s.replace("_ns", ""))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("simulated host time per run (ms, mean)")
    ax.set_yscale("symlog")
    ax.set_title("Where the time goes, per mode")
    ax.legend(fontsize=8)
    return save(fig, os.path.join(out, "breakdown.png"))


def plot_roofline(rows, out):
    pts = []
    for r in rows:
        f = r["figures"]
        if not r["workload"].startswith("gemm"):
            continue
        hbm = f.get("hbm_read_bytes", 0) + f.get("hbm_write_bytes", 0)
        busy = f.get("device_busy_ns", 0)
        if hbm <= 0 or busy <= 0 or f.get("macs", 0) <= 0:
            continue
        flops = 2 * f["macs"]
        pts.append((flops / hbm, flops / (busy * 1e-9) / 1e12, f["peak_tflops"], f["hbm_gb_per_s"], r["mode"]))
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    lo = min(p[0] for p in pts) / 4
    hi = max(p[0] for p in pts) * 4
    for peak, bw in sorted({(p[2], p[3]) for p in pts}):
        xs = [lo * (hi / lo) ** (i / 50) for i in range(51)]
        ax.plot(xs, [min(peak, x * bw / 1e3) for x in xs], linestyle="--", linewidth=1,
                label=f"roof: {peak:.2f} TFLOP/s, {bw:g} GB/s")
    for mode in sorted({p[4] for p in pts}):
        sel = [p for p in pts if p[4] == mode]
        ax.scatter([p[0] for p in sel], [p[1] for p in sel], label=mode, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("achieved TFLOP/s (device busy time)")
    ax.set_title("GEMM roofline")
    ax.legend(fontsize=7)
    return save(fig, os.path.join(out, "roofline.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--out", required=True)
    ap.add_argument("--metric", default="total_ns", help="a key of each point's figures")
    ap.add_argument("--axis", action="append", help="config path(s) to plot against (default: all)")
    a = ap.parse_args()
    rows = [r for r in read_results(a.dir) if r.get("status") == "ok"]
    if not rows:
        print(f"plot_sweep.py: no finished points in {a.dir}", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    axes = a.axis or sorted({k for r in rows for k in r["axes"]})
    written = [plot_axis(rows, axis, a.metric, a.out) for axis in axes]
    written += [plot_breakdown(rows, a.out), plot_roofline(rows, a.out)]
    for w in written:
        if w:
            print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
