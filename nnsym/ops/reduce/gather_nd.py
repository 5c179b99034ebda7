"""``gather_nd`` and ``scatter_nd``: rows of an array addressed by index tuples (the first
dimension of ``indices`` holds the tuple components; ``reduce/index_nd.c.j2``).

Components are truncated toward zero, negative ones count from the end (as MXNet's), and
out-of-range ones are clipped: MXNet raises there (gather_nd) or writes out of bounds
(scatter_nd). scatter_nd keeps the last of duplicate tuples (MXNet leaves that undefined).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, known, register
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.ops.reduce.indexing import as_index, index_data_type
from nnsym.types import shape_str

Array = np.ndarray


def _rows(idx: Array, dims: tuple[int, ...]) -> Array:
    """The flat row each index tuple addresses (components as the kernel reads them)."""
    m = len(dims)
    r = as_index(idx).reshape(m, -1)
    row = np.zeros(r.shape[1], np.int64)
    for k, d in enumerate(dims):
        c = np.where(r[k] < 0, r[k] + d, r[k])
        row = row * d + np.clip(c, 0, max(d - 1, 0))
    out: Array = row
    return out


def gather_nd_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    data, idx = ins
    if not known(data) or not known(idx):
        return list(ins), list(outs)
    if len(idx) < 2:
        raise RuleError(f"gather_nd needs indices of at least 2 dimensions, got {shape_str(idx)}")
    m = idx[0]
    if m > len(data) or m < 1:
        raise RuleError(f"indices {shape_str(idx)} must address at most the {len(data)} "
                        f"dimensions of data {shape_str(data)}")
    return list(ins), [(*idx[1:], *data[m:]) or (1,)]


def gather_nd_reference(p: Any, data: Array, idx: Array) -> Array:
    m = idx.shape[0]
    dims = data.shape[:m]
    rest = data.shape[m:]
    out_shape = (*idx.shape[1:], *rest) or (1,)
    if size(dims) == 0:
        return np.zeros(out_shape, data.dtype)
    rows = data.reshape(size(dims), -1)
    out: Array = rows[_rows(idx, dims)].reshape(out_shape)
    return out


def _nd_launch(call: KernelCall, kind: str, big: tuple[int, ...], idx_shape: tuple[int, ...],
               idx_dtype: Any, req: str) -> Launch:
    m = idx_shape[0]
    dims = big[:m]
    spec = KernelSpec.make("reduce/index_nd.c.j2", kind=kind, m=m,
                           dtype=call.out_dtypes[0].name, idx_dtype=np.dtype(idx_dtype).name,
                           req=req)
    nn = size(idx_shape[1:])
    ws = size(dims) * 8 if kind == "scatter" else 0
    return Launch(spec, (nn, size(big[m:]), *dims), workspace=ws)


def gather_nd_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    return Lowered((_nd_launch(call, "gather", call.in_shapes[0], call.in_shapes[1],
                               call.in_dtypes[1], call.req),))


def gather_nd_backward_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    return Lowered((_nd_launch(call, "gather_grad", call.out_shapes[0], call.in_shapes[1],
                               call.in_dtypes[1], call.out_req(0)),))


def _like_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    like = ins[2] if ins[2] is not None else outs[0]
    return [ins[0], ins[1], like], [like]


BACKWARD_GATHER_ND = register(OpDef(
    name="_backward_gather_nd",
    params=NoParams,
    inputs=("ograd", "indices", "data"),
    outputs=("data_grad",),
    infer_shape=_like_shape,
    infer_type=lambda p, ins, outs: (list(ins), [outs[0] if ins[0] is None else ins[0]]),
    ignore_inputs=(2,),
    kernels={DENSE: Kernel(gather_nd_backward_lowering)},
    differentiable=False,
    doc="Gradient of gather_nd: the output gradient added into the rows gathered.",
))


def gather_nd_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_GATHER_ND, node, [g, node.inputs[1], node.inputs[0]])
    return [Entry(b, 0), None]


GATHER_ND = register(OpDef(
    name="gather_nd",
    params=NoParams,
    inputs=("data", "indices"),
    infer_shape=gather_nd_shape,
    infer_type=index_data_type,
    reference=gather_nd_reference,
    kernels={DENSE: Kernel(gather_nd_lowering)},
    grad=gather_nd_grad,
    doc="Gathers rows of data addressed by index tuples (indices' first dimension).",
    examples=(
        Example(((2, 3, 4), (2, 5)), ints={1: (-2, 4)}),
        Example(((3, 4), (2, 2, 3)), ints={1: (0, 3)}, dtype="float64"),
        Example(((4, 3), (1, 6)), ints={1: (0, 4)}, dtype="int32", low=-5, high=5),
        Example(((5,), (1, 3)), ints={1: (-5, 5)}, dtype="float16"),
    ),
    bad_params=({"shape": (2,)},),
))


@dataclass(frozen=True, kw_only=True)
class ScatterNDParams(Params):
    shape: tuple[int, ...] = field(doc="Shape of the output.")


def scatter_nd_shape(p: ScatterNDParams, ins: list, outs: list) -> tuple[list, list]:
    data, idx = ins
    out = tuple(p.shape)
    if known(idx):
        if len(idx) < 2:
            raise RuleError(
                f"scatter_nd needs indices of at least 2 dimensions, got {shape_str(idx)}")
        m = idx[0]
        if m > len(out) or m < 1:
            raise RuleError(f"indices {shape_str(idx)} must address at most the {len(out)} "
                            f"dimensions of shape {out}")
        want = (*idx[1:], *out[m:]) or (1,)
        if known(data) and tuple(data) != want:
            raise RuleError(f"data must have shape {shape_str(want)}, got {shape_str(data)}")
        return [want, idx], [out]
    return list(ins), [out]


def scatter_nd_reference(p: ScatterNDParams, data: Array, idx: Array) -> Array:
    m = idx.shape[0]
    out = np.zeros(p.shape, data.dtype)
    dims = p.shape[:m]
    if size(dims) == 0 or out.size == 0:
        return out
    rows = out.reshape(size(dims), -1)
    vals = data.reshape(-1, rows.shape[1])
    for j, r in enumerate(_rows(idx, dims)):  # the last of duplicate rows wins
        rows[r] = vals[j]
    return out


def scatter_nd_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    return Lowered((_nd_launch(call, "scatter", call.out_shapes[0], call.in_shapes[1],
                               call.in_dtypes[1], call.req),))


def scatter_nd_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The data's gradient is the output gradient gathered at the indices (as MXNet)."""
    g = ograds[0]
    assert g is not None
    b = backward_node(GATHER_ND, node, [g, node.inputs[1]], params=NoParams())
    return [Entry(b, 0), None]


SCATTER_ND = register(OpDef(
    name="scatter_nd",
    params=ScatterNDParams,
    inputs=("data", "indices"),
    infer_shape=scatter_nd_shape,
    infer_type=index_data_type,
    reference=scatter_nd_reference,
    kernels={DENSE: Kernel(scatter_nd_lowering)},
    grad=scatter_nd_grad,
    doc="Scatters rows of data to the index tuples of a zero array of the given shape.",
    examples=(
        # one tuple in the float examples: the gradient (a gather, as MXNet's) is exact only
        # without duplicate tuples
        Example(((1,), (2, 1)), {"shape": (3, 4)}, ints={1: (-2, 3)}),
        Example(((1, 3), (1, 1)), {"shape": (4, 3)}, ints={1: (0, 4)}, dtype="float64"),
        Example(((3,), (2, 3)), {"shape": (2, 2)}, ints={1: (0, 2)}, dtype="int32", low=-5,
                high=5),
        Example(((4,), (1, 4)), {"shape": (6,)}, ints={1: (0, 6)}, dtype="float16"),
    ),
    bad_params=({}, {"shape": "x"}),
))
