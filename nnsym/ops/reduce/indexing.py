"""Index operators: ``where``, ``take``, ``pick`` (alias ``choose_element_0index``),
``batch_take``, ``one_hot`` and ``argmax_channel``.

Indices are read from data arrays of any dtype (MXNet's are usually float32): a float index is
truncated toward zero, then clipped into range ("clip") or taken modulo the axis length
("wrap"); a float that does not fit int64 (NaN, +-Inf) counts as 0. No kernel reads or writes
outside its arrays whatever the indices hold. ``take``'s mode "raise" clips too (MXNet raises
on an out-of-range index; kernels here have no error channel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    known,
    merge_shape,
    norm_axis,
    register,
    same_dtype,
)
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, no_gradient
from nnsym.ops.reduce.broadcast_reduce import reduce_lowering
from nnsym.types import shape_str

Array = np.ndarray


def as_index(idx: Array) -> Array:
    """Indices as the kernels read them: truncated toward zero, non-int64 floats as 0."""
    if idx.dtype.kind != "f":
        r: Array = idx.astype(np.int64)
        return r
    v = idx.astype(np.float64)
    ok = (v >= -(2.0**63)) & (v < 2.0**63)
    r = np.where(ok, np.trunc(np.where(ok, v, 0.0)), 0).astype(np.int64)
    return r


def fix_index(r: Array, n: int, mode: str) -> Array:
    if n <= 0:
        return np.zeros_like(r)
    out: Array = np.mod(r, n) if mode == "wrap" else np.clip(r, 0, n - 1)
    return out


# ---------------------------------------------------------------------------------------------
# where


def where_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's WhereOpShape: x, y and the output share a shape; the condition has it too, or is
    1-D with the first dimension's size."""
    cond, x, y = ins
    s = merge_shape(merge_shape(x, y), outs[0])
    if s is None:
        return list(ins), [s]
    if cond is not None and known(cond) and known(s):
        if len(cond) == len(s):
            if tuple(cond) != tuple(s):
                raise RuleError(f"condition shape {shape_str(cond)} must be {shape_str(s)}")
        elif len(cond) != 1 or cond[0] != s[0]:
            raise RuleError(
                f"condition shape {shape_str(cond)} must be {shape_str(s)} or ({s[0]},)"
            )
    return [cond, s, s], [s]


def where_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """x, y and the output share a dtype; the condition's is free."""
    _, ins2 = same_dtype(p, list(ins[1:]), list(outs))
    t = ins2[0]
    return [ins[0], t, t], [t]


def where_reference(p: Any, cond: Array, x: Array, y: Array) -> Array:
    c = cond != 0
    if c.ndim != x.ndim:
        c = c.reshape(c.shape + (1,) * (x.ndim - 1))
    return np.where(c, x, y).astype(x.dtype, copy=False)


def _where_ia(call: KernelCall, data: int) -> tuple[int, int]:
    n = size(call.in_shapes[data])
    cond = call.in_shapes[0 if data == 1 else 1]
    inner = max(1, n // max(size(cond), 1)) if len(cond) != len(call.in_shapes[data]) else 1
    return n, inner


def where_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("reduce/index_where.c.j2", cond_dtype=call.in_dtypes[0].name,
                           dtype=call.out_dtypes[0].name, req=call.req)
    return Lowered((Launch(spec, _where_ia(call, 1)),))


def where_backward_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("reduce/index_where_backward.c.j2", cond_dtype=call.in_dtypes[1].name,
                           dtype=call.out_dtypes[0].name, req_x=call.out_req(0),
                           req_y=call.out_req(1))
    return Lowered((Launch(spec, _where_ia(call, 0)),))


BACKWARD_WHERE = register(OpDef(
    name="_backward_where",
    params=NoParams,
    inputs=("ograd", "condition"),
    outputs=("x_grad", "y_grad"),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[0], ins[0]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0], ins[0]]),
    kernels={DENSE: Kernel(where_backward_lowering)},
    differentiable=False,
    doc="Gradient of where: the output gradient to x where the condition holds, else to y.",
))


