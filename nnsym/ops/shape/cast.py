"""Cast and the copy-like operators: zeros_like, ones_like, BlockGrad and _copy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, zeros_like
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
from nnsym.ops.common.grad import backward_node, no_gradient, pass_through
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


# ---------------------------------------------------------------------------------------------
# amp_cast and amp_multicast: casts between floating types only (AMP); other dtypes pass through

AMP_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8", "uint8")
_FLOATS = ("float16", "float32", "float64")


def _is_float(dt: object) -> bool:
    return dt is not None and np.dtype(dt).name in _FLOATS  # type: ignore[call-overload]


@dataclass(frozen=True, kw_only=True)
class AmpCastParams(Params):
    dtype: str = field(kind="dtype", choices=AMP_DTYPES, doc="Output data type (floats only).")


def amp_cast_type(p: AmpCastParams, ins: list, outs: list) -> tuple[list, list]:
    x = ins[0]
    if x is None:
        return list(ins), list(outs)
    return [x], [np.dtype(p.dtype) if _is_float(x) else x]


def amp_cast_reference(p: AmpCastParams, data: np.ndarray) -> np.ndarray:
    return data.astype(p.dtype) if data.dtype.name in _FLOATS else data.copy()


BACKWARD_AMP_CAST = _shape_only_backward(
    "amp_cast", AmpCastParams, cast_backward_lowering,
    "Gradient of amp_cast: the output gradient cast back to the input's dtype.")

AMP_CAST = register(
    OpDef(
        name="amp_cast",
        params=AmpCastParams,
        infer_shape=elemwise_shape,
        infer_type=amp_cast_type,
        inplace=((0, 0),),
        reference=amp_cast_reference,
        kernels={DENSE: Kernel(cast_lowering)},
        grad=_with_data(BACKWARD_AMP_CAST),
        doc="Casts between floating types (for AMP); other dtypes are copied unchanged.",
        examples=(
            Example(((2, 3),), {"dtype": "float16"}),
            Example(((2, 3),), {"dtype": "float32"}, dtype="float64"),
            Example(((4,),), {"dtype": "float16"}, dtype="int32", low=-9, high=9),
        ),
        bad_params=({}, {"dtype": "float8"}),
    )
)


@dataclass(frozen=True, kw_only=True)
class AmpMulticastParams(Params):
    num_outputs: int = field(lower=1, doc="Number of input/output pairs.")
    cast_narrow: bool = field(default=False, doc="Cast to the narrowest float type (else widest).")


def _amp_target(p: AmpMulticastParams, dts: list) -> Any:
    floats = [np.dtype(d) for d in dts if _is_float(d)]
    if not floats:
        return None
    key = lambda d: d.itemsize
    return min(floats, key=key) if p.cast_narrow else max(floats, key=key)


def amp_multicast_type(p: AmpMulticastParams, ins: list, outs: list) -> tuple[list, list]:
    if any(d is None for d in ins):
        return list(ins), list(outs)
    t = _amp_target(p, ins)
    return list(ins), [t if _is_float(d) else d for d in ins]


def amp_multicast_reference(p: AmpMulticastParams, *data: np.ndarray) -> tuple:
    t = _amp_target(p, [a.dtype for a in data])
    return tuple(a.astype(t) if a.dtype.name in _FLOATS else a.copy() for a in data)


def amp_multicast_lowering(call: KernelCall) -> Lowered:
    n = len(call.in_shapes)
    launches: list[Launch] = []
    for i in range(n):
        one = dataclasses.replace(
            call, in_shapes=(call.in_shapes[i],), in_dtypes=(call.in_dtypes[i],),
            out_shapes=(call.out_shapes[i],), out_dtypes=(call.out_dtypes[i],),
            req=call.out_req(i), reqs=None)
        for ln in cast_lowering(one).launches:
            launches.append(dataclasses.replace(ln, args=(i, n + i)))
    return Lowered(tuple(launches))


def amp_multicast_backward_lowering(call: KernelCall) -> Lowered:
    """Inputs: the n output gradients, then the n forward inputs (dtype only)."""
    n = len(call.out_shapes)
    launches: list[Launch] = []
    for i in range(n):
        one = dataclasses.replace(
            call, in_shapes=(call.in_shapes[i],), in_dtypes=(call.in_dtypes[i],),
            out_shapes=(call.out_shapes[i],), out_dtypes=(call.out_dtypes[i],),
            req=call.out_req(i), reqs=None)
        for ln in cast_lowering(one).launches:
            launches.append(dataclasses.replace(ln, args=(i, 2 * n + i)))
    return Lowered(tuple(launches))


BACKWARD_AMP_MULTICAST = register(
    OpDef(
        name="_backward_amp_multicast",
        params=AmpMulticastParams,
        inputs=lambda p: (*(f"ograd{i}" for i in range(p.num_outputs)),
                          *(f"data{i}" for i in range(p.num_outputs))),
        outputs=lambda p: tuple(f"data{i}_grad" for i in range(p.num_outputs)),
        infer_shape=lambda p, ins, outs: (list(ins), list(ins[p.num_outputs:])),
        infer_type=lambda p, ins, outs: (list(ins), list(ins[p.num_outputs:])),
        ignore_inputs=lambda p: tuple(range(p.num_outputs, 2 * p.num_outputs)),
        kernels={DENSE: Kernel(amp_multicast_backward_lowering)},
        differentiable=False,
        doc="Gradient of amp_multicast: each output gradient cast back to its input's dtype.",
    )
)


def amp_multicast_grad(node, ograds):  # type: ignore[no-untyped-def]
    n = node.params.num_outputs
    heads = [g if g is not None else zeros_like(Entry(node, i)) for i, g in enumerate(ograds)]
    b = backward_node(BACKWARD_AMP_MULTICAST, node, [*heads, *node.inputs])
    return [Entry(b, i) for i in range(n)]


AMP_MULTICAST = register(
    OpDef(
        name="amp_multicast",
        params=AmpMulticastParams,
        inputs=lambda p: tuple(f"data{i}" for i in range(p.num_outputs)),
        outputs=lambda p: tuple(f"output{i}" for i in range(p.num_outputs)),
        key_var_num_args="num_outputs",
        infer_shape=lambda p, ins, outs: (list(ins), list(ins)),
        infer_type=amp_multicast_type,
        reference=amp_multicast_reference,
        kernels={DENSE: Kernel(amp_multicast_lowering)},
        grad=amp_multicast_grad,
        doc="Casts float inputs to their widest (or narrowest) float type, for AMP.",
        examples=(
            Example(((2, 3), (4,)), {"num_outputs": 2}),
            Example(((3,),), {"num_outputs": 1, "cast_narrow": True}, dtype="float16"),
        ),
        bad_params=({}, {"num_outputs": 0}),
    )
)
