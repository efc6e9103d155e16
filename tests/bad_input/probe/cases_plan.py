"""Issue 40 probe: plan files (plan check, exec), multi-core plans with "core": [chip, core] and
chip<N>: tensors on a system config."""
import copy
import json
import os

ROWS, COLS = 32, 64  # tiny.json: 32 partitions


def copy_plan(chip, core, remote_chip, name=None):
    """Loads a tile from this core's HBM tensor and stores it to chip `remote_chip`'s HBM."""
    t = "t_c%s_k%s" % (chip, core)
    remote = "chip%s:%s" % (remote_chip, t)
    tile = {"buf": "tile", "dtype": "fp32", "partitions": [0, ROWS], "free": [[COLS, 1]]}
    hbm = lambda b: {"buf": b, "dtype": "fp32", "rows": [ROWS, COLS], "free": [[COLS, 1]]}  # noqa
    return {
        "name": name or "copy_c%s_k%s" % (chip, core), "core": [chip, core], "semaphores": ["in"],
        "tensors": [{"name": t, "space": "hbm", "dtype": "fp32", "shape": [ROWS, COLS],
                     "role": "input"},
                    {"name": remote, "space": "hbm", "dtype": "fp32", "shape": [ROWS, COLS],
                     "role": "output"}],
        "buffers": [{"name": "tile", "space": "sbuf", "partitions": [0, ROWS], "bytes": COLS * 4}],
        "nodes": [{"id": 0, "name": "copy", "op": "copy"}],
        "streams": [
            {"engine": "dma", "name": "load", "dma_engine": 0, "instructions": [
                {"op": "dma_copy", "dst": tile, "src": hbm(t), "signal": [["in", 1]], "node": 0}]},
            {"engine": "dma", "name": "store", "dma_engine": 1, "instructions": [
                {"op": "dma_copy", "wait": [["in", 1]], "src": tile, "dst": hbm(remote),
                 "node": 0}]}]}


def plans(*ps):
    return {"format": "wallsim-plan", "version": 1, "plans": list(ps)}


