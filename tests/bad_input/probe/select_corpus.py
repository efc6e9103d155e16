#!/usr/bin/python3
"""Picks the probe's cheap good errors for the corpus: reads run_probe.py's probe_results.jsonl
and writes corpus40.tsv (NAME<TAB>EXPECTED), which make_corpus.py turns into corpus cases.

    /usr/bin/python3 tests/bad_input/probe/select_corpus.py /work/probe/out/probe_results.jsonl

EXPECTED is the message with the file paths of the probe's run cut off (the corpus runs from
other folders): the text after the last path the message names, else that path's file name.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
PATH = re.compile(r"(/work/probe/files|/tmp/p40-[A-Za-z0-9_]+)(/[^\s:'\"]*)?")


def expected_text(line):
    line = line.strip()
    last = None
    for m in PATH.finditer(line):
        last = m
    if last is None:
        text = line[len("wallsim: "):] if line.startswith("wallsim: ") else line
    else:
        text = line[last.end():].lstrip(":' ").strip()
        if len(text) < 8:
            text = os.path.basename(last.group(0)) if last.group(2) else text
    text = text[:90].rstrip()
    if not text or PATH.search(text) or "\t" in text or "files/" in text or "p40-" in text:
        return None
    return text


def main():
    import run_probe
    results = [json.loads(x) for x in open(sys.argv[1])]
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        cases = {c.fam + "." + c.name: c for c in run_probe.all_cases(tmp)}
    rows = []
    for r in results:
        c = cases.get(r["name"])
        if (c is None or not c.corpus or r["outcome"] != "GOOD-ERROR" or r["rc"] != 2
                or r["seconds"] >= 1.0):
            continue
        exp = expected_text(r["stderr"].strip().split("\n")[-1])
        if exp:
            rows.append((r["name"], exp))
    with open(os.path.join(HERE, "corpus40.tsv"), "w") as f:
        f.write("# The probe's cheap good errors (select_corpus.py): NAME<TAB>EXPECTED\n")
        for name, exp in sorted(rows):
            f.write("%s\t%s\n" % (name, exp))
    print("%d cases selected" % len(rows))


if __name__ == "__main__":
    main()
