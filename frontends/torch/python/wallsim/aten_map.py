"""ATen ops as graph ops (compiler_stub ops.def), composed exactly where the IR has no op of its own.

Each handler is `h(cap, args, kwargs, out) -> id | [id | None | callable]`: it emits graph ops
through `cap.g.op` for the ATen op's functional form and returns the SSA id of each output
(`None`: an output nobody can use; a callable: an output emitted only if it is used, e.g. batch
norm's saved statistics). In-place variants (`add_`) reuse the functional handler (`add`) and the
capture writes the result back. A handler raises MappingError for arguments it does not cover;
the op then goes through PyTorch's decomposition table or becomes a host_op.

The idioms are the ONNX importer's (frontends/onnx/src/onnx_ops.cpp): a convolution is im2col
(a strided view of the padded input) and a matmul per group, a depthwise one a multiply and a sum
over the window; pooling is im2col and a reduction; padding is a concat with constant blocks;
a reduction over any axes is transpose + reshape + a last-axis reduction; constants are iota +
affine (docs/PROGRAM_FORMAT.md).

This module is what the capture (recorder.py) uses: the table HANDLERS (aten_table.py), filled by
importing the handlers' modules (no ATen name is registered by two of them): aten_elementwise.py
(element-wise, copies, casts, constants), aten_nn.py (matrix products, reductions, softmax, norms,
convolution, pooling, attention), aten_index.py (embedding, gather, losses, backwards, joins) and
aten_views.py (views and their inverses); the builders they compose with are compose.py's.
"""

from . import aten_elementwise, aten_index, aten_nn, aten_views  # noqa: F401 (fill HANDLERS)
from .aten_table import ALIASING_COPIES, DECLINE, HANDLERS, Lazy
from .aten_views import unview, view_op, view_outputs
from .compose import bcast, cast

__all__ = ["ALIASING_COPIES", "DECLINE", "HANDLERS", "Lazy", "bcast", "cast", "unview", "view_op",
           "view_outputs"]
