"""Concat, SliceChannel and _split_v2: inputs joined along an axis, and one input split back
into pieces."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import OperatorParamError
from nnsym.ir.graph import Entry, Node, zeros_like
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    merge_shape,
    register,
    same_dtype,
)
from nnsym.ir.params import MAX_COUNT, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, node_gradient
from nnsym.ops.common.lowering import elem_dtype
from nnsym.ops.shape.helpers import _axis, _merge
from nnsym.types import Shape, shape_str

# ---------------------------------------------------------------------------------------------
# Concat and SliceChannel


@dataclass(frozen=True, kw_only=True)
class ConcatParams(Params):
    num_args: int = field(lower=1, upper=MAX_COUNT, doc="Number of inputs to be concated.")
    dim: int = field(default=1, doc="the dimension to be concated.")


def concat_shape(p: ConcatParams, ins: list, outs: list) -> tuple[list, list]:
    out = outs[0]
    nd = next((len(s) for s in (*ins, out) if s is not None), None)
    if nd is None:
        return list(ins), list(outs)
    if nd == 0:
        raise RuleError("zero-dimensional arrays cannot be concatenated")
    axis = _axis(p.dim, nd, "dim")
    base: Shape = (None,) * nd
    for s in (*ins, out):
        if s is None:
            continue
        if len(s) != nd:
            raise RuleError(
                f"incompatible shapes: {shape_str(s)} has {len(s)} dimensions, expected {nd}"
            )
        other = (*s[:axis], None, *s[axis + 1 :])
        try:
            base = merge_shape(base, other)  # type: ignore[assignment]
        except RuleError:
            raise RuleError(
                f"incompatible input shape: expected {shape_str(base)} outside dim {axis}, got "
                f"{shape_str(s)}"
            ) from None
    sizes = [None if s is None else s[axis] for s in ins]
    total = None if any(x is None for x in sizes) else sum(x for x in sizes if x is not None)
    out_size = None if out is None else out[axis]
    if total is None and out_size is not None:
        missing = [i for i, x in enumerate(sizes) if x is None]
        if len(missing) == 1:
            rest = out_size - sum(x for x in sizes if x is not None)
            if rest < 0:
                raise RuleError(
                    f"the output has {out_size} along dim {axis}, less than the known inputs' "
                    f"{out_size - rest}"
                )
            sizes[missing[0]] = rest
        total = out_size
    elif total is not None and out_size is not None and total != out_size:
        raise RuleError(
            f"the inputs' sizes along dim {axis} add up to {total}, but the output has {out_size}"
        )
    new_ins = [(*base[:axis], x, *base[axis + 1 :]) for x in sizes]
    return new_ins, [(*base[:axis], total, *base[axis + 1 :])]


def _join_lowering(
    call: KernelCall,
    mode: str,
    joined: tuple[int, ...],
    pieces: Sequence[tuple[int, ...]],
    axis: int,
) -> Lowered:
    """Concat/SliceChannel as (outer, inner_i) row blocks of the pieces in the joined array."""
    outer = size(joined[:axis])
    tail = size(joined[axis + 1 :])
    inner = [s[axis] * tail for s in pieces]
    if outer * sum(inner) == 0:
        return Lowered()
    spec = KernelSpec.make("shape/shape_join.c.j2", mode=mode, dtype=elem_dtype(call), req=call.req)
    return Lowered((Launch(spec, (len(inner), outer, sum(inner), *inner)),))


def concat_lowering(call: KernelCall) -> Lowered:
    out = call.out_shapes[0]
    return _join_lowering(call, "concat", out, call.in_shapes, call.params.dim % len(out))


def concat_backward_lowering(call: KernelCall) -> Lowered:
    """Split the output gradient into the pieces' gradients (SliceChannel's kernel), reading
    only the gradient: p = [ograd, data_0..data_{k-1} (shapes only), grad_0..grad_{k-1}]."""
    g = call.in_shapes[0]
    k = len(call.out_shapes)
    low = _join_lowering(call, "split", g, call.out_shapes, call.params.dim % len(g))
    sel = (0, *range(k + 1, 2 * k + 1))
    return Lowered(tuple(dataclasses.replace(ln, args=sel) for ln in low.launches))


BACKWARD_CONCAT = register(
    OpDef(
        name="_backward_Concat",
        params=ConcatParams,
        inputs=lambda p: ("ograd", *(f"arg{i}" for i in range(p.num_args))),
        outputs=lambda p: tuple(f"arg{i}_grad" for i in range(p.num_args)),
        infer_shape=lambda p, ins, outs: (list(ins), [i or o for i, o in zip(ins[1:], outs)]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or o for o in outs]),
        ignore_inputs=lambda p: tuple(range(1, p.num_args + 1)),  # shapes only
        kernels={DENSE: Kernel(concat_backward_lowering)},
        differentiable=False,
        doc="Gradient of Concat: the output gradient split back into the pieces.",
    )
)


concat_grad = node_gradient(BACKWARD_CONCAT)


CONCAT = register(
    OpDef(
        name="Concat",
        aliases=("concat",),
        params=ConcatParams,
        inputs=lambda p: tuple(f"arg{i}" for i in range(p.num_args)),
        key_var_num_args="num_args",
        infer_shape=concat_shape,
        infer_type=same_dtype,
        sparse=True,
        reference=lambda p, *xs: np.concatenate(xs, axis=p.dim),
        kernels={DENSE: Kernel(concat_lowering)},
        grad=concat_grad,
        doc="Joins the inputs along dimension ``dim``.",
        examples=(
            Example(((2, 3), (2, 4)), {"num_args": 2}),
            Example(((2, 3), (5, 3)), {"num_args": 2, "dim": 0}, dtype="float64"),
            Example(((2, 3, 4), (2, 3, 1), (2, 3, 2)), {"num_args": 3, "dim": -1}, dtype="int32"),
            Example(((4, 2),), {"num_args": 1, "dim": 0}),
        ),
        bad_params=({}, {"num_args": 0}, {"num_args": 2, "axis": 0}),
    )
)


@dataclass(frozen=True, kw_only=True)
class SliceChannelParams(Params):
    num_outputs: int = field(
        lower=1,
        upper=MAX_COUNT,
        doc="Number of splits. Note that this should evenly divide the length of the `axis`.",
    )
    axis: int = field(default=1, doc="Axis along which to split.")
    squeeze_axis: bool = field(
        default=False,
        doc="If true, Removes the axis with length 1 from the shapes of the output arrays. "
        "``squeeze_axis`` can be true only if ``input.shape[axis] == num_outputs``.",
    )


def slice_channel_shape(p: SliceChannelParams, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    n, sq = p.num_outputs, p.squeeze_axis
    o = None
    for s in outs:
        o = _merge(o, s, "the outputs")  # every piece has the same shape
    nd = len(d) if d is not None else None if o is None else len(o) + (1 if sq else 0)
    if nd is None:
        return list(ins), list(outs)
    if d is not None and o is not None and len(o) != nd - (1 if sq else 0):
        raise RuleError(f"output {shape_str(o)} does not fit a split of {shape_str(d)}")
    axis = _axis(p.axis, nd)
    if o is not None:
        if sq:
            whole = (*o[:axis], n, *o[axis:])
        else:
            ax = o[axis]
            whole = (*o[:axis], None if ax is None else ax * n, *o[axis + 1 :])
        d = _merge(d, whole, "the input and the joined outputs")
    assert d is not None
    ax = d[axis]
    if ax is not None:
        if ax % n:
            raise RuleError(
                f"cannot split axis {axis} of {shape_str(d)} into {n} equal parts: {n} does not "
                f"divide {ax}"
            )
        if sq and ax != n:
            raise RuleError(
                f"with squeeze_axis=True the split axis must have size num_outputs={n}, but "
                f"axis {axis} of {shape_str(d)} has {ax}"
            )
    if sq:
        piece = (*d[:axis], *d[axis + 1 :])
    else:
        piece = (*d[:axis], None if ax is None else ax // n, *d[axis + 1 :])
    return [d], [piece] * n


def slice_channel_reference(p: SliceChannelParams, data: np.ndarray) -> tuple[np.ndarray, ...]:
    parts = np.split(data, p.num_outputs, axis=p.axis)
    if p.squeeze_axis:
        parts = [np.squeeze(x, axis=p.axis) for x in parts]
    return tuple(parts)


def slice_channel_lowering(call: KernelCall) -> Lowered:
    d = call.in_shapes[0]
    axis = call.params.axis % len(d)
    n = call.params.num_outputs
    piece = (*d[:axis], d[axis] // n, *d[axis + 1 :])
    return _join_lowering(call, "split", d, [piece] * n, axis)


def slice_channel_backward_lowering(call: KernelCall) -> Lowered:
    """Concatenate the outputs' gradients back (Concat's kernel): p = [grad_0..grad_{k-1}, dx]."""
    d = call.out_shapes[0]
    axis = call.params.axis % len(d)
    n = call.params.num_outputs
    piece = (*d[:axis], d[axis] // n, *d[axis + 1 :])
    return _join_lowering(call, "concat", d, [piece] * n, axis)


def slice_channel_backward_shape(p: SliceChannelParams, ins: list,
                                 outs: list) -> tuple[list, list]:
    """The data's shape from any known piece gradient (the pieces lie side by side)."""
    piece = next((s for s in ins if s is not None), None)
    if piece is None:
        return list(ins), list(outs)
    nd = len(piece) + (1 if p.squeeze_axis else 0)
    axis = p.axis % nd
    if p.squeeze_axis:
        whole = (*piece[:axis], p.num_outputs, *piece[axis:])
    else:
        d = piece[axis]
        whole = (*piece[:axis], None if d is None else d * p.num_outputs, *piece[axis + 1 :])
    return list(ins), [whole]


