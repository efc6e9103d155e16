"""Issue 40 probe: program files, capture, sweeps and collect, output folders, configs and --set,
signals, a full disk and ulimit."""
import copy
import json
import os

X_IN = {"ev": "input", "id": 0, "name": "x", "dtype": "fp32", "shape": [4, 8]}
W = {"ev": "weight", "id": 1, "name": "w", "dtype": "fp32", "shape": [8, 8]}
MM = {"ev": "op", "id": 2, "op": "matmul", "inputs": [0, 1], "attrs": {}, "dtype": "fp32",
      "shape": [4, 8], "aten": "aten.mm.default", "module": "fc"}
RELU = {"ev": "op", "id": 3, "op": "relu", "inputs": [2], "attrs": {}, "dtype": "fp32",
        "shape": [4, 8], "aten": "aten.relu.default", "module": "act"}
BASE = [X_IN, W, MM, RELU, {"ev": "free", "id": 2}, {"ev": "read", "id": 3, "reason": "item"},
        {"ev": "step"}]
RUN_T = "run -c $C -w program:file=$D/{f} --out $T/o"
DFL = ("/usr/bin/python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
       "signal.signal(signal.SIGHUP, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])'")
RUN_O = "run -c $C -w gemm:m=64,k=64,n=64 --mode native --out "
ONNX_OK = "import onnx $D/onnx40_input_rank_12.onnx --out "


def prog(events=None, **top):
    d = {"format": "wallsim-program", "version": 1, "name": "p"}
    d.update(top)
    d["events"] = copy.deepcopy(BASE) if events is None else events
    return d


def ev(i, **kw):
    e = copy.deepcopy(BASE)
    e[i].update(kw)
    return e


