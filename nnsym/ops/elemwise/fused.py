"""Fused elementwise kernels: a tree of dense elementwise nodes as one generated loop.

The graph pass ``nnsym.passes.fuse.fuse_elementwise`` replaces each group it finds by one node of
``fused_op(k)`` (``k`` inputs, one output). The node's ``FusedParams`` hold the program: one
``Step`` per fused node, in topological order, each the scalar expression that node's own dense
kernel computes (taken from its lowering, ``scalar_form``: so expressions come only from the
operator tables, never from a user). The kernel (``fused.c.j2``, CUDA twin ``fused.cu.j2``)
reads every input once per element, evaluates the steps into locals stored in each step's
output type (the same rounding as the unfused kernels' stores) and writes the output once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import StorageTypeError
from nnsym.ir.opdef import DENSE, Kernel, OpDef
from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, comptype, size
from nnsym.ir.storage import Csr, Env, Rsp, Storage, StorageCall
from nnsym.ops.common.storage import values_of_pattern

TEMPLATE = "elemwise/fused.c.j2"
TEMPLATES = (TEMPLATE,)
# Outputs of at least this many elements split over the worker pool, in blocks of BLOCK
# elements (whole vectors, so every element is computed the same way whatever the split).
# NOTE: not a measured optimum: on the shared 2-core development machine the second core was
# never idle, so two threads did not beat one at any size (W3 at 16M: 14.9 vs 16.7 ms).
BLOCK = 1024

# The single-launch dense templates whose expression a fused kernel can take over, with the
# variables their expression reads (bound to the node's inputs in order).
_OPERAND = re.compile(r"^[tv][0-9]+$")


@dataclass(frozen=True)
class Step:
    """One fused node: ``expr`` over ``names`` (bound to ``operands``: ``v<k>`` input k or
    ``t<j>`` step j, each cast to ``comptype(var_dtype)``), run-time parameters ``fparams`` at
    ``fa[fa_offset:]``, result stored as ``out_dtype``."""

    op: str
    expr: str
    names: tuple[str, ...]
    var_dtype: str
    fparams: tuple[str, ...]
    fa_offset: int
    operands: tuple[str, ...]
    out_dtype: str

    def literal(self) -> tuple[Any, ...]:
        return (self.expr, self.names, comptype(self.var_dtype), self.fparams, self.fa_offset,
                self.operands, self.out_dtype)


@dataclass(frozen=True)
class ScalarForm:
    """What one node's dense kernel computes per element."""

    expr: str
    names: tuple[str, ...]  # variables, bound to the node's inputs in order
    var_dtype: str  # the variables' arithmetic type is comptype(var_dtype)
    fparams: tuple[str, ...]
    fa: tuple[float, ...]


def scalar_form(low: Lowered, n: int) -> ScalarForm | None:
    """The per-element expression of a lowered single-output elementwise node of ``n``
    elements, or None where its kernel is not one of the plain elementwise templates."""
    if low.views or len(low.launches) != 1:
        return None
    ln = low.launches[0]
    if ln.args is not None or ln.workspace or ln.seed_slot is not None:
        return None
    c = ln.spec.context()
    t = ln.spec.template
    if c.get("req") != "write" or "nnsym_" in str(c.get("expr", "")):
        return None
    if t == "elemwise/elemwise_unary.c.j2" and ln.ia == (n,):
        return ScalarForm(c["expr"], ("x",), c["in_dtype"], tuple(c["fparams"]), ln.fa)
    if t == "common/elemwise_binary.c.j2" and c["dtype"] == c["out_dtype"]:
        # broadcasting too: the fused kernel indexes each input by its own shape
        return ScalarForm(c["expr"], ("a", "b"), c["out_dtype"], (), ())
    if (t == "nn/activation.c.j2" and c["n_in"] == 1 and not c["gamma"]
            and c["mask_expr"] is None and ln.ia == (n,)):
        # Activation / LeakyReLU: the unary kernel's arithmetic (x in the input's type)
        return ScalarForm(c["expr"], ("x",), c["in_dtype"], tuple(c["fparams"]), ln.fa)
    if t == "elemwise/elemwise_add_n.c.j2" and ln.ia == (n,) and c["num"] <= c["group"]:
        # one pass: left to right in T, one store (more inputs take several rounded passes)
        names = tuple(f"x{k}" for k in range(c["num"]))
        return ScalarForm(" + ".join(names), names, c["dtype"], (), ())
    if t == "common/elemwise_backward.c.j2" and ln.ia == (n,):
        names = ("g",) + (("x",) if c["uses_x"] else ()) + (("y",) if c["uses_y"] else ())
        return ScalarForm(c["expr"], names, c["dtype"], tuple(c["fparams"]), ln.fa)
    return None


