#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# Inputs accepted with exit 0 that the format's own rules refuse (ONNX checker / strict shape
# inference; PROGRAM_FORMAT.md's read reasons and dims): the probe's cases, re-run.
/usr/bin/python3 tests/bad_input/probe/run_probe.py "$B" --jobs 1 --out $T/out --files $T/files --only '^(onnx\.p40_(two_producers|duplicate_initializer|duplicate_graph_input|concat_no_axis|reshape_shape_float|slice_axes_dup|split_sum_wrong|gather_float_indices|cast_no_to|cos_shape_float|constant_two_values|attr_duplicate_name|attr_ref_attr_name)|program\.p40_(read_reason_bogus|dims_unknown_id|dims_axis_range))$'
rm -rf "$T"
