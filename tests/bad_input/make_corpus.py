#!/usr/bin/env python3
"""Writes the bad-input corpus (issue 20): files under files/ and one case per line in cases.txt.

Each case line is NAME<TAB>EXPECTED<TAB>ARGS: `wallsim ARGS` (run by bash from the source tree,
with $D the files directory, $T a fresh temporary directory and $C configs/tiny.json) must exit
with code 2 and print one line on standard error that contains EXPECTED. Run this script again
after changing it; the files are kept in git so that the corpus does not depend on it.
"""
import copy
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FILES = os.path.join(HERE, "files")
cases = []


def write(name, data):
    path = os.path.join(FILES, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return "$D/" + name


def case(name, expected, args):
    cases.append((name, expected, args))


def load(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return json.load(f)


tiny = load("configs/tiny.json")
plan = load("examples/plans/vector_add.json")
graph = load("examples/graphs/mlp.json")
sweep = load("configs/sweeps/smoke.json")


# ---- JSON syntax and limits, for every reader --------------------------------------------------
syntax = {
    "empty": ("", "invalid JSON"),
    "whitespace": ("  \n\t ", "invalid JSON"),
    "truncated": ('{"name": "x", "arch": {', "invalid JSON"),
    "trailing_comma": ('{"name": "x",}', "invalid JSON"),
    "single_quotes": ("{'name': 'x'}", "invalid JSON"),
    "comment": ('// c\n{"name": "x"}', "invalid JSON"),
    "bare_word": ("{name: x}", "invalid JSON"),
    "nan": ('{"name": NaN}', "invalid JSON"),
    "infinity": ('{"name": Infinity}', "invalid JSON"),
    "two_documents": ('{"name": "a"}{"name": "b"}', "invalid JSON"),
    "lone_bracket": ("]", "invalid JSON"),
    "control_char": ('{"name": "a\x01b"}', "invalid JSON"),
    "bad_escape": ('{"name": "\\q"}', "invalid JSON"),
    "unterminated_string": ('{"name": "abc', "invalid JSON"),
    "invalid_utf8": (b'{"name": "\xff\xfe"}', "invalid JSON"),
    "overlong_utf8": (b'{"name": "\xc0\xaf"}', "invalid JSON"),
    "deep_array": ('{"name":' + "[" * 70000 + "]" * 70000 + "}", "nested deeper than 256"),
    "deep_object": ('{"a":' * 300 + "1" + "}" * 300, "nested deeper than 256"),
    "overflow": ("1e400", "does not fit a double"),
    "overflow_negative": ('{"name": -1e400}', "does not fit a double"),
    "overflow_exponent": ('{"x": 2E8143421}', "does not fit a double"),
    "duplicate_top": ('{"name": "a", "name": "b"}', "name: duplicate key"),
}
readers = {
    "config": ("config validate {f}", ""),
    "plan": ("plan check {f} -c $C", ""),
    "graph": ("compile {f} -c $C -o $T/out.plan.json", ""),
    "sweep": ("sweep {f} --count", ""),
}
for reader, (cmd, _) in readers.items():
    for key, (text, expected) in syntax.items():
        if reader != "config" and key in ("whitespace", "single_quotes", "bare_word", "lone_bracket",
                                          "bad_escape", "control_char", "overlong_utf8"):
            continue  # the config reader has them all; each reader has the main ones
        f = write(f"{reader}_{key}.json", text)
        case(f"{reader}.{key}", expected, cmd.format(f=f))

# ---- configs: semantic errors ------------------------------------------------------------------
def config_case(name, mutate, expected):
    c = copy.deepcopy(tiny)
    mutate(c)
    f = write(f"config_{name}.json", json.dumps(c))
    case(f"config.{name}", expected, f"config validate {f}")


config_case("unknown_top_key", lambda c: c.update(archx=1), "archx: unknown key")
config_case("unknown_nested_key", lambda c: c["arch"]["sbuf"].update(partitionz=1),
            "arch.sbuf.partitionz: unknown key")
config_case("wrong_type", lambda c: c["arch"]["sbuf"].update(partitions="many"),
            "arch.sbuf.partitions")
config_case("negative", lambda c: c["arch"]["sbuf"].update(partitions=-1), "arch.sbuf.partitions")
config_case("zero_freq", lambda c: c["timing"]["tensor"].update(freq_mhz=0),
            "timing.tensor.freq_mhz")
config_case("fraction", lambda c: c["arch"]["sbuf"].update(partitions=1.5), "arch.sbuf.partitions")
config_case("huge_int", lambda c: c["arch"].setdefault("hbm", {}).update(bytes=2**70),
            "arch.hbm.bytes")
config_case("null_value", lambda c: c["arch"]["sbuf"].update(partitions=None), "arch.sbuf.partitions")
config_case("arch_not_object", lambda c: c.update(arch=[1, 2]), "arch")
config_case("bool_for_int", lambda c: c["arch"]["dma"].update(engines=True), "arch.dma.engines")
config_case("bucket_not_pow2", lambda c: c["runtime"].update(aot={"bucket_min": 3}),
            "runtime.aot.bucket_min")
# Issue 37: degraded and failed links (tiny: 2 instances of a 2 x 1 torus, EFA between).
config_case("link_factor_zero", lambda c: c["links"]["efa"].update(bandwidth_factor=0),
            "links.efa.bandwidth_factor")
config_case("link_latency_factor_negative",
            lambda c: c["links"]["neuronlink"].update(latency_factor=-1),
            "links.neuronlink.latency_factor")
config_case("failed_link_unknown", lambda c: c["links"].update(failed="chip99.x+"),
            "links.failed: 'chip99.x+' is not a link of the system")
config_case("failed_link_not_text", lambda c: c["links"].update(failed=["chip0.x+"]),
            "links.failed")
config_case("failed_links_cut_a_chip_off",
            lambda c: c["links"].update(failed="chip0.x+,chip0.x-,chip0.efa.tx"),
            "links.failed: no route from chip 0 to chip 1 avoids the failed links")
config_case("hierarchy_unknown", lambda c: c["collectives"].update(hierarchy="tree"),
            "collectives.hierarchy")
write("config_duplicate_nested.json",
      json.dumps(tiny).replace('"partitions": 32,', '"partitions": 32, "partitions": 64,', 1))
case("config.duplicate_nested", "arch.sbuf.partitions: duplicate key",
     "config validate $D/config_duplicate_nested.json")
write("config_top_array.json", "[1, 2, 3]")
case("config.top_array", "expected an object", "config validate $D/config_top_array.json")

# ---- --set -------------------------------------------------------------------------------------
case("set.invalid_utf8", "not valid UTF-8", "config dump -c $C --set $'name=\\xff'")
case("set.no_equals", "expected path.to.key=value", "config dump -c $C --set arch.sbuf.partitions")
case("set.empty_key", "empty key", "config dump -c $C --set 'arch..partitions=1'")
case("set.unknown_parent", "--set arch.sbufx.partitions=1",
     "config dump -c $C --set arch.sbufx.partitions=1")
case("set.unknown_leaf", "--set arch.sbuf.partitionz=1",
     "config dump -c $C --set arch.sbuf.partitionz=1")
case("set.bad_value", "--set arch.sbuf.partitions=abc",
     "config dump -c $C --set arch.sbuf.partitions=abc")
case("set.inside_scalar", "cannot set a key inside a non-object",
     "config dump -c $C --set name.x=1")
case("set.deep_value", "nested deeper than 256",
     "config dump -c $C --set \"name=$(printf '%.0s[' {1..300})\"\"$(printf '%.0s]' {1..300})\"")
case("set.duplicate_in_value", "duplicate key",
     "config dump -c $C --set 'arch.sbuf={\"partitions\": 8, \"partitions\": 16}'")

# ---- plans ---------------------------------------------------------------------------------------
def plan_case(name, mutate, expected, text=None):
    p = copy.deepcopy(plan)
    if mutate:
        mutate(p)
    f = write(f"plan_{name}.json", text if text is not None else json.dumps(p))
    case(f"plan.{name}", expected, f"plan check {f} -c configs/trn2.json")


P0 = lambda p: p["plans"][0]
plan_case("wrong_format", lambda p: p.update(format="wallsim-graph"), "format")
plan_case("future_version", lambda p: p.update(version=99), "version")
plan_case("no_plans", lambda p: p.pop("plans"), "plans")
plan_case("no_streams", lambda p: P0(p).pop("streams"), "streams")
plan_case("unknown_op", lambda p: P0(p)["streams"][0]["instructions"][0].update(op="dma_copyx"),
          "dma_copyx")
plan_case("unknown_dtype", lambda p: P0(p)["tensors"][0].update(dtype="fp8x"), "fp8x")
plan_case("unknown_space", lambda p: P0(p)["tensors"][0].update(space="l3"), "l3")
plan_case("duplicate_semaphore", lambda p: P0(p)["semaphores"].append("x_in"),
          "duplicate semaphore")
plan_case("duplicate_tensor", lambda p: P0(p)["tensors"].append(dict(P0(p)["tensors"][0])),
          "duplicate name")
plan_case("buffer_named_like_tensor",
          lambda p: P0(p)["buffers"].append(dict(P0(p)["buffers"][0], name="x")), "duplicate name")
plan_case("unknown_semaphore",
          lambda p: P0(p)["streams"][0]["instructions"][0].update(signal=[["nope", 1]]),
          "no semaphore named")
plan_case("unknown_buffer",
          lambda p: P0(p)["streams"][0]["instructions"][0]["dst"].update(buf="nope"),
          "no buffer or tensor named")
plan_case("negative_shape", lambda p: P0(p)["tensors"][0].update(shape=[-1, 4]), "shape")
plan_case("too_many_free_dims",
          lambda p: P0(p)["streams"][0]["instructions"][0]["dst"].update(free=[[1, 1]] * 9),
          "free dims")
plan_case("pair_of_three",
          lambda p: P0(p)["buffers"][0].update(partitions=[0, 128, 3]), "two-element array")
plan_case("unknown_key", lambda p: P0(p).update(colour="red"), "colour: unknown key")
plan_case("tensor_in_sbuf", lambda p: P0(p)["tensors"][0].update(space="sbuf"), "buffers")
plan_case("buffer_in_hbm", lambda p: P0(p)["buffers"][0].update(space="hbm"), "tensors")
plan_case("scalar_min_max",
          lambda p: P0(p).update(scalars=[{"name": "s", "min": 5, "max": 1}]), "exceeds max")
plan_case("deadlock", lambda p: P0(p)["streams"][3]["instructions"][0].update(wait=[["added", 2]]),
          "waits for added >= 2 but it can reach at most 1")
plan_case("wait_too_large", lambda p: P0(p)["streams"][2]["instructions"][0].update(
    wait=[["added", 2**62]]), "wait[0][1]: expected an integer in [0, 281474976710656]")
write("plan_duplicate_key_nested.json",
      json.dumps(plan).replace('"name": "vector_add_128x1024"',
                               '"name": "a", "name": "vector_add_128x1024"'))
case("plan.duplicate_key_nested", "plans[0].name: duplicate key",
     "plan check $D/plan_duplicate_key_nested.json -c configs/trn2.json")

# ---- graphs --------------------------------------------------------------------------------------
def graph_case(name, mutate, expected):
    g = copy.deepcopy(graph)
    mutate(g)
    f = write(f"graph_{name}.json", json.dumps(g))
    case(f"graph.{name}", expected, f"compile {f} -c $C -o $T/out.plan.json")


graph_case("wrong_format", lambda g: g.update(format="wallsim-plan"), "format")
graph_case("unknown_op", lambda g: g["nodes"][5].update(op="matmulx"), "matmulx")
graph_case("forward_reference", lambda g: g["nodes"][5].update(inputs=[0, 9]), "graph_forward_reference.json")
graph_case("shape_mismatch", lambda g: g["nodes"][1].update(shape=[700, 3072]), "graph_shape_mismatch.json")
graph_case("bad_dtype", lambda g: g["nodes"][0].update(dtype="fp13"), "fp13")
graph_case("duplicate_id", lambda g: g["nodes"][6].update(id=5), "graph_duplicate_id.json")
graph_case("no_outputs", lambda g: g.update(outputs=[]), "graph_no_outputs.json")
graph_case("output_unknown", lambda g: g.update(outputs=[42]), "graph_output_unknown.json")
graph_case("negative_dim", lambda g: g["nodes"][0].update(shape=[-5, 768]), "shape")
graph_case("unknown_key", lambda g: g["nodes"][0].update(colour=1), "colour: unknown key")
graph_case("arity", lambda g: g["nodes"][7].update(inputs=[6, 5]), "graph_arity.json")
graph_case("over_hbm", lambda g: g["nodes"][0].update(shape=[2**20, 768]) or
           g["nodes"][5].update(), "HBM")

# ---- .npy inputs ---------------------------------------------------------------------------------
def npy_header(descr="<f4", shape=(128, 1024), fortran=False, version=(1, 0)):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", str(tuple(shape)).replace(",)", ",)"))
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack("<H", len(h)) + h.encode()