BACKWARD_SLICE_CHANNEL = register(
    OpDef(
        name="_backward_SliceChannel",
        params=SliceChannelParams,
        inputs=lambda p: tuple(f"output{i}_grad" for i in range(p.num_outputs)),
        outputs=("data_grad",),
        infer_shape=slice_channel_backward_shape,
        infer_type=lambda p, ins, outs: (list(ins), [next((t for t in ins if t is not None),
                                                          outs[0])]),
        kernels={DENSE: Kernel(slice_channel_backward_lowering)},
        differentiable=False,
        doc="Gradient of SliceChannel: the outputs' gradients joined (zeros where none flows).",
    )
)


def slice_channel_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    ins = [g if g is not None else zeros_like(Entry(node, i)) for i, g in enumerate(ograds)]
    return [Entry(backward_node(BACKWARD_SLICE_CHANNEL, node, ins), 0)]


SLICE_CHANNEL = register(
    OpDef(
        name="SliceChannel",
        aliases=("split",),
        params=SliceChannelParams,
        outputs=lambda p: tuple(f"output{i}" for i in range(p.num_outputs)),
        infer_shape=slice_channel_shape,
        infer_type=same_dtype,
        reference=slice_channel_reference,
        kernels={DENSE: Kernel(slice_channel_lowering)},
        grad=slice_channel_grad,
        doc="Splits the input into ``num_outputs`` equal parts along ``axis``.",
        examples=(
            Example(((2, 6),), {"num_outputs": 3}),
            Example(((4, 6),), {"num_outputs": 2, "axis": 0}, dtype="float64"),
            Example(((2, 3),), {"num_outputs": 3, "squeeze_axis": True}, dtype="int32"),
            Example(((2, 3, 4),), {"num_outputs": 2, "axis": -1}),
            Example(((2,),), {"num_outputs": 2, "axis": 0, "squeeze_axis": True}),
            Example(((2, 3),), {"num_outputs": 1}),
        ),
        bad_params=({}, {"num_outputs": 0}, {"num_outputs": 2, "squeeze_axis": "maybe"}),
    )
)


