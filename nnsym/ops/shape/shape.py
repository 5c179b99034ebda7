"""Operators that move data without computing on it: reshapes, permutations, slices, joins.

Reshape, Flatten, transpose, SwapAxis, expand_dims, squeeze, Concat, SliceChannel, slice,
slice_axis and tile, plus the copy-like Cast, zeros_like, ones_like, BlockGrad and _copy.

Shape rules follow MXNet 1.9.1's (``src/operator/tensor/matrix_op-inl.h`` and friends), including
its quirks where a graph could observe them: Reshape does not check the total size and computes
``-1`` at the position of the ``-1`` in ``shape`` even when ``-2``/``-4`` shifted the output
(``(2, 3, 4)`` with ``(-2, -1)`` gives ``(2, 1, 4, 1)``), and ``tile`` with a 0 in ``reps`` leaves
that dimension unknown. Checks that depend on the parameters alone (two free ``-1`` in a reshape,
a transpose ``axes`` that is not a permutation, a zero slice step...) are parameter errors, raised
when the node is made; MXNet raises them only at shape inference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Node, zeros_like
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    StypeRule,
    elemwise_shape,
    fixed_out_dtype,
    get_op,
    known,
    merge_shape,
    prod,
    register,
    same_dtype,
)
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, no_gradient, node_gradient, pass_through
from nnsym.ops.common.lowering import c_strides, copy_lowering, elem_dtype, strided_lowering
from nnsym.ops.common.storage import zeros_of_input_stype
from nnsym.types import DispatchMode, Shape, SType, shape_str

Dims = list[int | None]


def _merge(a: Shape | None, b: Shape | None, what: str) -> Shape | None:
    """``merge_shape`` with a message that says which two shapes disagree."""
    try:
        return merge_shape(a, b)
    except RuleError:
        raise RuleError(f"{what}: {shape_str(a)} and {shape_str(b)} disagree") from None


def _axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise RuleError(f"{what} {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % ndim


# ---------------------------------------------------------------------------------------------
# Dense kernels. Every operator here only moves (or converts) elements, so a few templates
# serve them all: a contiguous copy (views in add mode, BlockGrad, _copy), an N-d strided copy
# (transpose, SwapAxis, slice, slice_axis, tile), block copies (Concat, SliceChannel), Cast and
# a fill. The contiguous and strided copies are shared (``nnsym.ops.common.lowering``, templates
# ``common/shape_copy.c.j2`` and ``common/shape_strided.c.j2``); sizes, strides and offsets are
# run-time values; in write mode a kernel is built for an element width rather than a dtype, so
# one compiled kernel moves float32 and int32 alike.


def view_lowering(call: KernelCall) -> Lowered:
    """Reshape-like operators: the output is the input's memory (nothing runs); accumulating
    into an existing output is a real add."""
    if call.req == "write":
        return Lowered(views={0: 0})
    return copy_lowering(call)


# ---------------------------------------------------------------------------------------------
# Reshape


@dataclass(frozen=True, kw_only=True)
class ReshapeParams(Params):
    shape: tuple[int, ...] = field(
        default=(),
        doc="The target shape. Special values: 0 copies the input dimension, -1 infers one "
        "dimension, -2 copies all remaining input dimensions, -3 merges two input dimensions, "
        "-4 splits one input dimension into the next two values (one of which may be -1).",
    )
    reverse: bool = field(
        default=False, doc="If true then the special values are inferred from right to left."
    )
    target_shape: tuple[int, ...] = field(
        default=(),
        lower=0,
        doc="(Deprecated! Use ``shape`` instead.) Target new shape. One and only one dim can be "
        "0, in which case it will be inferred from the rest of dims.",
    )
    keep_highest: bool = field(
        default=False,
        doc="(Deprecated! Use ``shape`` instead.) Whether keep the highest dim unchanged. If set "
        "to true, then the first dim in target_shape is ignored, and always fixed as input.",
    )

    def __post_init__(self) -> None:
        _check_reshape_codes(self.shape, self.reverse)
        if not self.shape and self.keep_highest and not self.target_shape:
            raise ValueError("keep_highest=True needs a non-empty target_shape")


def _check_reshape_codes(shape: tuple[int, ...], reverse: bool) -> None:
    """The checks of MXNet's InferReshapeShape that depend on ``shape`` alone."""
    codes = shape[::-1] if reverse else shape
    order = " (reverse=True reads shape from right to left)" if reverse else ""
    free = False
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == -1:
            if free:
                raise ValueError(f"shape {shape}: only one dimension can be -1 (inferred)")
            free = True
        elif c == -4:
            if i + 2 >= len(codes):
                raise ValueError(
                    f"shape {shape}: -4 must be followed by the two dimensions to split into{order}"
                )
            d1, d2 = codes[i + 1], codes[i + 2]
            if d1 == -1 and d2 == -1:
                raise ValueError(f"shape {shape}: the split dimensions after -4 cannot both be -1")
            if not (d1 == -1 or d1 > 0) or not (d2 == -1 or d2 > 0):
                raise ValueError(
                    f"shape {shape}: the split dimensions after -4 must be positive or -1, "
                    f"got {d1}, {d2}{order}"
                )
            i += 2
        elif c < -4:
            raise ValueError(
                f"shape {shape}: {c} is neither a dimension nor a special value (0, -1, -2, -3, -4)"
            )
        i += 1


