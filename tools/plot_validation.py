#!/usr/bin/python3
"""Plots a wallsim validation: tools/plot_validation.py DIR

Reads DIR/validation.csv (written by `wallsim validate`) and writes PNGs (matplotlib, Agg):

  dma_chunk.png      DMA bandwidth against chunk size: measured and reference, error per point
  dma_queues.png     aggregate DMA bandwidth against the number of queues
  gemm_scalesim.png  GEMM cycles against SCALE-Sim's weight-stationary count, error per point
  roofline.png       every kernel's span against its roofline bound (never below the diagonal)
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(d):
    with open(os.path.join(d, "validation.csv")) as f:
        return list(csv.DictReader(f))


def compare(rs, section, xs, xlabel, ylabel, path, logx=False, logy=False):
    pts = [r for r in rs if r["section"] == section]
    if not pts:
        return
    meas = [float(r["measured"]) for r in pts]
    ref = [float(r["reference"]) for r in pts]
    err = [float(r["error_pct"]) for r in pts]
    x = xs(pts)
    fig, (a, b) = plt.subplots(2, 1, figsize=(7, 6), sharex=True,
                               gridspec_kw={"height_ratios": [3, 1]})
    a.plot(x, ref, "o-", label="reference (%s)" % pts[0]["reference_kind"])
    a.plot(x, meas, "x--", label="wallsim")
    a.set_ylabel(ylabel)
    a.legend()
    b.plot(x, err, "o-")
    b.axhline(0, color="k", linewidth=0.5)
    b.set_ylabel("error (%)")
    b.set_xlabel(xlabel)
    if logx:
        a.set_xscale("log", base=2)
        b.set_xscale("log", base=2)
    if logy:
        a.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main():
    d = sys.argv[1]
    rs = rows(d)
    compare(rs, "dma_chunk", lambda p: [int(r["name"].split()[0]) for r in p],
            "bytes per partition (chunk)", "GB/s", os.path.join(d, "dma_chunk.png"), logx=True)
    compare(rs, "dma_queues", lambda p: [int(r["name"].split()[0]) for r in p],
            "DMA queues", "GB/s (aggregate)", os.path.join(d, "dma_queues.png"))
    compare(rs, "gemm_scalesim", lambda p: list(range(len(p))),
            "shape (index, see validation.md)", "cycles", os.path.join(d, "gemm_scalesim.png"),
            logy=True)
    roof = [r for r in rs if r["section"] == "roofline"]
    if roof:
        fig, ax = plt.subplots(figsize=(6, 6))
        for kind in sorted({r["reference_kind"] for r in roof}):
            pts = [r for r in roof if r["reference_kind"] == kind]
            ax.scatter([float(r["reference"]) for r in pts], [float(r["measured"]) for r in pts],
                       label=kind)
        lo = min(float(r["reference"]) for r in roof if float(r["reference"]) > 0)
        hi = max(float(r["measured"]) for r in roof)
        ax.plot([lo, hi], [lo, hi], "k:", label="span = bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("roofline bound (ns)")
        ax.set_ylabel("simulated span (ns)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(d, "roofline.png"))
        plt.close(fig)


if __name__ == "__main__":
    main()
