"""The graph's dtypes of torch dtypes (fp64 is written as fp32, integers and bool as int32); the
capture (recorder.py) and the ATen handlers (aten_*.py) both use them."""

import torch

DTYPES = {torch.float32: "fp32", torch.float64: "fp32", torch.bfloat16: "bf16",
          torch.float16: "fp16"}


def graph_dtype(dt):
    return DTYPES.get(dt, "int32")
