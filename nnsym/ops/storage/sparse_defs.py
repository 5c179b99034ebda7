"""Operators defined for sparse storage: ``cast_storage``, ``_sparse_retain`` and ``_square_sum``
(with their gradients ``_backward_sparse_retain`` and ``_backward_square_sum``).

Storage types and dispatch follow MXNet 1.9.1 (MXNET-FACTS 4.6); the storage-specialised
kernels (``fcompute_ex``, at the end of this module) run the C kernels of
``nnsym.ops.common.sparse``. Every operator also has a
dense kernel, so graphs and the dense paths of the registry tests run it like any other.

Deliberate differences from MXNet, each a case where MXNet refuses or misbehaves:

- ``cast_storage`` converts between csr and row_sparse directly (MXNet: "not implemented").
- ``_sparse_retain`` accepts dense data: a dense result, the rows not listed set to zero (MXNet:
  "not implemented"); csr data falls back to that dense computation (with the usual warning).
  Its row_sparse result is canonical: the listed ids that the data stores, sorted and unique.
  MXNet returns the listed ids verbatim (in the given order, duplicates kept, a zero row for an
  id the data does not store): the same array, in non-canonical form. Ids are cast to integers
  by truncation toward zero, as MXNet casts them; ids outside ``[0, rows)`` select nothing
  (MXNet reads out of bounds). ``indices`` may have any shape (flattened) and any dtype.
- ``_backward_sparse_retain``: the output gradient's rows at every listed id in range, as
  row_sparse (sorted, unique; MXNet again keeps the list verbatim). A row_sparse output gradient
  is accepted too (MXNet: "not implemented").
- ``_square_sum`` accepts dense input (sum of squares; MXNet: "not implemented") and negative
  axes (MXNet: "not implemented" for axis=-1); ``exclude=True`` reduces the other axis (MXNet
  returns wrong values). ``axis`` must name one axis of the 2-D input: anything else is a
  parameter error when the node is made (MXNet fails at run time). bool data is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    StypeRule,
    elemwise_shape,
    merge_shape,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ir.storage import Env, Rsp, Storage, StorageCall
from nnsym.ops.common import sparse as sparse_kernels
from nnsym.ops.common.exprs import broadcast_rows
from nnsym.ops.common.grad import node_gradient, pass_through
from nnsym.ops.common.lowering import copy_lowering, reduce_out_shape
from nnsym.ops.common.storage import convert, copy_storage, to_dense
from nnsym.types import DispatchMode, SType, shape_str

D, R, C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR
EX_MODE = DispatchMode.FCOMPUTE_EX
STYPES = ("default", "row_sparse", "csr")

# ---------------------------------------------------------------------------------------------
# Storage kernels (named by the storage-type rules below)


def cast_storage_kernel(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """The input in the decided storage type (a copy when it already is)."""
    res = convert(ins[0], call.out_stypes[0])
    return [copy_storage(res) if res is ins[0] else res]


def sparse_retain_kernel(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """row_sparse data: its stored rows among the listed ids. Dense data (the gradient): every
    listed row in range."""
    data, indices = ins
    shape = tuple(data.shape)
    ids = retained_ids(to_dense(indices), shape[0])
    if isinstance(data, Rsp):
        if sparse_kernels.serves(data.data.dtype):
            vals, kept = sparse_kernels.rsp_retain(data.data, data.indices, ids, shape)
        else:
            hit = np.isin(data.indices, ids)
            vals, kept = data.data[hit], data.indices[hit]
        return [Rsp(np.ascontiguousarray(vals), np.ascontiguousarray(kept), shape)]
    vals = np.ascontiguousarray(to_dense(data)[ids])
    return [Rsp(vals, ids, shape)]


def square_sum_kernel(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    a = ins[0]
    assert isinstance(a, Rsp)
    p = call.params
    axis, dt = p.reduced_axis, call.out_dtypes[0]
    out_shape = tuple(call.out_shapes[0])
    if sparse_kernels.serves(a.data.dtype):
        st, res = sparse_kernels.rsp_square_sum(a.data, a.indices, a.shape, axis, p.keepdims)
        if st == "row_sparse":
            return [Rsp(res[0], res[1], out_shape)]
        return [np.ascontiguousarray(res.reshape(out_shape))]
    v = a.data.astype(np.float64 if dt.kind == "f" else np.int64)
    sums = np.sum(v * v, axis=axis)  # per stored row (axis 1) or per column (axis 0)
    if axis == 1 and p.keepdims:
        return [Rsp(np.ascontiguousarray(sums.astype(dt).reshape(-1, 1)), a.indices.copy(),
                    out_shape)]
    if axis == 1:
        dense = np.zeros(a.shape[0], dt)
        dense[a.indices] = sums.astype(dt)
        return [dense.reshape(out_shape)]
    return [np.ascontiguousarray(sums.astype(dt).reshape(out_shape))]


def square_sum_backward_kernel(env: Env, call: StorageCall,
                               ins: Sequence[Storage]) -> list[Any]:
    """2 * x * g over the data's stored rows (g read at those rows, or along the columns)."""
    g_arr, a = ins
    assert isinstance(a, Rsp)
    dt = call.out_dtypes[0]
    ct = np.dtype(np.float32) if dt == np.float16 else dt  # the dense kernel's compute type
    g = to_dense(g_arr).astype(ct)
    x = a.data.astype(ct)
    if call.params.reduced_axis == 1:
        w = g.reshape(-1)[a.indices].reshape(-1, 1)
    else:
        w = g.reshape(1, -1)
    vals = (2 * x * w).astype(dt)
    return [Rsp(np.ascontiguousarray(vals), a.indices.copy(), a.shape)]


