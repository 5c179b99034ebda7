"""Elementwise operators: unary math, clip, quadratic, ``_*_scalar`` arithmetic, same-shape binary
operators and ``add_n``. One table row per operator; ``register`` happens at the bottom.

Scalar expressions (``OpDef.expr``, shared by the C, CUDA and sparse kernels):

* unary forward expressions are in ``x``, binary ones in ``a`` (lhs) and ``b`` (rhs); parameters
  appear by name (as doubles);
* ``T`` is the *output* element type (a typedef the code generator provides). ``(T)scalar``
  reproduces MXNet's conversion of a parameter to the array's type: with int32 data,
  ``_plus_scalar(scalar=2.7)`` adds 2;
* math functions are ``<tgmath.h>`` names. On integer data they compute in double and the store
  truncates toward zero, as MXNet does (``exp`` of int32 ``[1, 2]`` is ``[2, 7]``). Integer
  ``a / b`` is C division (truncation), as in MXNet; numpy's ``//`` floors, so the references
  use ``trunc_div``;
* ``max``/``min`` propagate a NaN in either operand, and ``relu``/``clip`` propagate a NaN input,
  as MXNet 1.9.1 does; ``sign(NaN)`` is 0 and ``round`` rounds halves away from zero (C
  ``round``; numpy's ``round`` goes to even).

Backward expressions (for the executor's generated ``_backward_<op>`` kernels) sit in the same
rows and are collected in ``GRAD_EXPR`` (unary-form ops: in ``g`` = output gradient, ``x`` =
input, ``y`` = output, parameters by name) and ``BINARY_GRAD_EXPR`` (``(lhs grad, rhs grad)`` in
``g``, ``a``, ``b``, ``y``). ``"0"`` marks MXNet's zero gradient (``MakeZeroGradNodes``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    StypeRule,
    elemwise_shape,
    register,
    same_dtype,
)
from nnsym.ir.params import MAX_COUNT, NoParams, Params, field
from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ir.storage import StorageKernel
from nnsym.ops.common.exprs import (
    Array,
    BinaryFn,
    UnaryFn,
    binary_lowering,
    exact1,
    exact2,
    math1,
    math2,
    nan_max,
    nan_min,
    round_half_away,
    rounding,
    to_dtype,
    trunc_div,
)
from nnsym.ops.common.grad import binary_gradient, no_gradient, pass_through, unary_gradient
from nnsym.ops.common.storage import dense_result
from nnsym.ops.elemwise.sparse import add_n_rsp, binary_storage_kernel
from nnsym.types import DispatchMode, SType


def unary_lowering(expr: str, fparams: tuple[str, ...] = ()) -> Kernel:
    """The dense kernel of a one-input elementwise operator from its scalar expression."""
    def lower(call: Any) -> Any:
        spec = KernelSpec.make(
            "elemwise/elemwise_unary.c.j2",
            expr=expr,
            fparams=fparams,
            in_dtype=call.in_dtypes[0].name,
            out_dtype=call.out_dtypes[0].name,
            req=call.req,
            par_min=PAR_MIN,
        )
        fa = tuple(float(getattr(call.params, f)) for f in fparams)
        return Lowered((Launch(spec, (size(call.out_shapes[0]),), fa),))

    return Kernel(lower)


# ---------------------------------------------------------------------------------------------
# Unary operators without parameters


def rint_half_down(x: Array) -> Array:
    """MXNet's ``rint``: the nearer of floor and ceil, a tie going to the floor (2.5 -> 2,
    -2.5 -> -3); numpy's ``rint`` rounds ties to even."""
    lo, hi = np.floor(x), np.ceil(x)
    return np.asarray(np.where(x - lo <= hi - x, lo, hi))


def _gamma1(v: float) -> float:
    try:
        return math.gamma(v)
    except ValueError:  # a pole: 0 or a negative integer
        return math.copysign(math.inf, v) if v == 0 else math.nan
    except OverflowError:
        return math.inf


def _lgamma1(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):
        return math.inf


# Giles' single-precision erfinv approximation (w = -log(1 - x * x)), refined by two Newton
# steps on erf: the same arithmetic as the C/CUDA ``nnsym_erfinv`` in elemwise_unary.c.j2.
ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erfinv1(x: float) -> float:
    if math.isnan(x) or not -1.0 <= x <= 1.0:
        return math.nan
    if abs(x) == 1.0:
        return math.copysign(math.inf, x)
    w = -math.log((1.0 - x) * (1.0 + x))
    coef, t = (ERFINV_CENTRAL, w - 2.5) if w < 5.0 else (ERFINV_TAIL, math.sqrt(w) - 3.0)
    q = coef[0]
    for c in coef[1:]:
        q = c + q * t
    y = q * x
    for _ in range(2):
        y -= (math.erf(y) - x) / (1.1283791670955126 * math.exp(-y * y))
    return y


gamma_fn: UnaryFn = np.vectorize(_gamma1, otypes=[np.float64])
lgamma_fn: UnaryFn = np.vectorize(_lgamma1, otypes=[np.float64])
erfinv_fn: UnaryFn = np.vectorize(_erfinv1, otypes=[np.float64])


