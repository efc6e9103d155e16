"""Writing a capture's program file and its values folder: atomically, nothing left behind on a
failure, and nothing replaced that wallsim did not write (docs/OUTPUTS.md)."""

import json
import os
import shutil
import stat
import tempfile

import numpy as np


# Every values folder a capture writes holds this file: a later capture replaces a folder only
# when it holds it (like a run directory's, docs/OUTPUTS.md), never a folder of the user's.
MARKER = ".wallsim-output"
MARKER_TEXT = "wallsim output directory: the next wallsim capture with --values replaces it\n"


class OutputError(Exception):
    """An output path wallsim will not replace, or cannot write: one line, exit code 2."""


def check_outputs(path, vdir):
    """Refuses, before anything runs, outputs that would replace what is not wallsim's: a program
    path that exists and is not a regular file (a folder, a FIFO, a device), and a values folder
    that exists and is not an earlier capture's."""
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        raise OutputError("%s exists and is not a regular file; refusing to replace it" % path)
    if vdir is None:
        return
    final = os.path.join(os.path.dirname(os.path.abspath(path)), vdir)
    if os.path.lexists(final):
        if os.path.islink(final) or not os.path.isdir(final):
            raise OutputError("%s exists and is not a folder; refusing to replace it" % final)
        if os.listdir(final) and not os.path.isfile(os.path.join(final, MARKER)):
            raise OutputError("%s is not empty and not an earlier capture's values (no %s in it); "
                              "refusing to replace it" % (final, MARKER))


class CaptureError(Exception):
    """The capture made a program file its replay would refuse: a bug in the capture (exit 1)."""


def check_program(doc):
    """The replay's SSA rules (frontends/torch/src/program.cpp), checked before the file is
    written: each id defined once, before its uses, and never used after its free; set-up
    events use only set-up values, and no step frees one. Raises CaptureError naming the event
    as the replay would ("events[N] (host_op): ...")."""
    state = {}  # id -> True once freed
    setup_ids = set()
    for section in ("setup", "events"):
        for n, ev in enumerate(doc.get(section, [])):
            kind = ev["ev"]
            where = "%s[%d] (%s%s)" % (section, n, kind, " " + ev["op"] if kind == "op" else "")
            if section == "setup" and kind == "step":
                raise CaptureError("%s: a step boundary in the set-up section" % where)
            uses = list(ev.get("inputs", []))
            if kind in ("read", "free", "grad"):
                uses.append(ev["id"])
            for i in uses:
                if i not in state:
                    raise CaptureError("%s: id %d is used before it is defined" % (where, i))
                if state[i]:
                    raise CaptureError("%s: id %d is used after it was freed" % (where, i))
            news = [ev["id"]] if kind in ("op", "input", "weight") else \
                [o["id"] for o in ev.get("outputs", [])]
            for i in news:
                if i in state:
                    raise CaptureError("%s: id %d is defined twice" % (where, i))
                state[i] = False
                if section == "setup":
                    setup_ids.add(i)
            if kind == "free":
                if section == "events" and ev["id"] in setup_ids:
                    raise CaptureError("%s: id %d is a set-up value, freed by a step" %
                                       (where, ev["id"]))
                state[ev["id"]] = True


def write_program(path, doc, vdir, value_files):
    """Writes the program file (and its values) atomically: nothing half-written on failure, no
    temporary file left behind, nothing replaced that check_outputs refuses."""
    out_dir = os.path.dirname(os.path.abspath(path))
    check_program(doc)  # a file the replay would refuse is never written
    check_outputs(path, vdir)
    umask = os.umask(0)
    os.umask(umask)
    made = []  # temporary files and folders to remove if anything fails
    try:
        if vdir:
            final = os.path.join(out_dir, vdir)
            tmp = tempfile.mkdtemp(dir=out_dir, prefix=".values-")
            made.append(tmp)
            os.chmod(tmp, 0o777 & ~umask)
            with open(os.path.join(tmp, MARKER), "w") as f:
                f.write(MARKER_TEXT)
            for fname, a in sorted(value_files.items()):
                np.save(os.path.join(tmp, fname + ".npy"), a)
        fd, tmp_json = tempfile.mkstemp(dir=out_dir, prefix=".program-", suffix=".json")
        made.append(tmp_json)
        os.chmod(tmp_json, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            f.write("{\n")
            keys = [k for k in doc if k not in ("setup", "events")]
            for k in keys:
                f.write("  %s: %s,\n" % (json.dumps(k), json.dumps(doc[k])))
            for section in ("setup", "events"):
                if section not in doc:
                    continue
                f.write('  "%s": [\n' % section)
                evs = doc[section]
                for n, ev in enumerate(evs):
                    f.write("    " + json.dumps(ev, separators=(",", ":")) +
                            (",\n" if n + 1 < len(evs) else "\n"))
                f.write("  ],\n" if section == "setup" else "  ]\n}\n")
        old = None
        if vdir and os.path.isdir(final):  # an earlier capture's (check_outputs): moved aside
            old = tempfile.mkdtemp(dir=out_dir, prefix=".values-old-")
            made.append(old)
            os.rename(final, os.path.join(old, "v"))
        try:
            if vdir:
                os.rename(tmp, final)
            os.replace(tmp_json, path)
        except OSError:
            if vdir and os.path.isdir(final) and not os.path.exists(tmp):
                os.rename(final, tmp)  # the new values back to be removed
            if old:
                os.rename(os.path.join(old, "v"), final)  # the earlier values back
            raise
        made.clear()
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as e:
        raise OutputError("%s: cannot write (%s)" % (e.filename or path, e.strerror or e))
    finally:
        for m in made:
            if os.path.isdir(m):
                shutil.rmtree(m, ignore_errors=True)
            else:
                try:
                    os.unlink(m)
                except OSError:
                    pass
