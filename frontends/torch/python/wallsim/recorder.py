"""The capture: a TorchDispatchMode that writes a program file (docs/PROGRAM_FORMAT.md).

Every ATen op runs for real on the CPU (so Python control flow sees real values) and is written
as graph ops (aten_map.py), a decomposition of it (torch._decomp) or a host_op. Tensors are
tracked per Python object: each holds the SSA id of its current value; a view remembers its
root base and the view ops from it, so a mutation through any alias (the shared `_version`
counter tells) is seen by every other alias at its next use.
"""

import os
import sys
import weakref

import numpy as np
import torch
import torch._decomp
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from . import aten_map, grads, guards, reads, sections
from .dtypes import graph_dtype
from .graph import Graph, MappingError
from .program_file import write_program

_active = []  # the capture running in this process (at most one)

NP_DTYPES = {"fp32": np.float32, "bf16": np.float32, "fp16": np.float16, "int32": np.int32}
# Ops that only run (no tensor result worth tracking, or bookkeeping).
PASSTHROUGH = {"aten.is_same_size.default", "aten.size.default", "aten.stride.default",
               "aten.sym_size.default", "aten.sym_numel.default", "aten.is_nonzero.default"}
# Factory ops whose values come from the host's random generator: uploaded as input events.
RANDOM = {"randn", "rand", "randint", "randperm", "normal_", "uniform_", "bernoulli_",
          "bernoulli", "random_", "normal", "exponential_", "multinomial"}


class _Info:
    __slots__ = ("id", "version", "root", "recipe", "lazy")

    def __init__(self, i, version):
        self.id = i
        self.version = version
        self.root = None  # strong reference to the root base tensor (as PyTorch's _base)
        self.recipe = None  # [(func, args, kwargs)] from the root; the first arg is the parent
        self.lazy = None  # an aten_map.Lazy emitting the value on first use


