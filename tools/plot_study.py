#!/usr/bin/python3
"""Draws a study's plots: tools/plot_study.py STUDY_DIR (run by `wallsim study NAME` itself).

Reads STUDY_DIR/study.json (the runs, their labels and key figures) and each run's
runs/<i>/stats.json, and writes PNGs into STUDY_DIR (matplotlib, Agg backend):

  <study>_time.png       every study: each run's total simulated time, split into start-up,
                         compile and the rest
  decode_steps.png       decode: each step's wall time (the prefill, then one per token)
  serving_latency.png    serving: time to first token and per-token latency, p50 and p99
  mask_seq.png           mask: bytes sent host to device and forward time against L
  granularity.png        granularity: first-step and warm-step time and HBM traffic against the
                         group size
  granularity_cuts.png   granularity: the cut points each run made on its last step's op stream
                         (from the plan spans of its trace: a plan `fusedN_...` holds N ops)
  fallback.png           fallback: first-step and warm-step time per policy and failure
  scaleout.png           scaleout: the step's time against the instance count, one line per
                         series (mode and EFA, or a variant), and its exposed communication share
"""
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(d):
    with open(os.path.join(d, "study.json")) as f:
        study = json.load(f)
    for r in study["runs"]:
        path = os.path.join(d, r["run"], "stats.json")
        r["stats"] = None
        if r["status"] == "ok" and os.path.exists(path):
            with open(path) as f:
                r["stats"] = json.load(f)
    return study


def save(fig, d, name):
    fig.tight_layout()
    path = os.path.join(d, name)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(path)


def ms(v):
    return v / 1e6


def time_bars(study, d):
    runs = [r for r in study["runs"] if r["status"] == "ok"]
    if not runs:
        return
    labels = [r["label"] for r in runs]
    startup = [ms(r["figures"]["startup_ns"]) for r in runs]
    compile_ = [ms(r["figures"].get("compile_ns", 0)) for r in runs]
    rest = [ms(r["figures"]["total_ns"]) - s - c for r, s, c in zip(runs, startup, compile_)]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(runs)), 4))
    ax.bar(labels, startup, label="start-up")
    ax.bar(labels, compile_, bottom=startup, label="compile (in steps)")
    ax.bar(labels, rest, bottom=[a + b for a, b in zip(startup, compile_)], label="other")
    ax.set_yscale("symlog")
    ax.set_ylabel("simulated time (ms)")
    ax.set_title(study["title"])
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    ax.legend(fontsize=8)
    save(fig, d, f"{study['study']}_time.png")


def plot_decode(study, d):
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in study["runs"]:
        if not r["stats"]:
            continue
        ax.plot([ms(s["wall_ns"]) for s in r["stats"]["steps"]], label=r["label"], linewidth=1)
    ax.set_yscale("log")
    ax.set_xlabel("step (0 = prefill, then one per token)")
    ax.set_ylabel("step wall time (ms, simulated)")
    ax.set_title("Per-token latency")
    ax.legend(fontsize=8)
    save(fig, d, "decode_steps.png")


def plot_serving(study, d):
    runs = [r for r in study["runs"] if r["stats"] and "serving" in r["stats"]]
    if not runs:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, what in zip(axes, ["ttft", "per_token"]):
        x = range(len(runs))
        p50 = [ms(r["stats"]["serving"]["latency"][f"{what}_p50_ns"]) for r in runs]
        p99 = [ms(r["stats"]["serving"]["latency"][f"{what}_p99_ns"]) for r in runs]
        ax.bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
        ax.bar([i + 0.2 for i in x], p99, width=0.4, label="p99")
        ax.set_xticks(list(x))
        ax.set_xticklabels([r["label"] for r in runs], rotation=30, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms (simulated)")
        ax.set_title("time to first token" if what == "ttft" else "per-token latency")
        ax.legend(fontsize=8)
    save(fig, d, "serving_latency.png")


def param(workload, key):
    m = re.search(rf"[:,]{key}=([^,]+)", workload)
    return m.group(1) if m else None


def plot_mask(study, d):
    series = {}
    for r in study["runs"]:
        if not r["stats"]:
            continue
        how = param(r["workload"], "mask") or "host"
        L = int(param(r["workload"], "seq") or 1024)
        f = r["figures"]
        series.setdefault(how, []).append((L, f.get("host_link_bytes", 0) / f["steps"] / 2**20,
                                           ms(f["warm_ns"])))
    if not series:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for how, pts in sorted(series.items()):
        pts.sort()
        axes[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"mask on {how}")
        axes[1].plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=f"mask on {how}")
    for ax, t, y in [(axes[0], "host-to-device bytes per forward", "MiB"),
                     (axes[1], "forward (warm step) time", "ms (simulated)")]:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("packed tokens L")
        ax.set_ylabel(y)
        ax.set_title(t)
        ax.legend(fontsize=8)
    save(fig, d, "mask_seq.png")


def step_groups(d, run):
    """The op counts of the fused groups the run's last step launched, in order (from its trace's
    plan spans; copies left out), or None without a trace."""
    path = os.path.join(d, run["run"], "trace.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        t = json.load(f)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    steps = [e for e in ev if e.get("pid") == 0 and e.get("tid") == 1 and e.get("ph") == "X"
             and e.get("name", "").startswith("step")]
    if not steps:
        return None
    last = steps[-1]
    names = [e["name"] for e in ev if e.get("ph") == "X" and e.get("tid") == 1000
             and last["ts"] <= e["ts"] <= last["ts"] + last["dur"]]
    out = []
    for n in names:
        if n.startswith("copy_"):
            continue
        m = re.match(r"fused(\d+)_", n)
        out.append(int(m.group(1)) if m else 1)
    return out


