"""``broadcast_to``/``broadcast_axis`` and axis reductions (``sum``, ``mean``, ``max``, ``min``,
``prod``, ``norm``). (The broadcasting binary operators, ``broadcast_add``, ..., are in the
elementwise family: ``nnsym.ops.elemwise.broadcast``.)

Shape rules follow MXNet 1.9.1 exactly, including what it leaves unknown on partial input: a
reduction over all axes gives ``(1,)`` (never ``()``), and an empty ``axis`` reduces everything
even when ``exclude`` is set.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from nnsym.errors import OperatorParamError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    StypeRule,
    known,
    register,
    same_dtype,
)
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, comptype, size
from nnsym.ops.common.exprs import broadcast_rows, is_integer, trunc_div
from nnsym.ops.common.grad import GradFn, node_gradient, refuse_integer_division
from nnsym.ops.common.lowering import grad_launch, reduce_out_shape, strided_lowering
from nnsym.ops.reduce.sparse import sum_csr
from nnsym.types import DispatchMode, SType, shape_str

Array = np.ndarray

# ---------------------------------------------------------------------------------------------
# broadcast_to, broadcast_axis


@dataclass(frozen=True, kw_only=True)
class BroadcastToParams(Params):
    shape: tuple[int, ...] = field(
        default=(), doc="Target shape; a 0 keeps the input's dimension there."
    )


def broadcast_to_shape(p: BroadcastToParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) != len(p.shape):
        raise RuleError(
            f"operand of shape {shape_str(data)} cannot be broadcast to {p.shape}: "
            f"{len(data)} vs {len(p.shape)} dimensions"
        )
    out: list[int | None] = []
    for d, t in zip(data, p.shape):
        if t < 0:
            raise RuleError(f"target shape {p.shape} has a negative dimension")
        if t == 0:
            out.append(d)
            continue
        # NOTE: MXNet also raises when the input dim is still unknown; nnsym waits instead.
        if d is not None and d not in (1, t):
            raise RuleError(f"array cannot be broadcast from {shape_str(data)} to {p.shape}")
        out.append(t)
    return list(ins), [tuple(out)]


def broadcast_to_reference(p: BroadcastToParams, x: Array) -> Array:
    target = tuple(d if t == 0 else t for d, t in zip(x.shape, p.shape))
    return np.array(np.broadcast_to(x, target))


@dataclass(frozen=True, kw_only=True)
class BroadcastAxisParams(Params):
    axis: tuple[int, ...] = field(default=(), doc="The axes to broadcast (non-negative).")
    size: tuple[int, ...] = field(default=(), doc="Target sizes of the broadcast axes.")


def broadcast_axis_shape(p: BroadcastAxisParams, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's BroadcastAxesShape: needs the whole input shape; axes must be non-negative."""
    data = ins[0]
    if len(p.axis) != len(p.size):
        raise RuleError(f"axis {p.axis} and size {p.size} must have the same length")
    if not known(data):
        return list(ins), list(outs)
    out = list(data)
    for a, s in zip(p.axis, p.size):
        if not 0 <= a < len(out):
            raise RuleError(f"axis {a} must be in range [0, {len(out)}) for {shape_str(data)}")
        if out[a] != 1:
            raise RuleError(
                f"broadcasting axis {a} must have size 1, got {out[a]} in {shape_str(tuple(out))}"
            )
        if s < 0:
            raise RuleError(f"size {p.size} has a negative entry")
        out[a] = s
    return list(ins), [tuple(out)]


def broadcast_axis_reference(p: BroadcastAxisParams, x: Array) -> Array:
    target = list(x.shape)
    for a, s in zip(p.axis, p.size):
        target[a] = s
    return np.array(np.broadcast_to(x, tuple(target)))


# ---------------------------------------------------------------------------------------------
# Reductions


@dataclass(frozen=True, kw_only=True)
class ReduceAxesParams(Params):
    axis: tuple[int, ...] | None = field(
        default=None,
        doc="Axes to reduce (negative counts from the end); None or () reduces all into (1,).",
    )
    keepdims: bool = field(default=False, doc="Keep reduced axes as dimensions of size one.")
    exclude: bool = field(default=False, doc="Reduce the axes NOT in axis instead.")


