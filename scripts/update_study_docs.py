#!/usr/bin/python3
"""Regenerates the measured part of docs/studies/NAME.md from fresh study runs.

    scripts/update_study_docs.py [--wallsim build/bin/wallsim] [--large] [NAME ...]
        (default: wall decode mask granularity fallback serving open-questions validate compiler)

Each doc holds generated text between the markers <!-- study NAME: begin --> and
<!-- study NAME: end -->; everything else in it names no figure. For a study, this runs
`wallsim study NAME` (default config and spec) and puts the table and findings of its NAME.md
between them, so the sentences stay those the command computes from its own table after any
model change; the README's plots of the study (docs/img/study_NAME*.png) are copied from the same
run. `open-questions` answers the seed's questions and case claims from the decode, mask,
serving, scaleout, tensor-parallel, granularity and fallback studies, the last two also under each compile-cost variant
(neuron and xla as fitted, every term x0.5 and x2): scripts/open_questions.py.
granularity's block also holds a captured model with repeated layers: torchvision's ViT-B/16
(12 identical encoder layers, random weights), captured with `wallsim capture` into
out/captures/vit_b_16.json and passed as `--model`; --no-capture leaves it out (GPT-2 only).
--large also runs configs/studies/serving-large.json (static serving at batches 8 and 32) into
serving.md's `serving-large` block, and open-questions then counts its static/continuous pairs;
with scaleout named, --large also runs configs/studies/scaleout-large.json (18 blocks) into
scaleout.md's `scaleout-large` block.
`validate` runs `wallsim validate` on configs/{trn2,trn1,tiny}.json and puts each validation.md
(headings one level down) between docs/VALIDATION.md's <!-- validate CONFIG: begin/end --> markers.
`compiler` compiles and runs examples/graphs/transformer_block.json (seq 512 and 1024, whole
graph and one op per plan) and examples/graphs/mlp.json on trn2 and writes docs/COMPILER.md's
<!-- measure transformer-block --> table and <!-- measure mlp-compile --> sentence.
Each study's real run time is printed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
import open_questions  # noqa: E402

ROOT = os.path.dirname(ROOT)
STUDIES = ["wall", "decode", "mask", "granularity", "fallback", "serving", "scaleout",
           "tensor-parallel"]


def block(md):
    """The table and findings of a study's NAME.md: from the header row to the end (wall.md:
    from its column definitions, which precede its per-workload tables)."""
    at = md.index("\nConfig `") if "\n| run |" not in md else md.index("\n| run |")
    return md[at + 1:].rstrip() + "\n"


def replace_block(doc, name, new, kind="study"):
    with open(doc) as f:
        text = f.read()
    begin, end = f"<!-- {kind} {name}: begin -->\n", f"<!-- {kind} {name}: end -->"
    if begin not in text or end not in text:
        print(f"{doc}: no '{begin.strip()}' ... '{end}' markers", file=sys.stderr)
        sys.exit(2)
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(doc, "w") as f:
        f.write(head + begin + new + end + tail)
    print(f"{doc}: {name} regenerated")


def compiler_measurements(wallsim, tmp, rev):
    """docs/COMPILER.md's measured blocks: the transformer block's plans on the chip, and the
    MLP example's modelled compile latency under both profiles."""
    cfg = os.path.join("configs", "trn2.json")

    def compile_(graph, out, group):
        r = subprocess.run([wallsim, "compile", graph, "-c", cfg, "--group", group, "--out", out],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout
        lat = dict(re.findall(r"compile latency \((\w+) profile\): ([0-9.]+) ms", r))
        plans, instructions = re.search(r"(\d+) plan\(s\), (\d+) instructions", r).groups()
        return int(plans), int(instructions), {k: float(v) for k, v in lat.items()}

    rows = ["| grouping | plans | instructions | HBM read + written | device time | "
            "tensor engine busy | busiest resource (its share of device time) |",
            "|---|---|---|---|---|---|---|"]
    with open(os.path.join(ROOT, "examples", "graphs", "transformer_block.json")) as f:
        graph512 = f.read()
    for seq in (512, 1024):
        graph = os.path.join(tmp, f"tb{seq}.json")
        with open(graph, "w") as f:
            f.write(graph512.replace("512", str(seq)))
        for group, label in (("all", "whole graph"), ("per-op", "one op per plan")):
            plan = os.path.join(tmp, f"tb{seq}-{group}.plan.json")
            plans, instructions, _ = compile_(graph, plan, group)
            out = os.path.join(tmp, f"tb{seq}-{group}")
            subprocess.run([wallsim, "exec", plan, "-c", cfg, "--trace-level", "none", "--out",
                            out], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "stats.json")) as f:
                d = json.load(f)["device"]
            rows.append(
                f"| seq {seq}, {label} | {plans} | {instructions:,} | "
                f"{d['hbm']['read_bytes'] / 1e6:.1f} + {d['hbm']['write_bytes'] / 1e6:.1f} MB | "
                f"{d['time_ns'] / 1e6:.3f} ms | "
                f"{100 * d['engines']['tensor']['utilization']:.0f} % | "
                f"{d['bound']['resource']} ({100 * d['bound']['fraction']:.0f} %) |")
    table = "\n".join(rows) + f"\n\n(At {rev}.)\n"
    mlp = os.path.join("examples", "graphs", "mlp.json")
    _, whole_n, whole = compile_(mlp, os.path.join(tmp, "mlp-all.json"), "all")
    plans, _, per_op = compile_(mlp, os.path.join(tmp, "mlp-per-op.json"), "per-op")
    sentence = (f"For the MLP example ({whole_n:,} instructions whole) this is "
                f"{whole['neuron'] / 1e3:.2f} s (neuron) against {whole['xla']:.1f} ms (xla); "
                f"compiled one op per plan, {per_op['neuron'] / 1e3:.1f} s (neuron: {plans} "
                f"compiler runs) against {per_op['xla']:.1f} ms (xla), at {rev}.\n")
    doc = os.path.join(ROOT, "docs", "COMPILER.md")
    replace_block(doc, "transformer-block", table, kind="measure")
    replace_block(doc, "mlp-compile", sentence, kind="measure")


