"""What a capture cannot see, said rather than silently dropped (issue 40): threads the script starts
(ATen ops in another thread are not captured: a warning), and os._exit, which skips the end of the
capture (the program is written first when the status is 0)."""

import os
import sys
import threading

from .program_file import CaptureError, OutputError
from .sections import SetupError


def _say(msg):
    print("wallsim capture: " + msg, file=sys.stderr, flush=True)


def install(cap):
    """Patches threading.Thread.start and os._exit while cap runs; returns the undo."""
    pid = os.getpid()
    real_start, real_exit = threading.Thread.start, os._exit
    warned = []

    def start(thread, *a, **k):
        if not warned and not cap.closed:
            warned.append(True)
            _say("warning: the script starts a thread (%s); ATen ops run in other threads are "
                 "not captured" % thread.name)
        return real_start(thread, *a, **k)

    def exit_(code):
        if os.getpid() != pid or cap.closed:  # a forked child, or after the capture
            real_exit(code)
        cap.closed = True
        if code != 0:
            _say("the script called os._exit(%s); no program written" % code)
            real_exit(2 if cap.command else code)
        try:
            cap.finish()
        except (OutputError, SetupError) as e:
            _say(str(e))
            real_exit(2)
        except CaptureError as e:
            _say("capture bug: %s; no program written" % e)
            real_exit(1)
        _say("the script called os._exit(0); wrote %s" % cap.path)
        sys.stdout.flush()
        real_exit(0)

    threading.Thread.start = start
    os._exit = exit_

    def undo():
        threading.Thread.start = real_start
        os._exit = real_exit
    return undo
