"""The capture's events as the program file holds them: dead code dropped, and the events run
inside `wallsim.setup()` moved to the file's set-up section (docs/PROGRAM_FORMAT.md, "Set-up")."""

import contextlib


class SetupError(Exception):
    """A set-up section the program format cannot hold (a step inside it, set-up work that uses
    a value the steps made): the script's error, one line, exit code 2."""


@contextlib.contextmanager
def setup_section(cap):
    """Marks every event `cap` records inside the block as set-up (nested blocks are one)."""
    if cap.in_setup:
        yield
        return
    cap.in_setup = True
    start = len(cap.events)
    try:
        yield
    finally:
        cap.in_setup = False
        for ev in cap.events[start:]:
            ev["_setup"] = True


def live_events(events, live, value_files):
    """The events without dead code: ops, inputs and weights no read, host op, step boundary or
    the end of the capture needs (parameter initialisation, unused outputs). `live`: the ids
    alive at the end; the values of dropped events leave `value_files`."""
    live = set(live)
    keep = []
    for ev in reversed(events):
        kind = ev["ev"]
        if kind == "step":
            live |= ev.pop("_live")
        elif kind in ("read", "grad"):  # a grad marks a value the replay may all-reduce
            live.add(ev["id"])
        elif kind == "host_op":
            if not any(o["id"] in live for o in ev["outputs"]):
                for o in ev["outputs"]:
                    value_files.pop("o%d" % o["id"], None)
                continue
            live.update(ev["inputs"])
        elif kind == "op":
            if ev["id"] not in live:
                continue
            live.update(ev["inputs"])
        elif kind in ("input", "weight"):
            if ev["id"] not in live:
                value_files.pop(kind[0] + str(ev["id"]), None)
                continue
        keep.append(ev)
    keep.reverse()
    # a step followed only by frees ends the last step: no empty step after it
    k = len(keep)
    while k and keep[k - 1]["ev"] == "free":
        k -= 1
    if k and keep[k - 1]["ev"] == "step":
        del keep[k - 1]
    defined = set()
    out = []
    for ev in keep:
        if ev["ev"] == "free" and ev["id"] not in defined:
            continue
        if "inplace_of" in ev and ev["inplace_of"] not in defined:
            del ev["inplace_of"]
        if "id" in ev and ev["ev"] in ("op", "input", "weight"):
            defined.add(ev["id"])
        for o in ev.get("outputs", []):
            defined.add(o["id"])
        out.append(ev)
    return out


def _defines(ev):
    if ev["ev"] in ("op", "input", "weight"):
        return [ev["id"]]
    return [o["id"] for o in ev.get("outputs", [])]


def split_setup(events, value_files):
    """(set-up events, step events) from the live events, each marked `_setup` or not.

    Set-up values stay live for every step: a step's free of one is dropped, and a free inside
    the set-up block of a value the steps made stays with the steps. A weight the set-up uses
    moves to the set-up section (weights are uploaded once wherever they are). Set-up work that
    uses any other value the steps made is a SetupError. Reads are numbered again in file order
    (set-up first), with their values files."""
    setup, steps = [], []
    setup_ids = set()
    step_weights = {}  # id -> its weight event, still among the steps
    for ev in events:
        mark = ev.pop("_setup", False)
        kind = ev["ev"]
        if kind == "free":
            if ev["id"] not in setup_ids:
                steps.append(ev)
            elif mark:
                setup.append(ev)
            continue  # a step's free of a set-up value: dropped
        if not mark:
            if kind == "weight":
                step_weights[ev["id"]] = ev
            steps.append(ev)
            continue
        uses = list(ev.get("inputs", [])) + ([ev["id"]] if kind == "read" else [])
        for i in uses:
            if i in setup_ids:
                continue
            w = step_weights.pop(i, None)
            if w is None:
                what = kind + (" " + ev["op"] if kind == "op" else "")
                raise SetupError(
                    "wallsim.setup(): set-up work (%s, %s in module '%s') uses a value made "
                    "outside wallsim.setup() (id %d); set-up may use only weights and values "
                    "made inside it" % (what, ev.get("aten", "a read"), ev.get("module", ""), i))
            steps.remove(w)
            setup.append(w)
            setup_ids.add(i)
        setup.append(ev)
        setup_ids.update(_defines(ev))
    renumbered = {}
    n = 0
    for ev in setup + steps:
        if ev["ev"] != "read":
            continue
        old = ev.pop("_r")
        if old != n and ("r%d" % old) in value_files:
            renumbered["r%d" % n] = value_files.pop("r%d" % old)
        n += 1
    value_files.update(renumbered)
    return setup, steps