def where_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_WHERE, node, [g, node.inputs[0]])
    return [None, Entry(b, 0), Entry(b, 1)]


WHERE = register(OpDef(
    name="where",
    params=NoParams,
    inputs=("condition", "x", "y"),
    infer_shape=where_shape,
    infer_type=where_type,
    reference=where_reference,
    kernels={DENSE: Kernel(where_lowering)},
    grad=where_grad,
    doc="Elements of x where the condition is non-zero, else of y (a 1-D condition picks "
    "whole rows along the first axis).",
    examples=(
        Example(((2, 3), (2, 3), (2, 3)), ints={0: (0, 2)}),
        Example(((4,), (4, 2, 3), (4, 2, 3)), ints={0: (0, 2)}, dtype="float64"),
        Example(((5,), (5,), (5,)), ints={0: (0, 2)}, dtype="int32", low=-5, high=5),
        Example(((3, 2), (3, 2), (3, 2)), ints={0: (0, 2)}, dtype="float16"),
    ),
    bad_params=({"axis": 1},),
))


# ---------------------------------------------------------------------------------------------
# take


@dataclass(frozen=True, kw_only=True)
class TakeParams(Params):
    axis: int = field(default=0, doc="The axis of the input to take along (-r <= axis < r).")
    mode: str = field(
        default="clip",
        choices=("clip", "raise", "wrap"),
        doc="Out-of-range indices: clip into range, wrap around; raise clips here.",
    )


def take_shape(p: TakeParams, ins: list, outs: list) -> tuple[list, list]:
    """out = a.shape[:axis] + indices.shape + a.shape[axis + 1:] (needs both shapes)."""
    a, idx = ins
    if a is None or idx is None:
        return list(ins), list(outs)
    ax = norm_axis(p.axis, len(a))
    return list(ins), [(*a[:ax], *idx, *a[ax + 1 :])]


def index_data_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """The output has the data's dtype (input 0); the indices' dtype is free."""
    t = ins[0] if ins[0] is not None else outs[0]
    return [t, *ins[1:]], [t]


def take_reference(p: TakeParams, a: Array, idx: Array) -> Array:
    ax = p.axis % a.ndim
    r = fix_index(as_index(idx), a.shape[ax], "wrap" if p.mode == "wrap" else "clip")
    if a.shape[ax] == 0:
        shape = (*a.shape[:ax], *idx.shape, *a.shape[ax + 1 :])
        return np.zeros(shape, a.dtype)
    return np.take(a, r, axis=ax)


def _take_dims(call: KernelCall, data_shape: tuple[int, ...]) -> tuple[int, int, int]:
    p = call.params
    if isinstance(p, TakeParams):
        ax = p.axis % len(data_shape)
    elif isinstance(p, PickParams):
        ax = int(p.axis or 0) % len(data_shape)
    else:  # batch_take: rows of the last axis
        ax = len(data_shape) - 1
    return size(data_shape[:ax]), data_shape[ax], size(data_shape[ax + 1 :])


def _take_spec(call: KernelCall, template: str, idx_dtype: Any, dtype: Any, req: str) -> Any:
    p = call.params
    kind = "take" if isinstance(p, TakeParams) else "pick"
    mode = "wrap" if getattr(p, "mode", "clip") == "wrap" else "clip"
    return KernelSpec.make(template, kind=kind, mode=mode, idx_dtype=np.dtype(idx_dtype).name,
                           dtype=np.dtype(dtype).name, req=req)


def take_lowering(call: KernelCall) -> Lowered:
    """Gather (take, pick, batch_take): ``reduce/index_take.c.j2``."""
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    outer, n, inner = _take_dims(call, call.in_shapes[0])
    if isinstance(call.params, TakeParams):
        m = size(call.in_shapes[1])
    else:
        m = 1
        if not isinstance(call.params, PickParams):  # batch_take: one row per index
            outer, inner = size(call.in_shapes[1]), 1
    spec = _take_spec(call, "reduce/index_take.c.j2", call.in_dtypes[1], call.out_dtypes[0],
                      call.req)
    return Lowered((Launch(spec, (outer, n, inner, m)),))