def capture_vit(wallsim):
    """Captures examples/torch/vision.py's ViT-B/16 (one eval forward); its path from ROOT."""
    rel = os.path.join("out", "captures", "vit_b_16.json")
    os.makedirs(os.path.join(ROOT, "out", "captures"), exist_ok=True)
    t = time.time()
    # For real, not --meta: on meta tensors PyTorch skips MultiheadAttention's fused fast path
    # and records another op stream (docs/MODELS.md, *Capture*).
    subprocess.run([wallsim, "capture", os.path.join("examples", "torch", "vision.py"), "--out",
                    rel, "--", "--model", "vit_b_16"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    print(f"capture vit_b_16: {time.time() - t:.0f} s real", flush=True)
    return rel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wallsim", default=os.path.join(ROOT, "build", "bin", "wallsim"))
    ap.add_argument("--large", action="store_true", help="also run serving-large.json")
    ap.add_argument("--no-capture", action="store_true",
                    help="granularity without the captured ViT-B/16 (no PyTorch needed)")
    ap.add_argument("names", nargs="*",
                    default=STUDIES + ["open-questions", "validate", "compiler"])
    a = ap.parse_args()
    # The source the runs come from, written under each block: the commit, "+dirty" for a work tree
    # with uncommitted changes.
    rev = "commit " + subprocess.run(["git", "describe", "--always", "--dirty=+dirty"], cwd=ROOT,
                                     capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        dirs, took = {}, {}

        def run(name, out_key, extra=()):
            if out_key in dirs:
                return dirs[out_key]
            out = os.path.join(tmp, out_key.replace("@", "_").replace("*", "x"))
            t = time.time()
            subprocess.run([a.wallsim, "study", name, "--out", out, *extra], cwd=ROOT,
                           check=True, stdout=subprocess.DEVNULL)
            took[out_key] = time.time() - t
            print(f"study {out_key}: {took[out_key]:.0f} s real", flush=True)
            dirs[out_key] = out
            return out

        for name in a.names:
            if name in ("open-questions", "validate", "compiler"):
                continue
            if name not in STUDIES:
                print(f"unknown study '{name}'", file=sys.stderr)
                return 2
            extra = []
            if name == "granularity" and not a.no_capture:
                extra = ["--model", "ViT-B/16 (captured)=program:file=" + capture_vit(a.wallsim)]
            out = run(name, name, extra)
            # The open-questions answers read GPT-2's rows unprefixed: a one-model run only.
            if name == "fallback" or (name == "granularity" and not extra):
                dirs[open_questions.key(name, "neuron", 1.0)] = out
            doc = os.path.join(ROOT, "docs", "studies", name + ".md")
            with open(os.path.join(out, name + ".md")) as f:
                replace_block(doc, name, block(f.read()) + f"\n(`wallsim study {name}` took "
                              f"{took[name]:.0f} s of real time for this block, at {rev}.)\n")
            # The README's figures of this study: docs/img/study_<plot>.png is the run's <plot>.png.
            img = os.path.join(ROOT, "docs", "img")
            for png in sorted(os.listdir(img)):
                src = os.path.join(out, png[len("study_"):])
                if png.startswith("study_" + name) and png.endswith(".png") and os.path.exists(src):
                    shutil.copyfile(src, os.path.join(img, png))
        if a.large and "scaleout" in a.names:
            out = run("scaleout", "scaleout-large",
                      ["--spec", os.path.join(ROOT, "configs", "studies", "scaleout-large.json")])
            with open(os.path.join(out, "scaleout.md")) as f:
                replace_block(os.path.join(ROOT, "docs", "studies", "scaleout.md"),
                              "scaleout-large", block(f.read()) +
                              f"\n({took['scaleout-large']:.0f} s of real time, at {rev}.)\n")
        if a.large and any(n != "scaleout" for n in a.names):
            out = run("serving", "serving-large",
                      ["--spec", os.path.join(ROOT, "configs", "studies", "serving-large.json")])
            with open(os.path.join(out, "serving.md")) as f:
                replace_block(os.path.join(ROOT, "docs", "studies", "serving.md"), "serving-large",
                              block(f.read()) +
                              f"\n({took['serving-large']:.0f} s of real time, at {rev}.)\n")
        if "open-questions" in a.names:
            for name in ("decode", "mask", "serving", "scaleout", "tensor-parallel"):
                run(name, name)
            for name in ("granularity", "fallback"):
                for profile, factor in open_questions.VARIANTS:
                    k = open_questions.key(name, profile, factor)
                    if k not in dirs:
                        dirs[k] = run(name, k, ["--profile", profile, "--cost-factor",
                                                f"{factor:g}"])
            md = open_questions.generate(dirs, os.path.join(ROOT, "docs", "img"))
            md += f"\nRuns at {rev}; their real time: " + ", ".join(
                f"{k} {v:.0f} s" for k, v in took.items()) + ".\n"
            replace_block(os.path.join(ROOT, "docs", "studies", "open-questions.md"),
                          "open-questions", md)
        if "compiler" in a.names:
            compiler_measurements(a.wallsim, tmp, rev)
        if "validate" in a.names:
            for config in ("trn2", "trn1", "tiny"):
                out = os.path.join(tmp, "validate-" + config)
                t = time.time()
                # Exit code 3 means a check failed: the table says which, so it is still copied.
                r = subprocess.run([a.wallsim, "validate", "-c",
                                    os.path.join("configs", config + ".json"), "--out", out],
                                   cwd=ROOT, stdout=subprocess.DEVNULL)
                if r.returncode not in (0, 3):
                    print(f"validate {config}: exit code {r.returncode}", file=sys.stderr)
                    return 2
                print(f"validate {config}: {time.time() - t:.0f} s real", flush=True)
                with open(os.path.join(out, "validation.md")) as f:
                    md = re.sub(r"(?m)^#", "##", f.read()).rstrip() + "\n"
                replace_block(os.path.join(ROOT, "docs", "VALIDATION.md"), config,
                              md + f"\n(At {rev}.)\n", kind="validate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