npys = {
    "bad_magic": (b"\x93NUMPX\x01\x00" + b"\0" * 120, "bad magic"),
    "too_short": (b"\x93NUM", "too short"),
    "bad_version": (npy_header(version=(9, 0)) + b"\0" * 16, "format version"),
    "truncated_data": (npy_header() + b"\0" * 100, "x.npy"),
    "wrong_dtype": (npy_header(descr="<c16") + b"\0" * 100, "x.npy"),
    "wrong_shape": (npy_header(shape=(3, 3)) + b"\0" * 36, "x.npy"),
    "huge_header": (b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31) + b"{}", "x.npy"),
    "fortran": (npy_header(fortran=True) + b"\0" * (128 * 1024 * 4), "x.npy"),
    "bad_dict": (b"\x93NUMPY\x01\x00" + struct.pack("<H", 6) + b"{nope}", "x.npy"),
}
for name, (data, expected) in npys.items():
    d = os.path.join(FILES, f"npy_{name}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "x.npy"), "wb") as f:
        f.write(data)
    case(f"npy.{name}", expected,
         f"exec examples/plans/vector_add.json -c configs/trn2.json --functional --inputs $D/npy_{name} --out $T/o")

# ---- workload specs ------------------------------------------------------------------------------
for name, spec, expected in [
    ("unknown_workload", "gemmx", "gemmx"),
    ("unknown_param", "gemm:q=1", "q"),
    ("not_a_number", "gemm:m=abc", "abc"),
    ("negative", "gemm:m=-1", "m"),
    ("zero", "gemm:m=0", "m"),
    ("overflow", "gemm:m=99999999999999999999", "m"),
    ("no_value", "gemm:m", "m"),
    ("duplicate_param", "gemm:m=128,m=256", "m"),
    ("empty_name", ":m=1", "workload"),
    ("lengths_directory", "serve:lengths=configs", "is a directory"),
    # issue 38: distributed workloads
    ("tp_zero", "transformer:tp=0", "tp"),
    ("tp_heads", "transformer:heads=12,tp=8", "heads 12 do not split over 8"),
    ("tp_d_ff", "transformer:heads=4,d_model=64,d_ff=102,tp=4", "d_ff 102 does not split"),
    ("dp_batch", "transformer:batch=3,dp=2", "batch 3 does not split"),
    ("decode_tp_heads", "decode:heads=12,tp=8", "heads 12 do not split over 8"),
    ("decode_tp_d_ff", "decode:heads=4,d_model=64,d_ff=102,tp=4", "d_ff 102 does not split"),
    ("decode_tp_zero", "decode:tp=0", "decode.tp"),
    ("serve_tp_heads", "serve:heads=12,tp=8", "heads 12 do not split over 8"),
    ("serve_tp_vocab", "serve:tp=2", "vocab 50257 does not split over 2"),
    ("sp_without_tp", "transformer:sp=1", "sequence parallel needs tp > 1"),
    ("sp_tokens", "transformer:heads=2,d_model=64,d_ff=128,seq=7,tp=2,sp=1", "7 tokens do not split"),
    ("train_dp_batch", "train:batch=5,dp=2", "batch 5 does not split"),
    ("train_lr", "train:lr=-1", "lr"),
    ("train_bucket_mb", "train:bucket_mb=-1", "bucket_mb"),
    ("too_many_ranks", "transformer:batch=4,tp=4,dp=4", "16 ranks"),
    ("train_pp_layers", "train:layers=3,pp=2", "layers 3 do not split over 2 pipeline stages"),
    ("train_pp_zero", "train:pp=0", "train.pp"),
    ("train_microbatches", "train:batch=6,microbatches=4", "do not split into 4 micro-batches"),
    ("transformer_pp_layers", "transformer:layers=3,pp=2", "layers 3 do not split over 2"),
    ("transformer_microbatches", "transformer:batch=2,pp=2,layers=2,microbatches=3",
     "2 sequences of a data-parallel rank do not split into 3"),
    ("decode_pp_layers", "decode:layers=3,pp=2", "decode.pp: layers 3 do not split over 2"),
    ("decode_dp_batch", "decode:batch=3,dp=2", "decode.dp: batch 3 does not split over 2"),
    ("decode_microbatches", "decode:batch=2,layers=2,pp=2,microbatches=3",
     "2 sequences of a data-parallel rank do not split into 3"),
    ("decode_paged_batch", "decode:batch=2,kv=paged", "decode.batch: kv=paged decodes one"),
    ("decode_sp", "decode:tp=2,pp=2,sp=1", "unknown parameter 'sp' of decode"),
    ("serve_pp_layers", "serve:layers=3,pp=2", "serve.pp: layers 3 do not split over 2"),
    ("serve_dp_requests", "serve:requests=3,dp=4", "serve.dp: 3 requests leave some of 4"),
]:
    case(f"workload.{name}", expected,
         f"run -c $C -w '{spec}' --mode native --out $T/o --trace-level none")

# ---- run / exec / study / sweep arguments --------------------------------------------------------
case("run.out_empty", "--out", "run -c $C -w gemm:m=128,k=96,n=96 --mode native --out ''")
case("exec.out_empty", "--out", "exec examples/plans/vector_add.json -c configs/trn2.json --out ''")
case("run.steps_minus_one", "--steps -1", "run -c $C -w gemm:m=128,k=96,n=96 --steps -1 --out $T/o")
case("run.steps_zero", "--steps 0", "run -c $C -w gemm:m=128,k=96,n=96 --steps 0 --out $T/o")
case("run.out_is_file", "not a directory", "run -c $C -w gemm:m=128,k=96,n=96 --out $C")
case("exec.scalar_twice", "--scalar s=3",
     "exec examples/plans/vector_add.json -c configs/trn2.json --scalar s=1 --scalar s=3 --out $T/o")
case("exec.scalar_not_int", "not an integer",
     "exec examples/plans/vector_add.json -c configs/trn2.json --scalar s=x --out $T/o")
case("exec.trace_window", "--trace-window",
     "exec examples/plans/vector_add.json -c configs/trn2.json --trace-window 5:1 --out $T/o")
case("exec.functional_too_large", "memory",
     "exec examples/plans/matmul.json -c configs/trn2.json --functional "
     "--set arch.sbuf.partitions=1024 --set arch.sbuf.bytes_per_partition=1073741824 --out $T/o")
case("run.functional_too_large", "--no-memory-check",
     "run -c configs/trn2.json -w gemm:m=128,k=96,n=96 --functional "
     "--set arch.sbuf.partitions=1024 --set arch.sbuf.bytes_per_partition=1073741824 --out $T/o")
case("run.plan_too_large", "instructions",
     "run -c configs/trn2.json -w gemm:m=65536,k=65536,n=65536 --set arch.hbm.bytes=68719476736 "
     "--mode native --out $T/o")
big = write("graph_plan_too_large.json", json.dumps({
    "format": "wallsim-graph", "version": 1, "name": "big", "nodes": [
        {"id": 0, "op": "input", "name": "a", "dtype": "bf16", "shape": [65536, 65536], "role": "input"},
        {"id": 1, "op": "input", "name": "b", "dtype": "bf16", "shape": [65536, 65536], "role": "weight"},
        {"id": 2, "op": "matmul", "inputs": [0, 1]}], "outputs": [2]}))
case("compile.plan_too_large", "instructions", f"compile {big} -c configs/trn2.json --set arch.hbm.bytes=68719476736 --out $T/p.json")
# A corrupt tuning cache (compiler.tune.cache, issue 35): one line naming the file and what is wrong.
tc_trunc = write("tuning_cache_truncated.json", '{"format": "wallsim-tuning-cache", "version": 1, "entries": [\n')
tc_format = write("tuning_cache_wrong_format.json",
                  json.dumps({"format": "wallsim-plan", "version": 1, "entries": []}) + "\n")
tc_chosen = write("tuning_cache_no_chosen.json", json.dumps({
    "format": "wallsim-tuning-cache", "version": 1, "entries": [{
        "family": "matmul", "signature": "s", "arch": "a", "timing": "t", "build": "b", "candidates": 4,
        "measured": [{"point": "p", "predicted_ns": 1.0, "simulated_ns": 2.0}]}]}) + "\n")
case("compile.tuning_cache_truncated", "tuning_cache_truncated.json",
     f"compile examples/graphs/mlp.json -c configs/trn2.json --tune --tuning-cache {tc_trunc} --out $T/p.json")
case("compile.tuning_cache_wrong_format", "not a tuning cache",
     f"compile examples/graphs/mlp.json -c configs/trn2.json --tuning-cache {tc_format} --out $T/p.json")
case("compile.tuning_cache_no_chosen", "entries[0].chosen is missing",
     f"compile examples/graphs/mlp.json -c configs/trn2.json --tune --tuning-cache {tc_chosen} --out $T/p.json")
case("run.tuning_cache_wrong_format", "not a tuning cache",
     f"run -c $C --tuning-cache {tc_format} -w gemm:m=128,k=96,n=96 --mode native --out $T/o")
case("config.cache_is_file", "runtime.aot.disk_cache",
     "run -c $C --set runtime.aot.disk_cache=$C -w gemm:m=128,k=96,n=96 --mode aot --out $T/o")
case("config.hardware_transpose_unpriced", "arch.dma.hardware_transpose",
     "compile examples/graphs/mlp.json -c configs/trn2.json --set timing.dma.transpose_chunk_bytes=0 --out $T/p.json")
case("config.hardware_transpose_contradicts", "timing.dma.transpose_chunk_bytes is 256",
     "compile examples/graphs/mlp.json -c configs/trn2.json --set arch.dma.hardware_transpose=false --out $T/p.json")

def sweep_case(name, mutate, expected, extra="--count"):
    s = copy.deepcopy(sweep)
    mutate(s)
    f = write(f"sweep_{name}.json", json.dumps(s))
    case(f"sweep.{name}", expected, f"sweep {f} {extra}")


sweep_case("axis_in_zip", lambda s: s["axes"].update({"arch.tensor.rows": [8, 16]}),
           "already an axis")
sweep_case("no_workloads", lambda s: s.update(workloads=[]), "workloads")
sweep_case("bad_mode", lambda s: s.update(modes=["nativex"]), "nativex")
sweep_case("zip_lengths", lambda s: s["zip"][0].update({"arch.tensor.cols": [16]}),
           "equal lengths")
sweep_case("bad_axis_value", lambda s: s["axes"].update({"arch.sbuf.partitions": ["x"]}),
           "bad config")
sweep_case("too_many_points",
           lambda s: s["axes"].update({f"runtime.sweep_dummy_{i}": list(range(10)) for i in range(10)}),
           "more than the limit")
sweep_case("unknown_key", lambda s: s.update(axis={}), "axis: unknown key")
sweep_case("steps_zero", lambda s: s.update(steps=0), "steps")
case("sweep.index_out_of_range", "--index", "sweep configs/sweeps/smoke.json --out $T/sw --index 999")
case("sweep.out_is_file", "not a directory", "sweep configs/sweeps/smoke.json --out $C")
case("sweep.slurm_letters", "SLURM_ARRAY_TASK_ID",
     "sweep configs/sweeps/smoke.json --out $T/sw")  # runner sets SLURM_ARRAY_TASK_ID=abc
case("sweep.slurm_suffix", "SLURM_ARRAY_TASK_ID", "sweep configs/sweeps/smoke.json --out $T/sw")
case("sweep.slurm_negative", "SLURM_ARRAY_TASK_ID", "sweep configs/sweeps/smoke.json --out $T/sw")

study = {"title": "t", "columns": ["total_nss"],
         "runs": [{"label": "a", "workload": "gemm:m=128,k=96,n=96", "mode": "native"}]}
write("study_misspelt_column.json", json.dumps(study))
case("study.misspelt_column", "total_nss",
     "study granularity -c $C --spec $D/study_misspelt_column.json --out $T/st")
write("study_no_runs.json", json.dumps(dict(study, columns=["total_ns"], runs=[])))
case("study.no_runs", "runs", "study granularity -c $C --spec $D/study_no_runs.json --out $T/st")
case("study.out_empty", "--out",
     "study granularity -c $C --spec configs/studies/granularity.json --out ''")

# ---- ONNX models (wallsim import onnx) -----------------------------------------------------------
def onnx_model(op="Relu", opset=13, dims=(2, 3)):
    """A one-node float model, serialized with python3-onnx (the build's test dependency)."""
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="n0")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return m.SerializeToString()