def take_backward_lowering(call: KernelCall) -> Lowered:
    """Scatter-add of the output gradient into the data's gradient."""
    data = call.out_shapes[0]
    if size(data) == 0:
        return Lowered()
    outer, n, inner = _take_dims(call, data)
    m = size(call.in_shapes[1]) if isinstance(call.params, TakeParams) else 1
    spec = _take_spec(call, "reduce/index_take_backward.c.j2", call.in_dtypes[1],
                      call.out_dtypes[0], call.out_req(0))
    return Lowered((Launch(spec, (outer, n, inner, m)),))


def _gather_grad(op: OpDef) -> Any:
    """The data gets the scatter-add; the indices none. The backward node's output shape is
    the data's, set from the forward data entry through a shape-only read."""

    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        b = backward_node(op, node, [g, node.inputs[1], node.inputs[0]])
        return [Entry(b, 0), None]

    return grad


def _like_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    like = ins[2] if ins[2] is not None else outs[0]
    return [ins[0], ins[1], like], [like]


def _scatter_backward(name: str, params: type[Params], doc: str) -> OpDef:
    """``_backward_<name>(ograd, indices, data) -> data grad``, the data read for its shape."""
    return register(OpDef(
        name=f"_backward_{name}",
        params=params,
        inputs=("ograd", "indices", "data"),
        outputs=("data_grad",),
        infer_shape=_like_shape,
        infer_type=lambda p, ins, outs: (list(ins), [outs[0] if ins[0] is None else ins[0]]),
        ignore_inputs=(2,),
        kernels={DENSE: Kernel(take_backward_lowering)},
        differentiable=False,
        doc=doc,
    ))


BACKWARD_TAKE = _scatter_backward(
    "take", TakeParams, "Gradient of take: the output gradient added into the rows taken.")

TAKE = register(OpDef(
    name="take",
    params=TakeParams,
    inputs=("a", "indices"),
    infer_shape=take_shape,
    infer_type=index_data_type,
    reference=take_reference,
    kernels={DENSE: Kernel(take_lowering)},
    grad=_gather_grad(BACKWARD_TAKE),
    doc="Takes elements of an array along an axis at the given (truncated) indices.",
    examples=(
        Example(((5, 3), (4,)), ints={1: (-2, 7)}),
        Example(((3, 4, 2), (2, 3)), {"axis": 1, "mode": "wrap"}, ints={1: (-6, 9)},
                dtype="float64"),
        Example(((3, 4), (2,)), {"axis": -1, "mode": "raise"}, ints={1: (0, 4)}),
        Example(((4, 2), (3,)), {"axis": 0}, ints={1: (0, 4)}, dtype="int32", low=-5, high=5),
        Example(((3, 5), (2, 2)), {"axis": 1, "mode": "wrap"}, ints={1: (-8, 8)},
                dtype="float16"),
    ),
    bad_params=({"mode": "nearest"}, {"axis": "a"}, {"axes": 1}),
))


# ---------------------------------------------------------------------------------------------
# pick, batch_take


@dataclass(frozen=True, kw_only=True)
class PickParams(Params):
    axis: int | None = field(
        default=-1, doc="The axis to pick along (negative counts from the end); None: refused."
    )
    keepdims: bool = field(default=False, doc="Keep the picked axis as a size-1 dimension.")
    mode: str = field(
        default="clip", choices=("clip", "wrap"),
        doc="Out-of-range indices: clip into range or wrap around.",
    )


def pick_shape(p: PickParams, ins: list, outs: list) -> tuple[list, list]:
    """index = out = data without the axis (size 1 there with keepdims)."""
    data, idx = ins
    if p.axis is None:
        raise RuleError("axis=None is not supported by pick yet; an axis must be given")
    if data is None:
        return list(ins), list(outs)
    ax = norm_axis(p.axis, len(data))
    if p.keepdims:
        want = (*data[:ax], 1, *data[ax + 1 :])
    else:
        want = (*data[:ax], *data[ax + 1 :]) or (1,)
    s = merge_shape(merge_shape(want, idx), outs[0])
    return [data, s], [s]


