"""broadcast_like, reshape_like, slice_like, shape_array and size_array: operators that take
(part of) a shape from a second input, or return the input's shape.

The second input of the ``*_like`` operators is read for its shape only and gets no gradient
(MXNet gives it zeros). broadcast_like and slice_like are strided copies (their gradients the
scatter-add back: a sum over the broadcast axes, the gradient in the slice's place);
reshape_like is a view; shape_array and size_array write int64 values known at bind time
(``shape_values.c.j2``) and have no gradient.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    fixed_out_dtype,
    register,
)
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.common.lowering import c_strides, strided_lowering
from nnsym.ops.shape.helpers import (
    Dims,
    _axis,
    _shape_only_backward,
    _with_data,
    view_lowering,
)
from nnsym.ops.shape.reshape import reshape_grad
from nnsym.ops.shape.slicing import scatter_add_lowering
from nnsym.types import shape_str


def lhs_dtype(p: object, ins: list, outs: list) -> tuple[list, list]:
    """The output has the first input's dtype; the second input's is its own (shape only)."""
    t = ins[0] if ins[0] is not None else outs[0]
    return [t, ins[1]], [t]


def _skip_like(low: Lowered) -> Lowered:
    """A copy from the first input into the output: p = [lhs, rhs (shape only), out]."""
    return Lowered(tuple(dataclasses.replace(ln, args=(0, 2)) for ln in low.launches))


# ---------------------------------------------------------------------------------------------
# broadcast_like


@dataclass(frozen=True, kw_only=True)
class BroadcastLikeParams(Params):
    lhs_axes: tuple[int, ...] | None = field(
        default=None, doc="Axes to perform broadcast on in the first input array"
    )
    rhs_axes: tuple[int, ...] | None = field(
        default=None, doc="Axes to copy from the second input array"
    )

    def __post_init__(self) -> None:
        if (self.lhs_axes is None) != (self.rhs_axes is None) or (
            self.lhs_axes is not None and len(self.lhs_axes) != len(self.rhs_axes or ())
        ):
            raise ValueError(
                f"lhs_axes {self.lhs_axes} and rhs_axes {self.rhs_axes} must be given together, "
                "with the same number of axes"
            )


def broadcast_like_shape(p: BroadcastLikeParams, ins: list, outs: list) -> tuple[list, list]:
    lhs, rhs = ins
    if lhs is None or rhs is None:
        return list(ins), list(outs)
    if p.lhs_axes is None:
        if len(lhs) != len(rhs):
            raise RuleError(f"operand of shape {shape_str(lhs)} cannot be broadcast to "
                            f"{shape_str(rhs)}")
        out: Dims = []
        for x, y in zip(lhs, rhs):
            if x is not None and y is not None and x not in (1, y):
                raise RuleError(f"operand of shape {shape_str(lhs)} cannot be broadcast to "
                                f"{shape_str(rhs)}")
            out.append(x if y is None else y)
        return list(ins), [tuple(out)]
    out = list(lhs)
    for la, ra in zip(p.lhs_axes, p.rhs_axes or ()):
        i = _axis(la, len(lhs), "lhs_axes entry")
        j = _axis(ra, len(rhs), "rhs_axes entry")
        if lhs[i] is not None and lhs[i] != 1:
            raise RuleError(f"axis {la} of {shape_str(lhs)} has size {lhs[i]}: only an axis of "
                            "size 1 can be broadcast")
        out[i] = rhs[j]
    return list(ins), [tuple(out)]


def _broadcast_strides(lhs: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    return [0 if x != y else s for x, y, s in zip(lhs, out, c_strides(lhs))]


def broadcast_like_lowering(call: KernelCall) -> Lowered:
    lhs, out = call.in_shapes[0], call.out_shapes[0]
    return _skip_like(strided_lowering(call, out, _broadcast_strides(lhs, out), 0))


def broadcast_like_backward_lowering(call: KernelCall) -> Lowered:
    """The output gradient summed over the broadcast axes."""
    g, lhs = call.in_shapes
    return scatter_add_lowering(call, g, _broadcast_strides(lhs, g), 0)


def broadcast_like_reference(p: BroadcastLikeParams, lhs: np.ndarray,
                             rhs: np.ndarray) -> np.ndarray:
    if p.lhs_axes is None:
        shape = rhs.shape
    else:
        out = list(lhs.shape)
        for la, ra in zip(p.lhs_axes, p.rhs_axes or ()):
            out[la] = rhs.shape[ra]
        shape = tuple(out)
    return np.ascontiguousarray(np.broadcast_to(lhs, shape))


BACKWARD_BROADCAST_LIKE = _shape_only_backward(
    "broadcast_like", BroadcastLikeParams, broadcast_like_backward_lowering,
    "Gradient of broadcast_like: the output gradient summed over the broadcast axes.")

BROADCAST_LIKE = register(
    OpDef(
        name="broadcast_like",
        params=BroadcastLikeParams,
        inputs=("lhs", "rhs"),
        infer_shape=broadcast_like_shape,
        infer_type=lhs_dtype,
        ignore_inputs=(1,),
        reference=broadcast_like_reference,
        kernels={DENSE: Kernel(broadcast_like_lowering)},
        grad=_with_data(BACKWARD_BROADCAST_LIKE),
        doc="Broadcasts the first input to the second's shape (or along ``lhs_axes`` to the "
        "sizes of the second's ``rhs_axes``).",
        examples=(
            Example(((1, 3), (4, 3))),
            Example(((2, 1, 1), (2, 3, 4)), dtype="float64"),
            Example(((1, 3), (4, 3, 5)), {"lhs_axes": (0,), "rhs_axes": (2,)}, dtype="int32"),
            Example(((2, 1, 3), (5, 4)), {"lhs_axes": (-2,), "rhs_axes": (0,)}),
            Example(((2, 3), (2, 3))),
        ),
        bad_params=({"lhs_axes": (0,)}, {"lhs_axes": (0,), "rhs_axes": (0, 1)}, {"axis": 0}),
    )
)


# ---------------------------------------------------------------------------------------------
# reshape_like


@dataclass(frozen=True, kw_only=True)
class ReshapeLikeParams(Params):
    lhs_begin: int | None = field(
        default=None,
        doc="Defaults to 0. The beginning index along which the lhs dimensions are to be "
        "reshaped. Supports negative indices.",
    )
    lhs_end: int | None = field(
        default=None,
        doc="Defaults to None. The ending index along which the lhs dimensions are to be used "
        "for reshaping. Supports negative indices.",
    )
    rhs_begin: int | None = field(
        default=None,
        doc="Defaults to 0. The beginning index along which the rhs dimensions are to be used "
        "for reshaping. Supports negative indices.",
    )
    rhs_end: int | None = field(
        default=None,
        doc="Defaults to None. The ending index along which the rhs dimensions are to be used "
        "for reshaping. Supports negative indices.",
    )


def _range(begin: int | None, end: int | None, nd: int, what: str) -> tuple[int, int]:
    """MXNet's ReshapeLikeRangeCanonicalize: [begin, end) of ``nd`` dims, negatives counted
    from the back."""
    b = 0 if begin is None else begin + nd if begin < 0 else begin
    e = nd if end is None else end + nd if end < 0 else end
    if not (0 <= b <= nd and 0 <= e <= nd and b < e):
        raise RuleError(f"invalid {what} range begin={begin}, end={end} for {nd} dimensions")
    return b, e


def reshape_like_target(p: ReshapeLikeParams, lhs: tuple, rhs: tuple) -> tuple:
    lb, le = _range(p.lhs_begin, p.lhs_end, len(lhs), "lhs")
    rb, re_ = _range(p.rhs_begin, p.rhs_end, len(rhs), "rhs")
    return (*lhs[:lb], *rhs[rb:re_], *lhs[le:])


def reshape_like_shape(p: ReshapeLikeParams, ins: list, outs: list) -> tuple[list, list]:
    lhs, rhs = ins
    if lhs is None or rhs is None:
        return list(ins), list(outs)
    out = reshape_like_target(p, lhs, rhs)
    if all(x is not None for x in (*lhs, *out)):
        n_in, n_out = int(np.prod(lhs, dtype=np.int64)), int(np.prod(out, dtype=np.int64))
        if n_in != n_out:
            raise RuleError(f"cannot reshape {shape_str(lhs)} ({n_in} elements) into "
                            f"{shape_str(out)} ({n_out} elements)")
    return list(ins), [out]


def reshape_like_lowering(call: KernelCall) -> Lowered:
    """A view of the first input; accumulating into an existing output adds it (no rhs)."""
    low = view_lowering(call)
    return low if call.req == "write" else _skip_like(low)


RESHAPE_LIKE = register(
    OpDef(
        name="reshape_like",
        params=ReshapeLikeParams,
        inputs=("lhs", "rhs"),
        infer_shape=reshape_like_shape,
        infer_type=lhs_dtype,
        inplace=((0, 0),),
        inplace_identity=True,
        ignore_inputs=(1,),
        reference=lambda p, lhs, rhs: lhs.reshape(reshape_like_target(p, lhs.shape, rhs.shape)),
        kernels={DENSE: Kernel(reshape_like_lowering)},
        grad=reshape_grad,
        doc="Reshapes the first input's dims [lhs_begin, lhs_end) to the second input's dims "
        "[rhs_begin, rhs_end) (by default the whole shape).",
        examples=(
            Example(((2, 3), (3, 2))),
            Example(((2, 6), (5, 2, 3, 7)), {"lhs_begin": 1, "rhs_begin": 1, "rhs_end": 3},
                    dtype="float64"),
            Example(((2, 6), (5, 2, 3, 7)), {"lhs_begin": -1, "rhs_begin": 1, "rhs_end": -1},
                    dtype="int32"),
            Example(((4, 3, 2), (2, 2)), {"lhs_end": 1}),
        ),
        bad_params=({"lhs_begin": "x"}, {"begin": 0}),
    )
)


# ---------------------------------------------------------------------------------------------
# slice_like


@dataclass(frozen=True, kw_only=True)
class SliceLikeParams(Params):
    axes: tuple[int, ...] = field(
        default=(),
        doc="List of axes on which input data will be sliced according to the corresponding "
        "size of the second input. By default will slice on all axes. Negative axes are "
        "supported.",
    )


def slice_like_shape(p: SliceLikeParams, ins: list, outs: list) -> tuple[list, list]:
    d, like = ins
    if d is None or like is None:
        return list(ins), list(outs)
    if not p.axes:
        if len(d) != len(like):
            raise RuleError(f"slice_like of {shape_str(d)} to {shape_str(like)}: the shapes "
                            "must have the same number of dimensions when axes is empty")
        axes = list(range(len(d)))
    else:
        axes = [_axis(a, len(d)) for a in p.axes]
    out = list(d)
    for i in axes:
        if i >= len(like):
            raise RuleError(f"axis {i} is out of bounds for the shape_like input "
                            f"{shape_str(like)}")
        x, y = d[i], like[i]
        if x is not None and y is not None and x < y:
            raise RuleError(f"slice_like: axis {i} of {shape_str(d)} ({x}) is shorter than "
                            f"that of {shape_str(like)} ({y})")
        out[i] = y
    return list(ins), [tuple(out)]


def slice_like_lowering(call: KernelCall) -> Lowered:
    return _skip_like(
        strided_lowering(call, call.out_shapes[0], c_strides(call.in_shapes[0]), 0)
    )


def slice_like_backward_lowering(call: KernelCall) -> Lowered:
    """The output gradient at the slice's place, zeros elsewhere."""
    g, shape = call.in_shapes
    return scatter_add_lowering(call, g, c_strides(shape), 0)