good = onnx_model()
write("onnx_empty.onnx", b"")
case("onnx.empty", "empty file", "import onnx $D/onnx_empty.onnx --out $T/g.json")
write("onnx_garbage.onnx", b"\xff\xff\xff\xff not a protobuf \x00\x01")
case("onnx.garbage", "not a valid ONNX model", "import onnx $D/onnx_garbage.onnx --out $T/g.json")
write("onnx_truncated.onnx", good[: len(good) // 2])
case("onnx.truncated", "not a valid ONNX model",
     "import onnx $D/onnx_truncated.onnx --out $T/g.json")
write("onnx_opset99.onnx", onnx_model(opset=99))
case("onnx.unknown_opset", "opset 99 is not supported",
     "import onnx $D/onnx_opset99.onnx --out $T/g.json")
write("onnx_unknown_op.onnx", onnx_model(op="FooBar"))
case("onnx.unknown_op", "ONNX op 'FooBar' is not supported (supported: Abs",
     "import onnx $D/onnx_unknown_op.onnx --out $T/g.json")
write("onnx_unsupported_op.onnx", onnx_model(op="Det"))
case("onnx.unsupported_op", "node 0 'n0' (Det): ONNX op 'Det' is not supported",
     "import onnx $D/onnx_unsupported_op.onnx --out $T/g.json")
write("onnx_dynamic.onnx", onnx_model(dims=("batch", 3)))
case("onnx.dynamic_dim", "dynamic dim 'batch' has no bound",
     "import onnx $D/onnx_dynamic.onnx --out $T/g.json")
case("onnx.bad_dim_arg", "expected NAME=N",
     "import onnx $D/onnx_dynamic.onnx --out $T/g.json --dim batch=x")
case("onnx.missing", "cannot", "import onnx $D/no_such_model.onnx --out $T/g.json")
case("onnx.directory", "is a directory", "import onnx $D --out $T/g.json")
case("onnx.dev_zero", "not a regular file", "import onnx /dev/zero --out $T/g.json")
case("onnx.graph_workload_missing", "file",
     "run -c $C --workload graph:file=$D/no_such_graph.json --out $T/r")

# ---- issue 40: ONNX models whose sizes or dtypes cannot be imported ------------------------------
def onnx_graph(nodes, inputs, inits=(), opset=13):
    """A float model of `nodes` with `inputs` [(name, dims)] and initializers `inits`."""
    import onnx
    from onnx import TensorProto, helper
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(d)) for n, d in inputs]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "g", ins, [y], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return m.SerializeToString()