def digamma_expr(v: str) -> str:
    """A C expression for digamma(v) (gamma's and gammaln's derivatives; C has no digamma):
    the recurrence up to v + 6, the asymptotic series there, reflection below 0.5."""

    def positive(u: str) -> str:
        z = f"({u} + 6)"
        z2 = f"({z} * {z})"
        series = (f"log({z}) - 0.5 / {z} - 1.0 / (12 * {z2}) + 1.0 / (120 * {z2} * {z2})"
                  f" - 1.0 / (252 * {z2} * {z2} * {z2})"
                  f" + 1.0 / (240 * {z2} * {z2} * {z2} * {z2})")
        steps = " - ".join(f"1.0 / ({u} + {k})" for k in range(6))
        return f"({series} - {steps})"

    pi = "3.141592653589793"
    return (f"({v} < 0.5 ? {positive(f'(1 - {v})')} - {pi} / tan({pi} * {v}) "
            f": {positive(v)})")


class Unary(NamedTuple):
    """One unary operator: forward/backward expressions, numpy reference, example input range."""

    name: str
    expr: str
    grad: str
    ref: UnaryFn
    domain: tuple[float, float] = (-2.0, 2.0)
    sparse: bool = True  # exposed in mx.sym.sparse
    ints: bool = False  # integer examples are meaningful
    doc: str = ""


# fmt: off
# name, forward (x), backward (g, x, y), reference, example domain
UNARY: tuple[Unary, ...] = (
    Unary("relu", "x <= 0 ? 0 : x", "y > 0 ? g : 0", exact1(lambda x: np.where(x <= 0, 0, x)),
          ints=True, doc="Rectified linear unit: max(x, 0); a NaN input stays NaN."),
    Unary("sigmoid", "1 / (1 + exp(-x))", "g * y * (1 - y)",
          math1(lambda x: 1 / (1 + np.exp(-x))), doc="Logistic sigmoid 1 / (1 + exp(-x))."),
    Unary("tanh", "tanh(x)", "g * (1 - y * y)", math1(np.tanh), doc="Hyperbolic tangent."),
    Unary("exp", "exp(x)", "g * y", math1(np.exp), doc="Natural exponential."),
    Unary("log", "log(x)", "g / x", math1(np.log), (0.1, 4.0), doc="Natural logarithm."),
    Unary("log1p", "log1p(x)", "g / (1 + x)", math1(np.log1p), (-0.9, 3.0),
          doc="log(1 + x), accurate for small x."),
    Unary("expm1", "expm1(x)", "g * exp(x)", math1(np.expm1), doc="exp(x) - 1, accurate near 0."),
    Unary("log2", "log2(x)", "g / (x * 0.6931471805599453)", math1(np.log2), (0.1, 4.0),
          sparse=False, doc="Base-2 logarithm."),
    Unary("erf", "erf(x)", "g * 1.1283791670955126 * exp(-x * x)",
          math1(np.vectorize(math.erf, otypes=[np.float64])), sparse=False,
          doc="The Gauss error function, 2/sqrt(pi) times the integral of exp(-t*t) from 0 to x."),
    Unary("sqrt", "sqrt(x)", "g / (2 * y)", math1(np.sqrt), (0.0, 4.0), doc="Square root."),
    Unary("rsqrt", "1 / sqrt(x)", "g * -0.5 / (x * sqrt(x))", math1(lambda x: 1 / np.sqrt(x)),
          (0.1, 4.0), doc="Reciprocal square root 1 / sqrt(x)."),
    Unary("square", "x * x", "g * 2 * x", exact1(np.square), ints=True, doc="x * x."),
    Unary("abs", "fabs(x)", "x > 0 ? g : (x < 0 ? -g : 0)", exact1(np.abs), ints=True,
          doc="Absolute value."),
    Unary("sign", "x > 0 ? 1 : (x < 0 ? -1 : 0)", "0",
          exact1(lambda x: np.where(x > 0, 1, np.where(x < 0, -1, 0))), ints=True,
          doc="-1, 0 or 1 by the sign of x (0 for NaN)."),
    Unary("negative", "-x", "-g", exact1(np.negative), ints=True, doc="-x."),
    Unary("reciprocal", "1 / x", "-g / (x * x)", math1(np.reciprocal), (0.25, 4.0), sparse=False,
          doc="1 / x."),
    Unary("sin", "sin(x)", "g * cos(x)", math1(np.sin), doc="Sine."),
    Unary("cos", "cos(x)", "-g * sin(x)", math1(np.cos), doc="Cosine."),
    Unary("floor", "floor(x)", "0", rounding(np.floor), (-3.0, 3.0), ints=True,
          doc="Largest integer <= x."),
    Unary("ceil", "ceil(x)", "0", rounding(np.ceil), (-3.0, 3.0), ints=True,
          doc="Smallest integer >= x."),
    Unary("round", "round(x)", "0", rounding(round_half_away), (-3.0, 3.0), ints=True,
          doc="Nearest integer, halves away from zero (MXNet/C round; numpy rounds to even)."),
    Unary("rint", "x - floor(x) <= ceil(x) - x ? floor(x) : ceil(x)", "0",
          rounding(rint_half_down), (-3.0, 3.0), ints=True,
          doc="Nearest integer, halves toward -inf (MXNet's rint: 2.5 -> 2, -2.5 -> -3)."),
    Unary("fix", "trunc(x)", "0", rounding(np.trunc), (-3.0, 3.0), ints=True,
          doc="Nearest integer toward zero."),
    Unary("trunc", "trunc(x)", "0", rounding(np.trunc), (-3.0, 3.0), ints=True,
          doc="The integer part, rounded toward zero."),
    Unary("tan", "tan(x)", "g * (y * y + 1)", math1(np.tan), (-1.2, 1.2), doc="Tangent."),
    Unary("arcsin", "asin(x)", "g / sqrt(1 - x * x)", math1(np.arcsin), (-0.9, 0.9),
          doc="Inverse sine, in [-pi/2, pi/2]."),
    Unary("arccos", "acos(x)", "-g / sqrt(1 - x * x)", math1(np.arccos), (-0.9, 0.9),
          doc="Inverse cosine, in [0, pi]."),
    Unary("arctan", "atan(x)", "g / (x * x + 1)", math1(np.arctan), doc="Inverse tangent."),
    Unary("sinh", "sinh(x)", "g * cosh(x)", math1(np.sinh), doc="Hyperbolic sine."),
    Unary("cosh", "cosh(x)", "g * sinh(x)", math1(np.cosh), doc="Hyperbolic cosine."),
    Unary("arcsinh", "asinh(x)", "g / sqrt(x * x + 1)", math1(np.arcsinh),
          doc="Inverse hyperbolic sine."),
    Unary("arccosh", "acosh(x)", "g / sqrt(x * x - 1)", math1(np.arccosh), (1.1, 4.0),
          doc="Inverse hyperbolic cosine."),
    Unary("arctanh", "atanh(x)", "g / (1 - x * x)", math1(np.arctanh), (-0.9, 0.9),
          doc="Inverse hyperbolic tangent."),
    Unary("degrees", "x * 57.29577951308232", "g * 57.29577951308232", math1(np.degrees),
          doc="Radians to degrees."),
    Unary("radians", "x * 0.017453292519943295", "g * 0.017453292519943295",
          math1(np.radians), doc="Degrees to radians."),
    Unary("cbrt", "cbrt(x)", "g / (3 * y * y)", math1(np.cbrt), (0.3, 3.0), doc="Cube root."),
    Unary("rcbrt", "1 / cbrt(x)", "-g * y / (3 * x)", math1(lambda x: 1 / np.cbrt(x)),
          (0.3, 3.0), sparse=False, doc="Reciprocal cube root 1 / cbrt(x)."),
    Unary("log10", "log10(x)", "g / (x * 2.302585092994046)", math1(np.log10), (0.1, 4.0),
          doc="Base-10 logarithm."),
    Unary("gamma", "tgamma(x)", f"g * y * ({digamma_expr('x')})", math1(gamma_fn), (0.5, 3.0),
          doc="The gamma function."),
    Unary("gammaln", "lgamma(x)", f"g * ({digamma_expr('x')})", math1(lgamma_fn), (0.5, 3.0),
          doc="log |gamma(x)|."),
    Unary("erfinv", "nnsym_erfinv(x)", "g * 0.886226925452758 * exp(y * y)", math1(erfinv_fn),
          (-0.9, 0.9), sparse=False, doc="Inverse of the Gauss error function."),
    Unary("softsign", "x / (1 + fabs(x))", "g / ((1 + fabs(x)) * (1 + fabs(x)))",
          math1(lambda x: x / (1 + np.abs(x))), sparse=False, doc="x / (1 + |x|)."),
    Unary("logical_not", "x == 0 ? 1 : 0", "0", exact1(lambda x: x == 0), ints=True,
          sparse=False, doc="1 where x is 0, else 0 (NaN counts as true), in the input's dtype."),
)
# fmt: on


