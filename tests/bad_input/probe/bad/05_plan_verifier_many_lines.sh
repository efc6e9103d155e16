#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# plan check prints every verifier finding, one line each: 2 lines for one bad dma_copy,
# 10,000 lines for 5,000 extra empty vector streams. Expected: one line (the first finding, and
# how many more).
/usr/bin/python3 -c 'import json; p=json.load(open("examples/plans/vector_add.json")); p["plans"][0]["streams"]+=[{"engine":"vector","instructions":[]}]*5000; json.dump(p, open("'$T'/p.json","w"))'
"$B" plan check $T/p.json -c configs/trn2.json 2>&1 | wc -l
rm -rf "$T"