# ---------------------------------------------------------------------------------------------
# cast_storage


@dataclass(frozen=True, kw_only=True)
class CastStorageParams(Params):
    stype: str = field(choices=STYPES, doc="The output's storage type.")


def cast_storage_shape(p: CastStorageParams, ins: list, outs: list) -> tuple[list, list]:
    i, o = elemwise_shape(p, ins, outs)
    s = o[0]
    if s is not None:
        if p.stype == "csr" and len(s) != 2:
            raise RuleError(f"cast_storage to csr needs a 2-D array, not shape {shape_str(s)}")
        if p.stype == "row_sparse" and len(s) == 0:
            raise RuleError("cast_storage to row_sparse needs at least one dimension")
    return i, o


def cast_storage_reference(p: CastStorageParams, x: np.ndarray) -> np.ndarray:
    return np.array(x, copy=True)


def _stype_is(st: SType) -> Any:
    return lambda p: p.stype == st.label


# Every pair but dense -> dense (no rule: the dense kernel, a copy) is fcompute_ex.
CAST_STORAGE_RULES = tuple(
    StypeRule((src,), (dst,), EX_MODE, when=_stype_is(dst), kernel=cast_storage_kernel)
    for src in (D, R, C) for dst in (D, R, C) if (src, dst) != (D, D)
)

CAST_STORAGE = register(OpDef(
    name="cast_storage",
    params=CastStorageParams,
    infer_shape=cast_storage_shape,
    infer_type=same_dtype,
    reference=cast_storage_reference,
    kernels={DENSE: Kernel(copy_lowering)},
    stype_rules=CAST_STORAGE_RULES,
    grad=pass_through,
    sparse=True,
    doc="Casts the input to the storage type ``stype`` (default, row_sparse or csr); the values "
        "are unchanged. Every pair of storage types is supported (MXNet refuses csr <-> "
        "row_sparse).",
    examples=(
        Example(((3, 4),), {"stype": "default"}),
        Example(((3, 4),), {"stype": "csr"}, dtype="float64"),
        Example(((5, 2, 3),), {"stype": "row_sparse"}),
        Example(((4, 3),), {"stype": "csr"}, dtype="int32", low=-2, high=2),
        Example(((0, 3),), {"stype": "row_sparse"}),
    ),
    bad_params=({}, {"stype": "coo"}, {"stype": "csr", "dtype": "float32"}),
))

# ---------------------------------------------------------------------------------------------
# _sparse_retain


def retained_ids(indices: np.ndarray, rows: int) -> np.ndarray:
    """The row ids ``indices`` selects among ``rows``: each entry truncated toward zero (float
    ids, as MXNet casts them), those in ``[0, rows)`` kept (NaN dropped); sorted, unique int64."""
    v = np.asarray(indices).reshape(-1)
    if v.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            ok = (v > -1) & (v < rows)
        ids = np.trunc(v[ok]).astype(np.int64)
    else:
        ids = v[(v >= 0) & (v < rows)].astype(np.int64)
    return np.unique(ids)


def retain_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """The output has the data's shape; the indices may have any shape (they are flattened)."""
    try:
        data = merge_shape(ins[0], outs[0])
    except RuleError:
        raise RuleError(f"output shape {shape_str(outs[0])} differs from the data's "
                        f"{shape_str(ins[0])}") from None
    if data is not None and len(data) == 0:
        raise RuleError("the data needs at least one dimension (the rows to select)")
    return [data, ins[1]], [data]


