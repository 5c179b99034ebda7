"""allclose, arange_like, index_array and getnnz: small contrib operators whose outputs do not
depend differentiably on their inputs (comparisons, counts, positions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    StypeRule,
    fixed_out_dtype,
    norm_axis,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ir.storage import Csr, Env, Storage, StorageCall
from nnsym.ops.common.grad import no_gradient
from nnsym.types import DispatchMode, SType, shape_str

Array = np.ndarray
FLOAT_DTYPES = ("float16", "float32", "float64")

# ---------------------------------------------------------------------------------------------
# allclose


@dataclass(frozen=True, kw_only=True)
class AllCloseParams(Params):
    # MXNet's defaults are float32 1e-5 and 1e-8, printed at float32 precision.
    rtol: float = field(default=9.99999975e-06, doc="Relative tolerance.")
    atol: float = field(default=9.99999994e-09, doc="Absolute tolerance.")
    equal_nan: bool = field(default=True, doc="Whether NaN in both a and b counts as equal.")


def allclose_shape(p: AllCloseParams, ins: list, outs: list) -> tuple[list, list]:
    a, b = ins
    if a is not None and b is not None and a != b:
        raise RuleError(f"a has shape {shape_str(a)} and b {shape_str(b)}; they must be equal")
    s = a if a is not None else b
    return [s, s], [()]


def allclose_type(p: AllCloseParams, ins: list, outs: list) -> tuple[list, list]:
    ins2, _ = same_dtype(p, ins, [None])
    return ins2, [np.dtype(np.uint8)]


def allclose_reference(p: AllCloseParams, a: Array, b: Array) -> Array:
    ct = np.float32 if a.dtype == np.float16 else a.dtype.type
    x, y = a.astype(ct), b.astype(ct)
    rtol, atol = (np.float32(v).astype(ct) for v in (p.rtol, p.atol))
    with np.errstate(all="ignore"):
        close = (x == y) | (np.abs(x - y) <= atol + rtol * np.abs(y))
    if a.dtype.kind == "f":
        nx, ny = np.isnan(x), np.isnan(y)
        close = np.where(nx | ny, p.equal_nan & nx & ny, close)
    ok = close
    return np.array(int(np.all(ok)), np.uint8)


def allclose_lowering(call: KernelCall) -> Lowered:
    spec = KernelSpec.make("contrib_misc/allclose.c.j2", dtype=call.in_dtypes[0].name,
                           req=call.req)
    p = call.params
    ia = (size(call.in_shapes[0]), int(p.equal_nan))
    return Lowered((Launch(spec, ia, (float(p.rtol), float(p.atol))),))


ALLCLOSE = register(OpDef(
    name="_contrib_allclose",
    params=AllCloseParams,
    inputs=("a", "b"),
    infer_shape=allclose_shape,
    infer_type=allclose_type,
    reference=allclose_reference,
    kernels={DENSE: Kernel(allclose_lowering)},
    # no gradient: MXNet's allclose is non-differentiable (backward through it raises)
    doc="1 (uint8, shape ()) when |a - b| <= atol + rtol * |b| everywhere (NaNs per equal_nan).",
    examples=(
        Example(((2, 3), (2, 3))),  # random values: not close
        Example(((3, 4), (3, 4)), {"rtol": 10.0, "atol": 10.0}, dtype="float64"),
        Example(((4,), (4,)), {"rtol": 0.5, "atol": 2.0, "equal_nan": False}, dtype="int32",
                low=0, high=2),
    ),
    bad_params=({"rtol": "x"}, {"tol": 1.0}),
))


# ---------------------------------------------------------------------------------------------
# arange_like


@dataclass(frozen=True, kw_only=True)
class ArangeLikeParams(Params):
    start: float = field(default=0.0, doc="First value.")
    step: float = field(default=1.0, doc="Spacing between values.")
    repeat: int = field(default=1, lower=1, doc="Times each value is repeated.")
    ctx: str = field(default="", doc="Context of the output (imperative calls; ignored).")
    axis: int | None = field(
        default=None, doc="Count along this axis of data only (None: data's whole shape).")


def arange_like_shape(p: ArangeLikeParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if p.axis is None:
        return [data], [data]
    try:
        ax = norm_axis(p.axis, len(data))
    except ValueError as e:
        raise RuleError(str(e)) from None
    return [data], [(data[ax],)]


def arange_like_reference(p: ArangeLikeParams, data: Array) -> Array:
    n = data.size if p.axis is None else data.shape[p.axis]
    shape = data.shape if p.axis is None else (n,)
    dt = data.dtype
    with np.errstate(all="ignore"):
        start, step = np.array(p.start).astype(dt), np.array(p.step).astype(dt)
        v = start + (np.arange(n) // p.repeat).astype(dt) * step
    return np.asarray(v, dt).reshape(shape)


def arange_like_lowering(call: KernelCall) -> Lowered:
    n = size(call.out_shapes[0])
    if n == 0:
        return Lowered()
    spec = KernelSpec.make("contrib_misc/arange_like.c.j2", dtype=call.out_dtypes[0].name,
                           req=call.req)
    p = call.params
    return Lowered((Launch(spec, (n, p.repeat), (float(p.start), float(p.step))),))


ARANGE_LIKE = register(OpDef(
    name="_contrib_arange_like",
    params=ArangeLikeParams,
    infer_shape=arange_like_shape,
    infer_type=same_dtype,
    ignore_inputs=(0,),
    reference=arange_like_reference,
    kernels={DENSE: Kernel(arange_like_lowering)},
    grad=no_gradient,
    differentiable=False,
    doc="start + (i // repeat) * step over data's shape (or the length of one of its axes).",
    examples=(
        Example(((2, 3),), {"start": 1.0, "step": 2.0, "repeat": 2}),
        Example(((2, 3, 4),), {"axis": -1, "start": 1.0, "step": 0.5}, dtype="float64"),
        Example(((2, 5),), {"start": 0.5, "step": 1.5}, dtype="int32"),
    ),
    bad_params=({"repeat": 0}, {"axis": "x"}, {"stop": 3.0}),
))


# ---------------------------------------------------------------------------------------------
# index_array


@dataclass(frozen=True, kw_only=True)
class IndexArrayParams(Params):
    axes: tuple[int, ...] | None = field(
        default=None, doc="The axes whose coordinates are listed (None: all); may be negative.")


def _axes(p: IndexArrayParams, ndim: int) -> tuple[int, ...]:
    if p.axes is None:
        return tuple(range(ndim))
    try:
        return tuple(norm_axis(a, ndim) for a in p.axes)
    except ValueError as e:
        raise RuleError(f"axes={p.axes}: {e}") from None


def index_array_shape(p: IndexArrayParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    return [data], [(*data, len(_axes(p, len(data))))]


def index_array_reference(p: IndexArrayParams, data: Array) -> Array:
    axes = _axes(p, data.ndim)
    grids = np.indices(data.shape, dtype=np.int64)
    return np.stack([grids[a] for a in axes], axis=-1).reshape(*data.shape, len(axes))


def index_array_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[0]
    axes = _axes(call.params, len(shape))
    n = size(shape)
    if n == 0 or not axes:
        return Lowered()
    spec = KernelSpec.make("contrib_misc/index_array.c.j2", req=call.req)
    return Lowered((Launch(spec, (n, len(axes), len(shape), *shape, *axes)),))


INDEX_ARRAY = register(OpDef(
    name="_contrib_index_array",
    params=IndexArrayParams,
    infer_shape=index_array_shape,
    infer_type=fixed_out_dtype(lambda p: np.int64),
    ignore_inputs=(0,),
    reference=index_array_reference,
    kernels={DENSE: Kernel(index_array_lowering)},
    grad=no_gradient,
    differentiable=False,
    doc="The coordinates of every element of data along the given axes (int64, last axis).",
    examples=(
        Example(((2, 3),)),
        Example(((2, 3, 4),), {"axes": (-1, 0)}, dtype="float64"),
        Example(((3, 2),), {"axes": (1,)}, dtype="int32"),
    ),
    bad_params=({"axes": "x"}, {"axis": 1}),
))


# ---------------------------------------------------------------------------------------------
# getnnz


@dataclass(frozen=True, kw_only=True)
class GetNNZParams(Params):
    axis: int | None = field(
        default=None, doc="None: stored values of the whole matrix; 0: per column; 1: per row.")

    def __post_init__(self) -> None:
        if self.axis not in (None, 0, 1, -1, -2):
            raise ValueError(f"axis={self.axis} must be None, 0 or 1 for a 2-D matrix")


def _mode(p: GetNNZParams) -> int:
    return 0 if p.axis is None else (1 if p.axis % 2 == 0 else 2)


def getnnz_shape(p: GetNNZParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) != 2:
        raise RuleError(f"data has shape {shape_str(data)}; getnnz needs a 2-D (csr) matrix")
    mode = _mode(p)
    return [data], [(1,) if mode == 0 else ((data[1],) if mode == 1 else (data[0],))]


def getnnz_reference(p: GetNNZParams, data: Array) -> Array:
    nz = data != 0
    mode = _mode(p)
    if mode == 0:
        return np.array([nz.sum()], np.int64)
    return np.asarray(nz.sum(axis=0 if mode == 1 else 1), np.int64)


def getnnz_lowering(call: KernelCall) -> Lowered:
    r, c = call.in_shapes[0]
    spec = KernelSpec.make("contrib_misc/getnnz.c.j2", dtype=call.in_dtypes[0].name,
                           req=call.req)
    return Lowered((Launch(spec, (r, c, _mode(call.params))),))


def getnnz_csr(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """The stored values of a csr matrix: in all, per column or per row (int64)."""
    a = ins[0]
    assert isinstance(a, Csr)
    mode = _mode(call.params)
    if mode == 0:
        return [np.array([len(a.indices)], np.int64)]
    if mode == 1:
        return [np.bincount(a.indices, minlength=a.shape[1]).astype(np.int64)]
    return [np.diff(a.indptr).astype(np.int64)]


def _getnnz_kernel_guard(call: KernelCall) -> Lowered:
    if call.in_dtypes[0].kind not in "fiub":
        raise NoKernelError(f"getnnz has no kernel for {call.in_dtypes[0].name}")
    return getnnz_lowering(call)


GETNNZ = register(OpDef(
    name="_contrib_getnnz",
    params=GetNNZParams,
    infer_shape=getnnz_shape,
    infer_type=fixed_out_dtype(lambda p: np.int64),
    reference=getnnz_reference,
    kernels={DENSE: Kernel(_getnnz_kernel_guard)},
    stype_rules=(StypeRule((SType.CSR,), (SType.DEFAULT,), DispatchMode.FCOMPUTE_EX,
                           kernel=getnnz_csr),),
    doc="Number of stored values of a csr matrix, in all or per row (axis=1) or column (0).",
    examples=(
        Example(((4, 5),), ints={0: (-1, 2)}),
        Example(((3, 6),), {"axis": 1}, ints={0: (-1, 2)}, dtype="float64"),
    ),
    bad_params=({"axis": 2}, {"axis": "x"}),
))
