"""Lowerings and shape rules shared by the operator families.

Data-moving kernels (a contiguous copy and an N-d strided copy, used by the shape family's
operators, the broadcasting copies and the sparse defs' dense fallbacks), the broadcast/reduce
gradient launch (broadcasting operators, broadcast_to, reductions, PReLU and RReLU gradients) and
the axis-reduction shape rule (reductions and their sparse variants). Their templates are in this
package (``common/...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnsym.ir.opdef import RuleError
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.exprs import broadcast_rows
from nnsym.ops.common.grad import refuse_integer_division
from nnsym.types import Shape

# ---------------------------------------------------------------------------------------------
# Data-moving kernels. Sizes, strides and offsets are run-time values; in write mode a kernel is
# built for an element width rather than a dtype, so one compiled kernel moves float32 and int32
# alike.

_WIDTH = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
# The blocked 2-D transpose, by element size: the block edge (elements; a block of each side
# stays in cache), the register-tile edge (vector lanes) and the integer type of a shuffle mask.
_BLOCK = {1: 128, 2: 128, 4: 64, 8: 64}
_LANES = {1: 16, 2: 8, 4: 8, 8: 4}  # 16-byte vectors for narrow elements, 32-byte otherwise
# Innermost dims up to this long are compile-time sizes (unrolled rows: slices of narrow
# columns, tiles of short rows).
_SHORT = 4
_MASK = {1: "int8_t", 2: "int16_t", 4: "int32_t", 8: "int64_t"}


def elem_dtype(call: KernelCall) -> str:
    """The dtype a data-moving kernel is built for (the element width alone in write mode)."""
    dt = call.out_dtypes[0]
    return _WIDTH[dt.itemsize] if call.req == "write" else dt.name


def c_strides(shape: Sequence[int]) -> list[int]:
    """C-contiguous strides in elements."""
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= shape[i]
    return st


def copy_lowering(call: KernelCall) -> Lowered:
    """out = in (or out += in) over the contiguous elements; in-place safe."""
    n = min(size(call.in_shapes[0]), size(call.out_shapes[0]))
    if n == 0:
        return Lowered()
    spec = KernelSpec.make("common/shape_copy.c.j2", dtype=elem_dtype(call), req=call.req)
    return Lowered((Launch(spec, (n,)),))


def _collapse(dims: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Drop size-1 dims and merge neighbours that are one run in both input and output."""
    out: list[tuple[int, int, int]] = []
    for d, a, b in dims:
        if d == 1:
            continue
        if out and out[-1][1] == a * d and out[-1][2] == b * d:
            out[-1] = (out[-1][0] * d, a, b)
        else:
            out.append((d, a, b))
    return out


def strided_lowering(
    call: KernelCall, dims: Sequence[int], in_strides: Sequence[int], in_offset: int
) -> Lowered:
    """Copy into the contiguous output of shape ``dims`` from the input element at
    ``in_offset + sum(i_k * in_strides[k])`` (strides in elements, any sign)."""
    if any(d == 0 for d in dims):
        return Lowered()
    rows = _collapse(list(zip(dims, in_strides, c_strides(dims)))) or [(1, 1, 1)]
    # A transpose: the innermost output dim strides through the input while another dim is the
    # input's contiguous one. Make that dim the second innermost and copy in 2-D tiles.
    k = next((i for i, r in enumerate(rows[:-1]) if r[1] == 1), None)
    tiled = rows[-1][1] not in (0, 1) and k is not None
    if tiled:
        assert k is not None
        inner = [rows.pop(k), rows.pop()]
        rows = _collapse(rows) + inner
    width = call.out_dtypes[0].itemsize
    # Register tiles add in the storage type: not for float16 (float arithmetic) or bool (or).
    vector = tiled and (call.req == "write" or call.out_dtypes[0].name not in ("float16", "bool"))
    spec = KernelSpec.make(
        "common/shape_strided.c.j2",
        nd=len(rows),
        dtype=elem_dtype(call),
        req=call.req,
        tiled=tiled,
        block=_BLOCK[width] if tiled else 0,
        lanes=_LANES[width] if vector else 0,
        mask=_MASK[width] if vector else "",
        inner=rows[-1][0] if not tiled and len(rows) > 1 and rows[-1][0] <= _SHORT else 0,
    )
    ia = (in_offset, 0, *(r[0] for r in rows), *(r[1] for r in rows), *(r[2] for r in rows))
    return Lowered((Launch(spec, ia),))


# ---------------------------------------------------------------------------------------------
# Axis reductions' output shape


def reduce_axes(axis: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """Sorted non-negative axes, checked the way MXNet's ReduceAxesShapeImpl checks them."""
    axes = sorted(a + ndim if a < 0 else a for a in axis)
    if len(set(axes)) != len(axes):
        raise RuleError(f"reduction axes {axis} have duplicates")
    if axes[-1] >= ndim or axes[0] < 0:
        raise RuleError(f"reduction axis {axis} is out of range for {ndim} dimensions")
    return tuple(axes)


def reduce_out_shape(
    data: Shape, axis: tuple[int, ...] | None, keepdims: bool, exclude: bool
) -> Shape:
    """MXNet's ReduceAxesShapeImpl; unknown input dims carry over as unknown."""
    if not axis:  # None or (): every axis, whatever ``exclude`` says
        return (1,) * len(data) if keepdims else (1,)
    axes = reduce_axes(axis, len(data))
    if keepdims:
        reduced = set(range(len(data))) - set(axes) if exclude else set(axes)
        return tuple(1 if i in reduced else d for i, d in enumerate(data))
    if exclude:
        return tuple(data[a] for a in axes)
    return tuple(d for i, d in enumerate(data) if i not in axes) or (1,)


# ---------------------------------------------------------------------------------------------
# Broadcast/reduce gradients (common/broadcast_reduce_backward.c.j2): a broadcasting operator's
# gradient sums over the broadcast axes; a sum/mean spreads the output gradient back over the
# reduced axes.


def grad_launch(kind: str, call: KernelCall, rows: list[tuple[int, int, int]],
                extra: tuple[int, ...] = (), fa: tuple[float, ...] = (), **lit: Any) -> Launch:
    spec = KernelSpec.make("common/broadcast_reduce_backward.c.j2", kind=kind, nd=len(rows),
                           dtype=call.out_dtypes[0].name, **lit)
    ia = (*(r[0] for r in rows), *(r[1] for r in rows),
          *((r[2] for r in rows) if kind == "binary" else ()), *extra)
    return Launch(spec, ia, fa)


def binary_grad_launch(call: KernelCall, lhs: tuple[int, ...], rhs: tuple[int, ...],
                       exprs: tuple[str, str], uses_y: bool = False,
                       reqs: tuple[str, str] | None = None) -> Launch:
    """The gradients of a broadcasting two-input elementwise function over the output
    gradient's space: ``exprs`` (in g, a, b, y) summed into lhs-shaped and rhs-shaped outputs.
    p = [g, a, b, (y), da, db]; ``reqs`` default to the node's output write modes."""
    refuse_integer_division("a broadcasting operator's gradient", exprs, call.out_dtypes[0])
    rows = broadcast_rows(call.in_shapes[0], lhs, rhs)
    req_a, req_b = reqs if reqs is not None else (call.out_req(0), call.out_req(1))
    return grad_launch("binary", call, rows, (size(lhs), size(rhs)), expr_a=exprs[0],
                       expr_b=exprs[1], uses_y=uses_y, req_a=req_a, req_b=req_b)