def retain_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """The output has the data's dtype; the indices may have any dtype."""
    t = outs[0] if outs[0] is not None else ins[0]
    return [t, ins[1]], [t]


def retain_reference(p: Any, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    out = np.zeros_like(data)
    ids = retained_ids(indices, data.shape[0])
    out[ids] = data[ids]
    return out


def retain_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[0]
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    rows = int(shape[0])
    spec = KernelSpec.make("storage/sparse_defs_retain.c.j2", dtype=call.out_dtypes[0].name,
                           idx_dtype=call.in_dtypes[1].name, req=call.req)
    ia = (rows, size(shape[1:]), size(call.in_shapes[1]))
    return Lowered((Launch(spec, ia, workspace=max(rows, 1)),))


BACKWARD_SPARSE_RETAIN = register(OpDef(
    name="_backward_sparse_retain",
    inputs=("ograd", "indices"),
    outputs=("data_grad",),
    infer_shape=retain_shape,
    infer_type=retain_type,
    reference=retain_reference,
    kernels={DENSE: Kernel(retain_lowering)},
    # MXNet: a dense output gradient gives a row_sparse data gradient (fcompute_ex).
    stype_rules=(
        StypeRule((D, None), (R,), EX_MODE, kernel=sparse_retain_kernel),
        StypeRule((R, None), (R,), EX_MODE, kernel=sparse_retain_kernel),
    ),
    differentiable=False,
    doc="Gradient of _sparse_retain: the output gradient's rows at the listed ids.",
))

SPARSE_RETAIN = register(OpDef(
    name="_sparse_retain",
    inputs=("data", "indices"),
    infer_shape=retain_shape,
    infer_type=retain_type,
    reference=retain_reference,
    kernels={DENSE: Kernel(retain_lowering)},
    stype_rules=(StypeRule((R, None), (R,), EX_MODE, kernel=sparse_retain_kernel),),
    grad=node_gradient(BACKWARD_SPARSE_RETAIN, lambda n: [n.inputs[1]], to_inputs=(0,)),
    doc="Keeps the rows of ``data`` whose ids are listed in ``indices`` (row_sparse data gives "
        "a row_sparse result holding the listed rows it stores; dense data gives a dense "
        "result with the other rows zero). ``nnsym.nd.sparse.retain``.",
    examples=(
        Example(((6, 3), (4,)), ints={1: (0, 6)}),
        Example(((5, 2, 2), (3,)), dtype="float64", ints={1: (0, 5)}),
        Example(((7, 2), (6,)), ints={1: (-3, 10)}),  # ids out of range select nothing
        Example(((6, 3), (2, 2)), dtype="int32", low=-5, high=5, ints={1: (0, 6)}),
        Example(((4, 3), (0,)), dtype="float64"),
        Example(((5,), (3,)), dtype="float16", ints={1: (0, 5)}),
    ),
    bad_params=({"axis": 0},),
))

# ---------------------------------------------------------------------------------------------
# _square_sum


@dataclass(frozen=True, kw_only=True)
class SquareSumParams(Params):
    axis: tuple[int, ...] | None = field(
        default=None,
        doc="The axis to reduce: 0 or 1 (-2 or -1) of the 2-D input (exactly one axis).",
    )
    keepdims: bool = field(default=False, doc="Keep the reduced axis as a dimension of size 1.")
    exclude: bool = field(default=False, doc="Reduce the other axis instead.")

    def __post_init__(self) -> None:
        if self.axis is None or len(self.axis) != 1 or not -2 <= self.axis[0] <= 1:
            raise ValueError(
                f"_square_sum reduces one axis of a 2-D array: axis must be 0, 1, -2 or -1, "
                f"not {self.axis}")

    @property
    def reduced_axis(self) -> int:
        """The axis summed over (0 or 1)."""
        assert self.axis is not None
        a = self.axis[0] % 2
        return 1 - a if self.exclude else a


def square_sum_shape(p: SquareSumParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) != 2:
        raise RuleError(f"_square_sum needs a 2-D input, not shape {shape_str(data)}")
    return list(ins), [reduce_out_shape(data, p.axis, p.keepdims, p.exclude)]


def square_sum_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    i, o = same_dtype(p, ins, outs)
    if o[0] is not None and np.dtype(o[0]) == np.bool_:
        raise RuleError("_square_sum does not support bool data")
    return i, o


def square_sum_reference(p: SquareSumParams, x: np.ndarray) -> np.ndarray:
    acc = np.float64 if x.dtype.kind == "f" else np.int64  # integer squares wrap like C's
    v = x.astype(acc)
    res: np.ndarray = np.sum(v * v, axis=p.reduced_axis, keepdims=p.keepdims).astype(x.dtype)
    return res


SQUARE_SUM_BLOCK = 256


def square_sum_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    rows, cols = call.in_shapes[0]
    dt = call.in_dtypes[0]
    spec = KernelSpec.make("storage/sparse_defs_square_sum.c.j2", dtype=dt.name, req=call.req,
                           axis=call.params.reduced_axis,
                           acc="double" if dt.kind == "f" else "uint64_t",
                           block=SQUARE_SUM_BLOCK)
    return Lowered((Launch(spec, (int(rows), int(cols))),))


def square_sum_backward_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    try:
        data = merge_shape(ins[1], outs[0])
    except RuleError:
        raise RuleError(f"gradient shape {shape_str(outs[0])} differs from the data's "
                        f"{shape_str(ins[1])}") from None
    return [ins[0], data], [data]


def square_sum_backward_lowering(call: KernelCall) -> Lowered:
    """data_grad = 2 * x * g, g spread over the reduced axis (broadcast_reduce's "spread")."""
    data = call.in_shapes[1]
    if size(data) == 0:
        return Lowered()
    p = call.params
    kept = tuple(d or 0 for d in reduce_out_shape(data, p.axis, True, p.exclude))
    rows = broadcast_rows(data, kept, data)
    spec = KernelSpec.make("common/broadcast_reduce_backward.c.j2", kind="spread", nd=len(rows),
                           dtype=call.out_dtypes[0].name, req=call.out_req(0),
                           expr="2 * x * g", uses_y=False)
    ia = (*(r[0] for r in rows), *(r[1] for r in rows))
    return Lowered((Launch(spec, ia, (1.0,)),))


def _keeps_rows(p: SquareSumParams) -> bool:
    return p.reduced_axis == 1 and p.keepdims


BACKWARD_SQUARE_SUM = register(OpDef(
    name="_backward_square_sum",
    params=SquareSumParams,
    inputs=("ograd", "data"),
    outputs=("data_grad",),
    infer_shape=square_sum_backward_shape,
    infer_type=same_dtype,
    kernels={DENSE: Kernel(square_sum_backward_lowering)},
    # row_sparse data: a row_sparse gradient over the data's rows (MXNet's rule).
    stype_rules=(StypeRule((None, R), (R,), EX_MODE, kernel=square_sum_backward_kernel),),
    differentiable=False,
    doc="Gradient of _square_sum: 2 * data * the output gradient spread over the axis.",
))

SQUARE_SUM = register(OpDef(
    name="_square_sum",
    params=SquareSumParams,
    infer_shape=square_sum_shape,
    infer_type=square_sum_type,
    reference=square_sum_reference,
    kernels={DENSE: Kernel(square_sum_lowering)},
    stype_rules=(
        StypeRule((R,), (R,), EX_MODE, when=_keeps_rows, kernel=square_sum_kernel),
        StypeRule((R,), (D,), EX_MODE, kernel=square_sum_kernel),
    ),
    grad=node_gradient(BACKWARD_SQUARE_SUM, lambda n: [n.inputs[0]]),
    doc="Sum of squares of a 2-D array along one axis (row_sparse input: axis 1 with keepdims "
        "gives row_sparse, otherwise dense). ``nnsym.nd.sparse.square_sum``.",
    examples=(
        Example(((4, 5),), {"axis": 1}),
        Example(((4, 5),), {"axis": 0, "keepdims": True}, dtype="float64"),
        Example(((4, 5),), {"axis": 1, "keepdims": True}),
        Example(((3, 4),), {"axis": -1}, dtype="float64"),
        Example(((3, 4),), {"axis": -2}),
        Example(((3, 4),), {"axis": 1, "exclude": True}),
        Example(((3, 300),), {"axis": 0}, dtype="float64"),
        Example(((3, 4),), {"axis": 0}, dtype="int32", low=-5, high=5),
        Example(((6, 3),), {"axis": 1}, dtype="float16"),
        Example(((0, 3),), {"axis": 0}),
    ),
    bad_params=({}, {"axis": (0, 1)}, {"axis": 2}, {"axis": -3}, {"keepdims": "maybe"},
                {"axis": ()}),
))
