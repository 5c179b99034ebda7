"""repeat, reverse, depth_to_space, space_to_depth and diag: strided copies that repeat, flip,
permute or pick the input's elements.

Their dense kernels are the shared strided copy (``common/shape_strided.c.j2``); the gradients
of the repeating or picking ones add the output gradient back (the scatter-add of
``common/broadcast_reduce_backward.c.j2``), and those of the permutations are the inverse
permutation (reverse is its own inverse; depth_to_space and space_to_depth undo each other).
diag of a 1-D input scatters it onto a zeroed square (the same scatter-add).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    get_op,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops.common.grad import backward_node
from nnsym.ops.common.lowering import c_strides, strided_lowering
from nnsym.ops.shape.helpers import Dims, _axis, _merge, _shape_only_backward, _with_data
from nnsym.ops.shape.slicing import scatter_add_lowering
from nnsym.types import shape_str

# ---------------------------------------------------------------------------------------------
# repeat


@dataclass(frozen=True, kw_only=True)
class RepeatParams(Params):
    repeats: int = field(lower=0, doc="The number of repetitions for each element.")
    axis: int | None = field(
        default=None,
        doc="The axis along which to repeat values. The negative numbers are interpreted "
        "counting from the backward. By default, use the flattened input array, and return a "
        "flat output array.",
    )


def repeat_shape(p: RepeatParams, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    if d is None:
        return list(ins), list(outs)
    r = p.repeats
    if p.axis is None:
        n = None if any(x is None for x in d) else int(np.prod(d, dtype=np.int64))
        return [d], [(None if n is None else n * r,)]
    axis = _axis(p.axis, len(d))
    x = d[axis]
    return [d], [(*d[:axis], None if x is None else x * r, *d[axis + 1 :])]


def repeat_geometry(shape: tuple[int, ...], p: RepeatParams) -> tuple[list[int], list[int]]:
    """The output as (..., d_axis, repeats, ...): the data's strides there, 0 along repeats."""
    if p.axis is None:
        return [int(np.prod(shape, dtype=np.int64)), p.repeats], [1, 0]
    axis = p.axis % len(shape)
    st = c_strides(shape)
    dims = [*shape[: axis + 1], p.repeats, *shape[axis + 1 :]]
    return dims, [*st[: axis + 1], 0, *st[axis + 1 :]]


def repeat_lowering(call: KernelCall) -> Lowered:
    dims, strides = repeat_geometry(call.in_shapes[0], call.params)
    return strided_lowering(call, dims, strides, 0)


def repeat_backward_lowering(call: KernelCall) -> Lowered:
    """The output gradient summed over each element's repeats."""
    dims, strides = repeat_geometry(call.in_shapes[1], call.params)
    return scatter_add_lowering(call, dims, strides, 0)


BACKWARD_REPEAT = _shape_only_backward(
    "repeat", RepeatParams, repeat_backward_lowering,
    "Gradient of repeat: the output gradient summed over each element's repeats.")

REPEAT = register(
    OpDef(
        name="repeat",
        params=RepeatParams,
        infer_shape=repeat_shape,
        infer_type=same_dtype,
        reference=lambda p, data: np.repeat(data, p.repeats, axis=p.axis),
        kernels={DENSE: Kernel(repeat_lowering)},
        grad=_with_data(BACKWARD_REPEAT),
        doc="Repeats each element of the input ``repeats`` times along ``axis`` (of the "
        "flattened input when ``axis`` is None).",
        examples=(
            Example(((2, 3),), {"repeats": 2}),
            Example(((2, 3),), {"repeats": 3, "axis": 1}, dtype="float64"),
            Example(((2, 3, 4),), {"repeats": 2, "axis": -3}, dtype="int32"),
            Example(((2, 3),), {"repeats": 1, "axis": 0}),
            Example(((2, 3),), {"repeats": 0, "axis": 1}),
        ),
        bad_params=({}, {"repeats": -1}, {"repeats": 2, "axis": "x"}, {"repeat": 2}),
    )
)


# ---------------------------------------------------------------------------------------------
# reverse (flip)


@dataclass(frozen=True, kw_only=True)
class ReverseParams(Params):
    axis: tuple[int, ...] = field(doc="The axis which to reverse elements.")


