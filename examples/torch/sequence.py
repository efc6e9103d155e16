"""A torch.nn sequence model (random weights), eval mode, one forward per step: an
nn.TransformerEncoder, an nn.LSTM or a batch_first nn.GRU.

    wallsim capture examples/torch/sequence.py --out lstm.json -- --model lstm
"""

import argparse

import torch
import torch.nn as nn

from _wallsim import wallsim

p = argparse.ArgumentParser()
p.add_argument("--model", default="lstm", choices=["transformer_encoder", "lstm", "gru"])
p.add_argument("--batch", type=int, default=2)
p.add_argument("--seq", type=int, default=16)
p.add_argument("--width", type=int, default=64)
p.add_argument("--steps", type=int, default=1)
args = p.parse_args()

torch.manual_seed(0)
w = args.width
if args.model == "transformer_encoder":
    layer = nn.TransformerEncoderLayer(w, nhead=4, dim_feedforward=2 * w, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2).eval()
elif args.model == "lstm":
    model = nn.LSTM(w, w, num_layers=2).eval()  # (seq, batch, width)
else:
    model = nn.GRU(w, w, num_layers=2, batch_first=True).eval()
shape = (args.seq, args.batch, w) if args.model == "lstm" else (args.batch, args.seq, w)
x = torch.randn(*shape)
with torch.no_grad():
    for _ in range(args.steps):
        y = model(x)
        if isinstance(y, tuple):  # an RNN: its last hidden state is read too (a batch_first
            h = y[1][0] if isinstance(y[1], tuple) else y[1]  # GRU's output is transposed
            print("mean |h|", round(float(abs(h.numpy()).mean()), 6))  # by a host op)
            y = y[0]
        out = y.numpy()  # the whole output (a read: a flush in a lazy runtime)
        print("mean |y|", round(float(abs(out).mean()), 6))
        wallsim.step()