def slice_like_reference(p: SliceLikeParams, data: np.ndarray, like: np.ndarray) -> np.ndarray:
    axes = [a % data.ndim for a in p.axes] if p.axes else range(data.ndim)
    index = [slice(None)] * data.ndim
    for i in axes:
        index[i] = slice(0, like.shape[i])
    return np.ascontiguousarray(data[tuple(index)])


BACKWARD_SLICE_LIKE = _shape_only_backward(
    "slice_like", SliceLikeParams, slice_like_backward_lowering,
    "Gradient of slice_like: the output gradient in its place, zeros elsewhere.")

SLICE_LIKE = register(
    OpDef(
        name="slice_like",
        params=SliceLikeParams,
        inputs=("data", "shape_like"),
        infer_shape=slice_like_shape,
        infer_type=lhs_dtype,
        ignore_inputs=(1,),
        reference=slice_like_reference,
        kernels={DENSE: Kernel(slice_like_lowering)},
        grad=_with_data(BACKWARD_SLICE_LIKE),
        doc="Slices the first input to the second input's size along ``axes`` (all by "
        "default), from the start of each axis.",
        examples=(
            Example(((4, 5), (2, 3))),
            Example(((4, 5), (2, 3)), {"axes": (1,)}, dtype="float64"),
            Example(((4, 5, 6), (3, 5, 2)), {"axes": (0, -1)}, dtype="int32"),
            Example(((4, 5), (4, 5))),
        ),
        bad_params=({"axes": "x"}, {"axis": (0,)}),
    )
)