def reverse_shape(p: ReverseParams, ins: list, outs: list) -> tuple[list, list]:
    d = _merge(ins[0], outs[0], "the input and the output")
    if d is not None:
        for a in p.axis:
            _axis(a, len(d))
    return [d], [d]


def _flips(p: ReverseParams, nd: int) -> set[int]:
    """The axes reversed an odd number of times (a repeated axis is reversed again)."""
    odd: set[int] = set()
    for a in p.axis:
        odd ^= {a % nd}
    return odd


def reverse_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[0]
    st = c_strides(shape)
    off = 0
    for a in _flips(call.params, len(shape)):
        off += (shape[a] - 1) * st[a] if shape[a] else 0
        st[a] = -st[a]
    return strided_lowering(call, shape, st, off)


def reverse_reference(p: ReverseParams, data: np.ndarray) -> np.ndarray:
    out = data
    for a in p.axis:
        out = np.flip(out, a)
    return np.ascontiguousarray(out)


def _reversed(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """reverse is its own inverse: its gradient reverses the output gradient back."""
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(get_op("reverse"), node, [g]), 0)]


REVERSE = register(
    OpDef(
        name="reverse",
        aliases=("flip",),
        params=ReverseParams,
        infer_shape=reverse_shape,
        infer_type=same_dtype,
        reference=reverse_reference,
        kernels={DENSE: Kernel(reverse_lowering)},
        grad=_reversed,
        doc="Reverses the order of the elements along the given axes (the shape is unchanged).",
        examples=(
            Example(((2, 3),), {"axis": (0,)}),
            Example(((2, 3, 4),), {"axis": (0, -1)}, dtype="float64"),
            Example(((2, 3, 4),), {"axis": (1,)}, dtype="int32"),
            Example(((4, 5),), {"axis": (1, 1)}),
            Example(((4, 5),), {"axis": ()}),
        ),
        bad_params=({}, {"axis": "x"}, {"axes": (0,)}),
    )
)


# ---------------------------------------------------------------------------------------------
# depth_to_space and space_to_depth


@dataclass(frozen=True, kw_only=True)
class BlockParams(Params):
    block_size: int = field(lower=1, doc="Blocks of [block_size. block_size] are moved")


def _four_d(d: tuple | None, what: str) -> None:
    if d is not None and len(d) != 4:
        raise RuleError(f"{what} needs a 4-D input (N, C, H, W), got {shape_str(d)}")


def _times(x: int | None, k: int) -> int | None:
    return None if x is None else x * k


def _div(x: int | None, k: int, what: str) -> int | None:
    if x is None:
        return None
    if x % k:
        raise RuleError(f"{what} ({x}) must be a multiple of {k}")
    return x // k


