#!/usr/bin/python3
"""Plots a wallsim sweep: tools/plot_sweep.py DIR --out PLOTDIR [--metric total_ns] [--axis PATH]

Reads DIR/results.jsonl (and DIR/points/*/result.json from --index runs), the latest line per
point, ok points only, and writes PNGs (matplotlib, Agg backend). Nothing is averaged across
workloads or other axes: each workload has its own panel, and each line or bar is one setting of
the other swept paths.

  metric_vs_<axis>.png   the metric against each swept config path: one panel per workload, one
                         line per mode and setting of the other axes
  breakdown.png          simulated time per run on a linear axis, stacked: start-up, then the
                         steps' host states (dispatch, compile, transfer, sync wait, other); one
                         panel per workload, one bar per mode and setting of the other axes
  roofline.png           every point with MACs: the matmul ops' arithmetic intensity (FLOP per
                         DMA byte, host copies excluded) against their achieved TFLOP/s (the op
                         table's time_ns), coloured by config under that config's roof
  heatmap_<a>_x_<b>.png  two-axis sweeps: the metric over each pair of swept paths, one panel per
                         workload, mode and setting of the remaining axes
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


def by_workload(rows):
    groups = collections.defaultdict(list)
    for r in rows:
        groups[r["workload"]].append(r)
    return sorted(groups.items())


def others(r, skip):
    """The point's other swept paths as a label: 'path=value, ...' ('' when there are none)."""
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(r["axes"].items()) if k not in skip)


def panels(n, width=5.5, height=3.8):
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat


def plot_axis(rows, axis, metric, out):
    groups = [(w, [r for r in rs if axis in r["axes"] and value(r, metric) is not None])
              for w, rs in by_workload(rows)]
    groups = [(w, rs) for w, rs in groups if rs]
    if not groups:
        return None
    follow = {c for c in {k for r in rows for k in r["axes"]} if zipped(rows, axis, c)} | {axis}
    fig, axs = panels(len(groups))
    for ax, (workload, rs) in zip(axs, groups):
        lines = collections.defaultdict(dict)
        for r in rs:
            rest = others(r, follow)
            lines[r["mode"] + (f" ({rest})" if rest else "")][r["axes"][axis]] = value(r, metric)
        for name, points in sorted(lines.items()):
            xs = sorted(points)
            ax.plot(xs, [points[x] for x in xs], marker="o", label=name)
        ax.set_xlabel(axis)
        ax.set_ylabel(label(metric))
        if metric.endswith("_ns") and min(v for p in lines.values() for v in p.values()) > 0:
            ax.set_yscale("log")
        ax.set_title(workload, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"{label(metric)} vs {axis}")
    return save(fig, os.path.join(out, f"{metric}_vs_{axis.replace('.', '_')}.png"))


BREAKDOWN = [("startup_ns", "start-up"), ("host_dispatch_ns", "dispatch"), ("compile_ns", "compile"),
             ("transfer_ns", "transfer"), ("sync_wait_ns", "sync wait"), ("host_other_ns", "other")]