def onnx_ints(name, values):
    from onnx import TensorProto, helper
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], list(values))


def onnx_case(name, expected, data, extra=""):
    write(f"onnx_{name}.onnx", data)
    case(f"onnx.{name}", expected, f"import onnx $D/onnx_{name}.onnx --out $T/g.json{extra}")


from onnx import TensorProto, helper  # noqa: E402
for op in ["Conv", "MaxPool", "AveragePool"]:
    attrs = dict(kernel_shape=[2, 2], strides=[0, 0])
    ins, inits = ["x"], []
    if op == "Conv":
        ins.append("w")
        inits.append(helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 2, 2], [1.0] * 4))
    onnx_case(f"{op.lower()}_strides_zero", "strides and dilations must be in 1..2^31, not 0",
              onnx_graph([helper.make_node(op, ins, ["y"], name="n0", **attrs)],
                         [("x", (1, 1, 4, 4))], inits))
onnx_case("conv_pads_huge", "pads must be in 0..2^31",
          onnx_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="n0", kernel_shape=[2, 2],
                                       pads=[2 ** 40, 0, 0, 0])],
                     [("x", (1, 1, 4, 4))],
                     [helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 2, 2], [1.0] * 4)]))
for name, shape, expected in [("constant_of_shape_huge", [2 ** 30, 2 ** 30], "more than 2^27"),
                              ("constant_of_shape_negative", [-4, 3], "negative dim")]:
    onnx_case(name, expected,
              onnx_graph([helper.make_node("ConstantOfShape", ["s"], ["c"], name="n0"),
                          helper.make_node("Add", ["x", "c"], ["y"], name="n1")],
                         [("x", (1,))], [onnx_ints("s", shape)]))