@dataclass(frozen=True)
class FusedParams:
    """A fused node's program (built by the fusion pass, never parsed from text)."""

    steps: tuple[Step, ...]
    in_dtypes: tuple[str, ...]
    fa: tuple[float, ...]

    def to_attrs(self) -> dict[str, str]:
        return {"num_steps": str(len(self.steps))}


def broadcast_rows(out: tuple[int, ...],
                   ins: tuple[tuple[int, ...], ...]) -> list[tuple[int, tuple[int, ...]]]:
    """The output's dims as ``(size, per-input strides)`` rows (strides in elements, 0 where an
    input is broadcast), size-1 dims dropped and neighbours that are one run in every input
    merged: a same-shape group is one row with strides all 1."""
    nd = len(out)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in ins]
    strides = []
    for s in padded:
        st, acc = [0] * nd, 1
        for i in range(nd - 1, -1, -1):
            st[i] = 0 if s[i] == 1 else acc
            acc *= s[i]
        strides.append(st)
    rows: list[tuple[int, tuple[int, ...]]] = []
    for d in range(nd):
        if out[d] == 1:
            continue
        cur = tuple(st[d] for st in strides)
        if rows and all(p == c * out[d] for p, c in zip(rows[-1][1], cur)):
            rows[-1] = (rows[-1][0] * out[d], cur)
        else:
            rows.append((out[d], cur))
    return rows or [(1, (1,) * len(ins))]


def _fused_shape(p: FusedParams, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
    known = [s for s in ins if s is not None and all(d is not None for d in s)]
    if len(known) != len(ins):
        return list(ins), list(outs)
    return list(ins), [tuple(int(d) for d in np.broadcast_shapes(*known))]


def _fused_type(p: FusedParams, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
    return [np.dtype(t) for t in p.in_dtypes], [np.dtype(p.steps[-1].out_dtype)]


def fused_lowering(call: KernelCall) -> Lowered:
    p: FusedParams = call.params
    n = size(call.out_shapes[0])
    if n == 0:
        return Lowered()
    for s in p.steps:
        if not all(_OPERAND.match(o) for o in s.operands):
            raise ValueError(f"bad fused operand in {s.operands}")
    rows = broadcast_rows(call.out_shapes[0], call.in_shapes)
    if any(st not in (0, 1) for st in rows[-1][1]):
        raise ValueError(f"fused inputs {call.in_shapes} are not contiguous in the output's "
                         f"last dimension {call.out_shapes[0]}")
    spec = KernelSpec.make(
        TEMPLATE,
        in_dtypes=p.in_dtypes,
        steps=tuple(s.literal() for s in p.steps),
        req=call.out_req(0),
        par_min=PAR_MIN,
        block=BLOCK,
        nd=len(rows),
        inner=rows[-1][1],
    )
    outer = tuple(r[0] for r in rows[:-1])
    strides = tuple(r[1][k] for k in range(len(call.in_shapes)) for r in rows[:-1])
    return Lowered((Launch(spec, (n, rows[-1][0], *outer, *strides), p.fa),))


def fused_values(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """The storage kernel of a sparse fused node (``nnsym.passes.fuse``): every input is a csr
    (or every one a row_sparse) array with one pattern, so the fused program runs once over the
    stored values, and the result shares the first input's index arrays."""
    a = ins[0]
    if not isinstance(a, (Csr, Rsp)) or any(
            type(x) is not type(a) or x.data.shape != a.data.shape for x in ins):
        raise StorageTypeError(
            "a sparse fused node needs inputs of one storage type and one pattern; got "
            + ", ".join(f"{type(x).__name__} with values {getattr(x, 'data', x).shape}"
                        for x in ins))
    vals = [np.asarray(x.data).reshape(-1) for x in ins]
    return [values_of_pattern(
        a, call, lambda out: env.dense_parsed(call.op, call.params, vals, out=out))]


@functools.cache
def fused_op(num_inputs: int) -> OpDef:
    """The (unregistered) operator of fused nodes with ``num_inputs`` inputs; the output may
    take any input's storage (each element's inputs are read before its output is written)."""
    return OpDef(
        name="_fused_elemwise",
        params=FusedParams,  # type: ignore[arg-type]
        inputs=tuple(f"arg{i}" for i in range(num_inputs)),
        infer_shape=_fused_shape,
        infer_type=_fused_type,
        inplace=tuple((i, 0) for i in range(num_inputs)),
        kernels={DENSE: Kernel(fused_lowering)},
        differentiable=False,
        doc="Elementwise operators fused into one kernel by the fusion pass.",
    )
