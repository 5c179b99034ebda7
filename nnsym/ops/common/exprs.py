"""Scalar expressions and numpy semantics shared by the operator families.

The same-shape binary operators' table (``BINARY``: expression, gradient expressions, numpy
reference), the numpy helpers their references are built from (C division, NaN-propagating
max/min, MXNet's integer math), the integer-division guard of kernel expressions and the dense
two-input elementwise kernel (numpy broadcasting allowed) with its stride rows. The elementwise
family registers the operators; the broadcasting operators, Dropout's gradient and the sparse
kernels reuse the expressions and the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from nnsym.ir.opdef import Kernel
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size

Array = np.ndarray
UnaryFn = Callable[[Array], Array]
BinaryFn = Callable[[Array, Array], Array]


# ---------------------------------------------------------------------------------------------
# numpy semantics shared by the references


def is_integer(dt: Any) -> bool:
    """Integer or bool dtype (MXNet computes their math in floating point and truncates)."""
    return np.dtype(dt).kind in "iub"


def trunc_div(a: Array, b: Array) -> Array:
    """C division: true division for floats, truncation toward zero for integers."""
    if not is_integer(np.result_type(a, b)):
        return np.asarray(np.true_divide(a, b))
    q = np.asarray(np.floor_divide(a, b))
    inexact = (q * b != a) & ((a < 0) != (b < 0))
    return np.asarray(q + inexact.astype(q.dtype))


def round_half_away(x: Array) -> Array:
    """C ``round``: halves go away from zero (numpy's ``np.round`` goes to even)."""
    t = np.trunc(x)
    return np.asarray(np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t))


def nan_max(a: Array, b: Array) -> Array:
    """MXNet's ``maximum``: NaN in either operand wins; on ties the rhs is taken."""
    return np.where(np.isnan(a) | (a > b), a, b)


def nan_min(a: Array, b: Array) -> Array:
    return np.where(np.isnan(a) | (a < b), a, b)


def to_dtype(r: Any, dtype: np.dtype) -> Array:
    """Store ``r`` as ``dtype`` the way C does (floats to integers truncate toward zero)."""
    return np.asarray(r).astype(dtype, copy=False)


def math1(fn: UnaryFn) -> UnaryFn:
    """A float function applied like MXNet: integer data goes through double and truncates."""

    def ref(x: Array) -> Array:
        with np.errstate(all="ignore"):
            v = x.astype(np.float64) if is_integer(x.dtype) else x
            return to_dtype(fn(v), x.dtype)

    return ref


def exact1(fn: UnaryFn) -> UnaryFn:
    """A function exact in every dtype (integer data stays integer)."""

    def ref(x: Array) -> Array:
        with np.errstate(all="ignore"):
            return to_dtype(fn(x), x.dtype)

    return ref


def rounding(fn: UnaryFn) -> UnaryFn:
    """floor/ceil/round: the identity on integer data."""

    def ref(x: Array) -> Array:
        if is_integer(x.dtype):
            return np.array(x)
        with np.errstate(all="ignore"):
            return to_dtype(fn(x), x.dtype)

    return ref


def math2(fn: BinaryFn) -> BinaryFn:
    def ref(a: Array, b: Array) -> Array:
        dt = np.result_type(a, b)
        with np.errstate(all="ignore"):
            if is_integer(dt):
                return to_dtype(fn(a.astype(np.float64), b.astype(np.float64)), dt)
            return to_dtype(fn(a, b), dt)

    return ref


def exact2(fn: BinaryFn) -> BinaryFn:
    def ref(a: Array, b: Array) -> Array:
        with np.errstate(all="ignore"):
            return to_dtype(fn(a, b), np.result_type(a, b))

    return ref


# ---------------------------------------------------------------------------------------------
# Same-shape binary operators


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
)
# fmt: on
BINARY_BY_NAME: dict[str, Binary] = {row.name: row for row in BINARY}


def binary_reference(fn: BinaryFn) -> Callable[[Any, Array, Array], Array]:
    return lambda p, a, b: fn(a, b)


# ---------------------------------------------------------------------------------------------
# Kernels

# C integer division traps (SIGFPE) on a zero divisor and on INT_MIN / -1, so the integer
# kernels of the dividing operators guard it: a zero divisor gives 0 (numpy's floor_divide gives
# 0 too, with a warning) and -1 negates (numpy's wrap-around result).
INT_DIV_OPERANDS: dict[str, tuple[str, str]] = {
    "reciprocal": ("1", "x"),
    "elemwise_div": ("a", "b"),
    "_div_scalar": ("x", "(T)scalar"),
    "_rdiv_scalar": ("(T)scalar", "x"),
}


def kernel_expr(name: str, expr: str, out_dtype: np.dtype) -> str:
    """The expression a kernel of operator ``name`` computes for output dtype ``out_dtype``."""
    operands = INT_DIV_OPERANDS.get(name)
    kind = np.dtype(out_dtype).kind
    if operands is None or kind not in "iub":
        return expr
    num, den = operands
    if kind == "i":
        return f"({den}) == 0 ? 0 : (({den}) == -1 ? -({num}) : ({num}) / ({den}))"
    return f"({den}) == 0 ? 0 : ({num}) / ({den})"


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= shape[i]
    return st


def broadcast_rows(
    out: tuple[int, ...], lhs: tuple[int, ...], rhs: tuple[int, ...]
) -> list[tuple[int, int, int]]:
    """The output's dims as ``(size, lhs stride, rhs stride)`` rows (strides in elements, 0 where
    broadcast), size-1 dims dropped and neighbours that are one run in both inputs merged."""
    nd = len(out)
    pa = (1,) * (nd - len(lhs)) + tuple(lhs)
    pb = (1,) * (nd - len(rhs)) + tuple(rhs)
    rows: list[tuple[int, int, int]] = []
    for d, da, db, sa, sb in zip(out, pa, pb, _c_strides(pa), _c_strides(pb)):
        if d == 1:
            continue
        x, y = (0 if da == 1 else sa), (0 if db == 1 else sb)
        if rows and rows[-1][1] == x * d and rows[-1][2] == y * d:
            rows[-1] = (rows[-1][0] * d, x, y)
        else:
            rows.append((d, x, y))
    return rows or [(1, 1, 1)]


_INNER = {(1, 1): "vv", (1, 0): "vs", (0, 1): "sv"}


def binary_kernel(name: str, expr: str) -> Kernel:
    """The dense kernel of a two-input elementwise operator (numpy broadcasting allowed)."""

    def lower(call: KernelCall) -> Lowered:
        out = call.out_shapes[0]
        if size(out) == 0:
            return Lowered()
        rows = broadcast_rows(out, call.in_shapes[0], call.in_shapes[1])
        spec = KernelSpec.make(
            "common/elemwise_binary.c.j2",
            expr=kernel_expr(name, expr, call.out_dtypes[0]),
            dtype=call.in_dtypes[0].name,
            out_dtype=call.out_dtypes[0].name,
            req=call.req,
            nd=len(rows),
            inner=_INNER[rows[-1][1:]],
        )
        ia = (
            *(r[0] for r in rows),
            *(r[1] for r in rows[:-1]),
            *(r[2] for r in rows[:-1]),
        )
        return Lowered((Launch(spec, ia),))

    return Kernel(lower)
