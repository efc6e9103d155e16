#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# A plan on core [0, 0] of tiny.json's 4-chip system storing to 'chip4:t' (or
# 'chip18446744073709551616:t'): 'plan check' says the file is fine (exit 0); exec fails at run
# time (2380 ns), and for 2^64 names "chip 18". Expected: plan check refuses the chip (exit 2,
# one line naming the tensor and the system's chip count), with the number as written.
/usr/bin/python3 - "$T" <<'PY'
import json, sys
sys.path.insert(0, "tests/bad_input/probe")
from cases_plan import copy_plan, plans
for n, chip in [("p4", 4), ("p64", 2 ** 64)]:
    json.dump(plans(copy_plan(0, 0, chip)), open("%s/%s.json" % (sys.argv[1], n), "w"))
PY
for n in p4 p64; do
  "$B" plan check $T/$n.json -c configs/tiny.json; echo "plan check: exit $?"
  "$B" exec $T/$n.json -c configs/tiny.json --out $T/o_$n; echo "exec: exit $?"
done
rm -rf "$T"
