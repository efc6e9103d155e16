"""A torchvision classifier (random weights, nothing downloaded), eval mode, one forward per step.

    wallsim capture examples/torch/vision.py --out resnet18.json -- --model resnet18
"""

import argparse

import torch
import torchvision

from _wallsim import wallsim

p = argparse.ArgumentParser()
p.add_argument("--model", default="resnet18",
               choices=["resnet18", "mobilenet_v2", "vit_b_16"])
p.add_argument("--batch", type=int, default=1)
p.add_argument("--size", type=int, default=224)
p.add_argument("--steps", type=int, default=1)
args = p.parse_args()

torch.manual_seed(0)
kwargs = {"image_size": args.size} if args.model == "vit_b_16" else {}
model = getattr(torchvision.models, args.model)(weights=None, **kwargs).eval()
x = torch.randn(args.batch, 3, args.size, args.size)
with torch.no_grad():
    for _ in range(args.steps):
        logits = model(x).numpy()  # one read: the logits (a flush in a lazy runtime)
        print("class", logits.argmax(axis=1).tolist())
        wallsim.step()
