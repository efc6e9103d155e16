#!/usr/bin/env python3
"""One row of docs/MODELS.md's table of issue 40's twelve models (scripts/model_zoo.sh) from a
functional replay's stats.json, or the replay's last error line when it failed.

usage: model_zoo_row.py --header | OUT_DIR MODEL MODE EXIT_CODE
Warm step: `warm.p50_ns` ("-" when no step was warm); compiles count start-up and steps; host
share: the host ops' time (`program.host_fallback.ns`) over the steps' wall time.
"""
import json
import os
import sys

HEADER = ("| model | mode | max rel. error | warm step (ms) | compiles | fallbacks | host ops | "
          "host share |\n|---|---|---:|---:|---:|---:|---:|---:|")


def row(out, model, mode, code):
    stats = os.path.join(out, "stats.json")
    if code != "0" or not os.path.exists(stats):
        lines = open(out + ".log").read().strip().splitlines() if os.path.exists(
            out + ".log") else []
        why = lines[-1] if lines else "exit %s" % code
        return "| %s | %s | fails: %s | | | | | |" % (model, mode, why.replace("|", "/"))
    s = json.load(open(stats))
    st, tot, prog = s["startup"], s["totals"], s["program"]
    steps_ns = sum(x["wall_ns"] for x in s["steps"])
    warm = s["warm"]["p50_ns"]
    cells = [model, mode, "%.1e" % prog["max_rel_error"],
             "-" if not warm else "%.3f" % (warm / 1e6),
             str(st["compiles"] + tot["compiles"]), str(tot["fallbacks"]),
             str(prog["host_fallback"]["ops"]),
             "%.1f %%" % (100.0 * prog["host_fallback"]["ns"] / max(steps_ns, 1))]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    if sys.argv[1:] == ["--header"]:
        print(HEADER)
    else:
        print(row(*sys.argv[1:]))
