#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# Under a plain 'ulimit -f' (SIGXFSZ not ignored, as in a user's shell) run, import and compile
# die of SIGXFSZ (exit 153) and leave .o.partial-PID/ and p.json.tmpXXXX behind; the tests trap
# XFSZ first, so they see the documented exit 2. Expected: wallsim ignores SIGXFSZ itself.
(ulimit -f 8; "$B" compile examples/graphs/transformer_block.json -c configs/trn2.json -o $T/p.json); echo "exit $?"
(ulimit -f 64; "$B" run -c configs/tiny.json -w gemm:m=4096,k=4096,n=4096 --mode native --trace-level instructions --out $T/o); echo "exit $?"
ls -A $T
rm -rf "$T"