# ---------------------------------------------------------------------------------------------
# _split_v2: numpy-style split at given indices (or into near-equal sections)


@dataclass(frozen=True, kw_only=True)
class SplitV2Params(Params):
    indices: tuple[int, ...] = field(
        doc="Indices of splits: the boundaries at which the split is performed along `axis`."
    )
    axis: int = field(default=1, doc="Axis along which to split.")
    squeeze_axis: bool = field(
        default=False,
        doc="If true, removes the split axis (every piece must then have length 1 along it).",
    )
    sections: int = field(
        default=0, lower=0, upper=MAX_COUNT,
        doc="Number of sections if equally split. 0 means split by indices.",
    )


def _split_v2_count(p: SplitV2Params) -> int:
    return p.sections if p.sections > 0 else max(1, len(p.indices))


def split_v2_bounds(p: SplitV2Params, size: int) -> list[tuple[int, int]]:
    """(start, end) of every piece along the axis of length ``size``. Sections follow
    ``numpy.array_split`` (the first ``size % sections`` pieces are one longer), as MXNet's."""
    if p.sections > 0:
        q, r = divmod(size, p.sections)
        ends = np.cumsum([q + 1 if i < r else q for i in range(p.sections)]).tolist()
        return [(e - (q + 1 if i < r else q), e) for i, e in enumerate(ends)]
    if not p.indices:
        raise RuleError("_split_v2 needs indices (or sections > 0)")
    bounds = []
    for i, start in enumerate(p.indices):
        end = p.indices[i + 1] if i + 1 < len(p.indices) else size
        if not 0 <= start <= end:
            raise RuleError(f"piece {i} of _split_v2 starts at {start}, after its end {end}: "
                            f"indices {p.indices} must be non-negative and sorted")
        if end > size:
            raise RuleError(f"piece {i} of _split_v2 ends at {end}, past the axis size {size}")
        bounds.append((start, end))
    return bounds


