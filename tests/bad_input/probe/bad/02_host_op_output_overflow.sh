#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# A host_op output of shape [2^40, 2^40] (2^82 bytes, the byte count wraps): exit 0, though
# [2^39] is refused ("device memory exhausted", issue 40). Expected: exit 2, one line.
printf '%s' '{"format":"wallsim-program","version":1,"name":"p","events":[{"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[4,8]},{"ev":"host_op","aten":"aten.foo.default","module":"m","inputs":[0],"outputs":[{"id":5,"dtype":"fp32","shape":[1099511627776,1099511627776]}],"flops":10,"bytes":10}]}' > $T/p.json
"$B" run -c configs/tiny.json -w program:file=$T/p.json --out $T/o; echo "exit $?"
rm -rf "$T"