def cases(cs, Case, files):
    def write(name, data):
        with open(os.path.join(files, name), "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return name

    # ---- program files ------------------------------------------------------------------------
    def p(name, doc, expect="err", msg=None, extra="", raw=None):
        f = write("program40_%s.json" % name, raw if raw is not None else json.dumps(doc))
        cs.append(Case("program", "p40_" + name, RUN_T.format(f=f) + extra, expect, msg))

    p("base_ok", prog(), "ok")
    p("wrong_format", prog(format="wallsim-plan"))
    p("version_2", prog(version=2))
    p("version_string", prog(version="1"))
    p("no_events", {"format": "wallsim-program", "version": 1, "name": "p"})
    p("events_empty", prog([]), "any")
    p("events_object", prog({"a": 1}))
    p("event_not_object", prog([1, 2]))
    p("ev_unknown", prog(BASE[:1] + [{"ev": "teleport", "id": 5}]))
    p("ev_missing", prog([{"id": 0, "name": "x", "dtype": "fp32", "shape": [4]}]))
    p("id_reused", prog(ev(1, id=0)))
    p("id_negative", prog(ev(0, id=-1)))
    p("id_2_63", prog(ev(0, id=2 ** 63)))
    p("id_float", prog(ev(0, id=0.5)))
    p("use_before_def", prog([MM, X_IN, W]))
    p("use_after_free", prog(BASE[:3] + [{"ev": "free", "id": 2}, RELU]))
    p("free_twice", prog(BASE[:5] + [{"ev": "free", "id": 2}]))
    p("free_unknown", prog(BASE + [{"ev": "free", "id": 77}]))
    p("read_freed", prog(BASE[:5] + [{"ev": "read", "id": 2, "reason": "item"}]))
    p("read_reason_bogus", prog(ev(5, reason="telepathy")))
    p("read_unknown_id", prog(ev(5, id=99)))
    p("op_unknown", prog(ev(2, op="matmulx")))
    p("op_arity", prog(ev(2, inputs=[0])))
    p("op_input_self", prog(ev(2, inputs=[2, 1])))
    p("op_attrs_not_object", prog(ev(3, attrs=[1])))
    p("op_attr_unknown", prog(ev(3, attrs={"colour": 1})))
    p("op_dtype_unknown", prog(ev(2, dtype="fp7")))
    p("op_shape_wrong", prog(ev(2, shape=[4, 9])))
    p("op_shape_negative", prog(ev(2, shape=[-4, 8])))
    p("op_no_aten", prog([X_IN, W, {k: v for k, v in MM.items() if k != "aten"}]), "any")
    p("op_module_not_string", prog(ev(2, module=5)))
    p("input_shape_empty", prog(ev(0, shape=[])), "any")
    p("input_shape_zero", prog(ev(0, shape=[0, 8])), "any")
    p("input_dims_overflow", prog(ev(0, shape=[2 ** 32, 2 ** 32, 2 ** 32])))
    p("weight_huge", prog(ev(1, shape=[2 ** 20, 2 ** 20])))
    p("input_dtype_int64", prog(ev(0, dtype="int64")))
    p("input_name_newline", prog(ev(0, name="a\nb")), "any")
    p("weight_name_dotdot", prog(ev(1, name="../../../../tmp/wallsim_probe_w")), "any",
      extra=" --functional")
    host = {"ev": "host_op", "aten": "aten.foo.default", "module": "m", "inputs": [0],
            "outputs": [{"id": 5, "dtype": "fp32", "shape": [4, 8]}], "flops": 10, "bytes": 10}
    p("host_op_ok", prog(BASE[:1] + [host, {"ev": "read", "id": 5, "reason": "item"}]), "ok")
    for nm, kv in [("flops_negative", {"flops": -1}), ("flops_1e300", {"flops": 1e300}),
                   ("bytes_2_63", {"bytes": 2 ** 63}), ("outputs_missing", {"outputs": None}),
                   ("outputs_empty", {"outputs": []}), ("aten_empty", {"aten": ""}),
                   ("output_shape_negative", {"outputs": [{"id": 5, "dtype": "fp32",
                                                          "shape": [-1]}]}),
                   ("output_id_reused", {"outputs": [{"id": 0, "dtype": "fp32", "shape": [4]}]}),
                   ("output_dims_overflow", {"outputs": [{"id": 5, "dtype": "fp32",
                                                         "shape": [2 ** 40, 2 ** 40]}]})]:
        h = dict(host, **kv)
        if kv.get("outputs", 1) is None:
            del h["outputs"]
        p("host_op_" + nm, prog(BASE[:1] + [h]),
          "any" if nm in ("flops_1e300", "bytes_2_63", "outputs_empty", "aten_empty") else "err")
    p("step_only", prog([{"ev": "step"}]), "any")
    p("steps_10000", prog(BASE[:4] + [{"ev": "step"}] * 10000), "any")
    p("dim_names_length", prog(ev(0, dim_names=["seq"])))
    p("dim_names_not_string", prog(ev(0, dim_names=[5, None])))
    p("dims_unknown_id", prog(dims={"seq": {"axis_of": [99, 0]}}))
    p("dims_axis_range", prog(ev(0, dim_names=["seq", None]), dims={"seq": {"axis_of": [0, 7]}}))
    p("bound_unknown_name", prog(), "err", extra=" --bound 'nope<=8'")
    p("bound_zero", prog(ev(0, dim_names=["seq", None]), dims={"seq": {"axis_of": [0, 0]}}),
      "err", extra=" --bound 'seq<=0'")
    p("bound_below_extent", prog(ev(0, dim_names=["seq", None]),
                                 dims={"seq": {"axis_of": [0, 0]}}), "err", extra=" --bound 'seq<=2'")
    p("inplace_of_unknown", prog(ev(3, inplace_of=99)), "any")
    p("unknown_top_key", prog(colour="red"))
    p("source_not_object", prog(source=5))
    p("name_not_string", prog(name=[1]))
    p("values_missing_folder", prog(values="nope.values"), "err", extra=" --functional")
    p("values_is_file", prog(values="program40_base_ok.json"), "err", extra=" --functional")
    p("values_fifo_name", prog(values="fifo"), "err", extra=" --functional")
    p("values_empty_string", prog(values=""), "err", extra=" --functional")
    p("duplicate_key", None, raw=json.dumps(prog()).replace('"name": "p"',
                                                            '"name": "p", "name": "q"'))
    p("trailing_garbage", None, raw=json.dumps(prog()) + "xx")
    os.makedirs(os.path.join(files, "program40_vals.values"), exist_ok=True)
    write("program40_vals.values/unrelated.txt", "not a value (git keeps no empty folder)\n")
    p("values_npy_missing", prog(values="program40_vals.values"), "err", extra=" --functional")
    os.makedirs(os.path.join(files, "program40_badnpy.values"), exist_ok=True)
    for n in ("i0.npy", "w1.npy", "r0.npy"):
        write("program40_badnpy.values/" + n, b"\x93NUMPY\x01\x00" + b"\x10\x00" + b"{}" * 8)
    p("values_npy_corrupt", prog(values="program40_badnpy.values"), "err", extra=" --functional")
    # the values folder as a symbolic link out of the program's folder (set up in $T)
    cs.append(Case("program", "p40_values_symlink_escape",
                   'run -c $C -w program:file=$T/p/p.json --functional --out $T/o', "err",
                   setup='mkdir -p $T/p $T/outside && ln -s $T/outside $T/p/p.values && '
                         "printf '%%s' '%s' > $T/p/p.json" %
                         json.dumps(prog(values="p.values")).replace("'", "")))
    cs.append(Case("program", "p40_file_fifo", "run -c $C -w program:file=$T/fifo --out $T/o"))
    cs.append(Case("program", "p40_file_dev_zero",
                   "run -c $C -w program:file=/dev/zero --out $T/o"))
    cs.append(Case("program", "p40_file_dir", "run -c $C -w program:file=$D --out $T/o"))

    # ---- capture --------------------------------------------------------------------------------
    def cap(name, body, expect="err", extra="", args="", setup="", check="", out="$T/p.json",
            timeout=60, then=None, left=None):
        write("capture40_%s.py" % name, body)
        cs.append(Case("capture", "p40_" + name,
                       "capture $D/capture40_%s.py --out %s%s%s" % (
                           name, out, extra, (" -- " + args) if args else ""),
                       expect, setup=setup, check=check, timeout=timeout, corpus=False,
                       then=then, left=left))

    imp = ("import sys, os\nsys.path.insert(0, os.path.join(os.getcwd(), 'frontends/torch/python'))\n"
           "import torch\nimport wallsim\n")
    mm = "x = torch.randn(4, 8); w = torch.randn(8, 8)\ny = (x @ w).relu()\nprint(y.sum().item())\n"
    cap("ok", imp + mm, "ok")
    cap("syntax_error", "def f(:\n")
    cap("raises", imp + mm + "raise ValueError('boom')\n")
    cap("sys_exit_3", imp + mm + "sys.exit(3)\n", "any")
    cap("sys_exit_0", imp + mm + "sys.exit(0)\n", "any")
    cap("os_exit_0", imp + mm + "os._exit(0)\n", "any")
    cap("no_ops", "print('hi')\n", "any")
    cap("keyboard_interrupt", imp + mm + "raise KeyboardInterrupt\n", "signal")
    cap("closes_stderr", imp + mm + "os.close(2)\n", "any")
    cap("chdir_tmp", imp + "os.chdir('/')\n" + mm, "any", out="$T/rel/p.json",
        setup="mkdir $T/rel")
    cap("deletes_out_dir", imp + "import shutil; shutil.rmtree(os.environ['T'] + '/d')\n" + mm,
        "any", out="$T/d/p.json", setup="mkdir $T/d")
    cap("out_becomes_dir", imp + "os.mkdir(os.environ['T'] + '/p.json')\n" + mm, "any",
        left="p.json")
    cap("out_becomes_fifo", imp + "os.mkfifo(os.environ['T'] + '/p.json')\n" + mm, "any",
        check='[ -p $T/p.json ] || echo "the FIFO made at p.json was replaced"', left="p.json")
    cap("threads", imp + "import threading\nts=[threading.Thread(target=lambda: [torch.randn(4,4)@"
        "torch.randn(4,4) for _ in range(5)]) for _ in range(4)]\n[t.start() for t in ts]\n"
        "[t.join() for t in ts]\n", "any")
    cap("fork", imp + "pid = os.fork()\nif pid == 0:\n    x = torch.randn(4,4) @ torch.randn(4,4)\n"
        "    os._exit(0)\nos.waitpid(pid, 0)\n" + mm, "any")
    cap("nested_capture", imp + "with wallsim.capture(os.environ['T'] + '/inner.json'):\n    " +
        mm.replace("\n", "\n    ").rstrip() + "\n", "any")  # says so on stderr (issue 40)
    cap("float64", imp + "x = torch.randn(4, 8, dtype=torch.float64)\nprint((x @ x.T).sum().item())\n",
        "any")
    cap("complex", imp + "x = torch.randn(4, 4, dtype=torch.complex64)\nprint((x @ x).abs().sum().item())\n",
        "any", then='"$B" run -c $C -w program:file=$T/p.json --out $T/o')
    cap("int64_overflow", imp + "x = torch.full((4,), 2**62, dtype=torch.int64)\n"
        "print((x * 4).sum().item())\n", "any")
    cap("sparse", imp + "x = torch.randn(4, 4).to_sparse()\nprint(torch.sparse.mm(x, torch.randn(4, 4)).sum().item())\n",
        "any")
    cap("mark_dynamic_bad_axis", imp + "x = torch.randn(4, 8)\nwallsim.mark_dynamic(x, 7, 'seq')\n"
        "print((x @ x.T).sum().item())\n", "any")
    cap("mark_dynamic_bad_name", imp + "x = torch.randn(4, 8)\nwallsim.mark_dynamic(x, 0, '../x')\n"
        "print((x @ x.T).sum().item())\n", "any")
    cap("step_outside", imp + "wallsim.step(); wallsim.step()\n" + mm, "any")
    cap("huge_output_write", imp + "sys.stdout.write('x' * 50_000_000)\n" + mm, "any")
    cap("name_slash", imp + mm, "any", extra=" --name ../../evil")
    cap("values_and_meta", imp + mm, "err", extra=" --values --meta")
    cap("out_missing_dir", imp + mm, "err", out="$T/nope/p.json")
    cap("out_fifo", imp + mm, "err", out="$T/fifo")
    cap("values_symlink_user_dir", imp + mm, "err", extra=" --values",
        setup="mkdir $T/user && echo keep > $T/user/thesis.tex && ln -s $T/user $T/p.values",
        check='[ -f $T/user/thesis.tex ] || echo "user file behind the p.values link lost"')
    cap("values_user_dir", imp + mm, "err", extra=" --values",
        setup="mkdir $T/p.values && echo keep > $T/p.values/thesis.tex",
        check='[ -f $T/p.values/thesis.tex ] || echo "user file in p.values lost"')
    cap("out_symlink_to_file", imp + mm, "any", out="$T/link.json",
        setup="echo keep > $T/victim && ln -s $T/victim $T/link.json",
        check='[ "$(cat $T/victim)" = keep ] || echo "wrote through the symlink into its target"')
    cs.append(Case("capture", "p40_script_fifo", "capture $T/fifo --out $T/p.json", corpus=False))
    cs.append(Case("capture", "p40_script_dir", "capture $D --out $T/p.json", corpus=False))
    cs.append(Case("capture", "p40_script_missing", "capture $D/nope.py --out $T/p.json",
                   corpus=False))

    # ---- sweeps and collect -----------------------------------------------------------------
    smoke = json.load(open("configs/sweeps/smoke.json"))

    def sw(name, mutate, expect="err", extra=" --count", msg=None):
        s = copy.deepcopy(smoke)
        mutate(s)
        f = write("sweep40_%s.json" % name, json.dumps(s))
        cs.append(Case("sweep", "p40_" + name, "sweep $D/%s%s" % (f, extra), expect, msg))

    sw("base_config_missing", lambda s: s.update(base_config="configs/nope.json"))
    sw("base_config_dir", lambda s: s.update(base_config="configs"))
    sw("base_config_dev_zero", lambda s: s.update(base_config="/dev/zero"))
    sw("base_config_number", lambda s: s.update(base_config=5))
    sw("workload_shell", lambda s: s.update(workloads=["gemm:m=1;touch /tmp/wallsim_pwn"]))
    sw("workload_backtick", lambda s: s.update(workloads=["gemm:m=`id`"]))
    sw("workload_newline", lambda s: s.update(workloads=["gemm:m=64\n,k=64"]))
    sw("modes_empty", lambda s: s.update(modes=[]))
    sw("modes_duplicate", lambda s: s.update(modes=["native", "native"]), "any")
    sw("modes_not_list", lambda s: s.update(modes="native"))
    sw("axes_value_object", lambda s: s["axes"].update({"arch.sbuf.partitions": [{"a": 1}]}))
    sw("axes_empty_list", lambda s: s["axes"].update({"arch.sbuf.partitions": []}))
    sw("axes_not_list", lambda s: s["axes"].update({"arch.sbuf.partitions": 16}))
    sw("axes_unknown_path", lambda s: s["axes"].update({"arch.nope.x": [1]}))
    sw("axes_empty_path", lambda s: s["axes"].update({"": [1]}))
    sw("zip_not_list", lambda s: s.update(zip={"a": [1]}))
    sw("timeout_zero", lambda s: s.update(timeout_s=0))
    sw("timeout_negative", lambda s: s.update(timeout_s=-5))
    sw("timeout_1e300", lambda s: s.update(timeout_s=1e300))
    sw("trace_level_bogus", lambda s: s.update(trace_level="all"))
    sw("seed_negative", lambda s: s.update(seed=-1))
    sw("seed_2_64", lambda s: s.update(seed=2 ** 64))
    sw("steps_huge", lambda s: s.update(steps=2 ** 40))
    sw("functional_string", lambda s: s.update(functional="yes"))
    sw("comment_key", lambda s: s.update(_comment="fine"), "ok")
    sw("list_ok", lambda s: None, "ok", extra=" --list")
    sw("spec_array", lambda s: None, "err", extra=" --count")
    write("sweep40_spec_array.json", "[1,2]")
    cs.append(Case("sweep", "p40_jobs_zero", "sweep configs/sweeps/smoke.json --out $T/s --jobs 0"))
    cs.append(Case("sweep", "p40_jobs_huge",
                   "sweep configs/sweeps/smoke.json --out $T/s --jobs 99999"))
    cs.append(Case("sweep", "p40_index_negative",
                   "sweep configs/sweeps/smoke.json --out $T/s --index -1"))
    line = {"index": 0, "id": "0123456789abcdef", "status": "ok", "workload": "w",
            "mode": "native", "axes": {}, "figures": {}, "seconds": 1.0}

    def coll(name, text, expect="any", setup=None, extra=""):
        if setup is None:
            d = "collect40_" + name
            os.makedirs(os.path.join(files, d), exist_ok=True)
            write(d + "/results.jsonl", text)
            cs.append(Case("collect", "p40_" + name, "collect $D/%s%s" % (d, extra), expect))
        else:
            cs.append(Case("collect", "p40_" + name, "collect $T/s" + extra, expect, setup=setup))

    J = lambda **kw: json.dumps(dict(line, **kw)) + "\n"  # noqa: E731
    coll("ok_line", J(), "ok")
    coll("not_json", "{nope\n" + J(), "any")
    coll("array_line", "[1,2,3]\n")
    coll("index_negative", J(index=-1))
    coll("index_float", J(index=0.5))
    coll("index_1e300", J(index=1e300))
    coll("index_string", J(index="0"))
    coll("id_dotdot", J(id="../../.."))
    coll("id_slash", J(id="a/b"))
    coll("id_empty", J(id=""))
    coll("status_bogus", J(status="maybe"))
    coll("figures_array", J(figures=[1]))
    coll("figures_nested", J(figures={"a": {"b": 1}}))
    coll("axes_nested", J(axes={"a": {"b": 1}}))
    coll("figure_huge", J(figures={"total_ns": 1e308}), "any")
    coll("csv_injection", J(workload="=cmd|'/c calc'!A1,\"x\"\n"), "any")
    coll("duplicate_index", J() + J(id="fedcba9876543210"), "any")
    coll("nul_bytes", J()[:-2] + "\0\0}\n")
    coll("invalid_utf8", J(workload="w").replace('"w"', '"\xff"').encode("latin-1"))
    coll("deep_nesting", '{"index":0,"figures":' + "[" * 5000 + "]" * 5000 + "}\n")
    coll("long_line_8mb", J(workload="w" * 8_000_000), "any")
    coll("empty_file", "", "any")
    coll("only_newlines", "\n\n\n", "any")
    coll("torn_last_line", J() + J()[:30], "any")
    coll("missing_keys", '{"index": 0}\n')
    coll("results_symlink", None, "any",  # reading through a link is harmless
         setup="mkdir $T/s && echo '%s' > $T/victim && ln -s $T/victim $T/s/results.jsonl" %
               J().strip())
    coll("results_dir", None, "err", setup="mkdir -p $T/s/results.jsonl")
    coll("results_fifo", None, "err", setup="mkdir $T/s && mkfifo $T/s/results.jsonl")
    coll("results_missing", None, "err", setup="mkdir $T/s")
    coll("dir_missing", None, "err", setup="true")
    coll("dir_is_file", None, "err", setup="echo x > $T/s")
    coll("csv_into_input", None, "any",
         setup="mkdir $T/s && echo '%s' > $T/s/results.jsonl" % J().strip(),
         extra=" --csv $T/s/results.jsonl")
    coll("csv_missing_dir", None, "err",
         setup="mkdir $T/s && echo '%s' > $T/s/results.jsonl" % J().strip(),
         extra=" --csv $T/nope/r.csv")
    coll("csv_empty", None, "any",
         setup="mkdir $T/s && echo '%s' > $T/s/results.jsonl" % J().strip(), extra=" --csv ''")  # '' is standard output, as no --csv
    cs.append(Case("sweep", "p40_results_symlink_run",
                   "sweep configs/sweeps/smoke.json --out $T/s", "err",
                   setup="mkdir $T/s && echo keep > $T/victim && ln -s $T/victim $T/s/results.jsonl",
                   check='[ "$(cat $T/victim)" = keep ] || echo "appended through the link"'))
    cs.append(Case("sweep", "p40_results_fifo_run", "sweep configs/sweeps/smoke.json --out $T/s",
                   "err", setup="mkdir $T/s && mkfifo $T/s/results.jsonl"))
    cs.append(Case("sweep", "p40_out_user_dir", "sweep configs/sweeps/smoke.json --out $T/s",
                   "any", setup="mkdir $T/s && echo keep > $T/s/thesis.tex",
                   check='[ -f $T/s/thesis.tex ] || echo "user file lost"'))
    cs.append(Case("sweep", "p40_forged_ok_lines", "sweep configs/sweeps/smoke.json --out $T/s",
                   "any", setup="mkdir $T/s && for i in $(seq 0 11); do echo "
                   "'{\"index\":'$i',\"id\":\"../../../etc\",\"status\":\"ok\"}' "
                   ">> $T/s/results.jsonl; done"))
    cs.append(Case("sweep", "p40_points_symlink", "sweep configs/sweeps/smoke.json --out $T/s",
                   "any", setup="mkdir -p $T/s $T/elsewhere && echo keep > $T/elsewhere/k && "
                   "ln -s $T/elsewhere $T/s/points",
                   check='[ -f $T/elsewhere/k ] || echo "file behind the points link lost"'))

    # ---- output folders -----------------------------------------------------------------------
    def out(name, args, expect="err", setup="", check=""):
        cs.append(Case("output", "p40_" + name, args, expect, setup=setup, check=check))

    keep = 'for f in $(cat $T/.keep 2>/dev/null); do [ -e "$f" ] || echo "$f lost"; done'
    out("run_marker_and_user_file", RUN_O + "$T/o", "any",  # documented: the marker is wallsim's
        setup="mkdir $T/o && touch $T/o/.wallsim-output && echo k > $T/o/thesis.tex")
    out("run_symlink_to_user_dir", RUN_O + "$T/l",
        setup="mkdir $T/u && echo k > $T/u/thesis.tex && ln -s $T/u $T/l",
        check='[ -f $T/u/thesis.tex ] || echo "user file behind the link lost"')
    out("run_symlink_to_marker_dir", RUN_O + "$T/l", "any",
        setup="mkdir $T/u && touch $T/u/.wallsim-output && ln -s $T/u $T/l",
        check='[ -L $T/l ] || [ -d $T/u ] || echo "link target gone"')
    out("run_dangling_symlink", RUN_O + "$T/l", "any", setup="ln -s $T/nowhere $T/l")
    out("run_out_dot", RUN_O + ".", "err", check="git status --porcelain | grep -v '^??' | head -3")
    out("run_out_dotdot", RUN_O + "$T/x/..", setup="mkdir $T/x")
    out("run_out_root", RUN_O + "/")
    out("run_out_trailing_slash", RUN_O + "$T/o/", "ok")
    out("run_out_under_file", RUN_O + "$T/f/o", setup="echo x > $T/f")
    out("run_out_long_name", RUN_O + "$T/" + "n" * 300)
    out("run_out_newline", RUN_O + "\"$T/a\"$'\\n'b", "any")
    out("run_out_proc", RUN_O + "/proc/self/o")
    out("run_out_char_device", RUN_O + "$T/null", setup="mknod $T/null c 1 3",
        check='[ -c $T/null ] || echo "device node replaced"')
    out("run_out_socket", RUN_O + "$T/sock",
        setup="/usr/bin/python3 -c \"import socket,os; s=socket.socket(socket.AF_UNIX); "
              "s.bind(os.environ['T']+'/sock')\"",
        check='[ -S $T/sock ] || echo "socket replaced"')
    out("run_out_readonly_dir", RUN_O + "$T/ro/o",
        setup="mkdir $T/ro && mount -t tmpfs -o size=1m,ro tmpfs $T/ro")
    out("exec_out_user_dir", "exec examples/plans/vector_add.json -c configs/trn2.json --out $T/o",
        setup="mkdir $T/o && echo k > $T/o/stats.json && echo k > $T/o/thesis.tex",
        check='[ -f $T/o/thesis.tex ] || echo "thesis.tex lost"')
    out("study_out_user_dir", "study granularity -c $C --spec configs/studies/granularity.json "
        "--out $T/o", setup="mkdir $T/o && echo k > $T/o/study.json && echo k > $T/o/thesis.tex",
        check='[ -f $T/o/thesis.tex ] || echo "thesis.tex lost"')
    for cmd, nm in [("compile examples/graphs/mlp.json -c $C -o ", "compile"),
                    ("plan format examples/plans/vector_add.json -o ", "plan_format"),
                    (ONNX_OK, "import")]:
        out(nm + "_char_device", cmd + "$T/null", setup="mknod $T/null c 1 3",
            check='[ -c $T/null ] || echo "device node replaced"')
        out(nm + "_socket", cmd + "$T/sock",
            setup="/usr/bin/python3 -c \"import socket,os; s=socket.socket(socket.AF_UNIX); "
                  "s.bind(os.environ['T']+'/sock')\"",
            check='[ -S $T/sock ] || echo "socket replaced"')
        out(nm + "_symlink_to_fifo", cmd + "$T/l", setup="ln -s $T/fifo $T/l")
        out(nm + "_symlink_to_file", cmd + "$T/l", "any",
            setup="echo keep > $T/victim && ln -s $T/victim $T/l",
            check='[ "$(cat $T/victim)" = keep ] || echo "wrote through the symlink into its target"')
        out(nm + "_missing_dir", cmd + "$T/nope/x.json")
        out(nm + "_readonly_file", cmd + "$T/ro.json", "any",
            setup="echo keep > $T/ro.json && chmod 444 $T/ro.json")
    out("import_weights_symlink_user_dir", ONNX_OK.replace("input_rank_12", "weights_name_unicode")
        + "$T/g.json --weights", setup="mkdir $T/u && echo k > $T/u/thesis.tex && "
        "ln -s $T/u $T/g.weights", check='[ -f $T/u/thesis.tex ] || echo "user file lost"')
    out("import_weights_user_dir", ONNX_OK.replace("input_rank_12", "weights_name_unicode")
        + "$T/g.json --weights", setup="mkdir $T/g.weights && echo k > $T/g.weights/thesis.tex",
        check='[ -f $T/g.weights/thesis.tex ] || echo "user file lost"')
    out("import_weights_fifo", ONNX_OK.replace("input_rank_12", "weights_name_unicode")
        + "$T/g.json --weights", setup="mkfifo $T/g.weights",
        check='[ -p $T/g.weights ] || echo "FIFO replaced"')
    out("import_out_is_input", "import onnx $T/m.onnx --out $T/m.onnx", "any",
        setup="cp $D/onnx40_input_rank_12.onnx $T/m.onnx")
    out("collect_csv_char_device", "collect $T/s --csv $T/null",
        setup="mkdir $T/s && cp tests/bad_input/files/sweep_dir/results.jsonl $T/s/ && "
              "mknod $T/null c 1 3", check='[ -c $T/null ] || echo "device node replaced"')

    # ---- configs and --set --------------------------------------------------------------------
    def st(name, sets, expect="err", cmd="config dump -c $C"):
        cs.append(Case("set", "p40_" + name, cmd + "".join(" --set " + s for s in sets), expect))

    for nm, s, e in [
            ("int_2_64", "arch.hbm.bytes=18446744073709551616", "err"),
            ("int_1e308", "arch.sbuf.partitions=1e308", "err"),
            ("int_minus_zero", "arch.dma.engines=-0", "any"),
            ("int_hex", "arch.sbuf.partitions=0x20", "err"),
            ("int_leading_zero", "arch.sbuf.partitions=032", "any"),
            ("int_plus", "arch.sbuf.partitions=+32", "any"),
            ("int_space", "'arch.sbuf.partitions= 32'", "any"),
            ("arch_empty_object", "'arch={}'", "any"),
            ("arch_null", "arch=null", "err"),
            ("whole_root", "'={}'", "err"),
            ("name_empty", "name=", "err"),
            ("name_quoted", "'name=\"x\"'", "any"),
            ("name_unicode", "'name=\u00e9\u6f22'", "any"),
            ("name_newline", "$'name=a\\nb'", "any"),
            ("name_10k", "name=" + "n" * 10000, "any"),
            ("comment_key", "arch._note=x", "any"),
            ("array_index", "arch.sbuf.0=1", "err"),
            ("chip_cores_0", "chip.cores=0", "err"),
            ("chip_cores_1025", "chip.cores=1025", "err"),
            ("torus_0", "topology.torus_x=0", "err"),
            ("instances_huge", "topology.instances=2147483648", "err"),
            ("bandwidth_nan", "timing.hbm.bandwidth_gb_per_s=nan", "err"),
            ("bandwidth_inf", "timing.hbm.bandwidth_gb_per_s=inf", "err"),
            ("bandwidth_tiny", "timing.hbm.bandwidth_gb_per_s=1e-300", "err"),
            ("latency_negative", "links.efa.latency_ns=-1", "err"),
            ("trailing_dot", "arch.sbuf.=1", "err"),
            ("leading_dot", ".arch=1", "err"),
            ("only_equals", "=", "err"),
            ("value_trailing_garbage", "arch.sbuf.partitions=32x", "err"),
            ("value_two_json", "'arch.sbuf.partitions=32 33'", "err"),
            ("seed_negative", "runtime.seed=-1", "err"),
            ("seed_2_64", "runtime.seed=18446744073709551616", "err"),
            ("string_for_bool", "topology.instance_ring=yes", "err"),
            ("bool_for_number", "links.efa.latency_ns=true", "err")]:
        st(nm, [s], e)
    st("thousand_sets", ["arch.sbuf.partitions=32"] * 1000, "any")
    st("conflicting_sets", ["arch.sbuf.partitions=16", "arch.sbuf.partitions=64"], "any")
    st("set_then_child", ["'arch.sbuf={\"partitions\":16}'", "arch.sbuf.partitions=32"], "any")
    st("validate_set_bad", ["arch.sbuf.partitions=-4"], "err", cmd="config validate $C")
    st("run_set_cores_0", ["chip.cores=0"], "err", cmd="run -c $C -w gemm:m=64,k=64,n=64 --mode native --out $T/o")
    st("run_set_sbuf_1", ["arch.sbuf.bytes_per_partition=1"], "err", cmd="run -c $C -w gemm:m=64,k=64,n=64 --mode native --out $T/o")
    st("run_set_freq_tiny", ["timing.tensor.freq_mhz=1e-9"], "err", cmd="run -c $C -w gemm:m=64,k=64,n=64 --mode native --out $T/o")
    for nm, arg, setup in [("missing", "$T/nope.json", ""), ("dir", "$T", ""),
                           ("fifo", "$T/fifo", ""), ("dev_zero", "/dev/zero", ""),
                           ("symlink_loop", "$T/loop", "ln -s $T/loop $T/loop"),
                           ("bom", "$D/config40_bom.json", ""),  # RFC 8259 allows ignoring a BOM
                           ("utf16", "$D/config40_utf16.json", ""),
                           ("big_string", "$D/config40_big_string.json", ""),
                           ("hbm_min", "$D/config40_hbm_min.json", ""),
                           ("hbm_2_50", "$D/config40_hbm_2_50.json", ""),
                           ("unreadable", "$T/u.json", "cp configs/tiny.json $T/u.json && "
                            "chmod 000 $T/u.json")]:
        cs.append(Case("config", "p40_" + nm, "config validate " + arg,
                       "any" if nm in ("hbm_min", "hbm_2_50", "big_string", "unreadable", "bom")
                       else "err", setup=setup))
    tiny = open("configs/tiny.json").read()
    write("config40_bom.json", "\ufeff" + tiny)
    write("config40_utf16.json", tiny.encode("utf-16"))
    t = json.loads(tiny)
    t["_note"] = "n" * 20_000_000
    write("config40_big_string.json", json.dumps(t))
    t = json.loads(tiny)
    t["arch"]["hbm"] = dict(t["arch"].get("hbm", {}), bytes=2 ** 20)
    write("config40_hbm_min.json", json.dumps(t))
    t["arch"]["hbm"]["bytes"] = 2 ** 50
    write("config40_hbm_2_50.json", json.dumps(t))

    # ---- signals: SIGINT / SIGTERM / SIGHUP mid-run -------------------------------------------
    big = "run -c $C -w gemm:m=4096,k=4096,n=4096 --mode native --trace-level instructions"

    def sig(name, cmd, signame, delay, setup="", check=""):
        # The child gets default INT and HUP handlers (a script's background job ignores SIGINT,
        # and nohup ignores SIGHUP), as a command typed at a terminal has them.
        script = ('$R "$B" %s 2>$T/../p40sig.err & p=$!; sleep %s; kill -%s $p; wait $p; rc=$?; '
                  'cat $T/../p40sig.err >&2; rm -f $T/../p40sig.err; exit $rc') % (cmd, delay,
                                                                                   signame)
        script = script.replace("$T/../p40sig.err", "/tmp/p40sig.$$.err").replace("$R", DFL)
        cs.append(Case("signal", "p40_" + name, None, "signal", setup=setup, check=check,
                       script=script, corpus=False))

    nohalf = ('[ -e $T/o ] && echo "output folder left after the signal: $(ls -A $T/o | head -3)"; '
              'ls -A $T | grep -E "partial|old" ; true')
    for s in ("INT", "TERM", "HUP"):
        for d in ("0.3", "1.5"):
            sig("run_%s_%s" % (s.lower(), d.replace(".", "_")), big + " --out $T/o", s, d,
                check=nohalf)
    sig("run_int_keeps_earlier", big + " --out $T/o", "INT", "1.0",
        setup='"$B" run -c $C -w gemm:m=64,k=64,n=64 --mode native --out $T/o >/dev/null 2>&1 && '
              "cp $T/o/stats.json $T/old_stats.json",
        check='cmp -s $T/o/stats.json $T/old_stats.json || echo "earlier output not kept"')
    write("sweep40_slow.json", json.dumps(dict(smoke, workloads=["gemm:m=2048,k=2048,n=2048"],
                                               modes=["native"], trace_level="instructions")))
    lines_ok = ('[ ! -e $T/s/results.jsonl ] || /usr/bin/python3 -c "import json,sys; '
                '[json.loads(x) for x in open(sys.argv[1])]" $T/s/results.jsonl || '
                'echo "results.jsonl has a torn line"')
    sig("sweep_int", "sweep $D/sweep40_slow.json --out $T/s --jobs 2", "INT", "3", check=lines_ok)
    sig("sweep_term", "sweep $D/sweep40_slow.json --out $T/s --jobs 2", "TERM", "3",
        check=lines_ok)
    cap_script = os.path.join("$D", "capture40_slow.py")
    write("capture40_slow.py", "import sys, os\nsys.path.insert(0, os.path.join(os.getcwd(), "
          "'frontends/torch/python'))\nimport torch, time\nfor i in range(600):\n"
          "    x = torch.randn(64, 64) @ torch.randn(64, 64)\n    time.sleep(0.05)\n")
    sig("capture_int", "capture %s --out $T/p.json" % cap_script, "INT", "4",
        check='ls -A $T | grep -v fifo; true')
    sig("capture_term", "capture %s --out $T/p.json" % cap_script, "TERM", "4",
        check='ls -A $T | grep -v fifo; true')
    sig("exec_int", "exec $T/big.json -c configs/trn2.json --trace-level instructions --out $T/o",
        "INT", "0.4", check=nohalf, setup='"$B" compile examples/graphs/gemm_4096.json -c '
        "configs/trn2.json -o $T/big.json >/dev/null 2>&1")

    # ---- a full disk (a 2 MiB tmpfs at $T/mnt) and ulimit -------------------------------------
    mnt = "mkdir $T/mnt && mount -t tmpfs -o size=2m tmpfs $T/mnt"

    def disk(name, args, expect="err", setup="", check="", left=None):
        cs.append(Case("disk", "p40_" + name, args, expect, setup=mnt + (" && " + setup if setup
                                                                           else ""), check=check,
                       left=left))

    disk("run_trace", big + " --out $T/mnt/o", check='ls -A $T/mnt | head -3')
    disk("run_trace_existing", big + " --out $T/mnt/o",
         setup='"$B" run -c $C -w gemm:m=64,k=64,n=64 --mode native --out $T/mnt/o >/dev/null '
               "2>&1 && cp $T/mnt/o/stats.json $T/old.json",
         check='cmp -s $T/mnt/o/stats.json $T/old.json || echo "earlier output not kept"')
    disk("exec_trace", "exec examples/plans/matmul.json -c configs/trn2.json --trace-level "
         "instructions --out $T/mnt/o", "any")
    disk("compile_big", "compile examples/graphs/transformer_block.json -c configs/trn2.json "
         "-o $T/mnt/p.json", "any", setup="dd if=/dev/zero of=$T/mnt/fill bs=1k count=2000 "
         "2>/dev/null; true")
    disk("import_weights", "import onnx $T/big.onnx --out $T/mnt/g.json --weights",
         setup='/usr/bin/python3 -c "import onnx,numpy as np;from onnx import helper as H,'
               "numpy_helper as N,TensorProto as TP;w=N.from_array(np.ones((1024,1024),"
               "np.float32),'w');g=H.make_graph([H.make_node('MatMul',['x','w'],['y'])],'g',"
               "[H.make_tensor_value_info('x',TP.FLOAT,[2,1024])],[H.make_tensor_value_info('y',"
               "TP.FLOAT,None)],[w]);onnx.save(H.make_model(g,opset_imports=[H.make_opsetid('',13)]"
               ",ir_version=8),'$T/big.onnx')\"",
         check='ls -A $T/mnt | head -3')
    disk("plan_format", "plan format $T/big.json -o $T/mnt/p.json",
         setup='"$B" compile examples/graphs/transformer_block.json -c configs/trn2.json -o '
               "$T/big.json >/dev/null 2>&1 && dd if=/dev/zero of=$T/mnt/fill bs=1k count=1900 "
               "2>/dev/null; true", expect="any")
    disk("sweep", "sweep configs/sweeps/smoke.json --out $T/mnt/s", left="mnt/s",
         setup="dd if=/dev/zero of=$T/mnt/fill bs=1k count=2040 2>/dev/null; true")
    disk("collect_csv", "collect $T/s --csv $T/mnt/r.csv",
         setup="mkdir $T/s && for i in $(seq 0 30000); do echo '{\"index\":'$i',\"id\":\""
               "0123456789abcdef\",\"status\":\"ok\",\"workload\":\"w\",\"mode\":\"native\","
               "\"axes\":{},\"figures\":{\"total_ns\":1},\"seconds\":1}'; done > "
               "$T/s/results.jsonl && dd if=/dev/zero of=$T/mnt/fill bs=1k count=2000 2>/dev/null;"
               " true", expect="any")
    cs.append(Case("disk", "p40_capture_values", "capture examples/torch/mlp.py --out "
                   "$T/mnt/p.json --values -- --width 512 --steps 1", "err", setup=mnt,
                   check="ls -A $T/mnt | head -3", corpus=False))

    def ul(name, lim, args, expect="err", setup=""):
        cs.append(Case("ulimit", "p40_" + name, None, expect, setup=setup,
                       script='ulimit %s; "$B" %s' % (lim, args), corpus=False))

    ul("v_run_trn2_big", "-v 4000000", "run -c configs/trn2.json -w gemm:m=524288,k=4096,n=4096 "
       "--mode native --out $T/o")
    ul("v_run_small", "-v 300000", "run -c $C -w gemm:m=256,k=256,n=256 --out $T/o", "any")
    ul("v_import_big", "-v 150000", "import onnx $D/onnx40_dead_nodes_3000.onnx --out $T/g.json",
       "any")
    ul("v_functional", "-v 1000000", "run -c configs/trn2.json -w gemm:m=16384,k=8192,n=8192 "
       "--functional --mode native --out $T/o")
    ul("f_run_trace_trapped", "-f 64; trap '' XFSZ", big + " --out $T/o")
    ul("f_import_trapped", "-f 1; trap '' XFSZ",
       "import onnx $D/onnx40_doubling_chain_60.onnx --out $T/g.json")
    ul("f_compile_trapped", "-f 8; trap '' XFSZ", "compile examples/graphs/transformer_block.json "
       "-c configs/trn2.json -o $T/p.json")
    ul("f_run_trace", "-f 64", big + " --out $T/o")
    ul("f_import", "-f 1", "import onnx $D/onnx40_doubling_chain_60.onnx --out $T/g.json")
    ul("f_compile", "-f 8", "compile examples/graphs/transformer_block.json -c configs/trn2.json "
       "-o $T/p.json")
    ul("n_files_8", "-n 8", "run -c $C -w gemm:m=64,k=64,n=64 --mode native --out $T/o", "any")
    ul("f_sweep", "-f 2", "sweep configs/sweeps/smoke.json --out $T/s", "any")
