#!/usr/bin/python3
"""Fits trn1's DMA parameters to the NKI matmul tutorial's measured latencies.

Runs `wallsim validate -c configs/trn1.json` on a grid of per-engine DMA rates and per-chunk
costs (descriptor issue 0: Trn1 descriptors are built ahead of time, docs/CALIBRATION.md) and
prints, per point, each kernel's simulated/measured ratio, the RMS of their logarithms and the
tiled/hoisted ratio; the best point last. docs/CALIBRATION.md ("DMA") shows the table.

  /usr/bin/python3 tools/fit_dma.py [--wallsim build/bin/wallsim] [--rates 6.6,6.8,...]
      [--chunks 0,32,64,...]                         (about 20 s per point)
"""
import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile


def run(wallsim, rate, chunk, tmp):
    out = os.path.join(tmp, f"v_{rate}_{chunk}")
    subprocess.run([wallsim, "validate", "-c", "configs/trn1.json", "--out", out,
                    "--set", "timing.dma.descriptor_issue_ns=0",
                    "--set", f"timing.dma.chunk_overhead_bytes={chunk}",
                    "--set", f"timing.dma.bandwidth_gb_per_s={rate}"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lat = {}
    with open(os.path.join(out, "validation.csv")) as f:
        for row in csv.DictReader(f):
            name = row["name"]
            if row["section"] == "hardware" and name.endswith(" latency") and ":" not in name \
                    and "/" not in name:
                lat[row["name"][:-len(" latency")]] = (float(row["measured"]), float(row["reference"]))
    return lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wallsim", default="build/bin/wallsim")
    ap.add_argument("--rates", default="6.6,6.8,7.0,7.2,7.4")
    ap.add_argument("--chunks", default="0,32,64,128")
    a = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    best = None
    with tempfile.TemporaryDirectory() as tmp:
        print("| rate (GB/s per engine) | chunk cost (B) | tiled | hoisted | blocked | fully blocked "
              "| RMS log error | tiled / hoisted |")
        print("|---|---|---|---|---|---|---|---|")
        for chunk in [int(c) for c in a.chunks.split(",")]:
            for rate in [float(r) for r in a.rates.split(",")]:
                lat = run(a.wallsim, rate, chunk, tmp)
                if len(lat) != 4:
                    sys.exit(f"fit_dma: validate gave {len(lat)} kernel latencies, not 4")
                ratios = [s / m for s, m in lat.values()]
                rms = math.sqrt(sum(math.log(r) ** 2 for r in ratios) / len(ratios))
                names = list(lat)
                th = lat[names[0]][0] / lat[names[1]][0]
                print(f"| {rate} | {chunk} | " + " | ".join(f"{r:.3f}" for r in ratios) +
                      f" | {rms * 100:.2f} % | {th:.3f} |", flush=True)
                if best is None or rms < best[0]:
                    best = (rms, rate, chunk, ratios, th)
    rms, rate, chunk, ratios, th = best
    print(f"\nbest: rate {rate} GB/s per engine, chunk cost {chunk} B: RMS log error "
          f"{rms * 100:.2f} %, worst ratio {max(ratios, key=lambda r: abs(math.log(r))):.3f}, "
          f"tiled/hoisted {th:.3f} (hardware 1.206)")


if __name__ == "__main__":
    main()
