"""Reshape, Flatten, expand_dims and squeeze: the input's memory under a new shape.

Reshape checks that the output has the input's number of elements (shape inference raises
otherwise) and infers ``-1`` at the output dimension it stands for. MXNet 1.9.1 does neither:
it writes the inferred size at the ``-1``'s position in ``shape`` even when ``-2``/``-4`` shifted
the output (``(2, 3, 4)`` with ``(-2, -1)`` gives ``(2, 1, 4, 1)``), and binds a graph whose
reshape has another element count, reading or writing past the input's memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    known,
    merge_shape,
    prod,
    register,
    same_dtype,
)
from nnsym.ir.params import NoParams, Params, field
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.shape.helpers import Dims, _axis, _merge, backward_reshape_shape, view_lowering
from nnsym.types import Shape, shape_str

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
    inf_idx = -1  # the output dimension the -1 stands for
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
            inf_idx = len(out)
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
    # after a -2 or -4 these differ, and MXNet writes a different dimension (then reads past
    # the input). nnsym infers the dimension the -1 stands for.
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
            if size % rest:
                raise RuleError(
                    f"shape {shape}: cannot infer the -1 dimension of a reshape of "
                    f"{shape_str(dshape)}: its {size} elements are not a whole number of "
                    f"times {rest}, the size of the other dimensions"
                )
            value = size // rest
        out[inf_idx] = value
    return tuple(out[::-1] if reverse else out)


def _check_size(p: ReshapeParams, dshape: Shape, oshape: Shape | None) -> None:
    """The output must hold as many elements as the input (where both are known)."""
    if oshape is None:
        return
    n_in, n_out = prod(dshape), prod(oshape)
    if n_in is not None and n_out is not None and n_in != n_out:
        target = f"target_shape {p.target_shape}" if p.target_shape and not p.shape \
            else f"shape {p.shape}"
        raise RuleError(
            f"cannot reshape {shape_str(dshape)} ({n_in} elements) with {target}: the result "
            f"{shape_str(oshape)} has {n_out} elements"
        )


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
        if size is not None and rest and size % rest:
            raise RuleError(
                f"target_shape {p.target_shape}: the input {shape_str(dshape)} ({size} "
                f"elements) is not a whole number of times {rest}, the other dimensions' size"
            )
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
    if size % rest:
        raise RuleError(
            f"the reshape's output {shape_str(out)} ({size} elements) is not a whole number of "
            f"times the input's known dimensions {shape_str(dshape)} ({rest} elements)"
        )
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
    _check_size(p, dshape, oshape)
    dshape = _fill_one_unknown(dshape, oshape)
    try:
        out = merge_shape(oshape, out)
    except RuleError:
        raise RuleError(
            f"Reshape of {shape_str(dshape)} with shape {p.shape} gives {shape_str(oshape)}, "
            f"but the output is {shape_str(out)}"
        ) from None
    dshape = _fill_one_unknown(dshape, out)
    _check_size(p, dshape, out)
    return [dshape], [out]


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
