#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# exec of a one-plan multi-core file on a system set to 64 x 64 chips x 4096 instances
# (16.7 M chips, each value within its documented range) runs for minutes elaborating it.
# Expected: refuse a system too large to elaborate (exit 2, one line), or elaborate lazily.
/usr/bin/python3 tests/bad_input/probe/run_probe.py "$B" --only '^system\.p40_set_torus_64$' --jobs 1 --out $T/out --files $T/files
rm -rf "$T"
