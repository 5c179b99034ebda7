"""slice, slice_axis and tile: strided copies of a region of the input, or of its repeats.

``tile`` with a 0 in ``reps`` leaves that dimension unknown, as in MXNet 1.9.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    elemwise_shape,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.lowering import c_strides, copy_lowering, strided_lowering
from nnsym.ops.shape.helpers import _merge, _shape_only_backward, _with_data
from nnsym.types import shape_str

# ---------------------------------------------------------------------------------------------
# slice, slice_axis and tile


@dataclass(frozen=True, kw_only=True)
class SliceParams(Params):
    begin: tuple[int | None, ...] = field(
        doc="starting indices for the slice operation, supports negative indices."
    )
    end: tuple[int | None, ...] = field(
        doc="ending indices for the slice operation, supports negative indices."
    )
    step: tuple[int | None, ...] = field(
        default=(), doc="step for the slice operation, supports negative values."
    )

    def __post_init__(self) -> None:
        if len(self.begin) != len(self.end):
            raise ValueError(f"begin {self.begin} and end {self.end} must have the same length")
        if self.step and len(self.step) != len(self.begin):
            raise ValueError(f"step {self.step} and begin {self.begin} must have the same length")
        for i, s in enumerate(self.step):
            if s == 0:
                raise ValueError(f"slice step[{i}] cannot be 0")

    def steps(self) -> list[int]:
        """The step of each sliced axis, 1 where not given."""
        if not self.step:
            return [1] * len(self.begin)
        return [1 if s is None else s for s in self.step]


def slice_len(begin: int | None, end: int | None, step: int, n: int) -> int:
    """Length of ``range(n)[begin:end:step]``, computed as MXNet's GetIndexRange does."""
    if n == 0:
        return 0
    b = begin if begin is not None else (n - 1 if step < 0 else 0)
    e = end if end is not None else (-1 if step < 0 else n)
    if b < 0:
        b += n
    if e < 0 and end is not None:
        e += n
    if b < 0 and step > 0:
        b = 0
    if b > n - 1 and step < 0:
        b = n - 1
    if b < 0 or b > n - 1:
        b = -1
    e = min(max(e, -1), n)
    if e == b or b < 0:
        return 0
    if step > 0:
        return (e - b - 1) // step + 1 if e > b else 0
    return (b - e - 1) // -step + 1 if e < b else 0