def reduce_shape(p: ReduceAxesParams, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's ReduceAxesShape: needs the input's ndim only."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    return list(ins), [reduce_out_shape(data, p.axis, p.keepdims, p.exclude)]


def _np_axes(axis: tuple[int, ...] | None, exclude: bool, ndim: int) -> tuple[int, ...]:
    """The axes numpy reduces for MXNet's (axis, exclude)."""
    if not axis:
        return tuple(range(ndim))
    picked = {a % ndim for a in axis}
    if exclude:
        return tuple(i for i in range(ndim) if i not in picked)
    return tuple(sorted(picked))


def _mx_result(r: Any, dtype: np.dtype) -> Array:
    """MXNet's legacy shapes have no 0-d arrays: a full reduction gives (1,)."""
    a: Array = np.asarray(r).astype(dtype, copy=False)
    return a.reshape(1) if a.ndim == 0 else a


Reducer = Callable[[Array, tuple[int, ...], bool], Array]


def _reduce_reference(fn: Reducer) -> Callable[[ReduceAxesParams, Array], Array]:
    def ref(p: ReduceAxesParams, x: Array) -> Array:
        axes = _np_axes(p.axis, p.exclude, x.ndim)
        with np.errstate(all="ignore"):
            return _mx_result(fn(x, axes, p.keepdims), x.dtype)

    return ref


def _mean(x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
    s: Array = np.asarray(np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype))
    n = int(np.prod([x.shape[a] for a in axes]))
    if is_integer(x.dtype):
        # MXNet sums in the data's type, then divides in it too (C: truncation toward zero).
        return trunc_div(s, np.asarray(n, dtype=x.dtype))
    return np.asarray(s / np.asarray(n, dtype=x.dtype))


class Reduction(NamedTuple):
    name: str
    aliases: tuple[str, ...]
    fn: Reducer
    sparse: bool
    doc: str


# fmt: off
REDUCTIONS: tuple[Reduction, ...] = (
    Reduction("sum", ("sum_axis",),
              lambda x, a, k: np.sum(x, axis=a, keepdims=k, dtype=x.dtype), True,
              "Sum over the given axes (accumulated in the data's type)."),
    Reduction("mean", (), _mean, True,
              "Mean over the given axes (integer data: truncated, as MXNet computes it)."),
    Reduction("max", ("max_axis",), lambda x, a, k: np.max(x, axis=a, keepdims=k), False,
              "Maximum over the given axes (NaN propagates)."),
    Reduction("min", ("min_axis",), lambda x, a, k: np.min(x, axis=a, keepdims=k), False,
              "Minimum over the given axes (NaN propagates)."),
    Reduction("prod", (), lambda x, a, k: np.prod(x, axis=a, keepdims=k, dtype=x.dtype), False,
              "Product over the given axes (accumulated in the data's type)."),
    Reduction("nansum", (), lambda x, a, k: np.nansum(x, axis=a, keepdims=k, dtype=x.dtype),
              False, "Sum over the given axes, NaN counted as zero."),
    Reduction("nanprod", (),
              lambda x, a, k: np.nanprod(x, axis=a, keepdims=k, dtype=x.dtype), False,
              "Product over the given axes, NaN counted as one."),
)
# fmt: on


def _reduce_examples(name: str) -> tuple[Example, ...]:
    return (
        Example(((2, 3, 4),)),
        Example(((2, 3, 4),), {"axis": 1}),
        Example(((2, 3, 4),), {"axis": (0, 2)}, dtype="float64"),
        Example(((2, 3, 4),), {"axis": -1, "keepdims": True}),
        Example(((2, 3, 4),), {"keepdims": True}),
        Example(((2, 3, 4),), {"axis": 1, "exclude": True}),
        Example(((2, 3, 4),), {"axis": (0, -1), "exclude": True, "keepdims": True}),
        Example(((2, 3, 4),), {"axis": (0, 1, 2), "exclude": True}),
        Example(((2, 3, 4),), {"axis": (), "exclude": True}),
        Example(((5,),), {"axis": 0}, dtype="float16"),
        Example(((3, 4),), {"axis": 0}, dtype="int32", low=-5, high=5),
    )


_REDUCE_BAD = ({"axis": "a"}, {"keepdims": "maybe"}, {"exclude": 2}, {"ord": 2})


# ---------------------------------------------------------------------------------------------
# norm

NORM_OUT_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8")


@dataclass(frozen=True, kw_only=True)
class NormParams(Params):
    ord: int = field(
        default=2, doc="Order of the norm; only 1 and 2 can be computed (as in MXNet)."
    )
    axis: tuple[int, ...] | None = field(
        default=None, doc="Axes to reduce; None or () reduces all into (1,)."
    )
    out_dtype: str | None = field(
        default=None, choices=NORM_OUT_DTYPES, kind="dtype", doc="The output's data type."
    )
    keepdims: bool = field(default=False, doc="Keep reduced axes as dimensions of size one.")


def norm_shape(p: NormParams, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's NormShape: needs the whole input shape (unlike sum, which needs its ndim)."""
    data = ins[0]
    if not known(data):
        return list(ins), list(outs)
    return list(ins), [reduce_out_shape(data, p.axis, p.keepdims, False)]


def norm_dtype(p: NormParams, ins: list, outs: list) -> tuple[list, list]:
    """``out_dtype`` when given (the input is left alone), else the input's dtype."""
    if p.out_dtype is None:
        return same_dtype(p, ins, outs)
    # NOTE: MXNet raises here while the input dtype is unknown; nnsym just waits for it.
    return list(ins), [np.dtype(p.out_dtype)]


def norm_reference(p: NormParams, x: Array) -> Array:
    if p.ord not in (1, 2):
        raise ValueError(f"norm supports ord=1 and ord=2, got {p.ord}")
    axes = _np_axes(p.axis, False, x.ndim)
    v = x.astype(np.float64)
    if p.ord == 1:
        r = np.sum(np.abs(v), axis=axes, keepdims=p.keepdims)
    else:
        r = np.sqrt(np.sum(v * v, axis=axes, keepdims=p.keepdims))
    return _mx_result(r, np.dtype(p.out_dtype or x.dtype))


# ---------------------------------------------------------------------------------------------
# Dense kernels. broadcast_to/broadcast_axis are strided copies (stride 0 along the broadcast
# dims) through the shared strided-copy kernel; reductions (and argmax/argmin in
# ``nnsym.ops.reduce.index``) use ``reduce/broadcast_reduce_reduce.c.j2``.


def _broadcast_copy(call: KernelCall) -> Lowered:
    """Copy the input into the output, reading broadcast (size-1 -> n) dims with stride 0."""
    shape, out = call.in_shapes[0], call.out_shapes[0]
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = 0 if shape[i] == 1 else acc
        acc *= shape[i]
    return strided_lowering(call, out, strides, 0)


# Outputs accumulated together when the innermost dim is kept: whole 16 KiB float32 rows of a
# 4096-wide input stream in (measured: sum(axis=0) of 4096x4096 float32 ~2x faster than 256).
REDUCE_BLOCK = 4096


def _limit(dtype: np.dtype, high: bool) -> str:
    """The C name of the largest/smallest value of ``dtype`` (infinities for floats)."""
    if dtype.kind == "f":
        return "INFINITY" if high else "-INFINITY"
    if dtype.kind in "ub":
        bits = 8 * dtype.itemsize
        return f"UINT{bits}_MAX" if high else "0"
    return f"INT{8 * dtype.itemsize}_{'MAX' if high else 'MIN'}"


def reduce_lowering(call: KernelCall, op: str, axes: tuple[int, ...]) -> Lowered:
    """One reduction kernel over the input's ``axes`` (numpy axes, non-negative); ``op`` is one
    of sum, mean, prod, nansum, nanprod, max, min, norm1, norm2, argmax, argmin."""
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    shape, dt = call.in_shapes[0], call.in_dtypes[0]
    reduced = set(axes)
    rows: list[list[int]] = []  # [size, reduced?]; size-1 dims dropped, neighbours merged
    for i, d in enumerate(shape):
        if d == 1:
            continue
        r = int(i in reduced)
        if rows and rows[-1][1] == r:
            rows[-1][0] *= d
        else:
            rows.append([d, r])
    if not any(r for _, r in rows):
        rows.insert(0, [1, 1])  # nothing to reduce: one reduced step over kept rows
    strides, step = [0] * len(rows), 1
    for i in range(len(rows) - 1, -1, -1):
        strides[i] = step
        step *= rows[i][0]
    count = size([d for d, r in rows if r])
    # NOTE: argmax/argmin reduce one axis (or all, which collapse into one): a reduced innermost
    # run is then the whole reduction, which the kernel's second (position) pass relies on.
    assert op not in ("argmax", "argmin") or sum(r for _, r in rows) == 1
    outer = list(zip(rows[:-1], strides[:-1]))
    kept = [x for (d, r), s in outer if not r for x in (d, s)]
    red = [x for (d, r), s in outer if r for x in (d, s)]
    if op in ("sum", "mean", "prod", "nansum", "nanprod"):
        acc = "double" if dt.kind == "f" else "uint64_t"
        init = "1" if op in ("prod", "nanprod") else "0"
    elif op in ("norm1", "norm2"):
        acc, init = "double", "0"
    else:
        acc = comptype(dt)
        init = _limit(dt, high=op in ("min", "argmin"))
    spec = KernelSpec.make(
        "reduce/broadcast_reduce_reduce.c.j2",
        op=op,
        in_dtype=dt.name,
        out_dtype=call.out_dtypes[0].name,
        req=call.req,
        nk=len(kept) // 2,
        nr=len(red) // 2,
        inner="R" if rows[-1][1] else "K",
        acc=acc,
        init=init,
        block=REDUCE_BLOCK,
        par_min=PAR_MIN,
    )
    return Lowered((Launch(spec, (rows[-1][0], count, *kept, *red)),))


def _reduce_kernel(op: str) -> Kernel:
    def lower(call: KernelCall) -> Lowered:
        p = call.params
        return reduce_lowering(call, op, _np_axes(p.axis, p.exclude, len(call.in_shapes[0])))

    return Kernel(lower)


def _norm_lowering(call: KernelCall) -> Lowered:
    p = call.params
    if p.ord not in (1, 2):
        raise OperatorParamError(f"norm supports ord=1 and ord=2, got ord={p.ord}")
    axes = _np_axes(p.axis, False, len(call.in_shapes[0]))
    return reduce_lowering(call, f"norm{p.ord}", axes)


# ---------------------------------------------------------------------------------------------
# Gradients (common/broadcast_reduce_backward.c.j2): broadcast_to's gradient sums over the
# broadcast axes; a sum/mean spreads the output gradient back over the reduced axes.


def _like_data_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """(ograd, data) -> data grad shaped as the data (read for its shape only)."""
    like = ins[1] if ins[1] is not None else outs[0]
    return [ins[0], like], [like]


def _shape_only_gradient(name: str, params: type[Params], lower: Any, doc: str) -> GradFn:
    """``_backward_<name>(ograd, data) -> data grad``, the data read for its shape only."""
    op = register(OpDef(
        name=f"_backward_{name}",
        params=params,
        inputs=("ograd", "data"),
        outputs=("data_grad",),
        infer_shape=_like_data_shape,
        infer_type=same_dtype,
        ignore_inputs=(1,),
        kernels={DENSE: Kernel(lower)},
        differentiable=False,
        doc=doc,
    ))

    return node_gradient(op, lambda n: n.inputs[:1])


def _broadcast_copy_backward(call: KernelCall) -> Lowered:
    """Sum the output gradient over the axes the input was broadcast along."""
    g, data = call.in_shapes
    rows = broadcast_rows(g, data, g)
    return Lowered((grad_launch("reduce", call, rows, (size(data), 0), req=call.out_req(0)),))


def _reduce_backward(expr: str, mean: bool = False) -> Any:
    """The lowering of a reduction's gradient ``expr`` (see the template's "spread" kind)."""
    uses_y = re.search(r"\by\b", expr) is not None

    def lower(call: KernelCall) -> Lowered:
        p = call.params
        if getattr(p, "out_dtype", None) is not None and call.in_dtypes[0] != call.out_dtypes[0]:
            raise OperatorParamError("the gradient of norm with out_dtype is not supported yet")
        refuse_integer_division("a reduction's gradient", (expr,), call.out_dtypes[0])
        data = call.in_shapes[1]
        kept = tuple(d or 0 for d in reduce_out_shape(data, p.axis, True,
                                                      getattr(p, "exclude", False)))
        rows = broadcast_rows(data, kept, data)
        n_red = size(data) // max(size(kept), 1) if size(kept) else 0
        scale = 1.0 / n_red if mean and n_red else 1.0
        return Lowered((grad_launch("spread", call, rows, fa=(scale,), req=call.out_req(0),
                                     expr=expr, uses_y=uses_y),))

    return lower


def _reduction_gradient(name: str, params: type[Params], expr: str, doc: str,
                        mean: bool = False, shape_only: bool = False) -> GradFn:
    """``_backward_<name>(ograd, data[, output]) -> data grad`` from ``expr``; the data is read
    for its shape only where the expression does not use x."""
    uses_y = re.search(r"\by\b", expr) is not None
    op = register(OpDef(
        name=f"_backward_{name}",
        params=params,
        inputs=("ograd", "data") + (("output",) if uses_y else ()),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        ignore_inputs=(1,) if shape_only else (),
        kernels={DENSE: Kernel(_reduce_backward(expr, mean))},
        differentiable=False,
        doc=doc,
    ))

    return node_gradient(op, lambda n: [n.inputs[0], *([Entry(n, 0)] if uses_y else [])])


REDUCE_GRADS: dict[str, GradFn] = {
    "sum": _reduction_gradient("sum", ReduceAxesParams, "scale * g",
                               "Gradient of sum: the output gradient spread over the axes.",
                               shape_only=True),
    "mean": _reduction_gradient("mean", ReduceAxesParams, "scale * g",
                                "Gradient of mean: the output gradient / n over the axes.",
                                mean=True, shape_only=True),
    "max": _reduction_gradient("max", ReduceAxesParams, "x == y ? g : 0",
                               "Gradient of max: to every element equal to the maximum."),
    "min": _reduction_gradient("min", ReduceAxesParams, "x == y ? g : 0",
                               "Gradient of min: to every element equal to the minimum."),
    "prod": _reduction_gradient("prod", ReduceAxesParams, "g * y / x",
                                "Gradient of prod: g * prod / x (as MXNet; undefined at x = 0)."),
    "nansum": _reduction_gradient("nansum", ReduceAxesParams, "x != x ? 0 : g",
                                  "Gradient of nansum: the output gradient, 0 at NaN."),
    "nanprod": _reduction_gradient("nanprod", ReduceAxesParams, "x != x ? 0 : g * y / x",
                                   "Gradient of nanprod: g * nanprod / x, 0 at NaN."),
}
NORM_GRADS = {
    1: _reduction_gradient("norm1", NormParams, "x > 0 ? g : (x < 0 ? -g : 0)",
                           "Gradient of the 1-norm: g * sign(x)."),
    2: _reduction_gradient("norm2", NormParams, "y == 0 ? 0 : g * x / y",
                           "Gradient of the 2-norm: g * x / norm (0 where the norm is 0)."),
}


def norm_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    fn = NORM_GRADS.get(node.params.ord)
    if fn is None:
        raise OperatorParamError(f"node {node.name!r} (norm): ord must be 1 or 2")
    return fn(node, ograds)


BROADCAST_TO_GRAD = _shape_only_gradient(
    "broadcast_to", NoParams, _broadcast_copy_backward,
    "Gradient of broadcast_to and broadcast_axis: summed over the broadcast axes.")


# ---------------------------------------------------------------------------------------------
# Registration

BROADCAST_TO = register(
    OpDef(
        name="broadcast_to",
        params=BroadcastToParams,
        infer_shape=broadcast_to_shape,
        infer_type=same_dtype,
        kernels={DENSE: Kernel(_broadcast_copy)},
        grad=BROADCAST_TO_GRAD,
        reference=broadcast_to_reference,
        doc="Broadcasts size-1 dimensions of the input to the given shape.",
        examples=(
            Example(((1, 3),), {"shape": (4, 3)}),
            Example(((2, 1),), {"shape": (0, 5)}),
            Example(((2, 1, 1),), {"shape": (0, 3, 0)}, dtype="float64"),
            Example(((1,),), {"shape": (5,)}, dtype="int32", low=-5, high=5),
            Example(((2, 3),), {"shape": (2, 3)}, dtype="float16"),
        ),
        bad_params=({"shape": "(a)"}, {"shap": (2, 3)}),
    )
)

BROADCAST_AXIS = register(
    OpDef(
        name="broadcast_axis",
        params=BroadcastAxisParams,
        infer_shape=broadcast_axis_shape,
        infer_type=same_dtype,
        kernels={DENSE: Kernel(_broadcast_copy)},
        grad=BROADCAST_TO_GRAD,
        reference=broadcast_axis_reference,
        aliases=("broadcast_axes",),
        doc="Broadcasts the input along the given size-1 axes.",
        examples=(
            Example(((1, 3, 1),), {"axis": (0, 2), "size": (2, 4)}),
            Example(((1, 3),), {"axis": 0, "size": 5}),
            Example(((2, 1, 3),), {"axis": 1, "size": 4}, dtype="float64"),
            Example(((3, 1),), {"axis": 1, "size": 2}, dtype="int32", low=-5, high=5),
            Example(((1, 1),), {}),
        ),
        bad_params=({"axis": "x"}, {"size": (1, 2.5)}, {"shape": (2,)}),
    )
)

# sum of a csr over axis 0 or 1: the csr kernel, dense result (MXNET-FACTS 4.6).
_SUM_STYPE_RULES = (
    StypeRule((SType.CSR,), (SType.DEFAULT,), DispatchMode.FCOMPUTE_EX,
              when=lambda p: p.axis is not None and len(p.axis) == 1 and not p.exclude,
              kernel=sum_csr),
)

REDUCE_OPS: dict[str, OpDef] = {
    row.name: register(
        OpDef(
            name=row.name,
            params=ReduceAxesParams,
            infer_shape=reduce_shape,
            infer_type=same_dtype,
            kernels={DENSE: _reduce_kernel(row.name)},
            stype_rules=_SUM_STYPE_RULES if row.name == "sum" else (),
            grad=REDUCE_GRADS.get(row.name),
            reference=_reduce_reference(row.fn),
            aliases=row.aliases,
            sparse=row.sparse,
            doc=row.doc,
            examples=_reduce_examples(row.name),
            bad_params=_REDUCE_BAD,
        )
    )
    for row in REDUCTIONS
}

NORM = register(
    OpDef(
        name="norm",
        params=NormParams,
        infer_shape=norm_shape,
        infer_type=norm_dtype,
        kernels={DENSE: Kernel(_norm_lowering)},
        grad=norm_grad,
        reference=norm_reference,
        sparse=True,
        doc="L1 or L2 norm over the given axes (over all elements by default).",
        examples=(
            Example(((2, 3, 4),)),
            Example(((2, 3, 4),), {"axis": 1}),
            Example(((2, 3, 4),), {"ord": 1, "axis": 0}, dtype="float64"),
            Example(((2, 3, 4),), {"axis": (1, 2)}),
            Example(((2, 3, 4),), {"axis": -1, "keepdims": True}),
            Example(((2, 3, 4),), {"keepdims": True, "out_dtype": "float64"}),
            Example(((3, 4),), {"ord": 1, "axis": 1}, dtype="int32", low=-5, high=5),
            Example(((6,),), {"out_dtype": "float32"}, dtype="float16"),
        ),
        bad_params=({"ord": 1.5}, {"out_dtype": "uint8"}, {"exclude": True}, {"axis": "a"}),
    )
)
