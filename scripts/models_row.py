#!/usr/bin/env python3
"""One row of docs/MODELS.md's replay table from a replay's stats.json (scripts/measure_models.sh).

usage: models_row.py STATS_JSON PROGRAM MODE REAL_S USER_S RSS_KB LOAD COMMIT
Compiles, recompiles and plans count start-up and steps.
"""
import json
import sys

TITLES = {
    "resnet18": "resnet18",
    "mobilenet_v2": "mobilenet_v2",
    "vit_b_16": "vit_b_16",
    "gpt2_logits": "GPT-2 logits, 64 tokens",
    "gpt2_generate": "GPT-2 generation, 32 tokens",
    "gpt2_bounded": "GPT-2 generation, `--bound seq<=64`",
    "mlp_sgd": "MLP, 2 SGD steps",
    "mlp_adam": "MLP, 2 Adam steps",
    "transformer_sgd": "2-layer transformer, 2 SGD steps",
    "transformer_adam": "2-layer transformer, 2 Adam steps",
}

HEADER = ("| program | mode | start-up (ms) | steps (ms) | per step (ms) | device busy (ms) | "
          "compiles | recompiles | plans launched | real (s) | user (s) | peak RSS (MB) | load | "
          "commit |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")


def row(path, name, mode, real, user, rss_kb, load, commit):
    s = json.load(open(path))
    st, tot, steps = s["startup"], s["totals"], s["steps"]
    steps_ms = sum(step["wall_ns"] for step in steps) / 1e6
    per_step = "=" if len(steps) == 1 else f"{steps_ms / len(steps):,.1f}"
    cells = [TITLES[name], mode, f"{st['wall_ns'] / 1e6:,.1f}", f"{steps_ms:,.1f}", per_step,
             f"{tot['device_busy_ns'] / 1e6:,.2f}", str(st["compiles"] + tot["compiles"]),
             str(st["recompiles"] + tot["recompiles"]),
             f"{st['plans_launched'] + tot['plans_launched']:,}", f"{float(real):.1f}",
             f"{float(user):.1f}", f"{int(rss_kb) // 1024:,}", load, commit]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    if sys.argv[1:] == ["--header"]:
        print(HEADER)
    else:
        print(row(*sys.argv[1:]))
