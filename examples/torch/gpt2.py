"""GPT-2 small in plain PyTorch (random weights): greedy generation reading each token with .item(),
or teacher-forced logits over a whole sequence (for the functional check).

    wallsim capture examples/torch/gpt2.py --out gen.json -- --mode generate --tokens 32
    wallsim capture examples/torch/gpt2.py --out logits.json --values -- --mode logits --prompt 64

The generation loop re-runs the whole sequence for each new token (no KV cache; as nanoGPT, the
output head runs on the last position only) from a host tensor of the tokens so far, whose
sequence axis, named "seq" with wallsim.mark_dynamic, grows by one every step: with exact shapes
a lazy runtime compiles every step anew; bounded (`--bound seq<=MAX` at replay) it compiles once.
"""

import argparse
import math
import random

import torch
import torch.nn as nn

from _wallsim import wallsim

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["generate", "logits"], default="generate")
p.add_argument("--tokens", type=int, default=32, help="tokens to generate")
p.add_argument("--prompt", type=int, default=8, help="prompt length")
p.add_argument("--layers", type=int, default=12)
p.add_argument("--width", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--vocab", type=int, default=50257)
p.add_argument("--context", type=int, default=1024)
p.add_argument("--batch", type=int, default=1, help="sequences (the same tokens in each)")
args = p.parse_args()


class Attention(nn.Module):
    def __init__(self, d, h, context):
        super().__init__()
        self.h = h
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(context, context)))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        q = q.view(B, T, self.h, D // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, D // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, D // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // self.h))
        att = att.masked_fill(self.bias[:T, :T] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, d, h, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, h, context)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(args.vocab, args.width)
        self.wpe = nn.Embedding(args.context, args.width)
        self.h = nn.ModuleList(Block(args.width, args.heads, args.context)
                               for _ in range(args.layers))
        self.ln_f = nn.LayerNorm(args.width)

    def forward(self, ids, last_only=False):
        T = ids.shape[1]
        pos = torch.arange(T)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        if last_only:
            x = x[:, -1:, :]
        return self.ln_f(x) @ self.wte.weight.t()  # tied output embedding


torch.manual_seed(0)
model = GPT2().eval()
tokens = [random.Random(0).randrange(args.vocab) for _ in range(args.prompt)]
with torch.no_grad():
    if args.mode == "logits":
        ids = wallsim.mark_dynamic(torch.tensor([tokens] * args.batch), 1, "seq")
        logits = model(ids).numpy()  # one read: every logit
        print("logits", logits.shape, float(logits[0, -1].max()))
    else:
        out = []
        for _ in range(args.tokens):
            ids = wallsim.mark_dynamic(torch.tensor([tokens] * args.batch), 1, "seq")  # uploaded
            tok = model(ids, last_only=True)[0, -1].argmax().item()  # a read: a flush
            out.append(tok)
            tokens.append(tok)
            wallsim.step()
        print("tokens", out)