onnx_case("pad_huge", "has more than 2^40 elements",
          onnx_graph([helper.make_node("Pad", ["x", "p"], ["y"], name="n0")], [("x", (2, 3))],
                     [onnx_ints("p", [0, 2 ** 40, 0, 0])]))
onnx_case("range_huge", "more than 2^27",
          onnx_graph([helper.make_node("Range", ["a", "b", "d"], ["r"], name="n0"),
                      helper.make_node("Cast", ["r"], ["rf"], name="n1", to=TensorProto.FLOAT),
                      helper.make_node("Add", ["x", "rf"], ["y"], name="n2")],
                     [("x", (1,))],
                     [helper.make_tensor(n, TensorProto.INT64, [], [v])
                      for n, v in [("a", 0), ("b", 2 ** 40), ("d", 1)]]))
for dtype, vals in [("uint64", [1, 2, 3, 4, 5, 6]), ("bool", [1, 0, 1, 0, 1, 0])]:
    onnx_case(f"matmul_{dtype}", "a matrix product of integer or bool values is not supported",
              onnx_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="n0")],
                         [("x", (2, 3))],
                         [helper.make_tensor("w", getattr(TensorProto, dtype.upper()), [3, 2],
                                             vals)]))

# ---- issue 40: outputs that are not regular files (the runner makes $T/fifo) -------------------
write("onnx_relu.onnx", good)
for name, args in [
        ("import_fifo", "import onnx $D/onnx_relu.onnx --out $T/fifo"),
        ("compile_fifo", "compile examples/graphs/mlp.json -c $C -o $T/fifo"),
        ("plan_format_fifo", "plan format examples/plans/vector_add.json -o $T/fifo"),
        ("collect_fifo", "collect $D/sweep_dir --csv $T/fifo"),
        ("collect_directory", "collect $D/sweep_dir --csv $D")]:
    case(f"output.{name}", "not a regular file; refusing to replace it", args)
