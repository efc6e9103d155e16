"""A 2-layer pre-norm transformer language model in plain PyTorch, trained with SGD or Adam.

    wallsim capture examples/torch/transformer.py --out tf.json -- --opt adam --steps 2
"""

import argparse
import math

import torch
import torch.nn as nn

from _wallsim import wallsim

p = argparse.ArgumentParser()
p.add_argument("--opt", choices=["sgd", "adam"], default="adam")
p.add_argument("--steps", type=int, default=2)
p.add_argument("--batch", type=int, default=2)
p.add_argument("--seq", type=int, default=16)
p.add_argument("--width", type=int, default=64)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--vocab", type=int, default=128)
p.add_argument("--mark-batch", action="store_true",
               help="name the batch axis of the ids and targets 'batch' (a data-parallel "
               "replay splits it)")
args = p.parse_args()


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.out = nn.Linear(4 * d, d)

    def forward(self, x, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q = q.view(B, T, self.h, D // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, D // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, D // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.h)
        att = att.masked_fill(mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
        x = x + self.proj(y)
        return x + self.out(self.act(self.fc(self.ln2(x))))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(args.vocab, args.width)
        self.pos = nn.Embedding(args.seq, args.width)
        self.blocks = nn.ModuleList(Block(args.width, args.heads) for _ in range(args.layers))
        self.ln = nn.LayerNorm(args.width)
        self.head = nn.Linear(args.width, args.vocab)
        self.register_buffer("mask", torch.tril(torch.ones(args.seq, args.seq)))

    def forward(self, ids):
        T = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln(x))


torch.manual_seed(0)
model = LM()
opt = (torch.optim.SGD(model.parameters(), lr=0.05) if args.opt == "sgd" else
       torch.optim.Adam(model.parameters(), lr=1e-3))
inp = torch.randint(0, args.vocab, (args.batch, args.seq))
tgt = torch.randint(0, args.vocab, (args.batch, args.seq))
if args.mark_batch:
    wallsim.mark_dynamic(inp, 0, "batch")
    wallsim.mark_dynamic(tgt, 0, "batch")
for _ in range(args.steps):
    logits = model(inp)
    loss = nn.functional.cross_entropy(logits.reshape(-1, args.vocab), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss %.6f" % loss.item())
    wallsim.step()