def _split_v2_pieces(p: SplitV2Params, d: Shape) -> list[Shape]:
    axis = _axis(p.axis, len(d))
    n = _split_v2_count(p)
    size = d[axis]
    if size is None:
        ax: list[int | None] = [1 if p.squeeze_axis else None] * n
    else:
        ax = [e - s for s, e in split_v2_bounds(p, size)]
    out: list[Shape] = []
    for i, a in enumerate(ax):
        if p.squeeze_axis:
            if a is not None and a != 1:
                raise RuleError(f"with squeeze_axis=True every piece must have length 1 along "
                                f"axis {axis}, but piece {i} of {shape_str(d)} has {a}")
            out.append((*d[:axis], *d[axis + 1:]))
        else:
            out.append((*d[:axis], a, *d[axis + 1:]))
    return out


def split_v2_params(indices_or_sections: Any, axis: int, squeeze_axis: bool,
                    axis_size: int | None) -> dict[str, Any]:
    """``_split_v2``'s params for ``split_v2(ary, indices_or_sections, axis, squeeze_axis)``.

    An int N splits into N pieces: with ``axis_size`` known (NDArray) N must divide it and the
    pieces' start indices are passed; without (Symbol) ``sections=N`` is. A tuple gives the
    split points (``[0] + list(tuple)`` as starts)."""
    if isinstance(indices_or_sections, (int, np.integer)) and not isinstance(
            indices_or_sections, bool):
        n = int(indices_or_sections)
        if n <= 0:
            raise OperatorParamError(f"split_v2: the number of sections must be positive, "
                                     f"got {n}")
        if axis_size is None:
            return {"indices": (), "axis": axis, "squeeze_axis": squeeze_axis, "sections": n}
        if axis_size % n:
            raise OperatorParamError(f"split_v2: array split does not result in an equal "
                                     f"division: {n} sections of an axis of size {axis_size}")
        step = axis_size // n
        indices: tuple[int, ...] = tuple(i * step for i in range(n))
    elif isinstance(indices_or_sections, tuple):
        bad = [v for v in indices_or_sections if not isinstance(v, (int, np.integer))]
        if bad:
            raise OperatorParamError(f"split_v2: split indices must be ints, got {bad!r}")
        indices = (0, *(int(v) for v in indices_or_sections))
    else:
        raise OperatorParamError(f"split_v2: indices_or_sections must be an int or a tuple of "
                                 f"ints, got {type(indices_or_sections).__name__}")
    return {"indices": indices, "axis": axis, "squeeze_axis": squeeze_axis}