def reshape_target(shape: tuple[int, ...], dshape: Shape, reverse: bool) -> Shape:
    """MXNet's InferReshapeShape over partial knowledge (unknown input dims stay unknown)."""
    codes = shape[::-1] if reverse else shape
    src = dshape[::-1] if reverse else dshape
    n = len(src)
    out: Dims = []
    si = 0
    inf_idx = -1
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            if si >= n:
                raise RuleError(
                    f"shape {shape}: a 0 copies input dimension {si}, but the input "
                    f"{shape_str(dshape)} has {n} dimensions"
                )
            out.append(src[si])
            si += 1
        elif c == -1:
            inf_idx = i
            out.append(1)
            si += 1
        elif c == -2:
            out.extend(src[si:])
            si = max(si, n)
        elif c == -3:
            if si + 1 >= n:
                raise RuleError(
                    f"shape {shape}: -3 merges input dimensions {si} and {si + 1}, but the "
                    f"input {shape_str(dshape)} has {n} dimensions"
                )
            a, b = src[si], src[si + 1]
            out.append(None if a is None or b is None else a * b)
            si += 2
        elif c == -4:
            if si >= n:
                raise RuleError(
                    f"shape {shape}: -4 splits input dimension {si}, but the input "
                    f"{shape_str(dshape)} has {n} dimensions"
                )
            d0 = src[si]
            si += 1
            d1, d2 = codes[i + 1], codes[i + 2]
            i += 2
            if d0 is not None:
                if d1 == -1:
                    d1 = d0 // d2
                if d2 == -1:
                    d2 = d0 // d1
                if d1 * d2 != d0:
                    raise RuleError(
                        f"shape {shape}: split dimensions {d1}, {d2} do not divide input "
                        f"dimension {d0}"
                    )
            out.append(None if d1 == -1 else d1)
            out.append(None if d2 == -1 else d2)
        else:
            out.append(c)
            si += 1
        i += 1
    # NOTE: MXNet stores the inferred size at the -1's position in `shape`, not in the output;
    # after a -2 or -4 these differ, and MXNet (and so nnsym) writes a different dimension.
    if inf_idx >= 0:
        size = prod(dshape)
        if size is None:
            value = None
        else:
            rest = prod(out)
            assert rest is not None  # every output dim is known when the input is
            if rest == 0:
                raise RuleError(
                    f"shape {shape}: cannot infer the -1 dimension of a reshape of "
                    f"{shape_str(dshape)}: the other dimensions have size 0"
                )
            value = size // rest
        if inf_idx < len(out):
            out[inf_idx] = value
    return tuple(out[::-1] if reverse else out)