case("output.run_fifo", "exists and is not a directory",
     "run -c $C -w gemm:m=64,k=64,n=64 --out $T/fifo")
os.makedirs(os.path.join(FILES, "sweep_dir"), exist_ok=True)
write("sweep_dir/results.jsonl", json.dumps(
    {"index": 0, "id": "0123456789abcdef", "status": "ok", "workload": "w", "mode": "native",
     "axes": {}, "figures": {}, "seconds": 1.0}) + "\n")
case("sweep.out_unwritable", "cannot create folder",
     "sweep configs/sweeps/smoke.json --out /proc/wallsim-issue40/sw")

# ---- issue 40: program files (wallsim run -w program:file=...) ------------------------------------
def program(events, **extra):
    doc = {"format": "wallsim-program", "version": 1, "name": "p"}
    doc.update(extra)
    doc["events"] = events
    return json.dumps(doc)


x_in = {"ev": "input", "id": 0, "name": "x", "dtype": "fp32", "shape": [4]}
write("program_host_op_huge.json", program([
    x_in, {"ev": "host_op", "aten": "aten.foo.default", "module": "", "inputs": [0],
           "outputs": [{"id": 1, "dtype": "fp32", "shape": [2 ** 39]}], "flops": 0, "bytes": 0},
    {"ev": "read", "id": 1, "reason": "item"}]))
