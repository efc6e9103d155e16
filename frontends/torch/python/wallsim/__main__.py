"""`python3 -m wallsim capture SCRIPT.py --out P.json [--values] [-- ARGS]` (what `wallsim capture`
runs): the script runs as __main__ under a capture; the program file is written only if it
finishes. Bad input is one line on stderr and exit code 2.
"""

import os
import runpy
import sys

USAGE = ("usage: wallsim capture SCRIPT.py --out P.json [--values | --meta] [--name NAME] "
         "[-- ARGS...]")


def fail(msg):
    print("wallsim capture: " + msg, file=sys.stderr)
    sys.exit(2)


def parse(argv):
    if not argv or argv[0] != "capture":
        fail(USAGE)
    argv = argv[1:]
    script_args = []
    if "--" in argv:
        k = argv.index("--")
        argv, script_args = argv[:k], argv[k + 1:]
    opts = {"out": None, "values": False, "meta": False, "name": None, "script": None}
    k = 0
    while k < len(argv):
        a = argv[k]
        if a in ("--out", "-o", "--name"):
            if k + 1 >= len(argv):
                fail("%s needs a value" % a)
            opts["out" if a != "--name" else "name"] = argv[k + 1]
            k += 2
        elif a in ("--values", "--meta"):
            opts[a[2:]] = True
            k += 1
        elif a.startswith("-"):
            fail("unknown option %s (%s)" % (a, USAGE))
        elif opts["script"] is None:
            opts["script"] = a
            k += 1
        else:
            fail("unexpected argument %s (script arguments go after --)" % a)
    if opts["script"] is None or opts["out"] is None:
        fail(USAGE)
    if opts["values"] and opts["meta"]:
        fail("--meta captures no values: --values and --meta exclude each other")
    return opts, script_args


def main(argv):
    opts, script_args = parse(argv)
    script = opts["script"]
    if not os.path.isfile(script):
        fail("no such script: %s" % script)
    out = opts["out"]
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):
        fail("the output directory does not exist: %s" % out_dir)
    try:
        import torch  # noqa: F401
    except ImportError as e:
        fail("PyTorch is not importable by %s (%s); install python3-torch" % (sys.executable, e))
    from .program_file import CaptureError, OutputError, check_outputs
    from .recorder import Capture
    from .sections import SetupError
    vdir = os.path.splitext(os.path.basename(out))[0] + ".values" if opts["values"] else None
    try:
        check_outputs(out, vdir)  # before the script runs: refused now, not after its work
    except OutputError as e:
        fail(str(e))
    name = opts["name"] or os.path.splitext(os.path.basename(script))[0]
    source = {"script": script, "argv": script_args}
    if opts["meta"]:
        source["meta"] = True
    cap = Capture(out, values=opts["values"], name=name, source=source, meta=opts["meta"])
    cap.command = True
    sys.argv = [script] + script_args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with cap:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            fail("%s exited with status %s; no program written" % (script, e.code))
        cap.closed = True
        try:
            cap.write()
        except (OutputError, SetupError) as e:
            fail(str(e))
        except CaptureError as e:
            print("wallsim capture: capture bug: %s; no program written" % e, file=sys.stderr)
            sys.exit(1)
    except (OutputError, SetupError) as e:  # writing the program when the script returned
        fail(str(e))
    except CaptureError as e:  # the capture made a file the replay would refuse: its bug
        print("wallsim capture: capture bug: %s; no program written" % e, file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # the user's script raised: one line, nothing written
        msg = str(e).strip().splitlines()
        hint = ""
        if opts["meta"] and msg and "meta" in msg[0]:
            hint = (" (--meta runs ATen ops on meta tensors: autograd refuses their gradients "
                    "for host parameters, so a training step needs a capture without --meta)")
        fail("%s raised %s%s; no program written%s" % (
            script, type(e).__name__, (": " + msg[0]) if msg else "", hint))
    evs = cap.written

    def count(kind):
        return sum(1 for ev in evs if ev["ev"] == kind)

    setup = ", %d set-up events" % len(cap.written_setup) if cap.written_setup else ""
    print("wallsim capture: wrote %s (%d events: %d ops, %d host ops, %d reads, %d steps%s)" % (
        out, len(evs), count("op"), count("host_op"), count("read"), count("step") + 1, setup))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (KeyboardInterrupt, RuntimeError) as e:
        # Ctrl-C, wherever it lands (torch's C import wraps it in a RuntimeError): one line,
        # the shell's 128 + SIGINT
        if isinstance(e, RuntimeError) and not str(e).startswith("KeyboardInterrupt"):
            raise
        print("wallsim capture: interrupted; no program written", file=sys.stderr)
        sys.exit(130)
