#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# collect DIR where DIR/results.jsonl is a FIFO blocks forever (sweep refuses a FIFO there);
# where it is a folder, collect exits 0 with a header and no rows. Expected: exit 2, one line.
mkdir -p $T/s $T/d/results.jsonl && mkfifo $T/s/results.jsonl
timeout 10 "$B" collect $T/s; echo "exit $? (124: still blocked after 10 s)"
"$B" collect $T/d; echo "exit $?"
rm -rf "$T"
