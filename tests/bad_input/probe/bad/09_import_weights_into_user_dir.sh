#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# import onnx --weights writes into an existing G.weights/ that is not an earlier import's (or
# through a symlink to a user's folder), replacing same-named files; capture --values refuses
# the same. Expected: exit 2 unless the folder holds the .wallsim-output marker.
/usr/bin/python3 -c "import onnx;from onnx import helper as H,TensorProto as TP;w=H.make_tensor('w',TP.FLOAT,[2,3],[1.0]*6);g=H.make_graph([H.make_node('Add',['x','w'],['y'],name='n0')],'g',[H.make_tensor_value_info('x',TP.FLOAT,[2,3])],[H.make_tensor_value_info('y',TP.FLOAT,None)],[w]);onnx.save(H.make_model(g,opset_imports=[H.make_opsetid('',13)],ir_version=8),'$T/m.onnx')"
mkdir $T/g.weights && echo "user data" > $T/g.weights/c_n0.npy
"$B" import onnx $T/m.onnx --out $T/g.json --weights; echo "exit $?"; head -c 9 $T/g.weights/c_n0.npy | od -c | head -1
rm -rf "$T"