def slice_shape(p: SliceParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    if d is None:
        return list(ins), list(outs)
    nd, k = len(d), len(p.begin)
    if nd == 0:
        raise RuleError("slice only works for ndim > 0")
    if k > nd:
        raise RuleError(f"slicing {k} axes exceeds the {nd} dimensions of {shape_str(d)}")
    steps = p.steps()
    # Axes sliced with (None, None, 1), and those past `begin`, pass through in both directions.
    whole = [
        i >= k or (p.begin[i] is None and p.end[i] is None and steps[i] == 1) for i in range(nd)
    ]
    if o is not None and len(o) == nd:
        d = _merge(d, tuple(o[i] if whole[i] else None for i in range(nd)), "input and output")
        assert d is not None
    out = tuple(
        x if whole[i] or x is None else slice_len(p.begin[i], p.end[i], steps[i], x)
        for i, x in enumerate(d)
    )
    return [d], [out]


def slice_start(begin: int | None, step: int, n: int) -> int:
    """First index of a non-empty ``range(n)[begin::step]`` slice, as GetIndexRange has it."""
    b = begin if begin is not None else (n - 1 if step < 0 else 0)
    if b < 0:
        b += n
    if b < 0 and step > 0:
        b = 0
    if b > n - 1 and step < 0:
        b = n - 1
    return b


def slice_geometry(p: SliceParams, shape: tuple[int, ...],
                   out: tuple[int, ...]) -> tuple[list[int], int]:
    """The data's element strides along the slice's axes (step times the axis stride) and the
    offset of its first element: where the output's elements are in the data."""
    st = c_strides(shape)
    strides, off = list(st), 0
    for i, (b, s) in enumerate(zip(p.begin, p.steps())):
        if out[i]:
            off += slice_start(b, s, shape[i]) * st[i]
            strides[i] = s * st[i]
    return strides, off


def slice_lowering(call: KernelCall) -> Lowered:
    out = call.out_shapes[0]
    strides, off = slice_geometry(call.params, call.in_shapes[0], out)
    return strided_lowering(call, out, strides, off)


def slice_reference(p: SliceParams, data: np.ndarray) -> np.ndarray:
    steps = p.steps()
    return data[tuple(slice(b, e, s) for b, e, s in zip(p.begin, p.end, steps))]


def scatter_add_lowering(call: KernelCall, dims: Sequence[int], strides: Sequence[int],
                         offset: int) -> Lowered:
    """dx[offset + sum(i_k * strides[k])] (+)= g[i] over g's index space ``dims`` (write mode
    zeroes dx first): the gradient of the strided copies (slice, tile)."""
    dims = list(dims) or [1]
    strides = list(strides) or [0]
    spec = KernelSpec.make("common/broadcast_reduce_backward.c.j2", kind="reduce", nd=len(dims),
                           dtype=call.out_dtypes[0].name, req=call.out_req(0))
    ia = (*dims, *strides, size(call.out_shapes[0]), offset)
    return Lowered((Launch(spec, ia),))


def slice_backward_lowering(call: KernelCall) -> Lowered:
    """The output gradient added at the slice's positions (zeros elsewhere)."""
    g = call.in_shapes[0]
    strides, off = slice_geometry(call.params, call.in_shapes[1], g)
    return scatter_add_lowering(call, g, strides, off)


BACKWARD_SLICE = _shape_only_backward(
    "slice", SliceParams, slice_backward_lowering,
    "Gradient of slice: the output gradient at the slice's positions, zeros elsewhere.")

SLICE = register(
    OpDef(
        name="slice",
        aliases=("crop",),
        params=SliceParams,
        infer_shape=slice_shape,
        infer_type=same_dtype,
        sparse=True,
        reference=slice_reference,
        kernels={DENSE: Kernel(slice_lowering)},
        grad=_with_data(BACKWARD_SLICE),
        doc="Slices a region of the input: ``data[begin[0]:end[0]:step[0], ...]``.",
        examples=(
            Example(((5, 6, 7),), {"begin": (0, 1), "end": (2, 4)}),
            Example(((5, 6, 7),), {"begin": (None,), "end": (None,)}, dtype="float64"),
            Example(((5, 6, 7),), {"begin": (0,), "end": (5,), "step": (2,)}, dtype="int32"),
            Example(((5, 6, 7),), {"begin": (4, None), "end": (0, None), "step": (-2, None)}),
            Example(((5, 6, 7),), {"begin": (1, 0, 0), "end": (3, 6, 7), "step": (1, 3, 2)}),
            Example(((5, 6, 7),), {"begin": (0, -4), "end": (5, -1)}),
            Example(((5, 6, 7),), {"begin": (0,), "end": (10,)}),
            Example(((5, 6, 7),), {"begin": (3,), "end": (1,)}),
        ),
        bad_params=(
            {"begin": (0,), "end": (3,), "step": (0,)},
            {"begin": (0, 1), "end": (2,)},
            {"begin": (0, 1), "end": (2, 3), "step": (1,)},
            {"begin": (0,)},
        ),
    )
)


@dataclass(frozen=True, kw_only=True)
class SliceAxisParams(Params):
    axis: int = field(doc="Axis along which to be sliced, supports negative indexes.")
    begin: int = field(
        doc="The beginning index along the axis to be sliced,  supports negative indexes."
    )
    end: int | None = field(
        doc="The ending index along the axis to be sliced,  supports negative indexes."
    )


def slice_axis_shape(p: SliceAxisParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    if d is None:
        return list(ins), list(outs)
    nd = len(d)
    if not -nd <= p.axis < nd:
        raise RuleError(f"axis {p.axis} is out of bounds for an array of {nd} dimensions")
    axis = p.axis % nd
    if o is not None and len(o) == nd:
        d = _merge(d, (*o[:axis], None, *o[axis + 1 :]), "input and output")
        assert d is not None
    size = d[axis]
    if size is None:
        return [d], [d]
    begin = p.begin + size if p.begin < 0 else p.begin
    if size > 0:
        end = size if p.end is None else p.end + size if p.end < 0 else p.end
        if end > size:
            raise RuleError(f"invalid end={p.end}: axis {p.axis} has size {size}")
        if not begin < end:
            raise RuleError(
                f"invalid begin={p.begin}, end={p.end} for axis {p.axis} of size {size}"
            )
    else:
        begin = end = 0
    if begin < 0:
        raise RuleError(f"invalid begin={p.begin} for axis {p.axis} of size {size}")
    return [d], [(*d[:axis], end - begin, *d[axis + 1 :])]


def slice_axis_lowering(call: KernelCall) -> Lowered:
    shape, out = call.in_shapes[0], call.out_shapes[0]
    axis = call.params.axis % len(shape)
    begin = call.params.begin + shape[axis] if call.params.begin < 0 else call.params.begin
    st = c_strides(shape)
    return strided_lowering(call, out, st, begin * st[axis] if out[axis] else 0)


def slice_axis_reference(p: SliceAxisParams, data: np.ndarray) -> np.ndarray:
    index = [slice(None)] * data.ndim
    index[p.axis] = slice(p.begin, p.end)
    return data[tuple(index)]


def slice_axis_backward_lowering(call: KernelCall) -> Lowered:
    g, shape = call.in_shapes
    axis = call.params.axis % len(shape)
    begin = call.params.begin + shape[axis] if call.params.begin < 0 else call.params.begin
    inner = size(shape[axis + 1 :])
    spec = KernelSpec.make("shape/shape_slice_backward.c.j2", dtype=call.out_dtypes[0].name,
                           req=call.out_req(0))
    ia = (size(shape[:axis]), shape[axis] * inner, g[axis] * inner, begin * inner)
    return Lowered((Launch(spec, ia),))


BACKWARD_SLICE_AXIS = _shape_only_backward(
    "slice_axis", SliceAxisParams, slice_axis_backward_lowering,
    "Gradient of slice_axis: the output gradient in its place, zeros elsewhere.")

SLICE_AXIS = register(
    OpDef(
        name="slice_axis",
        params=SliceAxisParams,
        infer_shape=slice_axis_shape,
        infer_type=same_dtype,
        reference=slice_axis_reference,
        kernels={DENSE: Kernel(slice_axis_lowering)},
        grad=_with_data(BACKWARD_SLICE_AXIS),
        doc="Slices the input along one axis: ``begin <= i < end``.",
        examples=(
            Example(((5, 6, 7),), {"axis": 1, "begin": 1, "end": 3}),
            Example(((5, 6, 7),), {"axis": -1, "begin": -3, "end": None}, dtype="float64"),
            Example(((5, 6, 7),), {"axis": 0, "begin": 0, "end": None}, dtype="int32"),
            Example(((5, 6, 7),), {"axis": 2, "begin": 2, "end": -1}),
        ),
        bad_params=(
            {"axis": 0, "begin": 0},
            {"axis": 0, "end": 1},
            {"axis": 0, "begin": 0.5, "end": 2},
        ),
    )
)


@dataclass(frozen=True, kw_only=True)
class TileParams(Params):
    reps: tuple[int, ...] = field(
        lower=0,
        doc="The number of times for repeating the tensor a. Each dim size of reps must be a "
        "positive integer. If reps has length d, the result will have dimension of max(d, "
        "a.ndim); If a.ndim < d, a is promoted to be d-dimensional by prepending new axes. If "
        "a.ndim > d, reps is promoted to a.ndim by pre-pending 1's to it.",
    )


def tile_shape(p: TileParams, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    if d is None:
        return list(ins), list(outs)
    if not p.reps:
        return elemwise_shape(p, ins, outs)
    nd = max(len(d), len(p.reps))
    dd = (1,) * (nd - len(d)) + tuple(d)
    rr = (1,) * (nd - len(p.reps)) + p.reps
    # NOTE: MXNet 1.x reads a 0 dimension as "unknown", so a 0 in reps leaves the dim unknown.
    out = tuple(None if x is None or r == 0 else x * r for x, r in zip(dd, rr))
    return [d], [out]


def tile_geometry(d: tuple[int, ...], reps: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """The output as (r0, d0, r1, d1, ...) and the data's strides there (0 along repeats)."""
    nd = max(len(d), len(reps))
    dd = (1,) * (nd - len(d)) + tuple(d)
    rr = (1,) * (nd - len(reps)) + tuple(reps)
    dims = [x for r, n in zip(rr, dd) for x in (r, n)]
    strides = [x for s in c_strides(dd) for x in (0, s)]
    return dims, strides


def tile_lowering(call: KernelCall) -> Lowered:
    """The output as (r0, d0, r1, d1, ...): repeats read the input with stride 0."""
    if not call.params.reps:
        return copy_lowering(call)
    dims, strides = tile_geometry(call.in_shapes[0], call.params.reps)
    return strided_lowering(call, dims, strides, 0)


def tile_backward_lowering(call: KernelCall) -> Lowered:
    """The output gradient summed over the repeats: g as (r0, d0, r1, d1, ...) added into dx
    with stride 0 along the repeats."""
    dims, strides = tile_geometry(call.in_shapes[1], call.params.reps)
    return scatter_add_lowering(call, dims, strides, 0)


BACKWARD_TILE = _shape_only_backward(
    "tile", TileParams, tile_backward_lowering,
    "Gradient of tile: the output gradient summed over the repeats.")

TILE = register(
    OpDef(
        name="tile",
        params=TileParams,
        infer_shape=tile_shape,
        infer_type=same_dtype,
        reference=lambda p, data: np.tile(data, p.reps),
        kernels={DENSE: Kernel(tile_lowering)},
        grad=_with_data(BACKWARD_TILE),
        doc="Repeats the whole input ``reps`` times along each axis.",
        examples=(
            Example(((2, 3),), {"reps": (2, 2)}),
            Example(((2, 3, 4),), {"reps": (3,)}, dtype="float64"),
            Example(((2, 3),), {"reps": (2, 1, 2)}, dtype="int32"),
            Example(((2, 3),), {"reps": (1,)}),
            Example(((2, 3),), {"reps": ()}),
        ),
        bad_params=({}, {"reps": (-1,)}, {"reps": (2, -2)}, {"reps": "two"}),
    )
)
