#!/usr/bin/python3
"""Regenerates the measured part of docs/studies/NAME.md from a fresh study run.

    scripts/update_study_docs.py [--wallsim build/bin/wallsim] [NAME ...]   (default: decode mask granularity fallback serving)

Each doc holds the study's table and its generated findings between the markers
<!-- study NAME: begin --> and <!-- study NAME: end -->; this runs `wallsim study NAME` (default
config and spec) and replaces what is between them with the table and findings of NAME.md, so
the sentences stay those the command computes from its own table after any model change.
The README's plots of the study (docs/img/study_NAME*.png) are copied from the same run.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def block(md):
    """The table and findings of a study's NAME.md: from the header row to the end."""
    at = md.index("\n| run |")
    return md[at + 1:].rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wallsim", default=os.path.join(ROOT, "build", "bin", "wallsim"))
    ap.add_argument("names", nargs="*", default=["decode", "mask", "granularity", "fallback", "serving"])
    a = ap.parse_args()
    for name in a.names:
        doc = os.path.join(ROOT, "docs", "studies", name + ".md")
        with open(doc) as f:
            text = f.read()
        begin, end = f"<!-- study {name}: begin -->\n", f"<!-- study {name}: end -->"
        if begin not in text or end not in text:
            print(f"{doc}: no '{begin.strip()}' ... '{end}' markers", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, name)
            subprocess.run([a.wallsim, "study", name, "--out", out], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
            with open(os.path.join(out, name + ".md")) as f:
                new = block(f.read())
            # The README's figures of this study: docs/img/study_<plot>.png is the run's <plot>.png.
            img = os.path.join(ROOT, "docs", "img")
            for png in sorted(os.listdir(img)):
                src = os.path.join(out, png[len("study_"):])
                if png.startswith("study_" + name) and png.endswith(".png") and os.path.exists(src):
                    shutil.copyfile(src, os.path.join(img, png))
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        with open(doc, "w") as f:
            f.write(head + begin + new + end + tail)
        print(f"{doc}: regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