def depth_to_space_shape(p: BlockParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    _four_d(d, "depth_to_space")
    _four_d(o, "depth_to_space's output")
    b = p.block_size
    if o is not None:
        back: Dims = [o[0], _times(o[1], b * b), _div(o[2], b, "the output height"),
                      _div(o[3], b, "the output width")]
        d = _merge(d, tuple(back), "the input and the output")
    if d is None:
        return list(ins), list(outs)
    c = _div(d[1], b * b, "the input's channels (block_size squared divides them)")
    return [d], [(d[0], c, _times(d[2], b), _times(d[3], b))]


def space_to_depth_shape(p: BlockParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    _four_d(d, "space_to_depth")
    _four_d(o, "space_to_depth's output")
    b = p.block_size
    if o is not None:
        back: Dims = [o[0], _div(o[1], b * b, "the output channels"), _times(o[2], b),
                      _times(o[3], b)]
        d = _merge(d, tuple(back), "the input and the output")
    if d is None:
        return list(ins), list(outs)
    h = _div(d[2], b, "the input height (block_size divides it)")
    w = _div(d[3], b, "the input width (block_size divides it)")
    return [d], [(d[0], _times(d[1], b * b), h, w)]


def depth_to_space_lowering(call: KernelCall) -> Lowered:
    """out[n, c, h*b+i, w*b+j] = in[n, (i*b+j)*C' + c, h, w]: the output as (N, C', H, b, W, b)."""
    n, c, h, w = call.in_shapes[0]
    b = call.params.block_size
    cc = c // (b * b)
    dims = [n, cc, h, b, w, b]
    strides = [c * h * w, h * w, w, b * cc * h * w, 1, cc * h * w]
    return strided_lowering(call, dims, strides, 0)


def space_to_depth_lowering(call: KernelCall) -> Lowered:
    """out[n, (i*b+j)*C + c, h, w] = in[n, c, h*b+i, w*b+j]: the output as (N, b, b, C, H', W')."""
    n, c, h, w = call.in_shapes[0]
    b = call.params.block_size
    dims = [n, b, b, c, h // b, w // b]
    strides = [c * h * w, w, 1, h * w, b * w, b]
    return strided_lowering(call, dims, strides, 0)


def depth_to_space_reference(p: BlockParams, x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    b = p.block_size
    y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))


def space_to_depth_reference(p: BlockParams, x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    b = p.block_size
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))


def _inverse(name: str):  # type: ignore[no-untyped-def]
    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        return [Entry(backward_node(get_op(name), node, [g]), 0)]

    return grad


DEPTH_TO_SPACE = register(
    OpDef(
        name="depth_to_space",
        params=BlockParams,
        infer_shape=depth_to_space_shape,
        infer_type=same_dtype,
        reference=depth_to_space_reference,
        kernels={DENSE: Kernel(depth_to_space_lowering)},
        grad=_inverse("space_to_depth"),
        doc="Moves blocks of channels into blocks of space: (N, C, H, W) -> "
        "(N, C / block_size², H * block_size, W * block_size).",
        examples=(
            Example(((1, 8, 2, 3),), {"block_size": 2}),
            Example(((2, 9, 2, 2),), {"block_size": 3}, dtype="float64"),
            Example(((2, 4, 3, 1),), {"block_size": 2}, dtype="int32"),
            Example(((1, 3, 2, 2),), {"block_size": 1}),
        ),
        bad_params=({}, {"block_size": 0}, {"block_size": "x"}),
    )
)

SPACE_TO_DEPTH = register(
    OpDef(
        name="space_to_depth",
        params=BlockParams,
        infer_type=same_dtype,
        infer_shape=space_to_depth_shape,
        reference=space_to_depth_reference,
        kernels={DENSE: Kernel(space_to_depth_lowering)},
        grad=_inverse("depth_to_space"),
        doc="Moves blocks of space into blocks of channels: (N, C, H, W) -> "
        "(N, C * block_size², H / block_size, W / block_size).",
        examples=(
            Example(((1, 2, 4, 6),), {"block_size": 2}),
            Example(((2, 1, 3, 6),), {"block_size": 3}, dtype="float64"),
            Example(((2, 3, 2, 4),), {"block_size": 2}, dtype="int32"),
            Example(((1, 3, 2, 2),), {"block_size": 1}),
        ),
        bad_params=({}, {"block_size": -2}, {"blocksize": 2}),
    )
)


# ---------------------------------------------------------------------------------------------
# diag


@dataclass(frozen=True, kw_only=True)
class DiagParams(Params):
    k: int = field(
        default=0,
        doc="Diagonal in question. The default is 0. Use k>0 for diagonals above the main "
        "diagonal, and k<0 for diagonals below the main diagonal. If input has shape (S0 S1) k "
        "must be between -S0 and S1",
    )
    axis1: int = field(
        default=0,
        doc="The first axis of the sub-arrays of interest. Ignored when the input is a 1-D array.",
    )
    axis2: int = field(
        default=1,
        doc="The second axis of the sub-arrays of interest. Ignored when the input is a 1-D "
        "array.",
    )


def _diag_axes(p: DiagParams, nd: int) -> tuple[int, int]:
    a1, a2 = _axis(p.axis1, nd, "axis1"), _axis(p.axis2, nd, "axis2")
    if a1 == a2:
        raise RuleError(f"axis1 and axis2 cannot refer to the same axis {a1}")
    return a1, a2


def _diag_len(p: DiagParams, n1: int | None, n2: int | None) -> int | None:
    if n1 is None or n2 is None:
        return None
    n = min(n1, n2 - p.k) if p.k >= 0 else min(n1 + p.k, n2)
    if n < 0:
        raise RuleError(f"diagonal k={p.k} does not exist in a {n1} x {n2} matrix")
    return n


def diag_shape(p: DiagParams, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    if d is None:
        return list(ins), list(outs)
    if len(d) == 0:
        raise RuleError("diag needs an input with at least one dimension")
    if len(d) == 1:
        n = d[0]
        m = None if n is None else n + abs(p.k)
        return [d], [(m, m)]
    a1, a2 = _diag_axes(p, len(d))
    rest = [x for i, x in enumerate(d) if i not in (a1, a2)]
    return [d], [(*rest, _diag_len(p, d[a1], d[a2]))]


def diag_geometry(p: DiagParams, shape: tuple[int, ...]) -> tuple[list[int], list[int], int]:
    """Where the diagonal's elements lie in a >= 2-D ``shape``: dims, strides and offset."""
    a1, a2 = _diag_axes(p, len(shape))
    st = c_strides(shape)
    n = _diag_len(p, shape[a1], shape[a2])
    assert n is not None
    rest = [i for i in range(len(shape)) if i not in (a1, a2)]
    dims = [*(shape[i] for i in rest), n]
    strides = [*(st[i] for i in rest), st[a1] + st[a2]]
    off = p.k * st[a2] if p.k >= 0 else -p.k * st[a1]
    return dims, strides, off if n else 0


def _square(p: DiagParams, n: int) -> tuple[list[int], list[int], int]:
    """The diagonal of the (n + |k|)² matrix a 1-D input of length n fills."""
    m = n + abs(p.k)
    return [n], [m + 1], (p.k if p.k >= 0 else -p.k * m) if n else 0


def diag_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[0]
    if len(shape) == 1:  # zeros with the input on the diagonal: a scatter into a zeroed square
        dims, strides, off = _square(call.params, shape[0])
        low = scatter_add_lowering(call, dims, strides, off)
        return Lowered(tuple(dataclasses.replace(ln, args=(0, 0, 1)) for ln in low.launches))
    dims, strides, off = diag_geometry(call.params, shape)
    return strided_lowering(call, dims, strides, off)


def diag_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data (shape only), dx]: the gradient's diagonal (1-D data), or the output
    gradient added onto the diagonal of a zeroed dx."""
    shape = call.in_shapes[1]
    if len(shape) == 1:
        dims, strides, off = _square(call.params, shape[0])
        low = strided_lowering(call, dims, strides, off)
        return Lowered(tuple(dataclasses.replace(ln, args=(0, 2)) for ln in low.launches))
    dims, strides, off = diag_geometry(call.params, shape)
    return scatter_add_lowering(call, dims, strides, off)


def diag_reference(p: DiagParams, data: np.ndarray) -> np.ndarray:
    if data.ndim == 1:
        return np.diag(data, p.k)
    return np.ascontiguousarray(np.diagonal(data, p.k, p.axis1, p.axis2))


BACKWARD_DIAG = _shape_only_backward(
    "diag", DiagParams, diag_backward_lowering,
    "Gradient of diag: the output gradient back on (or read off) the diagonal.")

DIAG = register(
    OpDef(
        name="diag",
        params=DiagParams,
        infer_shape=diag_shape,
        infer_type=same_dtype,
        reference=diag_reference,
        kernels={DENSE: Kernel(diag_lowering)},
        grad=_with_data(BACKWARD_DIAG),
        doc="The k-th diagonal of the sub-arrays over ``axis1`` and ``axis2`` (appended as the "
        "last axis), or, for a 1-D input, the square matrix with the input on its k-th diagonal.",
        examples=(
            Example(((3, 4),)),
            Example(((3, 4),), {"k": 1}, dtype="float64"),
            Example(((3, 4),), {"k": -2}, dtype="int32"),
            Example(((3, 4, 5),), {"k": 1, "axis1": 2, "axis2": 0}),
            Example(((2, 3, 4),), {"k": -1, "axis1": -1, "axis2": 1}),
            Example(((3,),)),
            Example(((3,),), {"k": 2}, dtype="float64"),
            Example(((4,),), {"k": -1}, dtype="int32"),
            Example(((3, 4),), {"k": 4}),
        ),
        bad_params=({"k": "x"}, {"axis1": 0.5}, {"axis": 0}),
    )
)
