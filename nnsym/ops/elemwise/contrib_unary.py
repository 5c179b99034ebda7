"""MXNet's elementwise contrib operators: straight-through rounding (round_ste, sign_ste),
gradientmultiplier (identity forward, scaled gradient) and div_sqrt_dim (x / sqrt(last dim)).

Their forward kernels are rows of the elementwise unary template; the straight-through
gradients pass the output gradient unchanged, as MXNet's do."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, elemwise_shape, register, same_dtype
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.exprs import Array, exact1, round_half_away, rounding
from nnsym.ops.common.grad import backward_node, pass_through
from nnsym.ops.elemwise.elemwise import unary_kernel

FLOAT_EXAMPLES = (
    Example(((2, 3),), low=-3.0, high=3.0),
    Example(((2, 3, 4),), dtype="float64", low=-3.0, high=3.0),
    Example(((3, 4),), dtype="float16", low=-3.0, high=3.0),
)


def _ste_op(name: str, expr: str, ref: Any, doc: str) -> OpDef:
    return register(OpDef(
        name=name,
        params=NoParams,
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        expr=expr,
        kernels={DENSE: unary_kernel(name, expr)},
        grad=pass_through,
        # NOTE: not the derivative (0 almost everywhere) by design, so the finite-difference
        # table leaves it out; tests/ops/test_contrib_misc.py checks the pass-through.
        differentiable=False,
        reference=lambda p, x: ref(x),
        doc=doc,
        examples=FLOAT_EXAMPLES,
        bad_params=({"scalar": 1.0},),
    ))


ROUND_STE = _ste_op(
    "_contrib_round_ste", "round(x)", rounding(round_half_away),
    "round(x) (halves away from zero) with a straight-through gradient: dx = dy.")
SIGN_STE = _ste_op(
    "_contrib_sign_ste", "x > 0 ? 1 : (x < 0 ? -1 : 0)",
    exact1(lambda x: np.where(x > 0, 1, np.where(x < 0, -1, 0))),
    "sign(x) with a straight-through gradient: dx = dy.")


# ---------------------------------------------------------------------------------------------
# gradientmultiplier


@dataclass(frozen=True, kw_only=True)
class GradientMultiplierParams(Params):
    scalar: float = field(default=1.0, doc="Factor the gradient is multiplied by.")
    is_int: bool = field(default=True, doc="Whether the scalar is an integer (MXNet's flag).")


GM_GRAD_EXPR = "x * scalar"

BACKWARD_GRADIENT_MULTIPLIER = register(OpDef(
    name="_contrib_backward_gradientmultiplier",
    params=GradientMultiplierParams,
    inputs=("ograd",),
    outputs=("data_grad",),
    infer_shape=elemwise_shape,
    infer_type=same_dtype,
    inplace=((0, 0),),
    kernels={DENSE: unary_kernel("_contrib_backward_gradientmultiplier", GM_GRAD_EXPR,
                                 ("scalar",))},
    differentiable=False,
    reference=lambda p, g: np.asarray(g.astype(np.float64) * p.scalar).astype(g.dtype),
    doc="Gradient of gradientmultiplier: the output gradient times scalar.",
    examples=(Example(((2, 3),), {"scalar": 2.0}),
              Example(((4,),), {"scalar": -0.25, "is_int": False}, dtype="float64")),
))


def gradient_multiplier_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(BACKWARD_GRADIENT_MULTIPLIER, node, [g]), 0)]


GRADIENT_MULTIPLIER = register(OpDef(
    name="_contrib_gradientmultiplier",
    params=GradientMultiplierParams,
    infer_shape=elemwise_shape,
    infer_type=same_dtype,
    inplace=((0, 0),),
    expr="x",
    kernels={DENSE: unary_kernel("_contrib_gradientmultiplier", "x")},
    grad=gradient_multiplier_grad,
    differentiable=False,  # NOTE: scaled on purpose; checked in tests/ops/test_contrib_misc.py
    reference=lambda p, x: x.copy(),
    doc="Identity forward; the backward pass multiplies the gradient by scalar.",
    examples=(
        Example(((2, 3),), {"scalar": 2.0}),
        Example(((2, 3, 4),), {"scalar": -0.5, "is_int": False}, dtype="float64"),
        Example(((3, 4),), {"scalar": 3.0}, dtype="float16"),
    ),
    bad_params=({"scalar": "x"}, {"alpha": 1.0}),
))


# ---------------------------------------------------------------------------------------------
# div_sqrt_dim


def div_sqrt_dim_lowering(call: KernelCall) -> Lowered:
    """x / sqrt(d), d the size of the last axis, in the elementwise template (sd at run time)."""
    n = size(call.out_shapes[0])
    if n == 0:
        return Lowered()
    shape = call.in_shapes[0]
    spec = KernelSpec.make(
        "elemwise/elemwise_unary.c.j2", expr="x / sd", fparams=("sd",),
        in_dtype=call.in_dtypes[0].name, out_dtype=call.out_dtypes[0].name, req=call.req)
    sd = math.sqrt(shape[-1]) if shape else 1.0
    return Lowered((Launch(spec, (n,), (sd,)),))


def div_sqrt_dim_reference(p: Any, x: Array) -> Array:
    d = x.shape[-1] if x.ndim else 1
    return np.asarray(x.astype(np.float64) / math.sqrt(d)).astype(x.dtype)


def div_sqrt_dim_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """Linear: the gradient is the output gradient divided the same way (MXNet's FGradient
    applies div_sqrt_dim itself)."""
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(DIV_SQRT_DIM, node, [g]), 0)]


DIV_SQRT_DIM = register(OpDef(
    name="_contrib_div_sqrt_dim",
    params=NoParams,
    infer_shape=elemwise_shape,
    infer_type=same_dtype,
    inplace=((0, 0),),
    kernels={DENSE: Kernel(div_sqrt_dim_lowering)},
    grad=div_sqrt_dim_grad,
    reference=div_sqrt_dim_reference,
    doc="x / sqrt(x.shape[-1]), elementwise.",
    examples=(
        Example(((2, 3, 4),)),
        Example(((5, 9),), dtype="float64"),
        Example(((2, 16),), dtype="float16"),
    ),
    bad_params=({"scalar": 1.0},),
))
