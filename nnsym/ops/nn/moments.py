"""moments: the mean and variance of the data over a set of axes (MXNet's nn/moments)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node, zeros_like
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True, kw_only=True)
class MomentsParams(Params):
    axes: tuple[int, ...] | None = field(
        default=None, doc="Axes to compute the moments over (required in practice, as MXNet)."
    )
    keepdims: bool = field(default=False, doc="Keep the reduced axes with size 1.")


def _axes(p: MomentsParams, ndim: int) -> tuple[int, ...]:
    if not p.axes:
        raise RuleError(
            "moments needs axes: empty axes are not supported (pass every axis for global "
            "moments)"
        )
    axes = []
    for a in p.axes:
        if not -ndim <= a < ndim:
            raise RuleError(f"axis {a} is out of range for {ndim} dimensions")
        axes.append(a % ndim)
    if len(set(axes)) != len(axes):
        raise RuleError(f"moments axes {p.axes} have duplicates")
    return tuple(sorted(axes))


def _out_shape(p: MomentsParams, d: tuple) -> tuple:
    axes = _axes(p, len(d))
    if p.keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(d))
    kept = tuple(n for i, n in enumerate(d) if i not in axes)
    return kept if kept else (1,)


def moments_shape(p: MomentsParams, ins: list, outs: list) -> tuple[list, list]:
    """Both outputs: the data without the axes (size 1 with keepdims; (1,) if none is left)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    try:
        out = _out_shape(p, data)
    except RuleError as e:
        raise RuleError(f"{e} (data {shape_str(data)})") from None
    return [data], [out, out]


def moments_reference(p: MomentsParams, data: np.ndarray):
    axes = _axes(p, data.ndim)
    x = data.astype(np.float64)
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    out = _out_shape(p, data.shape)
    return mu.reshape(out).astype(data.dtype), var.reshape(out).astype(data.dtype)


def _ia(p: MomentsParams, d: tuple) -> tuple[int, ...]:
    axes = _axes(p, len(d))
    strides = [size(d[i + 1 :]) for i in range(len(d))]
    kept = [i for i in range(len(d)) if i not in axes]
    od, os_ = [d[i] for i in kept], [strides[i] for i in kept]
    rd, rs = [d[i] for i in axes], [strides[i] for i in axes]
    return (size(od), size(rd), len(od), len(rd), *od, *os_, *rd, *rs)


def _check(name: str, dt: np.dtype) -> None:
    if dt.name not in FLOAT_DTYPES:
        raise NoKernelError(f"{name} has dense kernels for {FLOAT_DTYPES}, not {dt.name}")


def moments_lowering(call: KernelCall) -> Lowered:
    _check("moments", call.in_dtypes[0])
    spec = KernelSpec.make("nn/moments.c.j2", dtype=call.in_dtypes[0].name,
                           req_mean=call.out_req(0), req_var=call.out_req(1))
    return Lowered((Launch(spec, _ia(call.params, call.in_shapes[0])),))


def moments_backward_lowering(call: KernelCall) -> Lowered:
    _check("moments' gradient", call.in_dtypes[2])
    d = call.in_shapes[2]
    if size(d) == 0:
        return Lowered()
    spec = KernelSpec.make("nn/moments_backward.c.j2", dtype=call.in_dtypes[2].name,
                           req=call.out_req(0))
    return Lowered((Launch(spec, _ia(call.params, d)),))


BACKWARD_MOMENTS = register(
    OpDef(
        name="_backward_moments",
        params=MomentsParams,
        inputs=("ograd_mean", "ograd_var", "data", "mean"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[2]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[2]]),
        kernels={DENSE: Kernel(moments_backward_lowering)},
        differentiable=False,
        doc="Gradient of moments: g_mean / N + g_var * 2 (x - mean) / N.",
    )
)


def moments_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    heads = [g if g is not None else zeros_like(Entry(node, i)) for i, g in enumerate(ograds)]
    b = backward_node(BACKWARD_MOMENTS, node, [*heads, node.inputs[0], Entry(node, 0)])
    return [Entry(b, 0)]


MOMENTS = register(
    OpDef(
        name="moments",
        params=MomentsParams,
        outputs=("output0", "output1"),
        infer_shape=moments_shape,
        infer_type=same_dtype,
        reference=moments_reference,
        kernels={DENSE: Kernel(moments_lowering)},
        grad=moments_grad,
        doc="The mean and the (biased) variance over the given axes.",
        examples=(
            Example(((2, 3, 4),), {"axes": (1,)}),
            Example(((2, 3, 4),), {"axes": (0, 2), "keepdims": True}),
            Example(((2, 3, 4),), {"axes": (-1, 0)}),
            Example(((3, 4),), {"axes": (0, 1)}, dtype="float64"),
        ),
        bad_params=({"axes": "x"}, {"keepdims": "maybe"}, {"axis": 1}),
    )
)