def _unary_reference(fn: UnaryFn) -> Callable[[Any, Array], Array]:
    return lambda p, x: fn(x)


def _unary_examples(lo: float, hi: float, ints: bool) -> tuple[Example, ...]:
    exs = [
        Example(((2, 3),), low=lo, high=hi),
        Example(((2, 3, 4, 5),), low=lo, high=hi),
        Example(((7,),), dtype="float64", low=lo, high=hi),
        Example(((3, 4),), dtype="float16", low=lo, high=hi),
    ]
    if ints:
        exs.append(Example(((3, 4),), dtype="int32", low=-5, high=5))
    return tuple(exs)


_NO_PARAMS_BAD = ({"scalar": 1.0},)


def _register_unary(row: Unary) -> OpDef:
    return register(
        OpDef(
            name=row.name,
            params=NoParams,
            infer_shape=elemwise_shape,
            infer_type=same_dtype,
            inplace=((0, 0),),
            expr=row.expr,
            kernels={DENSE: unary_kernel(row.name, row.expr)},
            grad=unary_gradient(row.name, row.grad),
            sparse=row.sparse,
            reference=_unary_reference(row.ref),
            doc=row.doc,
            examples=_unary_examples(*row.domain, row.ints),
            bad_params=_NO_PARAMS_BAD,
        )
    )


# ---------------------------------------------------------------------------------------------
# clip and quadratic


@dataclass(frozen=True, kw_only=True)
class ClipParams(Params):
    a_min: float = field(doc="Minimum value.")
    a_max: float = field(doc="Maximum value.")


def clip_reference(p: ClipParams, x: Array) -> Array:
    # MXNet tests a_max first, so crossed bounds (a_min > a_max) differ from np.clip.
    lo, hi = to_dtype(p.a_min, x.dtype), to_dtype(p.a_max, x.dtype)
    return to_dtype(np.where(x > hi, hi, np.where(x < lo, lo, x)), x.dtype)


CLIP_EXPR = "x > (T)a_max ? (T)a_max : (x < (T)a_min ? (T)a_min : x)"
CLIP_GRAD = "(x > a_max || x < a_min) ? 0 : g"


