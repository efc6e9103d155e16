"""wallsim's PyTorch capture: run PyTorch code, write a program file (docs/PROGRAM_FORMAT.md).

    import wallsim
    with wallsim.capture("P.json", values=True):
        model(x)
"""

import contextlib


def current():
    """The capture running in this process, or None."""
    from . import recorder
    return recorder.current()


def capture(path, values=False, name=None):
    """A context manager capturing every ATen op run inside it into the program file `path`.

    Inside a script that `wallsim capture` already runs, it records into that capture instead."""
    if current() is not None:
        import sys
        print("wallsim capture: warning: wallsim.capture(%r) inside a running capture records "
              "into that capture; %s is not written" % (path, path), file=sys.stderr)
        return contextlib.nullcontext()
    from .recorder import Capture
    return Capture(path, values=values, name=name)


def step():
    """A step boundary (mark_step in a lazy runtime); nothing outside a capture."""
    cap = current()
    if cap is not None:
        cap.step()


def setup():
    """A context manager around set-up work (building the model, tables a constructor computes):
    what runs inside it is the program's set-up section, replayed once before the steps, not in
    every step. Nothing outside a capture.

        with wallsim.setup():
            model = build()
    """
    cap = current()
    return contextlib.nullcontext() if cap is None else cap.setup()


def mark_dynamic(t, axis, name):
    """Names axis `axis` of tensor t (before the program uses it) for bounded replay."""
    names = list(getattr(t, "_wallsim_dims", None) or [None] * t.dim())
    names[axis if axis >= 0 else axis + t.dim()] = name
    t._wallsim_dims = names
    cap = current()
    if cap is not None:
        info = cap.info(t)
        if info is not None and info.lazy is None:
            cap.g.declare(info.id, cap.g.shape[info.id], cap.g.dtype[info.id], names)
            for ev in reversed(cap.events):
                if ev.get("id") == info.id and ev["ev"] in ("input", "weight", "op"):
                    ev["dim_names"] = list(names)
                    break
    return t


__all__ = ["capture", "step", "setup", "mark_dynamic"]
