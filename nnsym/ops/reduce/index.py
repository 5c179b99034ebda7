"""argmax / argmin: index of the largest / smallest element along an axis (as the input dtype)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, norm_axis, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.reduce.broadcast_reduce import reduce_lowering


@dataclass(frozen=True, kw_only=True)
class ArgReduceParams(Params):
    axis: int | None = field(default=None, doc="Axis to reduce; None reduces all axes.")
    keepdims: bool = field(default=False, doc="Keep the reduced axis as a size-1 dimension.")


def arg_reduce_shape(p: ArgReduceParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if p.axis is None:
        return list(ins), [(1,) * len(data) if p.keepdims else (1,)]
    ax = norm_axis(p.axis, len(data))
    if p.keepdims:
        out = (*data[:ax], 1, *data[ax + 1 :])
    else:
        out = (*data[:ax], *data[ax + 1 :]) or (1,)
    return list(ins), [out]


def _reference(fn: Any) -> Any:
    def ref(p: ArgReduceParams, x: np.ndarray) -> np.ndarray:
        if p.axis is None:
            r = np.asarray(fn(x))
            return r.reshape((1,) * x.ndim if p.keepdims else (1,)).astype(x.dtype)
        r = fn(x, axis=p.axis, keepdims=p.keepdims)
        return np.asarray(r).reshape(r.shape or (1,)).astype(x.dtype)

    return ref


def _kernel(name: str) -> Kernel:
    """A reduction kernel (``reduce/broadcast_reduce_reduce.c.j2``) over one axis or all of them."""

    def lower(call: KernelCall) -> Lowered:
        nd = len(call.in_shapes[0])
        axis = call.params.axis
        axes = tuple(range(nd)) if axis is None else (axis % nd,)
        return reduce_lowering(call, name, axes)

    return Kernel(lower)


_EXAMPLES = (
    Example(((2, 3, 4),), {"axis": 1}),
    Example(((2, 3, 4),), {"axis": -1, "keepdims": True}),
    Example(((2, 3, 4),), {}),
    Example(((5,),), {"axis": 0}, dtype="float64"),
)

for _name, _fn in (("argmax", np.argmax), ("argmin", np.argmin)):
    register(
        OpDef(
            name=_name,
            params=ArgReduceParams,
            infer_shape=arg_reduce_shape,
            infer_type=same_dtype,
            kernels={DENSE: _kernel(_name)},
            reference=_reference(_fn),
            differentiable=False,
            grad=no_gradient,
            doc=f"Returns the indices of the {_name[3:]}imum values along an axis (input dtype).",
            examples=_EXAMPLES,
            bad_params=({"axis": "x"}, {"keepdim": True}),
        )
    )