@dataclass(frozen=True, kw_only=True)
class QuadraticParams(Params):
    a: float = field(default=0.0, doc="Coefficient of the quadratic term.")
    b: float = field(default=0.0, doc="Coefficient of the linear term.")
    c: float = field(default=0.0, doc="Constant term.")


def quadratic_reference(p: QuadraticParams, x: Array) -> Array:
    # Integer data: computed in floating point and truncated (MXNet's float coefficients).
    return math1(lambda v: p.a * v * v + p.b * v + p.c)(x)


QUADRATIC_EXPR = "a * x * x + b * x + c"
QUADRATIC_GRAD = "g * (2 * a * x + b)"


@dataclass(frozen=True, kw_only=True)
class HardSigmoidParams(Params):
    alpha: float = field(default=0.2, doc="Slope of hard sigmoid.")
    beta: float = field(default=0.5, doc="Bias of hard sigmoid.")


def hard_sigmoid_reference(p: HardSigmoidParams, x: Array) -> Array:
    return math1(lambda v: np.clip(p.alpha * v + p.beta, 0.0, 1.0))(x)


HARD_SIGMOID_EXPR = ("alpha * x + beta >= 1 ? 1 : (alpha * x + beta <= 0 ? 0 "
                     ": alpha * x + beta)")
HARD_SIGMOID_GRAD = "(y > 0 && y < 1) ? g * alpha : 0"


# ---------------------------------------------------------------------------------------------
# Operators with a scalar operand: _plus_scalar, _rdiv_scalar, ...


@dataclass(frozen=True, kw_only=True)
class ScalarParams(Params):
    scalar: float = field(default=1.0, doc="Scalar input value.")
    is_int: bool = field(
        default=True,
        doc="Whether the scalar is an integer; False makes integer data give float64 output.",
    )


def scalar_out_dtype(data: np.dtype, is_int: bool) -> np.dtype:
    """MXNet's NumpyBinaryScalarType for a known input dtype."""
    if data.kind in "iu" and not is_int:
        return np.dtype(np.float64)
    if data.kind == "b":
        return np.dtype(np.int64 if is_int else np.float64)
    return data


def scalar_dtype(p: ScalarParams, ins: list, outs: list) -> tuple[list, list]:
    """Output dtype follows the input, except integer/bool data with a non-integer scalar."""
    t = ins[0]
    if t is not None and (t.kind == "b" or (t.kind in "iu" and not p.is_int)):
        return [t], [scalar_out_dtype(t, p.is_int)]
    v = t if t is not None else outs[0]
    return [v], [v]


def mod_expr(a: str, b: str) -> str:
    """MXNet's mod: the remainder takes the divisor's sign (numpy's ``mod``), and a zero
    divisor gives 0."""
    r = f"fmod({a}, {b})"
    return f"({b}) == 0 ? 0 : (({r} != 0 && (({r} < 0) != (({b}) < 0))) ? {r} + ({b}) : {r})"


def int_mod_expr(a: str, b: str) -> str:
    """``mod_expr`` in integer arithmetic (C ``%`` traps on a zero divisor and INT_MIN % -1)."""
    r = f"({a}) % ({b})"
    return (f"(({b}) == 0 || ({b}) == -1) ? 0 : ((({r}) != 0 && ((({r}) < 0) != (({b}) < 0)))"
            f" ? ({r}) + ({b}) : ({r}))")


def mx_mod(a: Array, b: Array) -> Array:
    with np.errstate(all="ignore"):
        return np.asarray(np.where(b == 0, 0, np.mod(a, np.where(b == 0, 1, b))))


# The comparison and logic operators (elementwise ``_equal``, broadcast ``broadcast_equal``,
# scalar ``_equal_scalar``): 1 or 0 in the input's dtype, no gradient (MXNet's zero gradient).
# name: (scalar alias, expression in a and b, numpy reference, doc)
COMPARISONS: dict[str, tuple[str, str, BinaryFn, str]] = {
    "_equal": ("_EqualScalar", "a == b ? 1 : 0", np.equal, "lhs == rhs"),
    "_not_equal": ("_NotEqualScalar", "a != b ? 1 : 0", np.not_equal, "lhs != rhs"),
    "_greater": ("_GreaterScalar", "a > b ? 1 : 0", np.greater, "lhs > rhs"),
    "_greater_equal": ("_GreaterEqualScalar", "a >= b ? 1 : 0", np.greater_equal,
                       "lhs >= rhs"),
    "_lesser": ("_LesserScalar", "a < b ? 1 : 0", np.less, "lhs < rhs"),
    "_lesser_equal": ("_LesserEqualScalar", "a <= b ? 1 : 0", np.less_equal, "lhs <= rhs"),
    "_logical_and": ("_LogicalAndScalar", "(a != 0 && b != 0) ? 1 : 0",
                     lambda a, b: (a != 0) & (b != 0), "lhs and rhs"),
    "_logical_or": ("_LogicalOrScalar", "(a != 0 || b != 0) ? 1 : 0",
                    lambda a, b: (a != 0) | (b != 0), "lhs or rhs"),
    "_logical_xor": ("_LogicalXorScalar", "((a != 0) != (b != 0)) ? 1 : 0",
                     lambda a, b: (a != 0) != (b != 0), "lhs xor rhs"),
}