def split_v2_shape(p: SplitV2Params, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    if d is None:
        return list(ins), list(outs)
    if len(d) == 0:
        raise RuleError("a zero-dimensional array cannot be split")
    pieces = _split_v2_pieces(p, d)
    return [d], [_merge(o, s, f"output {i}") for i, (o, s) in enumerate(zip(outs, pieces))]


def split_v2_reference(p: SplitV2Params, data: np.ndarray) -> tuple[np.ndarray, ...]:
    axis = p.axis % data.ndim
    parts = [np.take(data, np.arange(s, e), axis=axis)
             for s, e in split_v2_bounds(p, data.shape[axis])]
    if p.squeeze_axis:
        parts = [np.squeeze(x, axis=axis) for x in parts]
    return tuple(parts)


def _split_v2_geometry(p: SplitV2Params, d: tuple[int, ...]) -> tuple[list, int]:
    axis = p.axis % len(d)
    pieces = [(*d[:axis], e - s, *d[axis + 1:]) for s, e in split_v2_bounds(p, d[axis])]
    return pieces, axis


def split_v2_lowering(call: KernelCall) -> Lowered:
    d = call.in_shapes[0]
    pieces, axis = _split_v2_geometry(call.params, d)
    return _join_lowering(call, "split", d, pieces, axis)


def split_v2_backward_lowering(call: KernelCall) -> Lowered:
    """The pieces' gradients joined back (Concat's kernel): p = [grad_0..grad_{k-1}, dx]."""
    d = call.out_shapes[0]
    pieces, axis = _split_v2_geometry(call.params, d)
    return _join_lowering(call, "concat", d, pieces, axis)


def split_v2_backward_shape(p: SplitV2Params, ins: list, outs: list) -> tuple[list, list]:
    """The data's shape from the pieces' gradients (all known, or the output already known)."""
    if outs[0] is not None or any(s is None for s in ins):
        return list(ins), list(outs)
    nd = len(ins[0]) + (1 if p.squeeze_axis else 0)
    axis = p.axis % nd
    if p.squeeze_axis:
        whole = (*ins[0][:axis], len(ins), *ins[0][axis:])
    else:
        whole = (*ins[0][:axis], sum(s[axis] for s in ins), *ins[0][axis + 1:])
    return list(ins), [whole]


BACKWARD_SPLIT_V2 = register(
    OpDef(
        name="_backward_split_v2",
        params=SplitV2Params,
        inputs=lambda p: tuple(f"output{i}_grad" for i in range(_split_v2_count(p))),
        outputs=("data_grad",),
        infer_shape=split_v2_backward_shape,
        infer_type=lambda p, ins, outs: (list(ins), [next((t for t in ins if t is not None),
                                                          outs[0])]),
        kernels={DENSE: Kernel(split_v2_backward_lowering)},
        differentiable=False,
        doc="Gradient of _split_v2 (MXNet's _split_v2_backward): the pieces' gradients joined.",
    )
)


def split_v2_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    ins = [g if g is not None else zeros_like(Entry(node, i)) for i, g in enumerate(ograds)]
    return [Entry(backward_node(BACKWARD_SPLIT_V2, node, ins), 0)]


SPLIT_V2 = register(
    OpDef(
        name="_split_v2",
        params=SplitV2Params,
        outputs=lambda p: tuple(f"output{i}" for i in range(_split_v2_count(p))),
        infer_shape=split_v2_shape,
        infer_type=same_dtype,
        reference=split_v2_reference,
        kernels={DENSE: Kernel(split_v2_lowering)},
        grad=split_v2_grad,
        doc="Splits the input along ``axis`` at ``indices`` (or into ``sections`` near-equal "
            "parts); the engine of ``split_v2``.",
        examples=(
            Example(((4, 6),), {"indices": (0, 1, 3), "axis": 1}),
            Example(((4, 6),), {"indices": (), "sections": 3, "axis": 1}, dtype="float64"),
            Example(((4, 3),), {"indices": (), "sections": 3, "axis": 0}, dtype="int32"),
            Example(((4, 3),), {"indices": (0, 2, 2), "axis": 0}),
            Example(((2, 3, 4),), {"indices": (0, 1, 2, 3), "axis": -1, "squeeze_axis": True}),
            Example(((5, 2),), {"indices": (0,), "axis": 0}),
        ),
        bad_params=({}, {"indices": (0,), "sections": -1}, {"indices": (0,), "num_outputs": 2}),
    )
)


# ---------------------------------------------------------------------------------------------
# stack: Concat along a new axis


@dataclass(frozen=True, kw_only=True)
class StackParams(Params):
    axis: int = field(
        default=0, doc="The axis in the result array along which the input arrays are stacked."
    )
    num_args: int = field(lower=1, upper=MAX_COUNT, doc="Number of inputs to be stacked.")


def _stack_axis(p: StackParams, nd: int) -> int:
    """The new axis's position in the (nd + 1)-dimensional output."""
    return _axis(p.axis, nd + 1)


def stack_shape(p: StackParams, ins: list, outs: list) -> tuple[list, list]:
    o = outs[0]
    piece = None
    for s in ins:
        piece = _merge(piece, s, "the stacked inputs")
    if o is not None:
        if len(o) == 0:
            raise RuleError("stack's output has at least one dimension")
        axis = _stack_axis(p, len(o) - 1)
        if o[axis] is not None and o[axis] != p.num_args:
            raise RuleError(
                f"the output {shape_str(o)} has {o[axis]} along the stacked axis {axis}, not "
                f"num_args={p.num_args}"
            )
        piece = _merge(piece, (*o[:axis], *o[axis + 1 :]), "the inputs and the output")
    if piece is None:
        return list(ins), list(outs)
    axis = _stack_axis(p, len(piece))
    return [piece] * p.num_args, [(*piece[:axis], p.num_args, *piece[axis:])]


def _stack_pieces(out: tuple[int, ...], p: StackParams) -> tuple[list[tuple[int, ...]], int]:
    axis = _stack_axis(p, len(out) - 1)
    return [(*out[:axis], 1, *out[axis + 1 :])] * p.num_args, axis


def stack_lowering(call: KernelCall) -> Lowered:
    out = call.out_shapes[0]
    pieces, axis = _stack_pieces(out, call.params)
    return _join_lowering(call, "concat", out, pieces, axis)


def stack_backward_lowering(call: KernelCall) -> Lowered:
    """The output gradient split back into the inputs' gradients: p = [ograd, grad_0, ...]."""
    g = call.in_shapes[0]
    pieces, axis = _stack_pieces(g, call.params)
    return _join_lowering(call, "split", g, pieces, axis)


def stack_backward_shape(p: StackParams, ins: list, outs: list) -> tuple[list, list]:
    g = ins[0]
    if g is None or len(g) == 0:
        return list(ins), list(outs)
    axis = _stack_axis(p, len(g) - 1)
    return list(ins), [(*g[:axis], *g[axis + 1 :])] * p.num_args


BACKWARD_STACK = register(
    OpDef(
        name="_backward_stack",
        params=StackParams,
        inputs=("ograd",),
        outputs=lambda p: tuple(f"arg{i}_grad" for i in range(p.num_args)),
        infer_shape=stack_backward_shape,
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or o for o in outs]),
        kernels={DENSE: Kernel(stack_backward_lowering)},
        differentiable=False,
        doc="Gradient of stack: the output gradient split back into the inputs' gradients.",
    )
)

STACK = register(
    OpDef(
        name="stack",
        params=StackParams,
        inputs=lambda p: tuple(f"arg{i}" for i in range(p.num_args)),
        key_var_num_args="num_args",
        infer_shape=stack_shape,
        infer_type=same_dtype,
        reference=lambda p, *xs: np.stack(xs, axis=p.axis),
        kernels={DENSE: Kernel(stack_lowering)},
        grad=node_gradient(BACKWARD_STACK, lambda n: ()),
        doc="Joins same-shaped inputs along a new axis ``axis`` of the result.",
        examples=(
            Example(((2, 3), (2, 3)), {"num_args": 2}),
            Example(((2, 3), (2, 3), (2, 3)), {"num_args": 3, "axis": 1}, dtype="float64"),
            Example(((2, 3), (2, 3)), {"num_args": 2, "axis": -1}, dtype="int32"),
            Example(((2, 3, 4),), {"num_args": 1, "axis": -2}),
            Example(((4,), (4,)), {"num_args": 2, "axis": 1}),
        ),
        bad_params=({}, {"num_args": 0}, {"num_args": 2, "dim": 0}),
    )
)
