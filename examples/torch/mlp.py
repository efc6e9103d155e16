"""A small MLP: forward only (reads the result with .item()), or training steps with SGD or Adam.

    wallsim capture examples/torch/mlp.py --out mlp.json -- --train adam --steps 2
"""

import argparse

import torch
import torch.nn as nn

from _wallsim import wallsim

p = argparse.ArgumentParser()
p.add_argument("--train", choices=["none", "sgd", "adam"], default="none")
p.add_argument("--steps", type=int, default=2)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--width", type=int, default=32)
p.add_argument("--classes", type=int, default=10)
p.add_argument("--mark-batch", action="store_true",
               help="name the batch axis of x and y 'batch' (a data-parallel replay splits it)")
args = p.parse_args()

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(args.width, 4 * args.width), nn.GELU(),
                    nn.Linear(4 * args.width, 4 * args.width), nn.ReLU(),
                    nn.Linear(4 * args.width, args.classes))
x = torch.randn(args.batch, args.width)
y = torch.randint(0, args.classes, (args.batch,))
if args.mark_batch:
    wallsim.mark_dynamic(x, 0, "batch")
    wallsim.mark_dynamic(y, 0, "batch")

if args.train == "none":
    with torch.no_grad():
        for _ in range(args.steps):
            out = net(x)
            print("sum %.6f" % out.sum().item())
            wallsim.step()
else:
    opt = (torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9) if args.train == "sgd" else
           torch.optim.Adam(net.parameters(), lr=1e-3))
    for _ in range(args.steps):
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("loss %.6f" % loss.item())
        wallsim.step()