class ScalarOp(NamedTuple):
    name: str
    alias: str
    expr: str
    grad: str
    fn: BinaryFn  # (data, scalar), both already in the output dtype
    doc: str
    domain: tuple[float, float] = (-2.0, 2.0)


# fmt: off
SCALAR_OPS: tuple[ScalarOp, ...] = (
    ScalarOp("_plus_scalar", "_PlusScalar", "x + (T)scalar", "g", exact2(np.add), "x + scalar"),
    ScalarOp("_minus_scalar", "_MinusScalar", "x - (T)scalar", "g", exact2(np.subtract),
             "x - scalar"),
    ScalarOp("_rminus_scalar", "_RMinusScalar", "(T)scalar - x", "-g",
             exact2(lambda x, s: s - x), "scalar - x"),
    ScalarOp("_mul_scalar", "_MulScalar", "x * (T)scalar", "g * scalar", exact2(np.multiply),
             "x * scalar"),
    ScalarOp("_div_scalar", "_DivScalar", "x / (T)scalar", "g / scalar", exact2(trunc_div),
             "x / scalar"),
    ScalarOp("_rdiv_scalar", "_RDivScalar", "(T)scalar / x", "-g * scalar / (x * x)",
             exact2(lambda x, s: trunc_div(s, x)), "scalar / x", (0.5, 3.0)),
    ScalarOp("_power_scalar", "_PowerScalar", "pow(x, (T)scalar)",
             "g * scalar * pow(x, scalar - 1)", math2(np.power), "x ** scalar", (0.1, 3.0)),
    ScalarOp("_rpower_scalar", "_RPowerScalar", "pow((T)scalar, x)", "g * y * log(scalar)",
             math2(lambda x, s: np.power(s, x)), "scalar ** x"),
    ScalarOp("_maximum_scalar", "_MaximumScalar", "(x != x || x > (T)scalar) ? x : (T)scalar",
             "x >= scalar ? g : 0", exact2(nan_max), "max(x, scalar)"),
    ScalarOp("_minimum_scalar", "_MinimumScalar", "(x != x || x < (T)scalar) ? x : (T)scalar",
             "x <= scalar ? g : 0", exact2(nan_min), "min(x, scalar)"),
    *(ScalarOp(f"{name}_scalar", alias, expr.replace("a", "x").replace("b", "(T)scalar"), "0",
               exact2(fn), f"{doc.replace('lhs', 'x').replace('rhs', 'scalar')}")
      for name, (alias, expr, fn, doc) in COMPARISONS.items()),
    ScalarOp("_mod_scalar", "_ModScalar", mod_expr("x", "(T)scalar"), "g", exact2(mx_mod),
             "x % scalar (the divisor's sign; 0 where scalar is 0)"),
    ScalarOp("_rmod_scalar", "_RModScalar", mod_expr("(T)scalar", "x"),
             "-g * floor(scalar / x)", exact2(lambda x, s: mx_mod(s, x)),
             "scalar % x (the divisor's sign; 0 where x is 0)", (0.5, 3.0)),
    ScalarOp("_hypot_scalar", "_HypotScalar", "hypot(x, (T)scalar)",
             "g * x / hypot(x, (T)scalar)", math2(np.hypot), "sqrt(x * x + scalar * scalar)"),
)
# fmt: on


def _scalar_reference(fn: BinaryFn) -> Callable[[ScalarParams, Array], Array]:
    def ref(p: ScalarParams, x: Array) -> Array:
        dt = scalar_out_dtype(x.dtype, p.is_int)
        # NOTE: the scalar is converted to the output type first (2.7 -> 2 for int32 data).
        return to_dtype(fn(x.astype(dt), to_dtype(p.scalar, dt)), dt)

    return ref


def _scalar_examples(row: ScalarOp) -> tuple[Example, ...]:
    lo, hi = row.domain
    ilo = max(lo, 1.0)  # integer data: no 0 divisors or bases
    neg = -1.5 if row.name != "_rpower_scalar" else 0.5  # a negative base gives NaN
    return (
        Example(((2, 3),), {"scalar": 2.5}, low=lo, high=hi),
        Example(((2, 3, 4),), {"scalar": neg}, dtype="float64", low=lo, high=hi),
        Example(((5,),), {}, dtype="float16", low=lo, high=hi),
        Example(((3, 4),), {"scalar": 2.7}, dtype="int32", low=ilo, high=hi + 2),
        Example(((3, 4),), {"scalar": 2.5, "is_int": False}, dtype="int32", low=ilo, high=hi + 2),
    )


# ---------------------------------------------------------------------------------------------
# Same-shape binary operators (the broadcasting operators, in ``broadcast.py``, share the table)


class Binary(NamedTuple):
    name: str
    aliases: tuple[str, ...]
    expr: str
    grad: tuple[str, str]  # (d lhs, d rhs) in g, a, b, y
    ref: BinaryFn
    doc: str
    sparse: bool = True


