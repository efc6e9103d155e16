#!/usr/bin/env bash
# Issue 40 probe finding (tests/bad_input/README.md). Run from the source root:
#   bash tests/bad_input/probe/bad/THIS.sh [WALLSIM_BIN]
B=${1:-build/bin/wallsim}
T=$(mktemp -d)
# import onnx --weights on a full disk (2 MiB tmpfs, run as root): exit 2 with one line, but a
# half-written G.weights/ is left behind. Expected: nothing left (as for G.json).
mkdir $T/mnt && mount -t tmpfs -o size=2m tmpfs $T/mnt || exit 1
/usr/bin/python3 -c "import onnx,numpy as np;from onnx import helper as H,numpy_helper as N,TensorProto as TP;w=N.from_array(np.ones((1024,1024),np.float32),'w');g=H.make_graph([H.make_node('MatMul',['x','w'],['y'])],'g',[H.make_tensor_value_info('x',TP.FLOAT,[2,1024])],[H.make_tensor_value_info('y',TP.FLOAT,None)],[w]);onnx.save(H.make_model(g,opset_imports=[H.make_opsetid('',13)],ir_version=8),'$T/big.onnx')"
"$B" import onnx $T/big.onnx --out $T/mnt/g.json --weights; echo "exit $?"; ls -A $T/mnt
umount $T/mnt; rm -rf "$T"
