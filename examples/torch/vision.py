"""A torchvision classifier or segmenter (random weights, nothing downloaded), eval mode, one
forward per step.

    wallsim capture examples/torch/vision.py --out resnet18.json -- --model resnet18
"""

import argparse

import torch
import torchvision

from _wallsim import wallsim

p = argparse.ArgumentParser()
p.add_argument("--model", default="resnet18",
               choices=["resnet18", "mobilenet_v2", "vit_b_16", "squeezenet1_0",
                        "shufflenet_v2_x0_5", "mnasnet0_5", "regnet_y_400mf", "efficientnet_b0",
                        "densenet121", "convnext_tiny", "swin_t",
                        "deeplabv3_mobilenet_v3_large"])
p.add_argument("--batch", type=int, default=1)
p.add_argument("--size", type=int, default=224)
p.add_argument("--steps", type=int, default=1)
args = p.parse_args()

torch.manual_seed(0)
kwargs = {"image_size": args.size} if args.model == "vit_b_16" else {}
# Building the model is set-up, replayed once and not in each step: regnet's builder computes
# its stage widths with tensor math and reads them (BlockParams: two .tolist()).
with wallsim.setup():
    if args.model.startswith("deeplabv3"):  # segmentation: no backbone weights either
        kwargs = {"weights_backbone": None}
        model = getattr(torchvision.models.segmentation, args.model)(weights=None,
                                                                     **kwargs).eval()
    else:
        model = getattr(torchvision.models, args.model)(weights=None, **kwargs).eval()
x = torch.randn(args.batch, 3, args.size, args.size)
with torch.no_grad():
    for _ in range(args.steps):
        out = model(x)
        out = out["out"] if isinstance(out, dict) else out  # segmentation: per-pixel logits
        logits = out.numpy()  # one read: the logits (a flush in a lazy runtime)
        print("class", logits.argmax(axis=1).reshape(args.batch, -1)[:, :8].tolist())
        wallsim.step()