# fmt: off
BINARY: tuple[Binary, ...] = (
    Binary("elemwise_add", ("_add", "_plus", "_Plus"), "a + b", ("g", "g"), exact2(np.add),
           "lhs + rhs"),
    Binary("elemwise_sub", ("_sub", "_minus", "_Minus"), "a - b", ("g", "-g"),
           exact2(np.subtract), "lhs - rhs"),
    Binary("elemwise_mul", ("_mul", "_Mul"), "a * b", ("g * b", "g * a"), exact2(np.multiply),
           "lhs * rhs"),
    Binary("elemwise_div", ("_div", "_Div"), "a / b", ("g / b", "-g * a / (b * b)"),
           exact2(trunc_div), "lhs / rhs (integers truncate toward zero)"),
    Binary("_maximum", ("_Maximum",), "(a != a || a > b) ? a : b",
           ("a >= b ? g : 0", "a < b ? g : 0"), exact2(nan_max), "max(lhs, rhs)", sparse=False),
    Binary("_minimum", ("_Minimum",), "(a != a || a < b) ? a : b",
           ("a <= b ? g : 0", "a > b ? g : 0"), exact2(nan_min), "min(lhs, rhs)", sparse=False),
    Binary("_power", ("_Power",), "pow(a, b)", ("g * b * pow(a, b - 1)", "g * y * log(a)"),
           math2(np.power), "lhs ** rhs", sparse=False),
    *(Binary(name, ("_" + "_".join(w.capitalize() for w in name[1:].split("_")),), expr,
             ("0", "0"), exact2(fn), doc, sparse=False)
      for name, (_, expr, fn, doc) in COMPARISONS.items()),
    Binary("_mod", ("_Mod",), mod_expr("a", "b"), ("g", "-g * floor(a / b)"), exact2(mx_mod),
           "lhs % rhs (the divisor's sign; 0 where rhs is 0)", sparse=False),
    Binary("_hypot", ("_Hypot",), "hypot(a, b)", ("g * a / y", "g * b / y"), math2(np.hypot),
           "sqrt(lhs * lhs + rhs * rhs)", sparse=False),
)
# fmt: on
BINARY_BY_NAME: dict[str, Binary] = {row.name: row for row in BINARY}


def binary_reference(fn: BinaryFn) -> Callable[[Any, Array, Array], Array]:
    return lambda p, a, b: fn(a, b)


# Storage-type tables of the same-shape binary operators (MXNET-FACTS 4.6). Pairs not listed
# fall back to dense; ``binary`` is the storage kernel of ``elemwise/sparse.py`` (merges over
# the union or intersection of the stored coordinates, or the sparse operand's pattern).
_EX = DispatchMode.FCOMPUTE_EX
_D, _R, _C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR
binary = binary_storage_kernel(
    lambda op, dt: kernel_expr(op.name, BINARY_BY_NAME[op.name].expr, dt))


def _rows(*rows: tuple[tuple[SType, SType], SType, DispatchMode, StorageKernel | None]) -> tuple:
    return tuple(StypeRule(ins, (out,), mode, kernel=k) for ins, out, mode, k in rows)


_ADD_SUB_RULES = _rows(
    ((_R, _R), _R, _EX, binary), ((_C, _C), _C, _EX, binary),
    ((_D, _C), _D, _EX, binary), ((_C, _D), _D, _EX, binary),
    ((_D, _R), _D, _EX, binary), ((_R, _D), _D, _EX, binary),
)
BINARY_STYPE_RULES: dict[str, tuple[StypeRule, ...]] = {
    "elemwise_add": _ADD_SUB_RULES,
    "elemwise_sub": _ADD_SUB_RULES,
    "elemwise_mul": _rows(
        ((_R, _R), _R, _EX, binary), ((_C, _C), _C, _EX, binary),
        ((_R, _D), _R, _EX, binary), ((_D, _R), _R, _EX, binary),
        ((_C, _D), _C, _EX, binary), ((_D, _C), _C, _EX, binary),
    ),
    # division: a dense operand makes the whole result dense; MXNet densifies the sparse one
    # silently (fcompute), as here.
    "elemwise_div": _rows(
        ((_R, _R), _D, _EX, binary),
        ((_D, None), _D, DispatchMode.FCOMPUTE, None),  # type: ignore[arg-type]
        ((None, _D), _D, DispatchMode.FCOMPUTE, None),  # type: ignore[arg-type]
    ),
}


def _binary_examples(row: Binary) -> tuple[Example, ...]:
    # One range serves both inputs; division and power keep clear of 0 and negative bases.
    lo, hi = (0.5, 3.0) if row.name in ("elemwise_div", "_power", "_mod") else (-2.0, 2.0)
    return (
        Example(((2, 3), (2, 3)), low=lo, high=hi),
        Example(((2, 3, 4, 5), (2, 3, 4, 5)), low=lo, high=hi),
        Example(((7,), (7,)), dtype="float64", low=lo, high=hi),
        Example(((3, 4), (3, 4)), dtype="float16", low=lo, high=hi),
        Example(((3, 4), (3, 4)), dtype="int32", low=max(lo, 1.0), high=hi + 3),
    )


# ---------------------------------------------------------------------------------------------
# add_n


@dataclass(frozen=True, kw_only=True)
class AddNParams(Params):
    num_args: int = field(lower=1, upper=MAX_COUNT, doc="Number of inputs to be summed.")


def add_n_inputs(p: AddNParams) -> tuple[str, ...]:
    return tuple(f"arg{i}" for i in range(p.num_args))


def add_n_reference(p: AddNParams, *xs: Array) -> Array:
    return to_dtype(functools.reduce(np.add, xs), xs[0].dtype)


# ---------------------------------------------------------------------------------------------
# Backward expression tables by operator name (each row's OpDef.grad is generated from them)

GRAD_EXPR: dict[str, str] = {
    **{row.name: row.grad for row in UNARY},
    "clip": CLIP_GRAD,
    "_contrib_quadratic": QUADRATIC_GRAD,
    **{row.name: row.grad for row in SCALAR_OPS},
}
BINARY_GRAD_EXPR: dict[str, tuple[str, str]] = {row.name: row.grad for row in BINARY}