# ---------------------------------------------------------------------------------------------
# shape_array and size_array


def _values_lowering(values_of):  # type: ignore[no-untyped-def]
    def lower(call: KernelCall) -> Lowered:
        values = values_of(call.in_shapes[0])
        spec = KernelSpec.make("shape/shape_values.c.j2", dtype="int64", req=call.req)
        return Lowered((Launch(spec, (len(values), *values)),))

    return Kernel(lower)


def shape_array_shape(p: object, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    return list(ins), [(None,) if d is None else (len(d),)]  # 1-D even before the input's known


def size_array_shape(p: object, ins: list, outs: list) -> tuple[list, list]:
    return list(ins), [(1,)]


_INT64 = fixed_out_dtype(lambda p: np.dtype("int64"))

SHAPE_ARRAY = register(
    OpDef(
        name="shape_array",
        params=NoParams,
        infer_shape=shape_array_shape,
        infer_type=_INT64,
        ignore_inputs=(0,),
        reference=lambda p, data: np.array(data.shape, dtype=np.int64),
        kernels={DENSE: _values_lowering(tuple)},
        grad=no_gradient,
        differentiable=False,
        doc="Returns the input's shape as a 1-D int64 array.",
        examples=(
            Example(((2, 3),)),
            Example(((4, 1, 5),), dtype="float64"),
            Example(((7,),), dtype="int32"),
        ),
        bad_params=({"axis": 0},),
    )
)

SIZE_ARRAY = register(
    OpDef(
        name="size_array",
        params=NoParams,
        infer_shape=size_array_shape,
        infer_type=_INT64,
        ignore_inputs=(0,),
        reference=lambda p, data: np.array([data.size], dtype=np.int64),
        kernels={DENSE: _values_lowering(lambda s: (size(s),))},
        grad=no_gradient,
        differentiable=False,
        doc="Returns the input's number of elements as a 1-element int64 array.",
        examples=(
            Example(((2, 3),)),
            Example(((4, 1, 5),), dtype="float64"),
            Example(((0, 3),), dtype="int32"),
        ),
        bad_params=({"axis": 0},),
    )
)