case("program.host_op_huge", "device memory exhausted",
     "run -c $C -w program:file=$D/program_host_op_huge.json --out $T/o")
for name, values in [("values_absolute", "/tmp"), ("values_dotdot", "../bad_input/files"),
                     ("values_inner_dotdot", "a/../../files")]:
    write(f"program_{name}.json", program([x_in, {"ev": "read", "id": 0, "reason": "item"}],
                                          values=values))
    case(f"program.{name}", "is not a folder inside the program file's folder",
         f"run -c $C -w program:file=$D/program_{name}.json --functional --out $T/o")

# Issue 40's probe findings, fixed: a host op's work past the simulator's clock, an output of more
# than 2^40 elements (its byte count wrapped), a system of more cores than one simulation holds,
# a line break inside an error, a plan with many verifier findings.
x48 = {"ev": "input", "id": 0, "name": "x", "dtype": "fp32", "shape": [4, 8]}
write("program_host_op_bytes_2_63.json", program([
    x48, {"ev": "host_op", "aten": "aten.foo.default", "module": "m", "inputs": [0],
          "outputs": [{"id": 5, "dtype": "fp32", "shape": [4, 8]}], "flops": 10,
          "bytes": 2 ** 63}]))
case("program.host_op_bytes_2_63", "flops and bytes must be at most 2^50",
     "run -c $C -w program:file=$D/program_host_op_bytes_2_63.json --out $T/o")
write("program_host_op_output_2_80.json", program([
    x48, {"ev": "host_op", "aten": "aten.foo.default", "module": "m", "inputs": [0],
          "outputs": [{"id": 5, "dtype": "fp32", "shape": [2 ** 40, 2 ** 40]}], "flops": 10,
          "bytes": 10}]))
case("program.host_op_output_2_80", "more than 2^40 elements",
     "run -c $C -w program:file=$D/program_host_op_output_2_80.json --out $T/o")
# Issue 40, the set-up section: a step boundary in it, set-up using a step's value, a step
# freeing a set-up value, a set-up value with a bounded dim, a set-up that is not a list.
x_dyn = dict(x_in, dim_names=["seq"])
for name, setup, events, extra, want in [
        ("setup_step", [x_in, {"ev": "step"}], [], "", "a step boundary in the set-up section"),
        ("setup_uses_step_value", [{"ev": "read", "id": 0, "reason": "item"}], [x_in], "",
         "is not made by the set-up section"),
        ("setup_freed_by_step", [x_in], [{"ev": "free", "id": 0}], "",
         "is a set-up value, which stays live for every step"),
        ("setup_bounded", [x_dyn], [{"ev": "read", "id": 0, "reason": "item"}],
         " --bound 'seq<=8'", "a set-up value with the bounded dim 'seq'"),
        ("setup_not_a_list", {"ev": "step"}, [x_in], "", "setup: expected an array")]:
    doc = json.loads(program(events))
    doc = {k: v for k, v in doc.items() if k != "events"}
    doc["setup"] = setup
    doc["events"] = events
    write(f"program_{name}.json", json.dumps(doc))
    case(f"program.{name}", want,
         f"run -c $C -w program:file=$D/program_{name}.json{extra} --out $T/o")