# ---------------------------------------------------------------------------------------------
# Dense kernels: unary-form operators use ``elemwise_unary.c.j2`` (parameters passed at run time
# in ``fa``), binary ones ``common/elemwise_binary.c.j2`` (``binary_kernel``, shared with the
# broadcasting operators), add_n ``elemwise_add_n.c.j2``. Sizes and strides are run-time values.

# C integer division traps (SIGFPE) on a zero divisor and on INT_MIN / -1, so the integer
# kernels of the dividing operators guard it: a zero divisor gives 0 (numpy's floor_divide gives
# 0 too, with a warning) and -1 negates (numpy's wrap-around result).
INT_DIV_OPERANDS: dict[str, tuple[str, str]] = {
    "reciprocal": ("1", "x"),
    "elemwise_div": ("a", "b"),
    "_div_scalar": ("x", "(T)scalar"),
    "_rdiv_scalar": ("(T)scalar", "x"),
}


# Integer mod in integer arithmetic (exact for int64, unlike fmod through double).
INT_MOD_OPERANDS: dict[str, tuple[str, str]] = {
    "_mod": ("a", "b"),
    "broadcast_mod": ("a", "b"),
    "_mod_scalar": ("x", "(T)scalar"),
    "_rmod_scalar": ("(T)scalar", "x"),
}


def kernel_expr(name: str, expr: str, out_dtype: np.dtype) -> str:
    """The expression a kernel of operator ``name`` computes for output dtype ``out_dtype``."""
    operands = INT_DIV_OPERANDS.get(name)
    kind = np.dtype(out_dtype).kind
    if name in INT_MOD_OPERANDS and kind in "iu":
        return int_mod_expr(*INT_MOD_OPERANDS[name])
    if operands is None or kind not in "iub":
        return expr
    num, den = operands
    if kind == "i":
        return f"({den}) == 0 ? 0 : (({den}) == -1 ? -({num}) : ({num}) / ({den}))"
    return f"({den}) == 0 ? 0 : ({num}) / ({den})"


def binary_kernel(name: str, expr: str) -> Kernel:
    """The dense kernel of a two-input elementwise operator (numpy broadcasting allowed)."""

    def lower(call: KernelCall) -> Lowered:
        return binary_lowering(call, kernel_expr(name, expr, call.out_dtypes[0]))

    return Kernel(lower)


def unary_kernel(name: str, expr: str, fparams: tuple[str, ...] = ()) -> Kernel:
    """``unary_lowering`` with the integer-division guard where the output dtype needs it."""
    plain = unary_lowering(expr, fparams)

    def lower(call: KernelCall) -> Lowered:
        e = kernel_expr(name, expr, call.out_dtypes[0])
        res: Lowered = (plain if e == expr else unary_lowering(e, fparams)).lower(call)
        return res

    return Kernel(lower)


def add_n_lowering(call: KernelCall) -> Lowered:
    n = size(call.out_shapes[0])
    if n == 0:
        return Lowered()
    spec = KernelSpec.make(
        "elemwise/elemwise_add_n.c.j2",
        dtype=call.out_dtypes[0].name,
        req=call.req,
        num=len(call.in_shapes),
        group=8,  # inputs read per pass over the output
    )
    return Lowered((Launch(spec, (n,)),))


# ---------------------------------------------------------------------------------------------
# Registration

UNARY_OPS: dict[str, OpDef] = {row.name: _register_unary(row) for row in UNARY}

CLIP = register(
    OpDef(
        name="clip",
        params=ClipParams,
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        expr=CLIP_EXPR,
        kernels={DENSE: unary_kernel("clip", CLIP_EXPR, ("a_min", "a_max"))},
        grad=unary_gradient("clip", CLIP_GRAD, ClipParams, ("a_min", "a_max")),
        sparse=True,
        reference=clip_reference,
        doc="Clips values to [a_min, a_max] (the bounds are cast to the data's type first).",
        examples=(
            Example(((2, 3),), {"a_min": -1.0, "a_max": 1.0}),
            Example(((2, 3, 4, 5),), {"a_min": 0, "a_max": 6}, low=-3, high=9),
            Example(((7,),), {"a_min": -0.5, "a_max": 0.25}, dtype="float64"),
            Example(((3, 4),), {"a_min": -1.5, "a_max": 1.5}, dtype="int32", low=-4, high=4),
            Example(((3, 4),), {"a_min": 1.0, "a_max": 0.0}, dtype="float16"),
        ),
        bad_params=({"a_min": 0.0}, {"a_max": 1.0}, {"a_min": "x", "a_max": 1.0}),
    )
)

QUADRATIC = register(
    OpDef(
        name="_contrib_quadratic",
        # MXNet 1.9.1 has only contrib.quadratic; its sparse-operator tutorial registers the
        # same operator as ``quadratic`` (nd.quadratic, nd.sparse.quadratic), so both names run
        aliases=("quadratic",),
        sparse=True,
        params=QuadraticParams,
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        expr=QUADRATIC_EXPR,
        kernels={DENSE: unary_kernel("_contrib_quadratic", QUADRATIC_EXPR, ("a", "b", "c"))},
        grad=unary_gradient("_contrib_quadratic", QUADRATIC_GRAD, QuadraticParams,
                            ("a", "b", "c"), backward_name="_contrib_backward_quadratic"),
        reference=quadratic_reference,
        doc="a * x * x + b * x + c, elementwise.",
        examples=(
            Example(((2, 3),), {"a": 1.0, "b": 2.0, "c": 3.0}),
            Example(((2, 3, 4, 5),), {}),
            Example(((7,),), {"a": 0.5}, dtype="float64"),
            Example(((3, 4),), {"a": 0.5, "b": 1.5, "c": 0.5}, dtype="int32", low=-4, high=4),
        ),
        bad_params=({"d": 1.0}, {"a": "one"}),
    )
)