class Capture(TorchDispatchMode):
    def __init__(self, path, values=False, name=None, source=None, meta=False):
        super().__init__()
        if meta and values:
            raise ValueError("a meta capture has no values to write (meta and values exclude "
                             "each other)")
        self.path = path
        self.values = values
        self.meta = meta  # timing-only: ATen ops run on meta tensors (shapes, no data)
        self.name = name or os.path.splitext(os.path.basename(path))[0]
        self.source = source or {}
        self.events = []
        self._next = 0
        self.g = Graph(self.events, self._new_id, self._provenance)
        self.tensors = {}  # id(obj) -> _Info
        self.refs = {}  # SSA id -> number of tracked objects holding it
        self.aten_stack = []
        self.module_stack = []
        self.module_names = {}  # id(module) -> path
        self.weight_names = {}  # id(tensor) -> name
        self.value_files = {}  # file name -> array
        self.reads = 0
        self.read_reason = []  # set by the patched Tensor methods
        self.dims = {}
        self.dead = set()
        self.freed = set()
        self._journals = []
        self._hooks = []
        self._patches = []
        self.closed = False
        self.in_setup = False  # inside wallsim.setup() (sections.setup_section)
        self.written_setup = []
        self._depth = 0
        self.command = False  # run by `wallsim capture` (guards: os._exit's status)
        self._unguard = None

    # ---- ids and provenance ----
    def _new_id(self):
        i = self._next
        self._next += 1
        return i

    def _provenance(self):
        aten = self.aten_stack[0] if self.aten_stack else ""
        return aten, (self.module_stack[-1] if self.module_stack else "")

    # ---- tensor tracking ----
    def info(self, t):
        return self.tensors.get(id(t))

    # ---- undo journal: a mapping that fails part-way leaves no trace ----
    def _note(self, undo):
        if self._journals:
            self._journals[-1].append(undo)

    def _note_info(self, info):
        if self._journals:
            saved = (info.id, info.version, info.lazy)

            def undo():
                info.id, info.version, info.lazy = saved
            self._journals[-1].append(undo)

    def _note_refs(self, i):
        if self._journals:
            old = self.refs.get(i)
            self._journals[-1].append(
                lambda: self.refs.__setitem__(i, old) if old is not None else self.refs.pop(i, None))

    def _begin(self):
        self._journals.append([])
        return (len(self.events), self._next)

    def _commit(self):
        done = self._journals.pop()
        if self._journals:
            self._journals[-1].extend(done)

    def _abort(self, mark):
        for undo in reversed(self._journals.pop()):
            undo()
        del self.events[mark[0]:]
        self.dead.update(range(mark[1], self._next))

    def _retain(self, i):
        self._note_refs(i)
        self.refs[i] = self.refs.get(i, 0) + 1

    def _release(self, i):
        self._note_refs(i)
        n = self.refs.get(i, 0) - 1
        if n > 0:
            self.refs[i] = n
            return
        self.refs.pop(i, None)
        if not self.closed:
            self._emit_free(i)

    def _emit_free(self, i):
        if i not in self.dead and i not in self.freed:
            self.freed.add(i)
            self._note(lambda: self.freed.discard(i))
            self.events.append({"ev": "free", "id": i})

    def _on_dead(self, key):
        info = self.tensors.pop(key, None)
        if info is None:
            return
        if info.lazy is None:
            self._release(info.id)
        else:
            for d in info.lazy.deps:
                self._release(d)

    def bind(self, t, i, lazy=None):
        """Makes tensor object t hold SSA id i (its previous id is released)."""
        key = id(t)
        info = self.tensors.get(key)
        old_id = None
        if info is None:
            info = _Info(i, t._version)
            self.tensors[key] = info
            weakref.finalize(t, self._on_dead, key)
            self._note(lambda: self.tensors.pop(key, None) if self.tensors.get(key) is info
                       else None)
        else:
            self._note_info(info)
            old_id, old_lazy = info.id, info.lazy
            info.id = i
            info.version = t._version
        if lazy is None:
            self._retain(i)
        else:
            for d in lazy.deps:
                self._retain(d)
        if info.lazy is None and old_id is not None:
            self._release(old_id)
        elif old_id is not None:
            for d in old_lazy.deps:
                self._release(d)
        info.lazy = lazy
        return info

    def id_of(self, t):
        """The SSA id of tensor t's current value, defining it (weight or input) if unseen."""
        info = self.info(t)
        if info is None:
            return self._define(t)
        if info.lazy is not None:
            self._note_info(info)
            fn = info.lazy
            info.lazy = None
            i = fn()
            info.id = i
            self._retain(i)
            for d in fn.deps:
                self._release(d)
            return i
        if info.root is not None and info.root._version != info.version:
            self._regenerate(t, info)
        return info.id

    def _regenerate(self, t, info):
        self._note_info(info)
        cur = self.id_of(info.root)
        for func, args, kwargs, shapes, k in info.recipe:
            self.aten_stack.append(str(func))  # the view op it redoes is its provenance
            try:
                cur = aten_map.view_op(self, func, cur, args, kwargs, shapes, k)
            finally:
                self.aten_stack.pop()
        self._release(info.id)
        info.id = cur
        self._retain(cur)
        info.version = info.root._version

    def _define(self, t):
        i = self._new_id()
        key = id(t)
        shape = list(t.shape) or [1]
        dt = graph_dtype(t.dtype)
        if key in self.weight_names or isinstance(t, torch.nn.Parameter):
            ev = {"ev": "weight", "id": i, "name": self.weight_names.get(key, "param%d" % i),
                  "dtype": dt, "shape": shape}
            kind = "w"
        else:
            ev = {"ev": "input", "id": i, "name": "input%d" % i, "dtype": dt, "shape": shape}
            kind = "i"
        names = getattr(t, "_wallsim_dims", None)
        self.g.declare(i, shape, dt, names)
        self.g.hbm.add(i)
        if i in self.g.names:
            ev["dim_names"] = self.g.names[i]
        self.events.append(ev)
        self.save(kind + str(i), t, dt)
        self.bind(t, i)
        return i

    def save(self, fname, t, dt):
        if self.values:
            self.read_reason.append("internal")
            try:
                with torch.no_grad(), reads.no_mode():
                    a = t.detach().to(torch.float32 if dt != "int32" else torch.int64).numpy()
            finally:
                self.read_reason.pop()
            self.value_files[fname] = np.array(a, dtype=NP_DTYPES[dt]).reshape(
                list(t.shape) or [1])

    # ---- events ----
    def read(self, t, reason):
        if not isinstance(t, torch.Tensor) or self.closed:
            return
        i = self.id_of(t)
        self.events.append({"ev": "read", "id": i, "reason": reason, "_r": self.reads})
        self.save("r%d" % self.reads, t, self.g.dtype[i])
        self.reads += 1

    def step(self):
        if self.in_setup:
            raise sections.SetupError("wallsim.step() inside wallsim.setup(): set-up is not a step")
        self.events.append({"ev": "step", "_live": set(self.refs)})

    def setup(self):
        """A context manager: the events inside it form the program's set-up section."""
        return sections.setup_section(self)

    def forget(self, t):
        """Stops tracking t: its next use defines it afresh (as a weight or input)."""
        info = self.tensors.pop(id(t), None)
        if info is not None:
            if info.lazy is None:
                self._release(info.id)
            else:
                for d in info.lazy.deps:
                    self._release(d)

    def host_op(self, name, args, kwargs, out, mutated=()):
        ins = []
        in_bytes = 0
        for a in _flat(args, kwargs):
            if isinstance(a, torch.Tensor):
                ins.append(self.id_of(a))
                in_bytes += a.numel() * a.element_size()
        outs = [o for o in _flat_out(out) if isinstance(o, torch.Tensor)]
        outs += [m for m in mutated if all(m is not o for o in outs)]
        ev = {"ev": "host_op", "aten": name, "module": self._provenance()[1], "inputs": ins,
              "outputs": [], "flops": 0, "bytes": in_bytes}
        flops = 0
        binds = []
        for o in outs:
            i = self._new_id()
            shape, dt = list(o.shape) or [1], graph_dtype(o.dtype)
            self.g.declare(i, shape, dt)
            ev["outputs"].append({"id": i, "dtype": dt, "shape": shape})
            ev["bytes"] += o.numel() * o.element_size()
            flops += max(o.numel(), 1)
            self.save("o%d" % i, o, dt)
            binds.append((o, i))
        in_elems = sum(a.numel() for a in _flat(args, kwargs) if isinstance(a, torch.Tensor))
        ev["flops"] = max(flops, in_elems)
        self.events.append(ev)
        # bound after the event: an in-place op's tensor releases its input's id, whose free
        # must follow the op that reads it (issue 40: transpose_, as_strided_)
        for o, i in binds:
            self.bind(o, i)

    # ---- modules ----
    def _pre_hook(self, module, inputs):
        key = id(module)
        if key not in self.module_names:
            for n, m in module.named_modules():
                self.module_names.setdefault(id(m), n)
            for n, p in list(module.named_parameters()) + list(module.named_buffers()):
                if id(p) not in self.weight_names:
                    # whatever made its value so far (initialisation) ran on the host: from
                    # here on it is a weight, uploaded once
                    self.weight_names[id(p)] = n
                    self.forget(p)

        self.module_stack.append(self.module_names[key])

    def _post_hook(self, module, inputs, output):
        if self.module_stack:
            self.module_stack.pop()

    # ---- the dispatch ----
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        if not name.startswith("aten.") or name in PASSTHROUGH or self.closed:
            if self.meta and name == "aten.is_nonzero.default" and args[0].is_meta:
                return self.__torch_dispatch__(torch.ops.aten._local_scalar_dense.default,
                                               types, args, {}) != 0
            return self._call(func, args, kwargs)
        packet = func.overloadpacket.__name__
        if packet == "_local_scalar_dense":
            self.read(args[0], self.read_reason[-1] if self.read_reason else "item")
            if self.meta and args[0].is_meta:
                return reads.stand_in(args[0].dtype)
            return func(*args, **kwargs)
        self.aten_stack.append(name)
        outer = len(self.aten_stack) == 1
        scratch_before = self.g.scratch
        if outer:
            self.g.scratch = []
        try:
            return self._dispatch(func, name, packet, args, kwargs)
        finally:
            self.aten_stack.pop()
            if outer:
                self._free_scratch()
                self.g.scratch = scratch_before

    def _free_scratch(self):
        for i in self.g.scratch:
            if i not in self.refs:
                self._emit_free(i)
        self.g.scratch = None

    def _dispatch(self, func, name, packet, args, kwargs):
        schema = func._schema
        mutated = [args[k] for k, a in enumerate(schema.arguments)
                   if k < len(args) and a.alias_info is not None and a.alias_info.is_write
                   and isinstance(args[k], torch.Tensor)]
        mutated += [kwargs[a.name] for a in schema.arguments
                    if a.name in kwargs and a.alias_info is not None and a.alias_info.is_write
                    and isinstance(kwargs[a.name], torch.Tensor)]
        is_view = (not mutated and schema.returns and
                   all(r.alias_info is not None for r in schema.returns))
        if packet in RANDOM:
            out = self._call(func, args, kwargs)
            for o in [o for o in _flat_out(out) if isinstance(o, torch.Tensor)] + mutated:
                self._fresh_input(o)
            return out
        if is_view and packet not in aten_map.ALIASING_COPIES:
            return self._view(func, packet, args, kwargs)
        inplace = packet.endswith("_") and mutated and mutated[0] is args[0]
        handler = aten_map.HANDLERS.get(packet.rstrip("_") if inplace else packet)
        if inplace and packet in aten_map.HANDLERS:
            handler = aten_map.HANDLERS[packet]
        decline = aten_map.DECLINE.get(packet)
        if handler is not None and decline is not None and decline(args, kwargs):
            handler = None
        if handler is not None and (not mutated or inplace):
            in_ids = self.id_of(args[0]) if inplace else None
            out = self._call(func, args, kwargs)  # PyTorch's errors reach the script unchanged
            mark = self._begin()
            try:
                res = handler(self, args, kwargs, out)
                if inplace:
                    self._write(args[0], res[0] if isinstance(res, (list, tuple)) else res,
                                in_ids)
                else:
                    self._bind_outputs(out, res)
                self._commit()
                return out
            except Exception as e:  # a form of the op the mapping does not cover
                self._abort(mark)
                self._debug(name, e)
            if inplace:
                self._host_after(name, args, kwargs, out, mutated, [in_ids])
            else:
                self.host_op(name, args, kwargs, out)
            return out
        decomp = torch._decomp.decomposition_table.get(func)
        if decomp is not None:
            mark = self._begin()
            try:
                with self:
                    out = decomp(*args, **kwargs)
                outs = [o for o in _flat_out(out) if isinstance(o, torch.Tensor)]
                if (not mutated or _same(out, mutated)) and all(
                        self.info(o) is not None for o in outs):
                    self._commit()
                    return out
                raise MappingError("the decomposition's results are not all tracked")
            except Exception as e:  # a decomposition that does not apply to these arguments
                self._abort(mark)
                self._debug("decomposition of " + name, e)
        in_ids = [self.id_of(a) for a in mutated]
        out = self._call(func, args, kwargs)
        self._host_after(name, args, kwargs, out, mutated, in_ids)
        return out

    def _call(self, func, args, kwargs):
        """Runs the ATen op: for real, or in a meta capture on meta tensors (host tensors the
        script made, parameters among them, are given as meta tensors of the same strides). An
        in-place op on a host tensor runs on the host (meta operands as zeros), so the tensor's
        version counter, which tells its views it changed, moves as it would."""
        if not self.meta:
            return func(*args, **kwargs)
        flat = [a for a in _flat(args, kwargs) if isinstance(a, torch.Tensor)]
        if not flat:
            return func(*args, **kwargs)  # a factory (random values, constants): on the host
        schema = func._schema
        host_write = any(
            a.alias_info is not None and a.alias_info.is_write and isinstance(v, torch.Tensor)
            and not v.is_meta
            for a, v in zip(schema.arguments, list(args) + [kwargs.get(a.name) for a in
                                                            schema.arguments[len(args):]]))
        with reads.no_mode():
            if host_write:
                conv = lambda t: torch.zeros(t.shape, dtype=t.dtype) if t.is_meta else t
            else:
                conv = lambda t: t if t.is_meta else torch.empty_strided(
                    t.shape, t.stride(), dtype=t.dtype, device="meta")
            a2, k2 = tree_map(lambda t: conv(t) if isinstance(t, torch.Tensor) else t,
                              (list(args), dict(kwargs)))
        return func(*a2, **k2)

    def _debug(self, what, e):
        if os.environ.get("WALLSIM_CAPTURE_DEBUG"):
            print("wallsim capture: %s: %r" % (what, e), file=sys.stderr)

    def _host_after(self, name, args, kwargs, out, mutated, in_ids):
        # The op ran; its mutated inputs' pre-op values are in_ids (inputs of the host op).
        for m in mutated:
            info = self.info(m)
            if info is not None:
                info.version = (info.root if info.root is not None else m)._version
        self.host_op(name, args, kwargs, out, mutated)

    def _fresh_input(self, t):
        """t holds values from the host's random generator: a new input (uploaded)."""
        i = self._new_id()
        shape, dt = list(t.shape) or [1], graph_dtype(t.dtype)
        self.g.declare(i, shape, dt)
        self.g.hbm.add(i)
        self.events.append({"ev": "input", "id": i, "name": "random%d" % i, "dtype": dt,
                            "shape": shape})
        self.save("i%d" % i, t, dt)
        info = self.bind(t, i)
        info.root = None

    def _bind_outputs(self, out, res):
        outs = _flat_out(out)
        if not isinstance(res, (list, tuple)):
            res = [res]
        for o, r in zip(outs, res):
            if not isinstance(o, torch.Tensor):
                continue
            if r is None:  # an output the mapping does not make: PyTorch's value, if used
                r = aten_map.Lazy(self._late_host(o))
            if isinstance(r, aten_map.Lazy):
                self.bind(o, -1, lazy=r)
            else:
                self._check(o, r)
                self.bind(o, r)

    def _late_host(self, o):
        ref = weakref.ref(o)
        name = self.aten_stack[0] if self.aten_stack else "?"

        def make():
            t = ref()
            i = self._new_id()
            shape, dt = list(t.shape) or [1], graph_dtype(t.dtype)
            self.g.declare(i, shape, dt)
            self.events.append({"ev": "host_op", "aten": name, "module": self._provenance()[1],
                                "inputs": [], "outputs": [{"id": i, "dtype": dt, "shape": shape}],
                                "flops": t.numel(), "bytes": t.numel() * t.element_size()})
            self.save("o%d" % i, t, dt)
            return i
        return make

    def _check(self, o, r):
        want = list(o.shape) or [1]
        if self.g.shape[r] != want:
            raise MappingError("%s gave shape %s, PyTorch %s" % (
                self.aten_stack[0] if self.aten_stack else "?", self.g.shape[r], want))

    def _write(self, t, new_id, old_id):
        """t was mutated in place; new_id is its new value (cast and broadcast to t)."""
        if isinstance(new_id, aten_map.Lazy):
            new_id = new_id()
        new_id = aten_map.cast(self, new_id, graph_dtype(t.dtype))
        new_id = aten_map.bcast(self, new_id, list(t.shape) or [1])
        ev = self.events[-1]
        if ev.get("id") == new_id and ev["ev"] == "op":
            ev["inplace_of"] = old_id
        info = self.info(t)
        if info.root is not None:
            # a write through a view: the root's new value, step by step back along the chain
            root = info.root
            try:
                olds = [self.id_of(root)]
                for entry in info.recipe[:-1]:
                    olds.append(aten_map.view_op(self, entry[0], olds[-1], *entry[1:]))
                cur = new_id
                for entry, old in zip(reversed(info.recipe), reversed(olds)):
                    cur = aten_map.unview(self, entry, old, cur)
            except MappingError:
                cur = None
            if cur is None:
                self._rollback_to_host(root)
            else:
                self._bind_again(root, cur)
            self._bind_again(t, new_id)
            return
        self._bind_again(t, new_id)

    def _bind_again(self, t, i):
        info = self.bind(t, i)
        info.version = (info.root if info.root is not None else t)._version

    def _rollback_to_host(self, root):
        i = self._new_id()
        shape, dt = list(root.shape) or [1], graph_dtype(root.dtype)
        old = self.id_of_nocheck(root)
        self.g.declare(i, shape, dt)
        self.events.append({"ev": "host_op", "aten": self.aten_stack[0] + " (into a view)",
                            "module": self._provenance()[1], "inputs": [old],
                            "outputs": [{"id": i, "dtype": dt, "shape": shape}],
                            "flops": root.numel(), "bytes": 2 * root.numel() * root.element_size()})
        self.save("o%d" % i, root, dt)
        self._bind_again(root, i)

    def id_of_nocheck(self, t):
        info = self.info(t)
        return info.id if info is not None and info.lazy is None else self.id_of(t)

    def _view(self, func, packet, args, kwargs):
        base = args[0]
        parent_id = self.id_of(base)
        out = self._call(func, args, kwargs)
        pinfo = self.info(base)
        root = pinfo.root if pinfo.root is not None else base
        recipe = (pinfo.recipe or []) if pinfo.root is not None else []
        outs = _flat_out(out)
        shapes = [list(o.shape) or [1] for o in outs]
        mark = self._begin()
        try:
            res = aten_map.view_outputs(self, func, parent_id, args, kwargs, shapes)
            for k, o in enumerate(outs):
                if o is not base and o is not root:
                    self._check(o, res[k])
            self._commit()
        except Exception as e:
            self._abort(mark)
            self._debug(str(func), e)
            self.host_op(str(func), args, kwargs, out)
            return out
        tail = tuple(None if isinstance(a, torch.Tensor) else a for a in args[1:])
        for k, o in enumerate(outs):
            if o is base or o is root:
                continue  # an alias op that returned its own input (lift_fresh)
            info = self.bind(o, res[k])
            info.root = root
            info.version = root._version
            info.recipe = recipe + [(func, (None,) + tail, kwargs, shapes, k)]
        return out

    # ---- start and finish ----
    def __enter__(self):
        if self in _active:  # re-entered to run a decomposition inside the dispatch
            self._depth += 1
            return super().__enter__()
        if _active:
            raise RuntimeError("wallsim.capture: a capture is already running")
        _active.append(self)
        mod = torch.nn.modules.module
        self._hooks = [mod.register_module_forward_pre_hook(self._pre_hook),
                       mod.register_module_forward_hook(self._post_hook)]
        self._patch()
        self._unguard = guards.install(self)
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb):
        r = super().__exit__(exc_type, exc, tb)
        if self._depth:
            self._depth -= 1
            return r
        self._close()
        if exc_type is None:
            self.write()
        return r

    def _close(self):
        self._unguard()
        self._unpatch()
        for h in self._hooks:
            h.remove()
        _active.remove(self)
        self.closed = True

    def finish(self):
        """Ends the capture without leaving its context (os._exit) and writes the program."""
        self._close()
        self.write()

    def _patch(self):
        self._patches = (reads.patch(self), grads.patch(self))

    def _unpatch(self):
        if self._patches:
            reads.unpatch(self._patches[0])
            grads.unpatch(self._patches[1])
        self._patches = []

    def write(self):
        doc = {"format": "wallsim-program", "version": 1, "name": self.name,
               "source": dict(self.source, torch=torch.__version__.split("a")[0])}
        vdir = None
        if self.values:
            vdir = os.path.splitext(os.path.basename(self.path))[0] + ".values"
            doc["values"] = vdir
        dims = {}
        for ev in self.events:
            for n in ev.get("dim_names") or []:
                if n and "*" not in n and n not in dims:
                    dims[n] = {"axis_of": [ev["id"], ev["dim_names"].index(n)]}
        if dims:
            doc["dims"] = dims
        while self.events and self.events[-1]["ev"] == "step":
            self.events.pop()
        live = sections.live_events(self.events, set(self.refs), self.value_files)
        setup, self.written = sections.split_setup(live, self.value_files)
        if setup:
            doc["setup"] = setup
        doc["events"] = self.written
        self.written_setup = setup
        write_program(self.path, doc, vdir, self.value_files)


def _same(out, mutated):
    outs = [o for o in _flat_out(out) if isinstance(o, torch.Tensor)]
    return all(any(o is m for m in mutated) for o in outs)


def _flat(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (list, tuple)):
            for b in a:
                yield b
        else:
            yield a


def _flat_out(out):
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]


def current():
    return _active[0] if _active else None