def plot_breakdown(rows, out):
    groups = by_workload(rows)
    fig, axs = panels(len(groups), width=6.5, height=4.2)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (workload, rs) in zip(axs, groups):
        rs = sorted(rs, key=lambda r: (r["mode"], others(r, set())))
        names = [r["mode"] + ("\n" + others(r, set()) if r["axes"] else "") for r in rs]
        xs = list(range(len(rs)))
        bottom = [0.0] * len(rs)
        for i, (key, name) in enumerate(BREAKDOWN):
            vals = [r["figures"].get(key, 0) / 1e6 for r in rs]
            ax.bar(xs, vals, bottom=bottom, label=name, color=colours[i % len(colours)])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(xs)
        ax.set_xticklabels(names, fontsize=6, rotation=90 if len(rs) > 6 else 0)
        ax.set_ylabel("simulated time per run (ms)")
        ax.set_title(workload, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("Where the time goes: start-up and the steps' host states")
    return save(fig, os.path.join(out, "breakdown.png"))


def config_label(f):
    return f"{f['peak_tflops']:.3g} TFLOP/s, {f['hbm_gb_per_s']:g} GB/s"


def plot_roofline(rows, out):
    pts = []
    for r in rows:
        f = r["figures"]
        macs, nbytes, ns = f.get("macs", 0), f.get("compute_dma_bytes", 0), f.get("compute_time_ns", 0)
        if macs <= 0 or nbytes <= 0 or ns <= 0:
            continue
        pts.append((2 * macs / nbytes, 2 * macs / (ns * 1e-9) / 1e12, f, r["mode"]))
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    lo = min(p[0] for p in pts) / 4
    hi = max(p[0] for p in pts) * 4
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = {m: k for m, k in zip(sorted({p[3] for p in pts}), "osD^v<>")}
    configs = sorted({config_label(p[2]) for p in pts})
    for i, cfg in enumerate(configs):
        f = next(p[2] for p in pts if config_label(p[2]) == cfg)
        colour = colours[i % len(colours)]
        xs = [lo * (hi / lo) ** (k / 50) for k in range(51)]
        ax.plot(xs, [min(f["peak_tflops"], x * f["hbm_gb_per_s"] / 1e3) for x in xs],
                linestyle="--", linewidth=1, color=colour, label=f"roof {cfg}")
        for mode, marker in markers.items():
            sel = [p for p in pts if config_label(p[2]) == cfg and p[3] == mode]
            if sel:
                ax.scatter([p[0] for p in sel], [p[1] for p in sel], color=colour, marker=marker,
                           zorder=3, label=f"{mode}, {cfg}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity of the matmul ops (FLOP per DMA byte, no host copies)")
    ax.set_ylabel("achieved TFLOP/s (op time)")
    ax.set_title("Roofline, per config")
    ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    return save(fig, os.path.join(out, "roofline.png"))


def zipped(rows, a, b):
    """Whether b follows from a (swept together in a zip): one value of b per value of a."""
    pairs = {(r["axes"][a], r["axes"][b]) for r in rows if a in r["axes"] and b in r["axes"]}
    return bool(pairs) and len(pairs) == len({x for x, _ in pairs})


def plot_heatmaps(rows, metric, axes, out):
    written = []
    for i, a in enumerate(axes):
        for b in axes[i + 1:]:
            if zipped(rows, a, b):
                continue  # a line, not a grid
            follow = {a, b} | {c for c in axes if zipped(rows, a, c) or zipped(rows, b, c)}
            groups = collections.defaultdict(dict)
            for r in rows:
                v = value(r, metric)
                if v is None or a not in r["axes"] or b not in r["axes"]:
                    continue
                rest = others(r, follow)
                key = f"{r['workload']}\n{r['mode']}" + (f", {rest}" if rest else "")
                groups[key][(r["axes"][a], r["axes"][b])] = v
            groups = {k: g for k, g in groups.items()
                      if len({x for x, _ in g}) > 1 and len({y for _, y in g}) > 1}
            if not groups:
                continue
            fig, axs = panels(len(groups), width=5, height=4)
            for ax, (key, g) in zip(axs, sorted(groups.items())):
                xs, ys = sorted({x for x, _ in g}), sorted({y for _, y in g})
                grid = [[g.get((x, y), float("nan")) for x in xs] for y in ys]
                im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
                ax.set_xticks(range(len(xs)))
                ax.set_xticklabels([str(x) for x in xs], fontsize=7)
                ax.set_yticks(range(len(ys)))
                ax.set_yticklabels([str(y) for y in ys], fontsize=7)
                for yi, row in enumerate(grid):
                    for xi, v in enumerate(row):
                        if v == v:
                            ax.text(xi, yi, f"{v:.3g}", ha="center", va="center", fontsize=6,
                                    color="white")
                ax.set_xlabel(a, fontsize=8)
                ax.set_ylabel(b, fontsize=8)
                ax.set_title(key, fontsize=8)
                fig.colorbar(im, ax=ax, label=label(metric))
            name = f"heatmap_{a.replace('.', '_')}_x_{b.replace('.', '_')}.png"
            written.append(save(fig, os.path.join(out, name)))
    return written


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
    written += plot_heatmaps(rows, a.metric, axes, a.out)
    for w in written:
        if w:
            print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
