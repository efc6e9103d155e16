#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# User text with a newline is copied raw into the error: 3 lines (and 2 for an ONNX node named
# "a\nb"). Expected: one line, control characters escaped.
/usr/bin/python3 -c 'import json; s=json.load(open("configs/sweeps/smoke.json")); s["workloads"]=["gemm:m=64\n,k=64"]; json.dump(s, open("'$T'/s.json","w"))'
"$B" sweep $T/s.json --count; echo "exit $?"
rm -rf "$T"
