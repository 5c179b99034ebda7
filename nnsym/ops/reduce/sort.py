"""``sort``, ``argsort`` and ``topk``: a stable sort of each row along an axis
(``reduce/sort.c.j2``).

Ties keep their original order in both directions (as MXNet 1.9.1's CPU results); NaN counts
as the largest value (MXNet's order with NaN is not consistent). Position outputs have the
``dtype`` parameter's type (float32 by default, as in MXNet) and no gradient; the value outputs
of ``sort`` and ``topk`` send their gradient back to the positions the values came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, norm_axis, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, no_gradient

Array = np.ndarray

INDEX_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8")


@dataclass(frozen=True, kw_only=True)
class TopKParams(Params):
    axis: int | None = field(default=-1, doc="Axis to select along; None: the flattened array.")
    k: int = field(default=1, doc="How many elements to select; k < 1 sorts the whole axis.")
    ret_typ: str = field(default="indices", choices=("both", "indices", "mask", "value"),
                         doc="value, indices, mask (1 at the top k) or both (value, indices).")
    is_ascend: bool = field(default=False, doc="Select the k smallest instead of the largest.")
    dtype: str = field(default="float32", choices=INDEX_DTYPES, kind="dtype",
                       doc="Dtype of the indices output.")


@dataclass(frozen=True, kw_only=True)
class SortParams(Params):
    axis: int | None = field(default=-1, doc="Axis to sort along; None: the flattened array.")
    is_ascend: bool = field(default=True, doc="Ascending (else descending) order.")


@dataclass(frozen=True, kw_only=True)
class ArgSortParams(Params):
    axis: int | None = field(default=-1, doc="Axis to sort along; None: the flattened array.")
    is_ascend: bool = field(default=True, doc="Ascending (else descending) order.")
    dtype: str = field(default="float32", choices=INDEX_DTYPES, kind="dtype",
                       doc="Dtype of the indices output.")


def _dims(shape: tuple[int, ...], axis: int | None) -> tuple[int, int, int]:
    """(outer, n, inner) of the rows along ``axis`` (None: one row of every element)."""
    if axis is None:
        return 1, size(shape), 1
    ax = axis % len(shape)
    return size(shape[:ax]), shape[ax], size(shape[ax + 1 :])


def _k(p: Any, n: int) -> int:
    k = getattr(p, "k", 0)
    return n if k < 1 else k


def _ret(p: Any) -> str:
    if isinstance(p, TopKParams):
        return p.ret_typ
    return "indices" if isinstance(p, ArgSortParams) else "value"


def sort_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None or any(d is None for d in data):
        return list(ins), list(outs)
    ret = _ret(p)
    if p.axis is None:
        n = size(data)
        sel: tuple[int, ...] = (_k(p, n),)
    else:
        ax = norm_axis(p.axis, len(data))
        n = data[ax]
        sel = (*data[:ax], _k(p, n), *data[ax + 1 :])
    if _k(p, n) > n:
        raise RuleError(f"k ({p.k}) must not exceed the {n} elements along the axis")
    if ret == "mask":
        return list(ins), [tuple(data)]
    return list(ins), [sel] * (2 if ret == "both" else 1)


def sort_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0]
    idx = np.dtype(getattr(p, "dtype", "float32"))
    ret = _ret(p)
    if ret == "both":
        return list(ins), [t, idx]
    return list(ins), [idx if ret == "indices" else t]


def _order(x: Array, ascend: bool) -> Array:
    """Stable order of each row of a 2-D array (ties in original order; NaN largest)."""
    if ascend:
        r: Array = np.argsort(x, axis=1, kind="stable")
        return r
    n = x.shape[1]
    rev = np.argsort(x[:, ::-1], axis=1, kind="stable")[:, ::-1]
    r = (n - 1 - rev).astype(np.int64)
    return r


def sort_reference(p: Any, x: Array) -> Any:
    outer, n, inner = _dims(x.shape, p.axis)
    k = _k(p, n)
    rows = x.reshape(outer, n, inner).transpose(0, 2, 1).reshape(outer * inner, n)
    order = _order(rows, p.is_ascend)[:, :k]
    idx_dt = np.dtype(getattr(p, "dtype", "float32"))

    def back(a: Array, kk: int) -> Array:
        b: Array = a.reshape(outer, inner, kk).transpose(0, 2, 1)
        if p.axis is None:
            return b.reshape(kk)
        ax = p.axis % x.ndim
        b = b.reshape((*x.shape[:ax], kk, *x.shape[ax + 1 :]))
        return b

    ret = _ret(p)
    if ret == "mask":
        m = np.zeros_like(rows)
        np.put_along_axis(m, order, 1, axis=1)
        return back(m, n).reshape(x.shape).astype(x.dtype)
    vals = back(np.take_along_axis(rows, order, axis=1), k).astype(x.dtype)
    ids = back(order, k).astype(idx_dt)
    if ret == "both":
        return vals, ids
    return ids if ret == "indices" else vals


def _spec(call: KernelCall, ret: str, dtype: Any, req: str) -> KernelSpec:
    p = call.params
    idx = np.dtype(getattr(p, "dtype", "float32")) if ret in ("indices", "both") else dtype
    return KernelSpec.make("reduce/sort.c.j2", ret=ret, dtype=np.dtype(dtype).name,
                           idx_dtype=np.dtype(idx).name, is_ascend=bool(p.is_ascend), req=req)


def sort_lowering(call: KernelCall) -> Lowered:
    data = call.in_shapes[0]
    if size(data) == 0 or all(size(s) == 0 for s in call.out_shapes):
        return Lowered()
    outer, n, inner = _dims(data, call.params.axis)
    spec = _spec(call, _ret(call.params), call.in_dtypes[0], call.req)
    ws = outer * inner * 2 * n * 8
    return Lowered((Launch(spec, (outer, n, inner, _k(call.params, n)), workspace=ws),))


def sort_backward_lowering(call: KernelCall) -> Lowered:
    data = call.in_shapes[1]
    if size(data) == 0:
        return Lowered()
    outer, n, inner = _dims(data, call.params.axis)
    spec = _spec(call, "grad", call.out_dtypes[0], call.out_req(0))
    ws = outer * inner * 2 * n * 8
    return Lowered((Launch(spec, (outer, n, inner, _k(call.params, n)), workspace=ws),))


BACKWARD_TOPK = register(OpDef(
    name="_backward_topk",
    params=TopKParams,
    inputs=("ograd", "data"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1] if ins[1] is not None else outs[0]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0] if ins[0] is not None else outs[0]]),
    kernels={DENSE: Kernel(sort_backward_lowering)},
    differentiable=False,
    doc="Gradient of topk's and sort's values: each value's gradient back at its position "
    "(the rows sorted again, in the forward's order).",
))


def sort_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The values' gradient scatters back; positions and masks get none."""
    p = node.params
    g = ograds[0]
    if g is None or _ret(p) not in ("value", "both"):
        return [None]
    bp = p if isinstance(p, TopKParams) else TopKParams(axis=p.axis, k=0, ret_typ="value",
                                                        is_ascend=p.is_ascend)
    b = backward_node(BACKWARD_TOPK, node, [g, node.inputs[0]], params=bp)
    return [Entry(b, 0)]