def pick_reference(p: PickParams, data: Array, idx: Array) -> Array:
    assert p.axis is not None
    ax = p.axis % data.ndim
    n = data.shape[ax]
    shape = [*data.shape]
    shape[ax] = 1
    r = fix_index(as_index(idx), n, p.mode).reshape(shape)
    if n == 0:
        out = np.zeros(shape, data.dtype)
    else:
        out = np.take_along_axis(data, r, axis=ax)
    out_shape = tuple(shape) if p.keepdims else (tuple(data.shape[:ax] + data.shape[ax + 1 :])
                                                  or (1,))
    return out.reshape(out_shape)


BACKWARD_PICK = _scatter_backward(
    "pick", PickParams, "Gradient of pick: the output gradient to the picked elements.")

PICK = register(OpDef(
    name="pick",
    params=PickParams,
    inputs=("data", "index"),
    infer_shape=pick_shape,
    infer_type=index_data_type,
    reference=pick_reference,
    kernels={DENSE: Kernel(take_lowering)},
    grad=_gather_grad(BACKWARD_PICK),
    aliases=("choose_element_0index",),
    doc="Picks one element per position along an axis, at the given (truncated) indices.",
    examples=(
        Example(((3, 4), (3,)), ints={1: (-2, 6)}),
        Example(((3, 4), (1, 4)), {"axis": 0, "keepdims": True}, ints={1: (0, 3)}),
        Example(((2, 5, 3), (2, 3)), {"axis": 1, "mode": "wrap"}, ints={1: (-7, 9)},
                dtype="float64"),
        Example(((4, 3), (4,)), {"axis": -1}, ints={1: (0, 3)}, dtype="int32", low=-5,
                high=5),
        Example(((6,), (1,)), {"axis": 0}, ints={1: (0, 6)}, dtype="float16"),
    ),
    bad_params=({"mode": "raise"}, {"axis": "a"}, {"keepdim": True}),
))


def batch_take_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """out = indices' shape; the data has at least 2 dims and one row (of its last axis) per
    index."""
    a, idx = ins
    s = merge_shape(idx, outs[0])
    if a is not None and known(a) and s is not None and known(s):
        da, ds = [int(d or 0) for d in a], [int(d or 0) for d in s]
        if len(da) < 2:
            raise RuleError(f"data must have at least 2 dimensions, got {shape_str(a)}")
        if size(da) // max(da[-1], 1) != size(ds) or da[-1] == 0:
            raise RuleError(
                f"index array's size {size(ds)} must be the data's {shape_str(a)} size "
                "excluding the last dimension"
            )
    return [a, s], [s]


def batch_take_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """The output has the data's dtype; the indices are int32 when nothing else says."""
    t = ins[0] if ins[0] is not None else outs[0]
    return [t, ins[1] if ins[1] is not None else np.dtype("int32")], [t]


def batch_take_reference(p: Any, a: Array, idx: Array) -> Array:
    m = a.shape[-1]
    rows = a.reshape(-1, m)
    r = fix_index(as_index(idx).reshape(-1), m, "clip")
    out: Array = rows[np.arange(rows.shape[0]), r].reshape(idx.shape)
    return out


BATCH_TAKE = register(OpDef(
    name="batch_take",
    params=NoParams,
    inputs=("a", "indices"),
    infer_shape=batch_take_shape,
    infer_type=batch_take_type,
    reference=batch_take_reference,
    kernels={DENSE: Kernel(take_lowering)},
    differentiable=False,
    grad=None,
    doc="Takes one element per row: out[i] = a[i, indices[i]] (indices clipped; deprecated in "
    "MXNet for pick).",
    examples=(
        Example(((3, 4), (3,)), ints={1: (-2, 6)}),
        Example(((2, 5), (2,)), ints={1: (0, 5)}, dtype="float64"),
        Example(((4, 3), (4,)), ints={1: (0, 3)}, dtype="int32", low=-5, high=5),
    ),
    bad_params=({"axis": 1},),
))