def cases(cs, Case, files):
    def write(name, doc, raw=None):
        with open(os.path.join(files, name), "w") as f:
            f.write(raw if raw is not None else json.dumps(doc))
        return name

    va = json.load(open("examples/plans/vector_add.json"))

    def pc(name, mutate, expect="err", exec_too=False, raw=None):
        d = copy.deepcopy(va)
        if mutate:
            mutate(d)
        f = write("plan40_%s.json" % name, d, raw)
        cs.append(Case("plan", "p40_" + name, "plan check $D/%s -c configs/trn2.json" % f, expect))
        if exec_too:
            cs.append(Case("plan", "p40_exec_" + name,
                           "exec $D/%s -c configs/trn2.json --out $T/o" % f, expect))

    P = lambda d: d["plans"][0]  # noqa: E731
    S = lambda d, s, i=0: P(d)["streams"][s]["instructions"][i]  # noqa: E731
    pc("base_ok", None, "ok", exec_too=True)
    pc("engine_unknown", lambda d: P(d)["streams"][0].update(engine="gpu"))
    pc("dma_engine_999", lambda d: P(d)["streams"][0].update(dma_engine=999))
    pc("dma_engine_negative", lambda d: P(d)["streams"][0].update(dma_engine=-1))
    pc("buffer_partitions_empty", lambda d: P(d)["buffers"][0].update(partitions=[0, 0]))
    pc("buffer_partitions_reversed", lambda d: P(d)["buffers"][0].update(partitions=[128, 0]))
    pc("buffer_partitions_beyond", lambda d: P(d)["buffers"][0].update(partitions=[0, 4096]))
    pc("buffer_offset_huge", lambda d: P(d)["buffers"][1].update(offset=2 ** 62))
    pc("buffer_bytes_zero", lambda d: P(d)["buffers"][0].update(bytes=0))
    pc("buffer_bytes_huge", lambda d: P(d)["buffers"][0].update(bytes=2 ** 40))
    pc("buffers_overlap", lambda d: P(d)["buffers"][1].update(offset=100), "any")
    pc("free_stride_negative", lambda d: S(d, 0)["dst"].update(free=[[1024, -1]]), "any",
       exec_too=True)
    pc("free_count_zero", lambda d: S(d, 0)["dst"].update(free=[[0, 1]]))
    pc("free_count_huge", lambda d: S(d, 0)["dst"].update(free=[[2 ** 40, 1]]))
    pc("free_stride_huge", lambda d: S(d, 0)["src"].update(free=[[1024, 2 ** 40]]))
    pc("dtype_mismatch", lambda d: S(d, 0)["dst"].update(dtype="bf16"), "any", exec_too=True)
    pc("rows_beyond_tensor", lambda d: S(d, 0)["src"].update(rows=[128 * 1024, 1024]))
    pc("rows_negative", lambda d: S(d, 0)["src"].update(rows=[-1, 1024]))
    pc("tensor_huge", lambda d: P(d)["tensors"][0].update(shape=[2 ** 40, 2 ** 40]))
    pc("tensor_rank_0", lambda d: P(d)["tensors"][0].update(shape=[]))
    pc("tensor_role_bogus", lambda d: P(d)["tensors"][0].update(role="sidekick"))
    pc("name_empty", lambda d: P(d)["tensors"][0].update(name=""))
    pc("name_unicode", lambda d: P(d).update(name="\u00e9\u6f22\n"), "any")
    pc("semaphores_10000", lambda d: P(d)["semaphores"].extend("s%d" % k for k in range(10000)),
       "any")
    pc("empty_streams_5000", lambda d: P(d)["streams"].extend(
        {"engine": "vector", "instructions": []} for _ in range(5000)), "any")
    pc("signal_negative", lambda d: S(d, 0).update(signal=[["x_in", -1]]))
    pc("signal_huge", lambda d: S(d, 0).update(signal=[["x_in", 2 ** 62]]))
    pc("wait_negative", lambda d: S(d, 2).update(wait=[["x_in", -1]]))
    pc("wait_triple", lambda d: S(d, 2).update(wait=[["x_in", 1, 2]]))
    pc("node_unknown", lambda d: S(d, 0).update(node=99), "any")
    pc("nodes_id_negative", lambda d: P(d)["nodes"][0].update(id=-1))
    pc("instruction_not_object", lambda d: P(d)["streams"][0]["instructions"].append(5))
    pc("op_missing", lambda d: S(d, 0).pop("op"))
    pc("plans_empty", lambda d: d.update(plans=[]), "any")
    pc("plans_not_list", lambda d: d.update(plans={}))
    pc("two_plans_same_name", lambda d: d["plans"].append(copy.deepcopy(P(d))), "any",
       exec_too=True)
    pc("version_float", lambda d: d.update(version=1.0), "any")
    pc("version_zero", lambda d: d.update(version=0))
    pc("scalar_unknown_ref", lambda d: S(d, 0)["src"].update(rows=["$nope", 1024]))
    pc("utf8_bom", None, "any", raw="\ufeff" + json.dumps(va))  # RFC 8259 allows ignoring it
    # instruction fuzz: every field of the vector add instruction set to hostile values
    add_ins = va["plans"][0]["streams"][2]["instructions"][0]
    for key in sorted(add_ins):
        for label, val in [("null", None), ("string", "x"), ("huge", 2 ** 63), ("list", [[]])]:
            if key == "op" and label == "string":
                continue
            pc("vector_%s_%s" % (key, label), lambda d, k=key, v=val: S(d, 2).update({k: v}))

    # ---- multi-core plans on tiny.json's system: 2 instances x 2x1 torus = 4 chips x 2 cores -----
    def mc(name, doc, expect="err", extra="", cfg="$C", raw=None):
        f = write("system40_%s.json" % name, doc, raw)
        cs.append(Case("system", "p40_" + name, "exec $D/%s -c %s --out $T/o%s" % (f, cfg, extra),
                       expect, surface="plan"))
        if expect == "err" and not extra:
            # plan check may leave what only a run can know to exec; not a chip the system lacks
            check_expect = "err" if name.startswith("remote_chip_") else "any"
            cs.append(Case("system", "p40_check_" + name, "plan check $D/%s -c %s" % (f, cfg),
                           check_expect, surface="plan"))

    mc("ok_neighbour", plans(copy_plan(0, 0, 1), copy_plan(1, 1, 2), copy_plan(3, 0, 0)), "ok")
    mc("ok_every_core", plans(*[copy_plan(c, k, (c + 1) % 4) for c in range(4) for k in range(2)]),
       "ok")
    mc("chip_out_of_range", plans(copy_plan(4, 0, 0)))
    mc("core_out_of_range", plans(copy_plan(0, 2, 1)))
    mc("chip_negative", plans(copy_plan(-1, 0, 1)))
    mc("chip_2_63", plans(copy_plan(2 ** 63 - 1, 0, 1)))
    mc("remote_chip_out_of_range", plans(copy_plan(0, 0, 4)))
    mc("remote_chip_negative", plans(copy_plan(0, 0, -1)), "any")  # a local name, as chipx:
    mc("remote_chip_2_64", plans(copy_plan(0, 0, 2 ** 64)))
    mc("remote_chip_leading_zero", plans(copy_plan(0, 0, "01")), "any")
    mc("remote_chip_letters", plans(copy_plan(0, 0, "x")), "any")
    mc("remote_chip_empty", plans(copy_plan(0, 0, "")), "any")
    mc("remote_chip_plus", plans(copy_plan(0, 0, "+1")), "any")
    mc("remote_chip_space", plans(copy_plan(0, 0, " 1")), "any")
    p = copy_plan(0, 0, 1)
    p["tensors"][1]["name"] = "chip1:"
    p["streams"][1]["instructions"][0]["dst"]["buf"] = "chip1:"
    mc("remote_name_empty", plans(p), "any")
    p = copy_plan(0, 0, 1)
    p["tensors"][1]["name"] = "chip1:chip2:x"
    p["streams"][1]["instructions"][0]["dst"]["buf"] = "chip1:chip2:x"
    mc("remote_name_nested", plans(p), "any")
    p = copy_plan(0, 0, 1)
    p["tensors"][1]["space"] = "host"
    mc("remote_host_space", plans(p), "any")
    mc("core_one_element", plans(dict(copy_plan(0, 0, 1), core=[0])))
    mc("core_three_elements", plans(dict(copy_plan(0, 0, 1), core=[0, 0, 0])))
    mc("core_strings", plans(dict(copy_plan(0, 0, 1), core=["0", "0"])))
    mc("core_float", plans(dict(copy_plan(0, 0, 1), core=[0.5, 0])))
    mc("core_null", plans(dict(copy_plan(0, 0, 1), core=None)))
    mc("core_object", plans(dict(copy_plan(0, 0, 1), core={"chip": 0})))
    mc("two_plans_same_core", plans(copy_plan(0, 0, 1), copy_plan(0, 0, 2, name="again")), "any")
    q = copy_plan(0, 0, 1)
    del q["core"]
    mc("mixed_with_and_without_core", plans(q, copy_plan(1, 0, 2)), "any")
    mc("functional", plans(copy_plan(0, 0, 1)), "err", extra=" --functional")
    mc("on_trn2", plans(copy_plan(15, 7, 0)), "ok", cfg="configs/trn2.json")
    mc("on_trn2_chip_16", plans(copy_plan(16, 0, 0)), cfg="configs/trn2.json")
    mc("cores_set_1", plans(copy_plan(0, 1, 1)), extra=" --set chip.cores=1")
    mc("many_plans_2000", plans(*[copy_plan(c % 4, c % 2, (c + 1) % 4, name="p%d" % c)
                                  for c in range(2000)]), "any")
    mc("system_hbm_overflow", plans(dict(copy_plan(0, 0, 1), tensors=[
        {"name": "t_c0_k0", "space": "hbm", "dtype": "fp32", "shape": [2 ** 20, 2 ** 20],
         "role": "input"},
        {"name": "chip1:t_c0_k0", "space": "hbm", "dtype": "fp32", "shape": [ROWS, COLS],
         "role": "output"}])))
    mc("system_remote_hbm_overflow", plans(dict(copy_plan(0, 0, 1), tensors=[
        {"name": "t_c0_k0", "space": "hbm", "dtype": "fp32", "shape": [ROWS, COLS],
         "role": "input"},
        {"name": "chip1:t_c0_k0", "space": "hbm", "dtype": "fp32", "shape": [2 ** 20, 2 ** 20],
         "role": "output"}])))
    two = [copy_plan(0, 0, 1), copy_plan(1, 0, 0)]
    two[1]["tensors"][1]["name"] = "chip0:t_c0_k0"  # writes the tensor plan 0 reads
    two[1]["streams"][1]["instructions"][0]["dst"]["buf"] = "chip0:t_c0_k0"
    mc("shared_remote_tensor", plans(*two), "any")
    q = copy_plan(0, 0, 0)
    mc("remote_is_own_chip", plans(q), "any")
    mc("trace_instructions", plans(copy_plan(0, 0, 1)), "ok", extra=" --trace-level instructions")
    mc("set_links_zero", plans(copy_plan(0, 0, 1)), extra=" --set links.neuronlink."
       "bandwidth_gb_per_s=0")
    mc("set_torus_64", plans(copy_plan(0, 0, 1)), "any", extra=" --set topology.torus_x=64 --set "
       "topology.torus_y=64 --set topology.instances=4096")
