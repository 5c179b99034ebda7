"""Helpers shared by the shape operators' modules: axis and shape checks with readable
messages, the view lowering of the reshape-like operators and the ``_backward_<name>(ograd,
data)`` gradients that read the data for its shape and dtype only."""

from __future__ import annotations

from typing import Any

from nnsym.ir.opdef import DENSE, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.common.lowering import copy_lowering
from nnsym.types import Shape, shape_str

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


def backward_reshape_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """(ograd, data) -> data grad shaped as the forward data; the data is read for its shape."""
    like = ins[1] if ins[1] is not None else outs[0]
    return [ins[0], like], [like]


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
