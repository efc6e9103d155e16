#!/usr/bin/python3
"""Runs `wallsim collectives` against AWS's published nccom-test runs and plots them.

  tools/collectives_validation.py WALLSIM OUTDIR

Writes OUTDIR/<case>.csv (the simulator's tables), OUTDIR/collectives.md (Markdown tables of
simulated against published, for docs/COLLECTIVES.md, its validation section) and
OUTDIR/collectives_busbw.png (busbw against size; matplotlib, Agg). The published figures are
the nccom-test examples of aws-neuron-sdk tools/neuron-sys-tools/nccom-test.rst (trn1; their
busbw is recomputed from size and time in GB/s = 1e9 bytes/s as wallsim prints: the page prints
GiB/s rounded to 0.01).
"""
import csv
import os
import subprocess
import sys

# (size B, time us, busbw GiB/s) as published.
AWS_TRN1_2X32_ALLR = [
    (8, 520, 0.00), (16, 520, 0.00), (32, 523, 0.00), (64, 525, 0.00), (128, 553, 0.00),
    (256, 709, 0.00), (512, 782, 0.00), (1024, 840, 0.00), (2048, 881, 0.00), (4096, 916, 0.01),
    (8192, 1013, 0.01), (16384, 1031, 0.03), (32768, 1174, 0.05), (65536, 1315, 0.09),
    (131072, 1315, 0.18), (262144, 1311, 0.37), (524288, 1312, 0.73), (1048576, 1328, 1.45),
    (2097152, 1329, 2.89), (4194304, 1378, 5.58), (8388608, 1419, 10.84),
    (16777216, 2138, 14.39), (33554432, 2711, 22.69), (67108864, 3963, 31.05),
    (134217728, 6279, 39.19), (268435456, 11954, 41.17), (536870912, 21803, 45.15),
    (1073741824, 41806, 47.09)]
AWS_TRN1_R2_ALLR = [
    (1024, 58, 0.02), (4096, 58, 0.07), (16384, 58, 0.26), (65536, 58, 1.05), (262144, 60, 4.07),
    (1048576, 68, 14.36), (4194304, 107, 36.51), (16777216, 332, 47.06), (67108864, 1214, 51.48),
    (268435456, 4750, 52.63), (1073741824, 18930, 52.83)]
AWS_TRN1_R32_ALLG = [(1024, 151, 0.01), (8192, 149, 0.05), (65536, 150, 0.39),
                     (524288, 179, 2.64)]

CASES = [
    # name, config, extra args, (published, busbw factor) or None, title
    ("trn1_2inst_allr", "configs/trn1.json",
     "--set topology.instances=2 --op all_reduce --ranks cores -b 8 -e 1G -f 2",
     (AWS_TRN1_2X32_ALLR, 2 * 63 / 64), "trn1.32xlarge x 2, all_reduce, 64 ranks (every core)"),
    ("trn1_r2_allr", "configs/trn1.json", "--op all_reduce --ranks 0.0,0.1 -b 1K -e 1G -f 4",
     (AWS_TRN1_R2_ALLR, 1.0), "trn1.32xlarge, all_reduce, 2 ranks (the two cores of chip 0)"),
    ("trn1_r32_allg", "configs/trn1.json", "--op all_gather --ranks cores -b 1K -e 1M -f 8",
     (AWS_TRN1_R32_ALLG, 31 / 32), "trn1.32xlarge, all_gather, 32 ranks (every core)"),
    ("trn2_allr_cores", "configs/trn2.json",
     "--op all_reduce --ranks cores --set collectives.hierarchy=dimensions -b 64 -e 1G -f 16",
     None, "trn2.48xlarge, all_reduce, 128 ranks (every core; one level per dimension)"),
    ("trn2_allr_chips", "configs/trn2.json", "--op all_reduce --ranks chips -b 8 -e 1G -f 8",
     None, "trn2.48xlarge, all_reduce, 16 ranks (one per chip)"),
]


def run(wallsim, out, name, config, args):
    path = os.path.join(out, name + ".csv")
    cmd = [wallsim, "collectives", "-c", config, "--csv", path] + args.split()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return list(csv.DictReader(f))


def published_busbw(published):
    """(size, busbw GB/s) from the published size and time: the printed busbw is rounded to
    0.01 GiB/s, zero at small sizes."""
    points, factor = published
    return [(size, size / (us * 1e-6) / 1e9 * factor) for size, us, _ in points]


def simulated_busbw(rows):
    """busbw in GB/s from size and time (the CSV's is rounded to 1e-4): the bus factor is the
    largest size's busbw / algbw."""
    last = rows[-1]
    factor = float(last["busbw_gb_per_s"]) / float(last["algbw_gb_per_s"])
    return [int(r["size_bytes"]) / (float(r["time_us"]) * 1e-6) / 1e9 * factor for r in rows]


def table(rows, published, title, args):
    pub = {}
    if published:
        bw = dict(published_busbw(published))
        pub = {p[0]: (p[0], p[1], bw[p[0]]) for p in published[0]}
    out = [f"**{title}** (`wallsim collectives {args}`)", ""]
    if pub:
        out.append("| size (B) | algorithm | time (us) | AWS time (us) | busbw (GB/s) | "
                   "AWS busbw (GB/s) | bound by |")
        out.append("|---:|---|---:|---:|---:|---:|---|")
    else:
        out.append("| size (B) | algorithm | time (us) | busbw (GB/s) | bound by |")
        out.append("|---:|---|---:|---:|---|")
    for r in rows:
        size = int(r["size_bytes"])
        if pub and size not in pub:
            continue
        cells = [str(size), r["algorithm"], f"{float(r['time_us']):.1f}"]
        if pub:
            p = pub[size]
            cells += [str(p[1]), f"{float(r['busbw_gb_per_s']):.2f}", f"{p[2]:.3g}"]
        else:
            cells += [f"{float(r['busbw_gb_per_s']):.2f}"]
        cells.append(r["bound_by"])
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main():
    wallsim, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    md = []
    results = {}
    for name, config, args, published, title in CASES:
        rows = run(wallsim, out, name, config, args)
        results[name] = (rows, published, title)
        md.append(table(rows, published, title, f"-c {config} {args}"))
    with open(os.path.join(out, "collectives.md"), "w") as f:
        f.write("\n".join(md))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, (rows, published, title) in results.items():
        line, = ax.plot([int(r["size_bytes"]) for r in rows], simulated_busbw(rows), "-o",
                        markersize=3, label="wallsim: " + title)
        if published:
            pts = published_busbw(published)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "--x",
                    color=line.get_color(), markersize=4, label="AWS nccom-test: " + title)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s, 1e9 bytes/s)")
    ax.set_title("Collectives: wallsim against AWS nccom-test (trn1) and trn2's shape")
    ax.legend(fontsize=6)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "collectives_busbw.png"), dpi=120)


if __name__ == "__main__":
    main()