HARD_SIGMOID = register(
    OpDef(
        name="hard_sigmoid",
        params=HardSigmoidParams,
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        expr=HARD_SIGMOID_EXPR,
        kernels={DENSE: unary_kernel("hard_sigmoid", HARD_SIGMOID_EXPR, ("alpha", "beta"))},
        grad=unary_gradient("hard_sigmoid", HARD_SIGMOID_GRAD, HardSigmoidParams,
                            ("alpha", "beta")),
        reference=hard_sigmoid_reference,
        doc="max(0, min(1, alpha * x + beta)), elementwise.",
        examples=(
            Example(((2, 3),), low=-4.0, high=4.0),
            Example(((2, 3, 4, 5),), {"alpha": 0.3, "beta": 0.4}, low=-4.0, high=4.0),
            Example(((7,),), {"alpha": 0.5, "beta": 0.25}, dtype="float64", low=-3.0, high=3.0),
            Example(((3, 4),), {"alpha": 0.25}, dtype="float16", low=-4.0, high=4.0),
        ),
        bad_params=({"gamma": 1.0}, {"alpha": "steep"}),
    )
)

# x + s and x - s with s != 0 on sparse input: a dense result computed directly (MXNet's rule;
# s == 0 keeps the storage type through the elementwise derivation).
_SCALAR_STYPE_RULES = {
    name: tuple(StypeRule((st,), (SType.DEFAULT,), DispatchMode.FCOMPUTE_EX,
                          when=lambda p: p.scalar != 0, kernel=dense_result)
                for st in (SType.ROW_SPARSE, SType.CSR))
    for name in ("_plus_scalar", "_minus_scalar")
}

SCALAR_OP_DEFS: dict[str, OpDef] = {
    row.name: register(
        OpDef(
            name=row.name,
            params=ScalarParams,
            infer_shape=elemwise_shape,
            infer_type=scalar_dtype,
            inplace=((0, 0),),
            expr=row.expr,
            kernels={DENSE: unary_kernel(row.name, row.expr, ("scalar",))},
            stype_rules=_SCALAR_STYPE_RULES.get(row.name, ()),
            grad=unary_gradient(row.name, row.grad, ScalarParams, ("scalar",)),
            reference=_scalar_reference(row.fn),
            aliases=(row.alias,),
            doc=f"Elementwise {row.doc} (the scalar takes the output's type first).",
            examples=_scalar_examples(row),
            bad_params=({"scalar": "abc"}, {"is_int": "maybe"}, {"lhs": 1}),
        )
    )
    for row in SCALAR_OPS
}

BINARY_OPS: dict[str, OpDef] = {
    row.name: register(
        OpDef(
            name=row.name,
            params=NoParams,
            inputs=("lhs", "rhs"),
            infer_shape=elemwise_shape,
            infer_type=same_dtype,
            inplace=((0, 0), (1, 0)),
            expr=row.expr,
            kernels={DENSE: binary_kernel(row.name, row.expr)},
            stype_rules=BINARY_STYPE_RULES.get(row.name, ()),
            grad=no_gradient if row.grad == ("0", "0") else binary_gradient(row.name, row.grad),
            sparse=row.sparse,
            reference=binary_reference(row.ref),
            aliases=row.aliases,
            doc=f"Elementwise {row.doc} of two arrays of one shape (no broadcasting).",
            examples=_binary_examples(row),
            bad_params=_NO_PARAMS_BAD,
        )
    )
    for row in BINARY
}

# add_n: all row_sparse -> row_sparse (merged rows); up to 8 inputs are tabled (MXNet: more
# than 4 inputs with any dense one -> dense, computed directly).
ADD_N_RULES = tuple(
    StypeRule((SType.ROW_SPARSE,) * n, (SType.ROW_SPARSE,), DispatchMode.FCOMPUTE_EX,
              kernel=add_n_rsp) for n in range(1, 9)
)

ADD_N = register(
    OpDef(
        name="add_n",
        params=AddNParams,
        inputs=add_n_inputs,
        key_var_num_args="num_args",
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        kernels={DENSE: Kernel(add_n_lowering)},
        stype_rules=ADD_N_RULES,
        grad=pass_through,
        sparse=True,
        reference=add_n_reference,
        aliases=("ElementWiseSum",),
        doc="Sums all input arrays elementwise (all of one shape).",
        examples=(
            Example(((2, 3),), {"num_args": 1}),
            Example(((2, 3), (2, 3)), {"num_args": 2}),
            Example(((2, 3, 4), (2, 3, 4), (2, 3, 4)), {"num_args": 3}, dtype="float64"),
            Example(((5,),) * 4, {"num_args": 4}, dtype="int32", low=-9, high=9),
            Example(((3, 4), (3, 4)), {"num_args": 2}, dtype="float16"),
        ),
        bad_params=({"num_args": 0}, {}, {"num_args": "two"}),
    )
)
