"""The capture's host reads: the Tensor methods it patches (item, tolist, numpy, print, ...), each
a `read` event, and what a meta capture's reads give the script (zeros)."""

import contextlib

import numpy as np
import torch

# Tensor method -> the read's reason (docs/PROGRAM_FORMAT.md, `read`).
METHODS = [("item", "item"), ("__bool__", "bool"), ("__int__", "item"), ("__float__", "item"),
           ("__index__", "item"), ("tolist", "tolist"), ("numpy", "numpy"),
           ("__repr__", "print"), ("__format__", "print"), ("cpu", "cpu")]


def patch(cap):
    """Patches torch.Tensor's reading methods to record a read in `cap`; returns what unpatch
    restores."""
    patches = []

    def reader(meth, reason):
        orig = getattr(torch.Tensor, meth)

        def wrapped(t, *a, **k):
            if cap.closed or cap.read_reason:
                return orig(t, *a, **k)
            if reason in ("item", "bool"):
                # the read itself is the _local_scalar_dense the call dispatches
                cap.read_reason.append(reason)
                try:
                    return orig(t, *a, **k)
                finally:
                    cap.read_reason.pop()
            cap.read(t, reason)
            if cap.meta and t.is_meta and reason != "print":
                return meta_read(t, meth, a)
            if cap.meta and t.is_meta and meth == "__format__" and t.dim() == 0:
                return format(stand_in(t.dtype), *a)
            cap.read_reason.append(reason)
            try:
                with no_mode():
                    return orig(t, *a, **k)
            finally:
                cap.read_reason.pop()

        patches.append((meth, orig))
        setattr(torch.Tensor, meth, wrapped)

    for meth, reason in METHODS:
        reader(meth, reason)
    return patches


def unpatch(patches):
    for meth, orig in reversed(patches):
        setattr(torch.Tensor, meth, orig)


@contextlib.contextmanager
def no_mode():
    """Runs its body outside the capture's dispatch mode."""
    from torch.utils._python_dispatch import _pop_mode_temporarily, _len_torch_dispatch_stack
    if _len_torch_dispatch_stack() == 0:
        yield
        return
    with _pop_mode_temporarily():
        yield


def stand_in(dtype):
    """What a meta capture's reads give the script: zero (the values are not computed)."""
    if dtype == torch.bool:
        return False
    return 0.0 if dtype.is_floating_point or dtype.is_complex else 0


def meta_read(t, meth, args):
    zeros = np.zeros(list(t.shape), dtype=np.float32 if t.dtype.is_floating_point else np.int64)
    if meth == "numpy":
        return zeros
    if meth == "tolist":
        return zeros.tolist() if t.dim() else stand_in(t.dtype)
    return torch.zeros(t.shape, dtype=t.dtype)  # cpu(): a host copy
