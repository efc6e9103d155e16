#!/usr/bin/python3
"""Issue 40's fresh probe: hundreds of malformed or hostile inputs, each run and classified.

    /usr/bin/python3 tests/bad_input/probe/run_probe.py WALLSIM_BIN [--only REGEX] [--jobs N]

Run from the source tree's root (configs are relative). Every case is a shell command run with
$B the binary, $D the probe's files folder, $T a fresh temporary folder holding a FIFO $T/fifo,
$C configs/tiny.json, after an optional set-up snippet and followed by an optional check snippet
(any output of the check is a finding). Outcomes:
  OK          exit 0 (and the check passed)
  GOOD-ERROR  exit 2 with one stderr line (or 130/143 with at most one line when interrupted)
  BAD         a signal, exit 1, several stderr lines, a hang (> 60 s), an accepted input the
              case says must be refused, a failed check (data loss, a replaced FIFO), or files
              left behind by a failed command.
Results: probe_results.jsonl in --out (default $TMPDIR/wallsim-probe/out) and a summary table.
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Case:
    def __init__(self, fam, name, args=None, expect="err", msg=None, setup="", check="",
                 script=None, timeout=60, then=None, surface=None, corpus=True, left=None):
        self.fam, self.name, self.args, self.expect, self.msg = fam, name, args, expect, msg
        self.setup, self.check, self.script, self.timeout, self.then = (setup, check, script,
                                                                      timeout, then)
        self.surface = surface or fam
        self.left = left  # a path the case's own script makes (not wallsim's leftover)
        # A case is a corpus candidate when run_corpus.sh can run it as it is.
        self.corpus = corpus and not setup and not check and script is None

    def command(self):
        return self.script if self.script is not None else '"$B" ' + self.args


PROGRESS = re.compile(r"^wallsim: \w+: step \d+/\d+ done, ")
STAGING = re.compile(r"^\.(.*\.(partial|old)-\d+|program-.*|values-.*|.*\.tmp.*)$")


def listing(root):
    out = set()
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def lines_of(text):
    return [x for x in text.split("\n") if x != ""] if text else []


def run_case(c, binary, files, src):
    T = tempfile.mkdtemp(prefix="p40-")
    os.mkfifo(os.path.join(T, "fifo"))
    env = dict(os.environ, B=binary, D=files, T=T, C="configs/tiny.json")
    res = {"surface": c.surface, "name": c.fam + "." + c.name, "cmd": c.command(),
           "setup": c.setup, "check": c.check}
    if c.setup:
        s = subprocess.run(["bash", "-c", c.setup], cwd=src, env=env, capture_output=True,
                           text=True)
        if s.returncode != 0:
            res.update(outcome="SETUP-FAILED", detail=s.stderr[-300:])
            shutil.rmtree(T, ignore_errors=True)
            return res
    before = listing(T)
    t0 = time.time()
    p = subprocess.Popen(["bash", "-c", c.command()], cwd=src, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=c.timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = None
    secs = time.time() - t0
    err = err.decode("utf-8", "replace")
    # progress lines of long runs ("wallsim: run: step 2/3 done, ...") are not error lines
    errl = [x for x in lines_of(err) if not PROGRESS.match(x)]
    res.update(rc=rc, seconds=round(secs, 2), stderr=err[-4000:])
    problems = []
    if rc is None:
        problems.append("hang: killed after %d s" % c.timeout)
    elif c.expect == "signal" and rc in (130, 143, 129):
        if len(errl) > 1:
            problems.append("%d stderr lines after the signal" % len(errl))
    elif rc < 0 or rc > 128:
        problems.append("killed by signal %d" % (-rc if rc < 0 else rc - 128))
    elif rc == 1:
        problems.append("exit 1 (internal error)")
    elif rc == 2:
        if len(errl) != 1:
            problems.append("%d stderr lines, not 1" % len(errl))
    elif rc == 0:
        if c.expect in ("err", "signal"):
            problems.append("accepted (exit 0) an input that must be refused")
    elif rc == 3 and c.surface == "sweep":
        pass  # some points failed: documented
    else:
        problems.append("exit code %d" % rc)
    if rc == 0 and c.then:
        t = subprocess.run(["bash", "-c", c.then], cwd=src, env=env, capture_output=True,
                           text=True, timeout=120)
        tl = lines_of(t.stderr)
        res["then_rc"] = t.returncode
        if t.returncode not in (0, 2) or (t.returncode == 2 and len(tl) != 1):
            problems.append("then (%s): exit %d, %d lines: %s" % (c.then, t.returncode, len(tl),
                                                                  t.stderr[-300:]))
    if c.check:
        k = subprocess.run(["bash", "-c", c.check], cwd=src, env=env, capture_output=True,
                           text=True)
        if k.stdout.strip() or k.returncode != 0:
            problems.append("check: " + (k.stdout.strip() or "exit %d" % k.returncode)[:300])
    if not os.path.exists(os.path.join(T, "fifo")) or not stat_is_fifo(os.path.join(T, "fifo")):
        problems.append("the FIFO $T/fifo was replaced")
    after = listing(T)
    if rc not in (0, None) and c.expect != "signal":
        new = sorted(x for x in after - before
                     if not (c.left and (x == c.left or x.startswith(c.left + "/"))))
        if new and c.surface not in ("sweep",):
            problems.append("left behind: " + ", ".join(new[:3]))
    hidden = sorted(x for x in after if STAGING.match(os.path.basename(x)))
    if hidden:
        problems.append("staging left: " + ", ".join(hidden[:3]))
    if c.msg and rc == 2 and len(errl) == 1 and c.msg not in errl[0]:
        res["msg_mismatch"] = c.msg
    if problems:
        res["outcome"], res["detail"] = "BAD", "; ".join(problems)
    elif rc == 0:
        res["outcome"] = "OK"
    else:
        res["outcome"] = "GOOD-ERROR"
    subprocess.run(["bash", "-c", 'for m in $(awk -v t="$T" \'index($2, t) == 1 {print $2}\' '
                    '/proc/mounts); do umount -l "$m"; done; chmod -R u+rwx "$T"; true'], env=env)
    shutil.rmtree(T, ignore_errors=True)
    return res


def stat_is_fifo(path):
    import stat
    try:
        return stat.S_ISFIFO(os.lstat(path).st_mode)
    except OSError:
        return False


def all_cases(files):
    import cases_misc
    import cases_onnx
    import cases_plan
    cs = []

    def add_onnx(name, data, expect, msg=None, extra="", then=True):
        with open(os.path.join(files, "onnx40_%s.onnx" % name), "wb") as f:
            f.write(data)
        cs.append(Case("onnx", "p40_" + name, "import onnx $D/onnx40_%s.onnx --out $T/g.json%s" %
                       (name, extra), expect, msg,
                       then=('"$B" compile $T/g.json -c $C -o $T/p.json' if then else None)))
    cases_onnx.cases(add_onnx)
    cases_misc.cases(cs, Case, files)
    cases_plan.cases(cs, Case, files)
    return cs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--only", default=".")
    ap.add_argument("--jobs", type=int, default=2)
    scratch = os.path.join(tempfile.gettempdir(), "wallsim-probe")
    ap.add_argument("--out", default=os.path.join(scratch, "out"))
    ap.add_argument("--files", default=os.path.join(scratch, "files"))
    a = ap.parse_args()
    src = os.getcwd()
    os.makedirs(a.files, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    cs = [c for c in all_cases(a.files) if re.search(a.only, c.fam + "." + c.name)]
    names = [c.fam + "." + c.name for c in cs]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    serial = [c for c in cs if c.surface in ("signal", "disk", "ulimit")]
    par = [c for c in cs if c not in serial]
    results = []
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        for r in ex.map(lambda c: run_case(c, a.binary, a.files, src), par):
            results.append(r)
            print("%-11s %-45s %s" % (r["outcome"], r["name"], r.get("detail", "")[:150]),
                  flush=True)
    for c in serial:
        r = run_case(c, a.binary, a.files, src)
        results.append(r)
        print("%-11s %-45s %s" % (r["outcome"], r["name"], r.get("detail", "")[:150]), flush=True)
    with open(os.path.join(a.out, "probe_results.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    table = {}
    for r in results:
        row = table.setdefault(r["surface"], {"tried": 0, "OK": 0, "GOOD-ERROR": 0, "BAD": 0,
                                              "SETUP-FAILED": 0})
        row["tried"] += 1
        row[r["outcome"]] += 1
    print("\n| surface | inputs tried | OK | good errors | BAD |")
    for s, row in sorted(table.items()):
        print("| %s | %d | %d | %d | %d |%s" % (s, row["tried"], row["OK"], row["GOOD-ERROR"],
                                               row["BAD"], " setup failed: %d" %
                                               row["SETUP-FAILED"] if row["SETUP-FAILED"] else ""))
    tot = {k: sum(r[k] for r in table.values()) for k in ("tried", "OK", "GOOD-ERROR", "BAD")}
    print("| total | %d | %d | %d | %d |" % (tot["tried"], tot["OK"], tot["GOOD-ERROR"],
                                             tot["BAD"]))


if __name__ == "__main__":
    main()
