"""Tests of the PyTorch capture (frontends/torch/python): the events it writes, the ATen -> graph-op
mapping checked numerically against PyTorch with the package's numpy evaluator, aliasing, named
dimensions, host ops and the `wallsim capture` command. Run by ctest with /usr/bin/python3;
exit code 77 (skipped) only when torch is not importable.
"""

import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "frontends", "torch", "python"))

try:
    import torch
    import torch.nn as nn
except ImportError as e:  # pragma: no cover
    print("SKIP: torch is not importable by %s (%s); scripts/install-deps.sh test installs "
          "python3-torch" % (sys.executable, e))
    sys.exit(77)

import wallsim  # noqa: E402
from wallsim.ops_def import OPS as IR_OPS  # noqa: E402
from wallsim.evaluate import evaluate  # noqa: E402


# op name -> accepted attribute names, from compiler_stub's ops.def (the package's reader).
OPS = {name: op.attrs for name, op in IR_OPS.items()}


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(0)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def load(self, name):
        with open(self.path(name)) as f:
            return json.load(f)

    def check_well_formed(self, doc):
        """SSA: each id defined once before use, never used after its free; graph ops and their
        attributes are ops.def's; a read's value file exists when values were captured."""
        defined, freed = set(), set()
        reads = 0
        for ev in doc.get("setup", []) + doc["events"]:
            kind = ev["ev"]
            uses = ev.get("inputs", []) + ([ev["id"]] if kind in ("read", "free") else [])
            for i in uses:
                self.assertIn(i, defined, "use of undefined id in %s" % ev)
                self.assertNotIn(i, freed, "use after free in %s" % ev)
            news = [ev["id"]] if kind in ("op", "input", "weight") else \
                [o["id"] for o in ev.get("outputs", [])]
            for i in news:
                self.assertNotIn(i, defined, "id defined twice: %s" % ev)
                defined.add(i)
            if kind == "op":
                self.assertIn(ev["op"], OPS, ev)
                self.assertTrue(set(ev["attrs"]) <= OPS[ev["op"]], ev)
                self.assertTrue(ev["aten"].startswith("aten."), ev)
                self.assertIsInstance(ev["module"], str)
                if "dim_names" in ev:
                    self.assertEqual(len(ev["dim_names"]), len(ev["shape"]))
            if kind == "free":
                freed.add(ev["id"])
            if kind == "read":
                if "values" in doc:
                    self.assertTrue(os.path.exists(os.path.join(
                        self.tmp.name, doc["values"], "r%d.npy" % reads)))
                reads += 1
        return defined

    def capture_and_check(self, name, fn, tol=1e-4):
        with wallsim.capture(self.path(name + ".json"), values=True):
            fn()
        doc = self.load(name + ".json")
        self.check_well_formed(doc)
        err, n, _ = evaluate(self.path(name + ".json"))
        self.assertGreater(n, 0, "nothing was read")
        self.assertLess(err, tol)
        return doc


def kinds(doc, kind):
    return [ev for ev in doc["events"] if ev["ev"] == kind]


def atens(doc):
    return {ev["aten"] for ev in doc["events"] if ev["ev"] == "op"}