# ---------------------------------------------------------------------------------------------
# one_hot

ONE_HOT_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8", "uint8")


@dataclass(frozen=True, kw_only=True)
class OneHotParams(Params):
    depth: int = field(lower=0, doc="Depth of the one-hot dimension.")
    on_value: float = field(default=1.0, doc="The value at the indices' positions.")
    off_value: float = field(default=0.0, doc="The value everywhere else.")
    dtype: str = field(default="float32", choices=ONE_HOT_DTYPES, kind="dtype",
                       doc="The output's dtype.")


def one_hot_shape(p: OneHotParams, ins: list, outs: list) -> tuple[list, list]:
    idx = ins[0]
    if idx is None:
        return list(ins), list(outs)
    return list(ins), [(*idx, p.depth)]


def one_hot_reference(p: OneHotParams, idx: Array) -> Array:
    if idx.dtype.kind == "f":
        v = idx.astype(np.float64)
        ok = (v >= -(2.0**63)) & (v < 2.0**63)
        r = np.where(ok, np.trunc(np.where(ok, v, 0.0)), -1).astype(np.int64)
    else:
        r = idx.astype(np.int64)
    hit = r[..., None] == np.arange(p.depth)
    dt = np.dtype(p.dtype)
    with np.errstate(all="ignore"):
        on, off = np.array(p.on_value).astype(dt), np.array(p.off_value).astype(dt)
    return np.where(hit, on, off).astype(dt)


def one_hot_lowering(call: KernelCall) -> Lowered:
    p: OneHotParams = call.params
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("reduce/index_one_hot.c.j2", idx_dtype=call.in_dtypes[0].name,
                           dtype=call.out_dtypes[0].name, req=call.req)
    return Lowered((Launch(spec, (size(call.in_shapes[0]), p.depth),
                           (float(p.on_value), float(p.off_value))),))


ONE_HOT = register(OpDef(
    name="one_hot",
    params=OneHotParams,
    inputs=("indices",),
    infer_shape=one_hot_shape,
    infer_type=lambda p, ins, outs: (list(ins), [np.dtype(p.dtype)]),
    reference=one_hot_reference,
    kernels={DENSE: Kernel(one_hot_lowering)},
    differentiable=False,
    grad=no_gradient,
    doc="One-hot rows of the given depth (an index outside [0, depth) gives off_value only).",
    examples=(
        Example(((4,),), {"depth": 5}, ints={0: (-1, 7)}),
        Example(((2, 3),), {"depth": 4, "on_value": 3.0, "off_value": -1.0, "dtype": "int32"},
                ints={0: (0, 4)}),
        Example(((3,),), {"depth": 3, "dtype": "float64"}, ints={0: (0, 3)}, dtype="int32"),
        Example(((2,),), {"depth": 0}, ints={0: (0, 3)}),
    ),
    bad_params=({}, {"depth": -1}, {"depth": 3, "dtype": "int16"}),
))


# ---------------------------------------------------------------------------------------------
# argmax_channel


def argmax_channel_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 2:
        raise RuleError(f"argmax_channel needs at least 2 dimensions, got {shape_str(data)}")
    return list(ins), [(data[0], *data[2:])]


ARGMAX_CHANNEL = register(OpDef(
    name="argmax_channel",
    params=NoParams,
    infer_shape=argmax_channel_shape,
    infer_type=same_dtype,
    reference=lambda p, x: np.argmax(x, axis=1).astype(x.dtype),
    kernels={DENSE: Kernel(lambda call: reduce_lowering(call, "argmax", (1,)))},
    differentiable=False,
    grad=no_gradient,
    doc="The index of the largest value along axis 1 (the channels; in the input's dtype).",
    examples=(
        Example(((3, 4),)),
        Example(((2, 3, 4),), dtype="float64"),
        Example(((2, 5),), dtype="int32", low=-5, high=5),
    ),
    bad_params=({"axis": 0},),
))
