"""transpose and SwapAxis: permutations of the input's dimensions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, get_op, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops.common.grad import backward_node
from nnsym.ops.common.lowering import c_strides, strided_lowering
from nnsym.ops.shape.helpers import Dims, _axis, _merge
from nnsym.types import Shape, shape_str

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
