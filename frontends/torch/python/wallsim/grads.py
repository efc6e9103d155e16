"""The capture's gradient marks: after every `torch.autograd.backward` (so `loss.backward()` too),
one `grad` event per parameter whose `.grad` the backward changed, naming the value it holds
(docs/PROGRAM_FORMAT.md, `grad`); a data-parallel replay all-reduces exactly these values."""

import weakref

import torch


def patch(cap):
    """Wraps torch.autograd.backward to record `grad` events in `cap`; returns what unpatch
    restores."""
    params = {}  # id(parameter) -> weakref, remembered the first time its module runs
    last = {}  # id(parameter) -> the SSA id of its last grad event

    def remember(module, inputs):
        for p in module.parameters(recurse=False):
            params.setdefault(id(p), weakref.ref(p))

    hook = torch.nn.modules.module.register_module_forward_pre_hook(remember)
    orig = torch.autograd.backward

    def backward(*a, **k):
        out = orig(*a, **k)
        if cap.closed or cap.in_setup:
            return out
        # last parameter first, DDP's initial bucket order: a gradient re-derived here (a view
        # of its accumulated base) is defined in the order the backward made its base
        for key, ref in reversed(list(params.items())):
            p = ref()
            if p is None or key not in cap.weight_names or p.grad is None:
                continue
            if cap.info(p.grad) is None:
                continue  # made outside the capture (no SSA value to name)
            g = cap.id_of(p.grad)
            if last.get(key) != g:
                last[key] = g
                cap.events.append({"ev": "grad", "id": g, "name": cap.weight_names[key]})
        return out

    torch.autograd.backward = backward
    return [("backward", orig, hook)]


def unpatch(patches):
    for _, orig, hook in patches:
        torch.autograd.backward = orig
        hook.remove()