class Events(Base):
    def test_mlp_forward_events(self):
        net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        x = torch.randn(3, 8)
        with wallsim.capture(self.path("p.json"), values=True), torch.no_grad():
            y = net(x)
            s = y.sum()
            s.item()
            wallsim.step()
            if s > 0:  # control flow on a tensor
                pass
            y.tolist()
            with open(os.devnull, "w") as null:
                print(y[0, 0], file=null)
            y.numpy()
        doc = self.load("p.json")
        self.check_well_formed(doc)
        self.assertEqual(doc["format"], "wallsim-program")
        self.assertEqual(doc["version"], 1)
        weights = {ev["name"]: ev["shape"] for ev in kinds(doc, "weight")}
        self.assertEqual(weights, {"0.weight": [16, 8], "0.bias": [16], "2.weight": [4, 16],
                                   "2.bias": [4]})
        self.assertEqual([ev["shape"] for ev in kinds(doc, "input")], [[3, 8]])
        self.assertEqual([ev["reason"] for ev in kinds(doc, "read")],
                         ["item", "bool", "tolist", "print", "numpy"])
        self.assertEqual(len(kinds(doc, "step")), 1)
        ops = {ev["op"] for ev in kinds(doc, "op")}
        self.assertTrue({"matmul", "bias_add", "relu", "reduce"} <= ops, ops)
        modules = {ev["module"] for ev in kinds(doc, "op") if ev["op"] == "relu"}
        self.assertEqual(modules, {"1"})
        self.assertTrue(kinds(doc, "free"))
        err, n, _ = evaluate(self.path("p.json"))
        self.assertEqual(n, 5)
        self.assertLess(err, 1e-5)

    def test_values_absent_without_the_flag(self):
        with wallsim.capture(self.path("p.json")):
            (torch.randn(4) * 2).sum().item()
        doc = self.load("p.json")
        self.assertNotIn("values", doc)
        self.assertFalse(os.path.exists(self.path("p.values")))

    def test_frees_follow_lifetimes(self):
        x = torch.randn(4, 4)
        with wallsim.capture(self.path("p.json")):
            a = x * 2
            b = a + 1
            del a  # a's value dies here, b's lives to the end
            b.sum().item()
        doc = self.load("p.json")
        self.check_well_formed(doc)
        evs = doc["events"]
        mul = next(ev for ev in evs if ev["ev"] == "op" and ev["aten"] == "aten.mul.Tensor")
        add = next(ev for ev in evs if ev["ev"] == "op" and ev["aten"] == "aten.add.Tensor")
        freed = [ev["id"] for ev in kinds(doc, "free")]
        self.assertIn(mul["id"], freed)
        self.assertNotIn(add["id"], freed)

    def test_parameter_initialisation_is_not_in_the_program(self):
        def build_and_run():
            net = nn.Linear(4, 4)  # uniform_ init inside the capture
            net(torch.randn(2, 4)).sum().item()
        doc = self.capture_and_check("init", build_and_run)
        self.assertEqual(sorted(ev["name"] for ev in kinds(doc, "weight")), ["bias", "weight"])
        self.assertEqual(len(kinds(doc, "input")), 1)  # the randn input, not the init values

    def test_backward_marks_each_parameters_gradient(self):
        # one grad a parameter a step, last parameter first, after the backward's ops and before
        # the optimizer's first update; the update derives from it (SGD momentum: step 0's grad
        # is the backward's op, step 1's a view re-derived from the accumulated base)
        net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(6, 4)
        with wallsim.capture(self.path("g.json"), values=True):
            for _ in range(2):
                loss = net(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                loss.item()
                wallsim.step()
        doc = self.load("g.json")
        self.check_well_formed(doc)
        weights = {ev["id"] for ev in kinds(doc, "weight")}
        steps, cur = [], []
        for ev in doc["events"]:
            if ev["ev"] == "step":
                steps.append(cur)
                cur = []
            else:
                cur.append(ev)
        steps.append(cur)
        self.assertEqual(len(steps), 2)
        for evs in steps:
            grads = [(k, ev) for k, ev in enumerate(evs) if ev["ev"] == "grad"]
            self.assertEqual([ev["name"] for _, ev in grads],
                             ["2.bias", "2.weight", "0.bias", "0.weight"])
            updates = []
            for k, ev in enumerate(evs):
                if ev["ev"] == "op" and ev.get("inplace_of") in weights:
                    weights.add(ev["id"])
                    updates.append(k)
            self.assertEqual(len(updates), 4)
            self.assertLess(max(k for k, _ in grads), min(updates))
            for k, g in grads:
                self.assertTrue(any(g["id"] in ev.get("inputs", []) for ev in evs[k + 1:]), g)
        err, n, _ = evaluate(self.path("g.json"))
        self.assertEqual(n, 2)
        self.assertLess(err, 1e-4)


class Setup(Base):
    def test_set_up_math_is_in_the_set_up_section_once(self):
        # Issue 40 (regnet's BlockParams): tensor math a builder runs and reads with .tolist()
        # is set-up, replayed once, not in the step that follows.
        def build():
            widths = (torch.arange(3) * 4.0 + 8).round().int()
            sizes = widths.tolist()  # a read in the set-up
            return nn.Sequential(nn.Linear(8, sizes[0]), nn.ReLU(), nn.Linear(sizes[0], 4))

        x = torch.randn(2, 8)
        with wallsim.capture(self.path("s.json"), values=True), torch.no_grad():
            with wallsim.setup():
                net = build()
            for _ in range(2):
                net(x).numpy()
                wallsim.step()
        doc = self.load("s.json")
        self.check_well_formed(doc)
        setup = doc["setup"]
        self.assertEqual([ev["reason"] for ev in setup if ev["ev"] == "read"], ["tolist"])
        set_up_atens = {ev["aten"] for ev in setup if ev["ev"] == "op"}
        self.assertIn("aten.arange.default", set_up_atens)
        self.assertIn("aten.mul.Tensor", set_up_atens)
        self.assertFalse(set_up_atens & atens(doc), "set-up math in a step")
        self.assertEqual(len(kinds(doc, "read")), 2)  # one numpy read per step
        self.assertEqual(len(kinds(doc, "step")), 1)
        set_up_ids = {ev["id"] for ev in setup if "id" in ev}
        self.assertFalse({ev["id"] for ev in kinds(doc, "free")} & set_up_ids)
        err, n, _ = evaluate(self.path("s.json"))
        self.assertEqual(n, 3)
        self.assertLess(err, 1e-5)
        without = self.path("n.json")
        with wallsim.capture(without), torch.no_grad():
            net = build()
            net(x).numpy()
        with open(without) as f:
            doc = json.load(f)
        self.assertNotIn("setup", doc)
        self.assertIn("aten.arange.default", atens(doc))

    def test_set_up_reads_are_numbered_first_and_weights_it_uses_move_to_it(self):
        lin = nn.Linear(4, 4)
        x = torch.randn(1, 4)
        with wallsim.capture(self.path("s.json"), values=True), torch.no_grad():
            lin(x).numpy()  # step 0 first: lin's weights appear here
            with wallsim.setup():
                scale = (lin.weight * 2).sum()
                scale.item()
            (lin(x) * scale).numpy()
        doc = self.load("s.json")
        self.check_well_formed(doc)
        self.assertEqual([ev["name"] for ev in doc["setup"] if ev["ev"] == "weight"], ["weight"])
        self.assertEqual([ev["reason"] for ev in doc["setup"] if ev["ev"] == "read"], ["item"])
        err, n, _ = evaluate(self.path("s.json"))
        self.assertEqual(n, 3)
        self.assertLess(err, 1e-5)

    def test_set_up_using_step_values_or_holding_a_step_is_refused(self):
        from wallsim.sections import SetupError
        x = torch.randn(4)
        with self.assertRaisesRegex(SetupError, r"uses a value made outside wallsim.setup\(\)"):
            with wallsim.capture(self.path("u.json")):
                y = x * 2
                with wallsim.setup():
                    (y + 1).sum().item()
        self.assertFalse(os.path.exists(self.path("u.json")))
        with self.assertRaisesRegex(SetupError, r"wallsim.step\(\) inside wallsim.setup\(\)"):
            with wallsim.capture(self.path("t.json")):
                with wallsim.setup():
                    wallsim.step()
        with wallsim.setup():  # outside a capture: nothing
            pass


class Mapping(Base):
    def test_conv_net_eval(self):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
                self.bn = nn.BatchNorm2d(8)
                self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
                self.g = nn.Conv2d(8, 8, 1, groups=2)
                self.pool = nn.MaxPool2d(3, 2, 1)
                self.fc = nn.Linear(8, 5)

            def forward(self, x):
                x = torch.relu_(self.bn(self.c1(x)))
                x = nn.functional.hardtanh(self.dw(x), 0.0, 6.0)
                x = x + self.g(x)
                x = self.pool(x)
                x = nn.functional.avg_pool2d(x, 2)
                return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

        net = Net().eval()
        with torch.no_grad():
            net.bn.running_mean.uniform_(-1, 1)
            net.bn.running_var.uniform_(0.5, 2)
        x = torch.randn(2, 3, 16, 16)

        def run():
            with torch.no_grad():
                net(x).softmax(-1).tolist()
        doc = self.capture_and_check("conv", run)
        self.assertTrue({"aten.convolution.default", "aten.native_batch_norm.default",
                         "aten.max_pool2d_with_indices.default", "aten.hardtanh.default"}
                        <= atens(doc), atens(doc))
        self.assertFalse(kinds(doc, "host_op"))
        self.assertIn("im2col", {ev["op"] for ev in kinds(doc, "op")})

    def test_multi_head_attention_fast_path(self):
        # as in torchvision's vit_b_16: nn.MultiheadAttention in eval without weights
        mha = nn.MultiheadAttention(32, 4, batch_first=True).eval()
        x = torch.randn(2, 5, 32)

        def run():
            with torch.no_grad():
                mha(x, x, x, need_weights=False)[0].numpy()
        doc = self.capture_and_check("mha", run)
        self.assertIn("aten._native_multi_head_attention.default", atens(doc))
        self.assertFalse(kinds(doc, "host_op"))
        self.assertIn("attention", {ev["op"] for ev in kinds(doc, "op")})

    def test_encoder_layer_fast_path_batch_norm_training_and_row_index(self):
        enc = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True).eval()
        net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        x, src, t = torch.randn(2, 3, 6, 6), torch.randn(2, 4, 16), torch.randn(5, 3)

        def run():
            with torch.no_grad():
                enc(src).numpy()
                net(x).sum().item()  # training mode: batch statistics, running stats updated
                net[1].running_mean.tolist()
                t[torch.tensor([4, 0, 4])].tolist()
        doc = self.capture_and_check("fast", run)
        a = atens(doc)
        self.assertTrue({"aten._transformer_encoder_layer_fwd.default",
                         "aten.native_batch_norm.default", "aten.index.Tensor"} <= a, a)
        self.assertFalse(kinds(doc, "host_op"))

    def test_training_steps_sgd_and_adam(self):
        for opt_cls in (torch.optim.SGD, torch.optim.Adam):
            net = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.LayerNorm(12), nn.Linear(12, 3))
            emb = nn.Embedding(10, 6)
            opt = opt_cls(list(net.parameters()) + list(emb.parameters()), lr=0.1)
            ids = torch.randint(0, 10, (5,))
            y = torch.randint(0, 3, (5,))

            def run():
                for _ in range(2):
                    loss = nn.functional.cross_entropy(net(emb(ids)), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    loss.item()
                    wallsim.step()
                net(emb(ids)).sum().item()
            doc = self.capture_and_check("train_" + opt_cls.__name__, run)
            a = atens(doc)
            self.assertTrue({"aten.gelu_backward.default", "aten.native_layer_norm_backward.default",
                             "aten.embedding_dense_backward.default",
                             "aten.nll_loss_backward.default"} <= a, a)
            if opt_cls is torch.optim.Adam:
                self.assertTrue({"aten.addcdiv_.default", "aten.sqrt.default"} <= a, a)
                self.assertGreater(len(kinds(doc, "read")), 3)  # Adam's step count reads
            self.assertFalse(kinds(doc, "host_op"))
            self.assertTrue(any("inplace_of" in ev for ev in kinds(doc, "op")))

    def test_elementwise_and_reductions(self):
        x = torch.randn(4, 6)
        z = torch.randn(6)

        def run():
            r = [torch.sigmoid(x) * torch.tanh(x) - x.exp() / (1 + x.abs()),
                 x.clamp(-0.5, 0.5), torch.where(x > 0, x, z), x.pow(2).sqrt().rsqrt(),
                 x.amax(0, keepdim=True), x.mean((0, 1), keepdim=True), x.var(1),
                 torch.erf(x), nn.functional.silu(x), nn.functional.gelu(x, approximate="tanh"),
                 x.argmax(1).float(), torch.max(x, 1)[0], x.log_softmax(0), 2 - x, x.masked_fill(x < 0, -1.5),
                 torch.cat([x, x * 2], 1), torch.stack([x, x], 0), x.t().contiguous(),
                 torch.arange(6) * 1.5 + z, x.tril(), x.sum()]
            for t in r:
                t.tolist()
        doc = self.capture_and_check("ew", run)
        self.assertFalse(kinds(doc, "host_op"), kinds(doc, "host_op"))


class Aliasing(Base):
    def test_writes_through_views_and_stale_views(self):
        x = torch.randn(4, 6)

        def run():
            y = x.clone()
            v = y[:, 2:]  # a view of y
            t = y.t()  # another view of y, used after y changes
            v.mul_(3)  # writes into y through v
            y.relu_()  # in place on the base: t is stale now
            t.tolist()
            y[1].add_(10)  # select view written in place
            y.tolist()
            w = y.view(24)
            w.zero_()
            y.sum().item()
        doc = self.capture_and_check("alias", run, tol=1e-6)
        self.assertFalse(kinds(doc, "host_op"))


class NamedDims(Base):
    def test_generation_names_the_sequence_and_writes_relative_positions(self):
        cmd = [sys.executable, "-m", "wallsim", "capture", os.path.join(ROOT, "examples", "torch",
               "gpt2.py"), "--out", self.path("gen.json"), "--values", "--", "--layers", "1",
               "--width", "32", "--heads", "4", "--vocab", "50", "--context", "32",
               "--tokens", "3", "--prompt", "4"]
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "frontends", "torch", "python"))
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        doc = self.load("gen.json")
        self.check_well_formed(doc)
        self.assertEqual(list(doc["dims"]), ["seq"])
        ins = [ev for ev in kinds(doc, "input") if ev.get("dim_names")]
        self.assertEqual([ev["shape"] for ev in ins], [[1, 4], [1, 5], [1, 6]])  # one per step
        self.assertTrue(all(ev["dim_names"] == [None, "seq"] for ev in ins))
        self.assertEqual(len(kinds(doc, "read")), 3)
        self.assertEqual(len(kinds(doc, "step")), 2)
        # per step the embedding's rows follow the sequence: 4, 5, 6
        emb = [ev["shape"][1] for ev in kinds(doc, "op") if ev["op"] == "embedding" and
               ev["shape"][0] == 1]
        self.assertEqual(emb, [4, 5, 6])
        self.assertTrue(all(ev.get("dim_names") == [None, "seq", None] for ev in kinds(doc, "op")
                            if ev["op"] == "embedding" and ev["shape"][0] == 1))
        # 4 heads and a prompt of 4 tokens: the heads axis has the sequence's extent at the first
        # step, but only the sequence axis is named (constants take their operand's names)
        heads = [ev for ev in kinds(doc, "op") if ev["op"] == "transpose" and
                 ev["attrs"]["perm"] == [0, 2, 1, 3]]
        self.assertTrue(heads)
        for ev in heads:  # [1, T, H, d] <-> [1, H, T, d]: one axis is the sequence
            self.assertEqual(ev.get("dim_names", []).count("seq"), 1, ev)
        rel = [ev["attrs"] for ev in kinds(doc, "op") if ev["op"] == "slice" and
               isinstance(ev["attrs"]["limit"], dict)]
        # x[:, -1:]: start seq-1; the mask cut bias[:T, :T]: limit seq
        self.assertIn({"dim": "seq", "offset": -1}, [a["start"] for a in rel])
        self.assertTrue(any(a["start"] == 0 and a["limit"] == {"dim": "seq", "offset": 0}
                            for a in rel))
        err, n, _ = evaluate(self.path("gen.json"))
        self.assertEqual(n, 3)
        self.assertLess(err, 1e-5)

    def test_mark_dynamic_propagates_through_reshape_and_matmul(self):
        w = torch.randn(8, 4)
        for batch, merged in ((1, "seq"), (2, "2*seq")):
            x = wallsim.mark_dynamic(torch.randn(batch, 7, 8), 1, "seq")
            with wallsim.capture(self.path("p.json")):
                y = (x.reshape(batch * 7, 8) @ w).view(batch, 7, 4).transpose(1, 2)
                y.sum().item()
            doc = self.load("p.json")
            names = {ev["aten"]: ev.get("dim_names") for ev in kinds(doc, "op")}
            self.assertEqual(kinds(doc, "input")[0]["dim_names"], [None, "seq", None])
            # merged with a batch of 2 the axis is "2*seq", and splits back to "seq"
            self.assertEqual(names["aten.mm.default"], [merged, None])
            self.assertEqual(names["aten.transpose.int"], [None, None, "seq"])
            self.assertNotIn(merged if batch > 1 else "-", doc.get("dims", {}))

    def test_a_broadcast_takes_the_names_of_every_operand(self):
        # [1, 4] * [batch, 4]: the [1, 4] operand's explicit broadcast runs at the batch's
        # extent, so it is named by the other operand (a sharded or bounded replay resizes it)
        x = wallsim.mark_dynamic(torch.randn(6, 4), 0, "batch")
        w = torch.randn(1, 4)
        s = torch.randn(1, 1)
        with wallsim.capture(self.path("b.json")):
            ((x * w) * s + s).sum().item()
        doc = self.load("b.json")
        ops = [ev for ev in kinds(doc, "op") if ev["op"] in ("broadcast", "reshape")]
        self.assertTrue(any(ev["op"] == "broadcast" for ev in ops), ops)
        for ev in ops:
            if ev["shape"] == [6, 4]:
                self.assertEqual(ev.get("dim_names"), ["batch", None], ev)


