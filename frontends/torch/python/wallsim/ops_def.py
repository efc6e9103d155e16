"""The graph IR's op table, read from compiler_stub's ops.def (the one place it is written).

OPS maps each op name to an Op: its attribute names, its kind (source, contraction, binary,
unary, activation, elementwise, reduction, row, layout, indirect, attention, collective,
composite; ops.def describes them), an activation's scalar-engine function (`act`, "identity"
otherwise) and the ATen op mapped to it alone (`aten`, "" when none). The package runs from the
source tree (wallsim capture puts frontends/torch/python on PYTHONPATH), so ops.def is found
relative to this file.
"""

import collections
import os
import re

Op = collections.namedtuple("Op", "attrs kind act aten")

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                    "compiler_stub", "include", "wallsim", "compiler_stub", "ops.def")
_ROW = re.compile(r'WALLSIM_GRAPH_OP\((\w+), \d+, \d+, "([^"]*)", \w+, \w+, (\w+), (\w+), '
                  r'"[^"]*", "[^"]*", "([^"]*)", ')


def _read(path):
    table = {}
    with open(path) as f:
        for line in f:
            m = _ROW.match(line)
            if m:
                table[m.group(1)] = Op(set(m.group(2).split()), m.group(3), m.group(4),
                                      m.group(5))
    if not table:
        raise RuntimeError("no WALLSIM_GRAPH_OP rows in " + path)
    return table


OPS = _read(os.path.normpath(PATH))


def of_kind(*kinds):
    """The names of the ops of these kinds."""
    return {n for n, o in OPS.items() if o.kind in kinds}