def _target_shape_path(p: ReshapeParams, dshape: Shape) -> Shape:
    """The deprecated ``target_shape``/``keep_highest`` form (also taken when ``shape=()``)."""
    o: Dims = list(p.target_shape)
    start = 0
    if p.keep_highest:
        if not dshape:
            raise RuleError("keep_highest=True needs an input with at least one dimension")
        o[0] = dshape[0]
        start = 1
    zeros = [i for i in range(start, len(o)) if o[i] == 0]
    if len(zeros) == 1:
        o[zeros[0]] = 1
        size, rest = prod(dshape), prod(o)
        o[zeros[0]] = None if size is None or rest is None or rest == 0 else size // rest
    return tuple(o)


def _fill_one_unknown(dshape: Shape, out: Shape | None) -> Shape:
    """MXNet's ReverseReshapeInferShape: one unknown input dim from a fully known output."""
    if out is None or not known(out):
        return dshape
    unknown = [i for i, d in enumerate(dshape) if d is None]
    if len(unknown) != 1:
        return dshape
    rest = prod([d for d in dshape if d is not None])
    size = prod(out)
    if not rest or size is None:
        return dshape
    filled = list(dshape)
    filled[unknown[0]] = size // rest
    return tuple(filled)


def reshape_shape(p: ReshapeParams, ins: list, outs: list) -> tuple[list, list]:
    dshape, out = ins[0], outs[0]
    if dshape is None:
        return list(ins), list(outs)  # MXNet infers nothing until the input's ndim is known
    if p.shape:
        oshape = reshape_target(p.shape, dshape, p.reverse)
    else:
        oshape = _target_shape_path(p, dshape)
    dshape = _fill_one_unknown(dshape, oshape)
    try:
        out = merge_shape(oshape, out)
    except RuleError:
        raise RuleError(
            f"Reshape of {shape_str(dshape)} with shape {p.shape} gives {shape_str(oshape)}, "
            f"but the output is {shape_str(out)}"
        ) from None
    return [_fill_one_unknown(dshape, out)], [out]


