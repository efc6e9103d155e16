"""The ATen handler table the capture dispatches on (aten_map.py fills it), the handlers' shared
helpers and Lazy, an output emitted only if used."""

import torch

from .dtypes import graph_dtype

HANDLERS = {}
# Ops whose schema says they may alias their input but that are copies when they change anything.
ALIASING_COPIES = {"to", "contiguous", "type_as"}


class Lazy:
    """An output emitted only if something uses it; `deps` are ids it needs (kept alive till then)."""

    def __init__(self, fn, deps=()):
        self.fn = fn
        self.deps = list(deps)

    def __call__(self):
        return self.fn()


# Forms a handler declines before the op runs (so the decomposition table gets the op whole):
# batch norm in training mode also updates the running statistics.
DECLINE = {"native_batch_norm": lambda args, kwargs: bool(args[5])}


def handles(*names):
    def reg(f):
        for n in names:
            HANDLERS[n] = f
        return f
    return reg


def gdt(t):
    return graph_dtype(t.dtype if isinstance(t, torch.Tensor) else t)


def shp(t):
    return list(t.shape) or [1]


def out_dt(out):
    return gdt(out)
