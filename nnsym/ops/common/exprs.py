"""Numpy semantics and the dense two-input kernel shared by the operator families.

The numpy helpers the operators' references are built from (C division, NaN-propagating
max/min, MXNet's integer math) and the dense two-input elementwise kernel (numpy broadcasting
allowed, ``common/elemwise_binary.c.j2``) with its stride rows. The operators' expression tables
live in their families (the binary ones in ``nnsym.ops.elemwise.elemwise``); the elementwise
family's binary and broadcasting operators and Dropout's gradient run the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, size

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
# Kernels

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


def binary_lowering(call: KernelCall, expr: str) -> Lowered:
    """The dense two-input elementwise kernel (numpy broadcasting allowed) computing the final
    scalar expression ``expr`` (in a and b): the elementwise family's binary and broadcasting
    operators and Dropout's gradient."""
    out = call.out_shapes[0]
    if size(out) == 0:
        return Lowered()
    rows = broadcast_rows(out, call.in_shapes[0], call.in_shapes[1])
    spec = KernelSpec.make(
        "common/elemwise_binary.c.j2",
        expr=expr,
        dtype=call.in_dtypes[0].name,
        out_dtype=call.out_dtypes[0].name,
        req=call.req,
        nd=len(rows),
        inner=_INNER[rows[-1][1:]],
        par_min=PAR_MIN,
    )
    ia = (
        *(r[0] for r in rows),
        *(r[1] for r in rows[:-1]),
        *(r[2] for r in rows[:-1]),
    )
    return Lowered((Launch(spec, ia),))
