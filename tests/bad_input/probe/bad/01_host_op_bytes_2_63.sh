#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# A program's host_op with "bytes": 2^63: exit 1 and three lines (SystemC E549 "FluidShare::start:
# time goes back"). Expected: exit 2, one line naming events[1].bytes.
printf '%s' '{"format":"wallsim-program","version":1,"name":"p","events":[{"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[4,8]},{"ev":"host_op","aten":"aten.foo.default","module":"m","inputs":[0],"outputs":[{"id":5,"dtype":"fp32","shape":[4,8]}],"flops":10,"bytes":9223372036854775808}]}' > $T/p.json
"$B" run -c configs/tiny.json -w program:file=$T/p.json --out $T/o; echo "exit $?"
rm -rf "$T"