_EX = (
    Example(((3, 5),)),
    Example(((2, 4, 3),), {"axis": 1}, dtype="float64"),
    Example(((2, 3, 4),), {"axis": None}),
    Example(((4, 6),), {"axis": 0}, dtype="int32", low=-3, high=3),
    Example(((2, 7),), dtype="float16"),
)

TOPK = register(OpDef(
    name="topk",
    params=TopKParams,
    outputs=lambda p: ("output0", "output1") if p.ret_typ == "both" else ("output",),
    infer_shape=sort_shape,
    infer_type=sort_type,
    reference=sort_reference,
    kernels={DENSE: Kernel(sort_lowering)},
    grad=sort_grad,
    doc="The k largest (or smallest) elements along an axis: values, positions, a mask or both.",
    examples=(
        Example(((3, 5),), {"k": 2}),
        Example(((3, 5),), {"k": 3, "ret_typ": "value"}),
        Example(((2, 4, 3),), {"k": 2, "axis": 1, "ret_typ": "both", "is_ascend": True},
                dtype="float64"),
        Example(((3, 6),), {"k": 2, "ret_typ": "mask"}),
        Example(((2, 3, 4),), {"k": 3, "axis": None, "ret_typ": "value"}),
        Example(((4, 6),), {"k": 0, "axis": 0, "ret_typ": "both", "dtype": "int64"},
                dtype="int32", low=-3, high=3),
        Example(((2, 7),), {"k": 4, "ret_typ": "value", "dtype": "int32"}, dtype="float16"),
    ),
    bad_params=({"ret_typ": "values"}, {"k": "a"}, {"dtype": "int8"}, {"axes": 1}),
))

SORT = register(OpDef(
    name="sort",
    params=SortParams,
    infer_shape=sort_shape,
    infer_type=sort_type,
    reference=sort_reference,
    kernels={DENSE: Kernel(sort_lowering)},
    grad=sort_grad,
    doc="Sorts along an axis (stable; ascending by default).",
    examples=(*_EX, Example(((3, 5),), {"is_ascend": False})),
    bad_params=({"is_ascend": "maybe"}, {"k": 2}),
))

ARGSORT = register(OpDef(
    name="argsort",
    params=ArgSortParams,
    infer_shape=sort_shape,
    infer_type=sort_type,
    reference=sort_reference,
    kernels={DENSE: Kernel(sort_lowering)},
    differentiable=False,
    grad=no_gradient,
    doc="The positions that sort an axis (stable; as float32 by default).",
    examples=(*_EX, Example(((3, 5),), {"is_ascend": False, "dtype": "int32"})),
    bad_params=({"dtype": "int8"}, {"k": 2}),
))
