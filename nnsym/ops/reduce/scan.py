"""cumsum (MXNet's ``_np_cumsum``): cumulative sums along an axis or over the flattened array."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient

CUMSUM_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8")


@dataclass(frozen=True, kw_only=True)
class CumsumParams(Params):
    axis: int | None = field(default=None, doc="Axis of the sums (None: the flattened array).")
    dtype: str | None = field(default=None, kind="dtype", choices=CUMSUM_DTYPES,
                              doc="Output and accumulator dtype (None: the input's).")


def _axis(p: CumsumParams, ndim: int) -> int:
    assert p.axis is not None
    if not -ndim <= p.axis < ndim:
        raise RuleError(f"axis {p.axis} is out of range for {ndim} dimensions")
    return p.axis % ndim


def cumsum_shape(p: CumsumParams, ins: list, outs: list) -> tuple[list, list]:
    a = ins[0]
    if a is None:
        return list(ins), list(outs)
    if p.axis is None:
        n = None if any(d is None for d in a) else size(a)
        return [a], [(n,)]
    _axis(p, len(a))
    return [a], [a]


def cumsum_type(p: CumsumParams, ins: list, outs: list) -> tuple[list, list]:
    if p.dtype is not None:
        return list(ins), [np.dtype(p.dtype)]
    t = ins[0] if ins[0] is not None else outs[0]
    return [t], [t]


def cumsum_reference(p: CumsumParams, a: np.ndarray) -> np.ndarray:
    dt = np.dtype(p.dtype) if p.dtype else a.dtype
    x = a.reshape(-1) if p.axis is None else a
    return np.cumsum(x, axis=0 if p.axis is None else p.axis, dtype=dt).astype(dt)


def _lines(p: CumsumParams, shape: tuple) -> tuple[int, int, int]:
    if p.axis is None:
        return 1, size(shape), 1
    ax = _axis(p, len(shape))
    return size(shape[:ax]), shape[ax], size(shape[ax + 1:])


def _scan(call: KernelCall, shape: tuple, reverse: bool) -> Lowered:
    """The backward (reverse) launch gets (ograd, output): the forward input is shape-only."""
    if size(shape) == 0:
        return Lowered()
    spec = KernelSpec.make("reduce/reduce_scan.c.j2", in_dtype=call.in_dtypes[0].name,
                           out_dtype=call.out_dtypes[0].name, req=call.out_req(0),
                           reverse=reverse)
    args = (0, 2) if reverse else None
    return Lowered((Launch(spec, _lines(call.params, shape), args=args),))


BACKWARD_CUMSUM = register(OpDef(
    name="_backward_np_cumsum",
    params=CumsumParams,
    inputs=("ograd", "a"),
    outputs=("a_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[1]]),
    ignore_inputs=(1,),
    kernels={DENSE: Kernel(lambda call: _scan(call, tuple(call.out_shapes[0]), True))},
    differentiable=False,
    doc="Gradient of cumsum: the output gradient summed from the end of each line.",
))

CUMSUM = register(OpDef(
    name="_np_cumsum",
    aliases=("cumsum",),
    params=CumsumParams,
    inputs=("a",),
    infer_shape=cumsum_shape,
    infer_type=cumsum_type,
    reference=cumsum_reference,
    kernels={DENSE: Kernel(lambda call: _scan(call, tuple(call.in_shapes[0]), False))},
    grad=node_gradient(BACKWARD_CUMSUM, lambda n: n.inputs[:1]),
    doc="Cumulative sums along an axis (None: over the flattened array).",
    examples=(
        Example(((2, 3, 4),), {"axis": 1}),
        Example(((3, 4),)),
        Example(((3, 4),), {"axis": -1, "dtype": "float64"}),
        Example(((5,),), {"axis": 0}, dtype="int32", low=-9, high=9),
        Example(((2, 3),), {"axis": 0}, dtype="float64"),
    ),
    bad_params=({"axis": "x"}, {"dtype": "uint8"}),
))
