"""Cast and the copy-like operators: zeros_like, ones_like, BlockGrad and _copy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    StypeRule,
    elemwise_shape,
    fixed_out_dtype,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient, pass_through
from nnsym.ops.common.lowering import copy_lowering
from nnsym.ops.common.storage import zeros_of_input_stype
from nnsym.ops.shape.helpers import _shape_only_backward, _with_data
from nnsym.types import DispatchMode, SType

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