class Meta(Base):
    def test_meta_capture_writes_the_same_events_without_compute(self):
        def run():
            x = wallsim.mark_dynamic(torch.tensor([[1, 2, 3]]), 1, "seq")
            emb = torch.nn.Embedding(10, 8)
            lin = torch.nn.Linear(8, 8)
            with torch.no_grad():
                for _ in range(2):
                    h = torch.relu(lin(emb(x)))
                    h[:, 1:] += 1  # a write through a view
                    tok = h[0, -1].argmax().item()
                    print(h.sum())
                    x = wallsim.mark_dynamic(torch.tensor([x[0].tolist() + [tok % 10]]), 1, "seq")
                    wallsim.step()
        docs = {}
        for meta in (False, True):
            torch.manual_seed(0)
            from wallsim.recorder import Capture
            name = "meta%d.json" % meta
            with Capture(self.path(name), meta=meta, name="m"):
                run()
            docs[meta] = self.load(name)
            self.check_well_formed(docs[meta])
        self.assertEqual(docs[False]["events"], docs[True]["events"])
        self.assertEqual(len(kinds(docs[True], "read")), 6)  # item, print, tolist per step
        with self.assertRaises(ValueError):
            Capture(self.path("x.json"), meta=True, values=True)


class HostOps(Base):
    def test_unmapped_op_becomes_a_host_op(self):
        x = torch.randn(5, 6)

        def run():
            y, _ = torch.sort(x * 2, dim=1)
            (y + 1).tolist()
        doc = self.capture_and_check("host", run, tol=1e-6)
        hosts = kinds(doc, "host_op")
        self.assertEqual([h["aten"] for h in hosts], ["aten.sort.default"])
        self.assertEqual(hosts[0]["outputs"][0]["shape"], [5, 6])
        self.assertGreater(hosts[0]["flops"], 0)
        self.assertEqual(hosts[0]["bytes"], 5 * 6 * 4 + 5 * 6 * (4 + 8))  # x; values, indices

    def test_cumsum_and_gather_are_graph_ops(self):
        x = torch.randn(5, 6)
        i = torch.tensor([[0, 2, 2], [5, 1, 0], [3, 3, 4], [1, 0, 5], [2, 2, 2]])

        def run():
            y = torch.cumsum(x * 2, dim=1) + torch.cumsum(x, dim=0)
            g = torch.gather(x, 1, i).sum() + torch.gather(x.t(), 0, i[:, :2].t()).sum()
            (y.sum() + g.sum()).item()
            torch.tensor([[1, 0, 1, 1]]).cumsum(1).tolist()  # int64: exact in fp32
        doc = self.capture_and_check("cg", run, tol=1e-6)
        self.assertEqual(kinds(doc, "host_op"), [])
        self.assertTrue({"aten.cumsum.default", "aten.gather.default"} <= atens(doc))

    def test_inplace_host_op_frees_its_input_after_it(self):
        # Issue 40: a batch_first GRU's aten.transpose_ (a host op) was preceded by the free of
        # the id it reads; every replay refused the file ("used after it was freed").
        gru = nn.GRU(4, 6, batch_first=True)
        x = torch.randn(2, 3, 4)

        def run():
            with torch.no_grad():
                y, h = gru(x)
                (y.sum() + h.sum()).item()
        doc = self.capture_and_check("gru", run, tol=1e-5)
        self.assertIn("aten.transpose_.default", [h["aten"] for h in kinds(doc, "host_op")])

    def test_a_program_the_replay_refuses_is_not_written(self):
        from wallsim import program_file
        bad = {"format": "wallsim-program", "version": 1, "name": "p", "events": [
            {"ev": "input", "id": 0, "name": "x", "dtype": "float32", "shape": [2]},
            {"ev": "free", "id": 0},
            {"ev": "host_op", "aten": "aten.transpose_.default", "module": "", "inputs": [0],
             "outputs": [{"id": 1, "dtype": "float32", "shape": [2]}], "flops": 2, "bytes": 8}]}
        with self.assertRaises(program_file.CaptureError) as e:
            program_file.write_program(self.path("p.json"), bad, None, {})
        self.assertIn("events[2] (host_op): id 0 is used after it was freed", str(e.exception))
        self.assertEqual(os.listdir(self.tmp.name), [])


    def test_strided_slices_narrow_and_unsafe_split_are_graph_ops(self):
        # Issue 40: swin's patch merging (x[..., 0::2, 1::2, :]) and narrow, and an RNN's gates
        # (unsafe_split) ran on the host, cutting an LSTM's step into 130 launches.
        x = torch.randn(2, 8, 6, 4)
        lstm = nn.LSTM(4, 5)

        def run():
            parts = [x[:, 0::2, 1::2, :], x[:, 1::2, 0::2], x.narrow(2, 1, 3),
                     x.narrow(-1, -2, 2), x[:, 1:7:3], x[:, :, 1::4]]
            for p in parts:
                p.numpy()
            with torch.no_grad():
                lstm(x[0, :3])[0].numpy()
        doc = self.capture_and_check("views", run, tol=1e-5)
        self.assertEqual(kinds(doc, "host_op"), [])