# Issue 38, data-parallel program replay (dp=N): no dim to split, a batch that does not split,
# weight updates without grad events (an older capture), a dim both bounded and split, a slice of
# part of the split axis and a concat along it (a row index is global).
xb = {"ev": "input", "id": 0, "name": "x", "dtype": "fp32", "shape": [4], "dim_names": ["batch"]}
w4 = {"ev": "weight", "id": 1, "name": "w", "dtype": "fp32", "shape": [4]}
red = {"ev": "read", "id": 0, "reason": "item"}
for name, events, extra, want in [
        ("dp_no_dim", [x_in, {"ev": "read", "id": 0, "reason": "item"}], ",dp=2",
         "the program names no dim 'batch' to split"),
        ("dp_batch_6", [dict(xb, shape=[6]), red], ",dp=4",
         "dim 'batch' has extent 6, which does not split over 4 data-parallel ranks"),
        ("dp_no_grads", [w4, {"ev": "op", "id": 2, "op": "scale", "inputs": [1],
                              "attrs": {"value": 0.5}, "dtype": "fp32", "shape": [4],
                              "aten": "aten.mul_.Tensor", "module": "", "inplace_of": 1}, xb, red],
         ",dp=2", "updates its weights but marks no gradients"),
        ("dp_bounded", [xb, red], ",dp=2 --bound 'batch<=8'", "is both bounded and split"),
        ("dp_slice", [xb, {"ev": "op", "id": 2, "op": "slice", "inputs": [0],
                           "attrs": {"axis": 0, "start": 0, "limit": 2}, "dtype": "fp32",
                           "shape": [2], "aten": "aten.slice.Tensor", "module": ""}, red], ",dp=2",
         "a slice of part of the sharded axis"),
        ("dp_concat", [xb, {"ev": "op", "id": 2, "op": "concat", "inputs": [0, 0],
                            "attrs": {"axis": 0}, "dtype": "fp32", "shape": [8],
                            "aten": "aten.cat.default", "module": "",
                            "dim_names": ["batch"]}, red], ",dp=2",
         "a concat along the sharded axis")]:
    write(f"program_{name}.json", program(events))
    case(f"program.{name}", want, f"run -c $C -w program:file=$D/program_{name}.json{extra} --out $T/o")
case("system.too_many_cores", "more than 65536 one simulation holds",
     "run -c $C -w gemm:m=64,k=64,n=64 --set topology.torus_x=64 --set topology.torus_y=64 "
     "--set topology.instances=4096 --out $T/o")
case("run.newline_in_workload", "\\n", "run -c $C -w $'gemm:m=64\\n,k=64' --out $T/o")
many = load("examples/plans/vector_add.json")
many["plans"][0]["streams"] += [{"engine": "vector", "instructions": []}] * 50
write("plan_many_findings.json", json.dumps(many))
case("plan.many_findings", "more findings: wallsim plan check --all lists them",
     "plan check $D/plan_many_findings.json -c configs/trn2.json")

# ---- special files: directories, FIFOs, devices --------------------------------------------------
for reader, cmd in [("config", "config validate {f}"), ("plan", "plan check {f} -c $C"),
                    ("graph", "compile {f} -c $C -o $T/out.plan.json"),
                    ("sweep", "sweep {f} --count")]:
    case(f"{reader}.directory", "is a directory", cmd.format(f="$D"))
    case(f"{reader}.fifo", "not a regular file", cmd.format(f="$T/fifo"))  # the runner makes it
    case(f"{reader}.dev_zero", "not a regular file", cmd.format(f="/dev/zero"))


# ---- issue 40's fresh probe (probe/): its cheap good errors, listed in probe/corpus40.tsv ---------
def probe_cases():
    """The probe's cases named in corpus40.tsv, with the files their arguments name."""
    import re
    import sys
    import tempfile
    sys.path.insert(0, os.path.join(HERE, "probe"))
    import run_probe
    with open(os.path.join(HERE, "probe", "corpus40.tsv")) as f:
        chosen = dict(line.rstrip("\n").split("\t") for line in f if not line.startswith("#"))
    cwd = os.getcwd()
    os.chdir(ROOT)  # the probe's generators read configs/ and examples/
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for c in run_probe.all_cases(tmp):
                name = c.fam + "." + c.name
                if name not in chosen:
                    continue
                rels = re.findall(r"\$D/([^\s'\"]+)", c.args)
                for rel in list(rels):  # a program's values folder, named inside the file
                    if rel.startswith("program40_") and rel.endswith(".json"):
                        try:
                            values = json.load(open(os.path.join(tmp, rel))).get("values")
                        except ValueError:
                            continue  # a malformed program file names no values folder
                        if (isinstance(values, str) and values.strip("./")
                                and os.path.isdir(os.path.join(tmp, values))):
                            rels.append(values)
                for rel in rels:
                    src, dst = os.path.join(tmp, rel), os.path.join(FILES, rel)
                    if os.path.isdir(src):
                        shutil.copytree(src, dst, dirs_exist_ok=True)
                    else:
                        os.makedirs(os.path.dirname(dst), exist_ok=True)
                        shutil.copyfile(src, dst)
                case(name, chosen.pop(name), c.args)
    finally:
        os.chdir(cwd)
    assert not chosen, "corpus40.tsv names cases the probe no longer has: %s" % sorted(chosen)


probe_cases()

with open(os.path.join(HERE, "cases.txt"), "w") as f:
    f.write("# Generated by make_corpus.py: NAME<TAB>EXPECTED<TAB>ARGS (see run_corpus.sh)\n")
    for c in cases:
        assert "\t" not in "".join(c), c
        f.write("\t".join(c) + "\n")
print(f"{len(cases)} cases, {len(os.listdir(FILES))} files")