def granularity_cuts(study, d):
    rows = []
    for r in study["runs"]:
        if not r["stats"] or r["mode"] == "aot":
            continue
        g = step_groups(d, r)
        if g:
            rows.append((r["label"], g))
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.2))
    for y, (label, g) in enumerate(rows):
        total = sum(g)
        ax.plot([0, total], [y, y], color="lightgray", linewidth=6, solid_capstyle="butt")
        at = 0
        for n in g[:-1]:
            at += n
            ax.plot([at, at], [y - 0.35, y + 0.35], color="C3", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("op index in the step (the op stream); a red tick is a cut between groups")
    ax.set_title("Cut points of each run's last step")
    save(fig, d, "granularity_cuts.png")


def plot_granularity(study, d):
    granularity_cuts(study, d)
    pts, aot = [], None
    for r in study["runs"]:
        if not r["stats"]:
            continue
        f = r["figures"]
        if r["mode"] == "aot":
            aot = f
            continue
        m = re.search(r"(?:group|size) (\d+)|(whole)", r["label"])
        if not m or "from the start" in r["label"]:
            continue
        if r.get("model") and r["model"] != study["runs"][0].get("model"):
            continue
        g = m.group(1) or m.group(2)
        pts.append((g, ms(f["cold_ns"]), ms(f["warm_ns"]), f["hbm_bytes_per_step"] / 2**20))
    if not pts:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    x = range(len(pts))
    axes[0].plot(x, [p[1] for p in pts], marker="o", label="first step (compiles)")
    axes[0].plot(x, [p[2] for p in pts], marker="o", label="warm step")
    if aot:
        axes[0].axhline(ms(aot["warm_ns"]), linestyle="--", color="gray", label="AOT warm step")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("ms (simulated)")
    axes[1].bar(x, [p[3] for p in pts])
    if aot:
        axes[1].axhline(aot["hbm_bytes_per_step"] / 2**20, linestyle="--", color="gray", label="AOT")
    axes[1].set_ylabel("HBM traffic per step (MiB)")
    for ax in axes:
        ax.set_xticks(list(x))
        ax.set_xticklabels([p[0] for p in pts])
        ax.set_xlabel("ops per fused group")
        ax.legend(fontsize=8)
    save(fig, d, "granularity.png")


def plot_fallback(study, d):
    runs = [r for r in study["runs"]]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(runs)), 4))
    x = range(len(runs))
    cold = [ms(r["figures"]["cold_ns"]) if r["status"] == "ok" else 0 for r in runs]
    warm = [ms(r["figures"]["warm_ns"]) if r["status"] == "ok" else 0 for r in runs]
    ax.bar([i - 0.2 for i in x], cold, width=0.4, label="first step")
    ax.bar([i + 0.2 for i in x], warm, width=0.4, label="warm step")
    for i, r in enumerate(runs):
        if r["status"] != "ok":
            ax.text(i, 1, "stops", ha="center", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels([r["label"] for r in runs], rotation=30, fontsize=8)
    ax.set_yscale("symlog")
    ax.set_ylabel("ms (simulated)")
    ax.set_title("Compile-failure fallback policies")
    ax.legend(fontsize=8)
    save(fig, d, "fallback.png")


def two_panels(series, d, name, xlabel, ylabels, titles, log_y=False):
    """Two panels against a log2 x axis (instances, or the tensor-parallel degree), one line per
    series: series = {name: [(x, left y, right y), ...]}; dotted lines for variants "(...)"."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, pts in series.items():
        pts.sort()
        style = "-" if "(" not in label else ":"
        for i in (0, 1):
            axes[i].plot([p[0] for p in pts], [p[i + 1] for p in pts], style, marker="o",
                         label=label)
    if log_y:
        axes[0].set_yscale("log")
    ticks = sorted({p[0] for pts in series.values() for p in pts})
    for ax, ylabel, title in zip(axes, ylabels, titles):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    axes[0].legend(fontsize=6)
    save(fig, d, name)


def plot_scaleout(study, d):
    series = {}
    for r in study["runs"]:
        f = r["figures"]
        if r["status"] != "ok" or "step_wall_ns" not in f:
            continue
        for name in r["series"]:
            series.setdefault(name, []).append(
                (f["instances"], ms(f["step_wall_ns"]), f["step_comm_exposed_ns"] / f["step_wall_ns"]))
    if series:
        two_panels(series, d, "scaleout.png", "trn1 instances (32 ranks each)",
                   ["step (ms, simulated; slowest rank)", "rank 0's exposed communication / step"],
                   ["Data-parallel step against instances", "Exposed communication"], log_y=True)


def plot_tensor_parallel(study, d):
    """Token step and its exposed-communication share against the tensor-parallel degree."""
    series = {}
    for r in study["runs"]:
        f = r["figures"]
        if r["status"] != "ok" or f.get("token_ns") is None:
            continue
        for name in r["series"]:
            series.setdefault(name, []).append(
                (f.get("world") or 1, ms(f["token_ns"]), f["token_comm_fraction"]))
    if series:
        two_panels(series, d, "tensor-parallel.png",
                   "tensor-parallel degree (cores; 8 a trn2 chip)",
                   ["token step (ms, simulated; slowest rank)",
                    "rank 0's exposed communication / token step"],
                   ["Decode token step against TP", "Exposed communication"])


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    study = load(d)
    time_bars(study, d)
    # A study's own plots, if it has any: plot_<name> (the studies are listed in cli/src/studies.def).
    extra = globals().get("plot_" + study["study"].replace("-", "_"))
    if extra:
        extra(study, d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