class Command(Base):
    def wallsim(self, *args, env=None):
        exe = os.environ.get("WALLSIM_BIN")
        if not exe:
            self.skipTest("WALLSIM_BIN is not set (ctest sets it)")
        return subprocess.run([exe, "capture"] + list(args), capture_output=True, text=True,
                              env=env)

    def test_capture_writes_the_program(self):
        r = self.wallsim(os.path.join(ROOT, "examples", "torch", "mlp.py"), "--out",
                         self.path("m.json"), "--", "--width", "8", "--batch", "2", "--steps", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("wrote", r.stdout)
        self.check_well_formed(self.load("m.json"))
        self.assertEqual(self.load("m.json")["source"]["argv"],
                         ["--width", "8", "--batch", "2", "--steps", "1"])

    def test_reported_steps_are_the_replayed_steps(self):
        # Review F20: two wallsim.step() calls make two steps; the last marker ends the program,
        # so the file holds one "step" event (a boundary) and the replay runs 2 steps.
        r = self.wallsim(os.path.join(ROOT, "examples", "torch", "mlp.py"), "--out",
                         self.path("m2.json"), "--", "--width", "8", "--batch", "2", "--steps", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(" 2 steps)", r.stdout)
        self.assertEqual(sum(1 for ev in self.load("m2.json")["events"] if ev["ev"] == "step"), 1)

    def test_bad_input_exits_2_with_one_line_and_no_file(self):
        bad = self.path("bad.py")
        with open(bad, "w") as f:
            f.write("import torch\ntorch.ones(2).sum().item()\nraise ValueError('boom')\n")
        out = self.path("o.json")
        notorch = self.path("notorch")
        os.makedirs(os.path.join(notorch, "torch"))
        with open(os.path.join(notorch, "torch", "__init__.py"), "w") as f:
            f.write("raise ImportError('no torch here')\n")
        cases = [([bad, "--out", out], None, "raised ValueError: boom"),
                 ([self.path("missing.py"), "--out", out], None, "no such script"),
                 ([bad, "--out", self.path("nodir/o.json")], None, "does not exist"),
                 ([bad, "--out", out], dict(os.environ, PYTHONPATH=notorch), "PyTorch is not"),
                 ([bad, "--out", out], dict(os.environ, WALLSIM_PYTHON="/nonexistent/python"),
                  "cannot run"),
                 ([bad, "--out", out, "--meta", "--values"], None, "exclude each other")]
        for args, env, msg in cases:
            r = self.wallsim(*args, env=env)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(msg, r.stderr)
            self.assertFalse(os.path.exists(out))
            self.assertFalse(os.path.exists(self.path("o.values")))

    def test_outputs_wallsim_did_not_write_are_refused_and_kept(self):
        # Issue 40: --values replaced a P.values/ folder with the user's files in it; --out a
        # folder or a FIFO, or P.values a file, left .program-*/.values-* behind (or replaced the
        # FIFO). Each is refused before the script runs, and nothing is left or lost.
        script = self.path("s.py")
        with open(script, "w") as f:
            f.write("import torch\nx = torch.ones(2, 3)\n(x * 2).sum().item()\n")
        os.makedirs(self.path("folder.json"))
        os.mkfifo(self.path("fifo.json"))
        os.makedirs(self.path("user.values"))
        with open(self.path("user.values/thesis.tex"), "w") as f:
            f.write("keep")
        with open(self.path("file.values"), "w") as f:
            f.write("keep")
        cases = [(["--out", self.path("folder.json")], "is not a regular file"),
                 (["--out", self.path("fifo.json")], "is not a regular file"),
                 (["--out", self.path("user.json"), "--values"], "not an earlier capture's"),
                 (["--out", self.path("file.json"), "--values"], "is not a folder")]
        for args, msg in cases:
            r = self.wallsim(script, *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(msg, r.stderr)
        self.assertTrue(os.path.isdir(self.path("folder.json")))
        self.assertTrue(stat.S_ISFIFO(os.stat(self.path("fifo.json")).st_mode))
        for name in ["user.values/thesis.tex", "file.values"]:
            with open(self.path(name)) as f:
                self.assertEqual(f.read(), "keep")
        self.assertFalse(os.path.exists(self.path("user.json")))
        self.assertEqual([f for f in os.listdir(self.tmp.name) if f.startswith(".")], [])
        # A capture's own values folder is replaced by the next capture.
        for _ in range(2):
            r = self.wallsim(script, "--out", self.path("own.json"), "--values")
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(".wallsim-output", os.listdir(self.path("own.values")))
        self.assertEqual([f for f in os.listdir(self.tmp.name) if f.startswith(".")], [])

    def test_what_the_capture_cannot_see_is_said(self):
        # Issue 40: os._exit(0) left no program, ops in threads and a nested capture were dropped,
        # each with exit 0 and nothing said.
        cases = {
            "exit0": ("x = torch.ones(3, 3)\n(x @ x).sum().item()\nos._exit(0)\n", 0,
                      "called os._exit(0); wrote"),
            "exit3": ("x = torch.ones(3, 3)\n(x @ x).sum().item()\nos._exit(3)\n", 2,
                      "called os._exit(3); no program written"),
            "thread": ("t = threading.Thread(target=lambda: torch.ones(2) * 2)\nt.start()\n"
                       "t.join()\n(torch.ones(2) * 3).sum().item()\n", 0,
                       "ATen ops run in other threads are not captured"),
            "nested": ("with wallsim.capture('inner.json'):\n    (torch.ones(2) * 3).sum().item()"
                       "\n", 0, "inner.json is not written")}
        for name, (body, code, msg) in cases.items():
            script = self.path(name + ".py")
            with open(script, "w") as f:
                f.write("import os, threading, torch, wallsim\n" + body)
            r = self.wallsim(script, "--out", self.path(name + ".json"))
            self.assertEqual(r.returncode, code, (name, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(msg, r.stderr)
            self.assertEqual(os.path.exists(self.path(name + ".json")), code == 0, name)
        self.check_well_formed(self.load("exit0.json"))
        self.assertFalse(os.path.exists(self.path("inner.json")))

    def test_ctrl_c_is_one_line_and_exit_130(self):
        import signal
        script = self.path("slow.py")
        with open(script, "w") as f:
            f.write("import sys, time, torch\n(torch.ones(2) * 2).sum().item()\n"
                    "print('ready', flush=True)\ntime.sleep(60)\n")
        exe = os.environ.get("WALLSIM_BIN")
        if not exe:
            self.skipTest("WALLSIM_BIN is not set (ctest sets it)")
        p = subprocess.Popen([exe, "capture", script, "--out", self.path("slow.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.assertEqual(p.stdout.readline().strip(), "ready")  # inside the script's work
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertEqual(err.strip(), "wallsim capture: interrupted; no program written")
        self.assertEqual(os.listdir(self.tmp.name), ["slow.py"])

    def test_a_failed_write_leaves_no_temporary_file(self):
        from wallsim import program_file
        doc = {"format": "wallsim-program", "version": 1, "name": "p", "events": []}
        real = os.replace

        def full_disk(*a):
            raise OSError(28, "No space left on device", a[1])
        program_file.os.replace = full_disk
        try:
            with self.assertRaises(program_file.OutputError) as e:
                program_file.write_program(self.path("p.json"), doc, "p.values",
                                       {"w0": __import__("numpy").zeros(2)})
        finally:
            program_file.os.replace = real
        self.assertIn("No space left on device", str(e.exception))
        self.assertEqual(os.listdir(self.tmp.name), [])  # the values too are taken back


if __name__ == "__main__":
    unittest.main()