def _numpy_reshape_target(p: ReshapeParams, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The intended meaning of ``shape`` as a numpy target (numpy infers ``-1`` and checks size)."""
    if not p.shape:
        t = list(p.target_shape)
        start = 1 if p.keep_highest else 0
        if p.keep_highest:
            t[0] = shape[0]
        zeros = [i for i in range(start, len(t)) if t[i] == 0]
        if len(zeros) == 1:
            t[zeros[0]] = -1
        return tuple(t)
    codes = p.shape[::-1] if p.reverse else p.shape
    src = shape[::-1] if p.reverse else shape
    out: list[int] = []
    si = i = 0
    while i < len(codes):
        c = codes[i]
        if c == -2:
            out.extend(src[si:])
            si = len(src)
        elif c == -3:
            out.append(src[si] * src[si + 1])
            si += 2
        elif c == -4:
            d1, d2 = codes[i + 1], codes[i + 2]
            out += [src[si] // d2 if d1 == -1 else d1, src[si] // d1 if d2 == -1 else d2]
            si += 1
            i += 2
        else:
            out.append(src[si] if c == 0 else c)
            si += 1
        i += 1
    return tuple(out[::-1] if p.reverse else out)


def reshape_reference(p: ReshapeParams, data: np.ndarray) -> np.ndarray:
    return data.reshape(_numpy_reshape_target(p, data.shape))


def backward_reshape_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """(ograd, data) -> data grad shaped as the forward data; the data is read for its shape."""
    like = ins[1] if ins[1] is not None else outs[0]
    return [ins[0], like], [like]


BACKWARD_RESHAPE = register(
    OpDef(
        name="_backward_reshape",
        inputs=("ograd", "data"),
        outputs=("data_grad",),
        infer_shape=backward_reshape_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        inplace_identity=True,
        ignore_inputs=(1,),
        kernels={DENSE: Kernel(view_lowering)},
        differentiable=False,
        doc="Gradient of the reshape-like operators: the output gradient in the input's shape.",
    )
)


reshape_grad = node_gradient(BACKWARD_RESHAPE, lambda n: n.inputs[:1])


def _shape_only_backward(name: str, params: Any, lower: Any, doc: str) -> OpDef:
    """``_backward_<name>(ograd, data) -> data grad``, the data read for its shape/dtype only."""
    return register(
        OpDef(
            name=f"_backward_{name}",
            params=params,
            inputs=("ograd", "data"),
            outputs=("data_grad",),
            infer_shape=backward_reshape_shape,
            infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
            ignore_inputs=(1,),
            kernels={DENSE: Kernel(lower)},
            differentiable=False,
            doc=doc,
        )
    )


def _with_data(op: OpDef) -> Any:
    return node_gradient(op, lambda n: n.inputs[:1])


RESHAPE = register(
    OpDef(
        name="Reshape",
        aliases=("reshape",),
        params=ReshapeParams,
        infer_shape=reshape_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        inplace_identity=True,
        reference=reshape_reference,
        kernels={DENSE: Kernel(view_lowering)},
        grad=reshape_grad,
        doc="Reshapes the input array, with MXNet's special values 0, -1, -2, -3 and -4.",
        examples=(
            Example(((2, 3, 4),), {"shape": (4, 0, 2)}),
            Example(((2, 3, 4),), {"shape": (6, 1, -1)}),
            Example(((2, 3, 4),), {"shape": (-1,)}, dtype="float64"),
            Example(((2, 3, 4),), {"shape": (-2, 1, 1)}, dtype="int32"),
            Example(((2, 3, 4, 5),), {"shape": (-3, -3)}),
            Example(((2, 3, 4),), {"shape": (-4, 1, 2, -2)}),
            Example(((2, 6, 4),), {"shape": (0, -4, 3, -1, 0)}),
            Example(((10, 5, 4),), {"shape": (-1, 0), "reverse": True}),
            Example(((2, 3, 4, 5),), {"shape": (-1, 0, 0), "reverse": True}, dtype="int32"),
            Example(((2, 3, 4),), {"target_shape": (6, 0)}),
            Example(((2, 3, 4),), {"target_shape": (4, 0), "keep_highest": True}),
            Example(((1,),), {}),
        ),
        bad_params=(
            {"shape": (-1, -1)},
            {"shape": (-4, -1, -1, 0)},
            {"shape": (-4, 2)},
            {"shape": (0, -4, 1, -1, 0), "reverse": True},
            {"shape": (-4, 0, -1)},
            {"shape": (-5,)},
            {"target_shape": (-1, 4)},
            {"keep_highest": True},
            {"shape": "(2, x)"},
            {"shap": (2, 3)},
        ),
    )
)


# ---------------------------------------------------------------------------------------------
# Flatten


def flatten_shape(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    if d is None:
        return list(ins), list(outs)
    if not d:
        raise RuleError("Flatten needs an input with at least one dimension")
    if o is not None and len(o) == 2 and d[0] is None:
        d = (o[0], *d[1:])  # the batch dimension passes through unchanged
    return [d], [(d[0], prod(d[1:]))]


FLATTEN = register(
    OpDef(
        name="Flatten",
        aliases=("flatten",),
        infer_shape=flatten_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        inplace_identity=True,
        reference=lambda p, data: data.reshape(data.shape[0], -1),
        kernels={DENSE: Kernel(view_lowering)},
        grad=reshape_grad,
        doc="Flattens the input to 2-D, keeping the first dimension: (d0, d1*...*dk).",
        examples=(
            Example(((2, 3, 4),)),
            Example(((2, 3, 4, 5),), dtype="float64"),
            Example(((5,),), dtype="int32"),
            Example(((2, 3),)),
        ),
        bad_params=({"axis": 1},),
    )
)


# ---------------------------------------------------------------------------------------------
# transpose and SwapAxis


def _permute(d: Shape | None, o: Shape | None, perm: Sequence[int]) -> tuple[Shape, Shape]:
    """``out[i] = in[perm[i]]``, inferred in both directions."""
    if o is not None:
        back: Dims = [None] * len(perm)
        for i, a in enumerate(perm):
            back[a] = o[i]
        d = _merge(d, tuple(back), "the input and the permuted output")
    assert d is not None
    return d, tuple(d[a] for a in perm)


def _ndim_of(d: Shape | None, o: Shape | None) -> int | None:
    if d is not None and o is not None and len(d) != len(o):
        raise RuleError(
            f"input {shape_str(d)} and output {shape_str(o)} have different numbers of dimensions"
        )
    s = d if d is not None else o
    return None if s is None else len(s)


@dataclass(frozen=True, kw_only=True)
class TransposeParams(Params):
    axes: tuple[int, ...] = field(
        default=(), doc="Target axis order. By default the axes will be inverted."
    )

    def __post_init__(self) -> None:
        if self.axes and sorted(self.axes) != list(range(len(self.axes))):
            raise ValueError(
                f"axes {self.axes} is not a permutation of 0..{len(self.axes) - 1} "
                "(negative axes are not accepted)"
            )


def transpose_shape(p: TransposeParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    nd = _ndim_of(d, o)
    if nd is None:
        return list(ins), list(outs)
    if nd == 0:
        raise RuleError("transpose needs an input with at least one dimension")
    if nd > 6:
        raise RuleError(f"transpose supports at most 6 dimensions, got {nd}")
    axes = p.axes or tuple(range(nd - 1, -1, -1))
    if len(axes) != nd:
        raise RuleError(f"axes {p.axes} has {len(axes)} entries for an input of {nd} dimensions")
    d, o = _permute(d, o, axes)
    return [d], [o]


def transpose_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[0]
    axes = call.params.axes or tuple(range(len(shape) - 1, -1, -1))
    st = c_strides(shape)
    return strided_lowering(call, [shape[a] for a in axes], [st[a] for a in axes], 0)


TRANSPOSE = register(
    OpDef(
        name="transpose",
        params=TransposeParams,
        infer_shape=transpose_shape,
        infer_type=same_dtype,
        reference=lambda p, data: np.transpose(data, p.axes or None),
        kernels={DENSE: Kernel(transpose_lowering)},
        grad=lambda node, ograds: [_transposed(node, ograds[0], inverse_axes(node.params.axes))],
        doc="Permutes the dimensions of the input (reverses them by default).",
        examples=(
            Example(((2, 3, 4),)),
            Example(((2, 3, 4),), {"axes": (1, 0, 2)}, dtype="float64"),
            Example(((2, 3, 4, 5),), {"axes": (0, 2, 3, 1)}, dtype="int32"),
            Example(((3,),), {"axes": (0,)}),
        ),
        bad_params=({"axes": (0, -1, 1)}, {"axes": (0, 0, 1)}, {"axes": (1, 2)}, {"axis": 0}),
    )
)


def inverse_axes(axes: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation undoing ``axes`` (``()``, reversal, is its own inverse)."""
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


def _transposed(node: Node, g: Entry | None, axes: tuple[int, ...]) -> Entry:
    """Transpose's gradient: the output gradient transposed back (a transpose node)."""
    assert g is not None
    op = get_op("transpose")
    params, _ = op.parse_params({"axes": axes})
    attrs = MappingProxyType({"axes": str(axes)} if axes else {})
    return Entry(Node(op, f"{node.name}_backward", params, (g,), attrs, (node,)), 0)


def _swapped(node: Node, g: Entry | None) -> Entry:
    """SwapAxis is its own inverse: its gradient swaps the same two axes back."""
    assert g is not None
    return Entry(backward_node(get_op("SwapAxis"), node, [g]), 0)


@dataclass(frozen=True, kw_only=True)
class SwapAxisParams(Params):
    dim1: int = field(default=0, doc="the first axis to be swapped.")
    dim2: int = field(default=0, doc="the second axis to be swapped.")


def swapaxis_shape(p: SwapAxisParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    nd = _ndim_of(d, o)
    if nd is None:
        return list(ins), list(outs)
    a1 = _axis(p.dim1, nd, "dim1")
    a2 = _axis(p.dim2, nd, "dim2")
    perm = list(range(nd))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    d, o = _permute(d, o, perm)
    return [d], [o]


def swapaxis_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[0]
    perm = list(range(len(shape)))
    a1, a2 = call.params.dim1 % len(shape), call.params.dim2 % len(shape)
    perm[a1], perm[a2] = perm[a2], perm[a1]
    st = c_strides(shape)
    return strided_lowering(call, [shape[a] for a in perm], [st[a] for a in perm], 0)


SWAPAXIS = register(
    OpDef(
        name="SwapAxis",
        aliases=("swapaxes",),
        params=SwapAxisParams,
        infer_shape=swapaxis_shape,
        infer_type=same_dtype,
        reference=lambda p, data: np.swapaxes(data, p.dim1, p.dim2),
        kernels={DENSE: Kernel(swapaxis_lowering)},
        grad=lambda node, ograds: [_swapped(node, ograds[0])],
        doc="Interchanges two axes of the input.",
        examples=(
            Example(((2, 3, 4),), {"dim1": 0, "dim2": 2}),
            Example(((2, 3, 4, 5),), {"dim1": 1, "dim2": 3}, dtype="float64"),
            Example(((2, 3, 4),), {"dim1": 0, "dim2": -1}, dtype="int32"),
            Example(((2, 3),)),
        ),
        bad_params=({"dim1": "a"}, {"dim1": 1.5}, {"axis1": 0}),
    )
)


# ---------------------------------------------------------------------------------------------
# expand_dims and squeeze


@dataclass(frozen=True, kw_only=True)
class ExpandDimsParams(Params):
    axis: int = field(
        doc="Position where new axis is to be inserted. Suppose that the input `NDArray`'s "
        "dimension is `ndim`, the range of the inserted axis is `[-ndim, ndim]`"
    )


def expand_dims_shape(p: ExpandDimsParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    if d is None and o is None:
        return list(ins), list(outs)
    indim = len(d) if d is not None else len(o) - 1
    if o is not None and len(o) != indim + 1:
        raise RuleError(
            f"expand_dims of {shape_str(d)} cannot give {shape_str(o)}: the output has one "
            "more dimension than the input"
        )
    axis = p.axis + indim + 1 if p.axis < 0 else p.axis
    if not 0 <= axis <= indim:
        raise RuleError(f"axis {p.axis} is out of the range [{-indim - 1}, {indim}]")
    if o is not None:
        d = _merge(d, o[:axis] + o[axis + 1 :], "the input and the output without the new axis")
    assert d is not None
    return [d], [(*d[:axis], 1, *d[axis:])]


EXPAND_DIMS = register(
    OpDef(
        name="expand_dims",
        params=ExpandDimsParams,
        infer_shape=expand_dims_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        inplace_identity=True,
        reference=lambda p, data: np.expand_dims(data, p.axis),
        kernels={DENSE: Kernel(view_lowering)},
        grad=reshape_grad,
        doc="Inserts a new axis of size 1 at position ``axis``.",
        examples=(
            Example(((2, 3),), {"axis": 0}),
            Example(((2, 3),), {"axis": 2}, dtype="float64"),
            Example(((2, 3),), {"axis": -1}, dtype="int32"),
            Example(((2, 3),), {"axis": -3}),
        ),
        bad_params=({}, {"axis": None}, {"axis": (0, 1)}),
    )
)


@dataclass(frozen=True, kw_only=True)
class SqueezeParams(Params):
    axis: tuple[int, ...] | None = field(
        default=None,
        doc="Selects a subset of the single-dimensional entries in the shape. If an axis is "
        "selected with shape entry greater than one, an error is raised.",
    )

    def __post_init__(self) -> None:
        if self.axis is not None and len(set(self.axis)) != len(self.axis):
            raise ValueError(f"duplicate value in axis {self.axis}")


def squeeze_shape(p: SqueezeParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    if d is None:
        return list(ins), list(outs)
    nd = len(d)
    if p.axis is None:
        if not known(d):
            return list(ins), list(outs)  # which dimensions are 1 is not known yet
        drop = {i for i, x in enumerate(d) if x == 1}
    else:
        drop = set()
        for a in p.axis:
            i = _axis(a, nd)
            if i in drop:
                raise RuleError(f"duplicate value in axis {p.axis} for {nd} dimensions")
            if d[i] is not None and d[i] != 1:
                raise RuleError(
                    f"cannot squeeze out axis {a} of {shape_str(d)}: its size is {d[i]}, not 1"
                )
            drop.add(i)
        d = tuple(1 if i in drop else x for i, x in enumerate(d))
    kept = [i for i in range(nd) if i not in drop]
    if not kept:
        return [d], [(1,)]  # MXNet keeps at least one dimension
    if o is not None and len(o) == len(kept):
        filled = list(d)
        for j, i in enumerate(kept):
            filled[i] = o[j]
        d = _merge(d, tuple(filled), "the input and the squeezed output")
        assert d is not None
    return [d], [tuple(d[i] for i in kept)]


def squeeze_reference(p: SqueezeParams, data: np.ndarray) -> np.ndarray:
    r = np.squeeze(data, axis=p.axis)
    return r.reshape(1) if r.ndim == 0 else r


SQUEEZE = register(
    OpDef(
        name="squeeze",
        params=SqueezeParams,
        infer_shape=squeeze_shape,
        infer_type=same_dtype,
        reference=squeeze_reference,
        kernels={DENSE: Kernel(view_lowering)},
        grad=reshape_grad,
        doc="Removes axes of size 1 (all of them, or those in ``axis``); keeps at least one.",
        examples=(
            Example(((1, 3, 1),)),
            Example(((1, 3, 1),), {"axis": 0}, dtype="float64"),
            Example(((1, 3, 1),), {"axis": (0, 2)}, dtype="int32"),
            Example(((1, 3, 1),), {"axis": -1}),
            Example(((1, 1),)),
            Example(((1, 1),), {"axis": (0, 1)}),
            Example(((2, 3),), {"axis": ()}),
        ),
        bad_params=({"axis": (0, 0)}, {"axis": "x"}, {"axes": 0}),
    )
)


# ---------------------------------------------------------------------------------------------
# Concat and SliceChannel


@dataclass(frozen=True, kw_only=True)
class ConcatParams(Params):
    num_args: int = field(lower=1, doc="Number of inputs to be concated.")
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


# ---------------------------------------------------------------------------------------------
# Cast and the copy-like operators

CAST_DTYPES = ("bool", "float16", "float32", "float64", "int32", "int64", "int8", "uint8")


@dataclass(frozen=True, kw_only=True)
class CastParams(Params):
    dtype: str = field(kind="dtype", choices=CAST_DTYPES, doc="Output data type.")


def cast_lowering(call: KernelCall) -> Lowered:
    src, dst = call.in_dtypes[0], call.out_dtypes[0]
    if src == dst:
        return copy_lowering(call)
    n = size(call.out_shapes[0])
    if n == 0:
        return Lowered()
    spec = KernelSpec.make("shape/shape_cast.c.j2", in_dtype=src.name, out_dtype=dst.name,
                           req=call.req)
    return Lowered((Launch(spec, (n,)),))


def cast_backward_lowering(call: KernelCall) -> Lowered:
    """The output gradient cast back to the input's dtype: Cast's kernel on (ograd, dx)."""
    inner = dataclasses.replace(call, in_shapes=call.in_shapes[:1], in_dtypes=call.in_dtypes[:1],
                                req=call.out_req(0), reqs=None)
    low = cast_lowering(inner)
    return Lowered(tuple(dataclasses.replace(ln, args=(0, 2)) for ln in low.launches))


BACKWARD_CAST = _shape_only_backward(
    "Cast", CastParams, cast_backward_lowering,
    "Gradient of Cast: the output gradient cast back to the input's dtype.")

CAST = register(
    OpDef(
        name="Cast",
        aliases=("cast",),
        params=CastParams,
        infer_shape=elemwise_shape,
        infer_type=fixed_out_dtype(lambda p: p.dtype),
        inplace=((0, 0),),
        inplace_identity=True,
        expr="x",
        reference=lambda p, data: data.astype(p.dtype),
        kernels={DENSE: Kernel(cast_lowering)},
        grad=_with_data(BACKWARD_CAST),
        doc="Casts every element to ``dtype``.",
        examples=(
            Example(((2, 3),), {"dtype": "float16"}),
            Example(((2, 3),), {"dtype": "int32"}, dtype="float64"),
            Example(((2, 3),), {"dtype": "float32"}, dtype="int32"),
            Example(((2, 3),), {"dtype": "uint8"}, low=0, high=100),
            Example(((4,),), {"dtype": "float64"}),
            Example(((2, 2),), {"dtype": "int8"}, dtype="float64"),
        ),
        bad_params=({}, {"dtype": "float8"}, {"dtype": "complex64"}, {"dtype": "int16"}),
    )
)


def fill_lowering(value: int) -> Kernel:
    """zeros_like / ones_like: the output filled with ``value`` (the input is not read)."""

    def lower(call: KernelCall) -> Lowered:
        n = size(call.out_shapes[0])
        if n == 0:
            return Lowered()
        spec = KernelSpec.make(
            "shape/shape_fill.c.j2", dtype=call.out_dtypes[0].name, req=call.req, value=value
        )
        return Lowered((Launch(spec, (n,)),))

    return Kernel(lower)


def _copy_like(name: str, expr: str, reference, doc: str, **kw) -> OpDef:  # type: ignore[no-untyped-def]
    return register(
        OpDef(
            name=name,
            infer_shape=elemwise_shape,
            infer_type=same_dtype,
            expr=expr,
            reference=reference,
            doc=doc,
            examples=(
                Example(((2, 3),)),
                Example(((4,),), dtype="float64"),
                Example(((2, 3, 4),), dtype="int32"),
            ),
            bad_params=({"value": 1},),
            **kw,
        )
    )


ZEROS_LIKE = _copy_like(
    "zeros_like",
    "0",
    lambda p, x: np.zeros_like(x),
    "An array of zeros shaped like the input.",
    kernels={DENSE: fill_lowering(0)},
    stype_rules=tuple(StypeRule((st,), ("in0",), DispatchMode.FCOMPUTE_EX,
                                kernel=zeros_of_input_stype)
                      for st in (SType.ROW_SPARSE, SType.CSR)),
    grad=no_gradient,
    ignore_inputs=(0,),
    sparse=True,
)
ONES_LIKE = _copy_like(
    "ones_like",
    "1",
    lambda p, x: np.ones_like(x),
    "An array of ones shaped like the input.",
    kernels={DENSE: fill_lowering(1)},
    grad=no_gradient,
    ignore_inputs=(0,),
)
# NOTE: BlockGrad's gradient is zero by definition, so a numeric gradient check does not apply.
BLOCK_GRAD = _copy_like(
    "BlockGrad",
    "x",
    lambda p, x: x.copy(),
    "Passes the input through and stops the gradient from flowing back.",
    aliases=("stop_gradient",),
    sparse=True,
    inplace=((0, 0),),
    inplace_identity=True,
    differentiable=False,
    grad=no_gradient,
    kernels={DENSE: Kernel(copy_lowering)},
)
COPY = _copy_like(
    "_copy",
    "x",
    lambda p, x: x.copy(),
    "Returns a copy of the input.",
    aliases=("identity",),
    kernels={DENSE: Kernel(copy_lowering)},
    grad=pass_through,
    inplace=((0, 0),),
    inplace_identity=True,
)
