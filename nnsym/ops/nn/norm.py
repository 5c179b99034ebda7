"""LayerNorm, InstanceNorm, GroupNorm and L2Normalization.

All four normalise groups of entries of a (A, R, B) view of the data: every (a, b) position is
a group of R entries, with its statistics at a * B + b. The centred ones (LayerNorm,
InstanceNorm, GroupNorm) subtract the group mean, divide by sqrt(var + eps) and apply gamma and
beta, indexed by c = (i / cstride) % C for an entry's flat index i; L2Normalization divides by
sqrt(sum of squares + eps). One kernel template pair (``nn/norm.c.j2``,
``nn/norm_backward.c.j2``) serves them all; each operator only says how its data maps to the
view:

==================  ===================  =====================  ==============
operator            (A, R, B)            (cstride, C)           statistics
==================  ===================  =====================  ==============
LayerNorm(axis)     (pre, d[axis], post) (post, d[axis])        d, axis -> 1
InstanceNorm        (N * C, S, 1)        (S, C)                 (N, C)
GroupNorm(G)        (N * G, C / G * S, 1) (C / G * S, G)        (N, G)
L2Normalization     instance (N, rest, 1); channel (N, C, S); spatial (N * C, S, 1)
==================  ===================  =====================  ==============

As in MXNet 1.9.1, GroupNorm's gamma and beta have one entry per group (num_groups,), and
InstanceNorm's hidden second statistic is the variance (the others store the std). The epsilons
are C floats in MXNet, so the kernels use eps rounded to float32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node, zeros_like
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    merge_shape,
    norm_axis,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, node_gradient
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")

Layout = tuple[int, int, int, int, int]  # (A, R, B, cstride, C)


def _eps(p: Params) -> float:
    """MXNet's eps parameters are C floats."""
    return float(np.float32(p.eps))  # type: ignore[attr-defined]


def _gamma_beta(name: str, ins: list, vec: tuple) -> list:
    new = [ins[0]]
    for what, given in zip(("gamma", "beta"), ins[1:]):
        try:
            new.append(merge_shape(given, vec))
        except RuleError:
            raise RuleError(
                f"{what} has shape {shape_str(given)} but {name} needs {shape_str(vec)} for "
                f"data {shape_str(ins[0])}"
            ) from None
    return new


def _check_float(name: str, dt: np.dtype, allowed: tuple[str, ...] = FLOAT_DTYPES) -> None:
    if dt.name not in allowed:
        raise NoKernelError(f"{name} has dense kernels for {allowed}, not {dt.name}")


def _reference_center(x: np.ndarray, layout: Layout, eps: float, gamma=None, beta=None):
    """out, mean, var, std of the centred normalisation over the (A, R, B) view, in float64."""
    a, r, b, cstride, c = layout
    v = x.astype(np.float64).reshape(a, r, b)
    mu = v.mean(axis=1, keepdims=True) if r else np.zeros((a, 1, b))
    var = ((v - mu) ** 2).mean(axis=1, keepdims=True) if r else np.zeros((a, 1, b))
    sd = np.sqrt(var + eps)
    out = ((v - mu) / sd).reshape(-1)
    if gamma is not None:
        ch = (np.arange(out.size) // max(cstride, 1)) % max(c, 1)
        out = out * gamma.astype(np.float64)[ch] + beta.astype(np.float64)[ch]
    return out.reshape(x.shape), mu.reshape(-1), var.reshape(-1), sd.reshape(-1)


def _forward_launch(call: KernelCall, layout: Layout, *, mode: str, affine: bool,
                    var_out: bool = False) -> Lowered:
    if size(call.in_shapes[0]) == 0 and size(call.out_shapes[-1]) == 0:
        return Lowered()
    n_out = len(call.out_shapes)
    spec = KernelSpec.make(
        "nn/norm.c.j2", dtype=call.in_dtypes[0].name, mode=mode, affine=affine,
        var_out=var_out, req=call.out_req(0), req_mean=call.out_req(1) if n_out == 3 else "null",
        req_std=call.out_req(n_out - 1),
    )
    return Lowered((Launch(spec, layout, (_eps(call.params),)),))


def _backward_launch(call: KernelCall, layout: Layout, *, mode: str,
                     var_in: bool = False) -> Lowered:
    if size(call.in_shapes[1]) == 0:
        return Lowered()
    center = mode == "center"
    spec = KernelSpec.make(
        "nn/norm_backward.c.j2", dtype=call.in_dtypes[1].name, mode=mode, var_in=var_in,
        req_x=call.out_req(0), req_g=call.out_req(1) if center else "null",
        req_b=call.out_req(2) if center else "null",
    )
    return Lowered((Launch(spec, layout, (_eps(call.params),)),))


def _backward_op(name: str, params: type[Params], layout: Callable[[Any, tuple], Layout],
                 stat: str, *, var_in: bool = False) -> OpDef:
    """``_backward_<name>``: (ograd, data, gamma, mean, <stat>) -> data, gamma, beta grads."""

    def lower(call: KernelCall) -> Lowered:
        _check_float(f"{name}'s gradient", call.in_dtypes[1])
        return _backward_launch(call, layout(call.params, call.in_shapes[1]), mode="center",
                                var_in=var_in)

    return register(
        OpDef(
            name=f"_backward_{name}",
            params=params,
            inputs=("ograd", "data", "gamma", "mean", stat),
            outputs=("data_grad", "gamma_grad", "beta_grad"),
            infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
            infer_type=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
            kernels={DENSE: Kernel(lower)},
            differentiable=False,
            doc=f"Gradient of {name} (data, gamma, beta) from the saved mean and {stat}.",
        )
    )


def _center_grad(backward: OpDef) -> Callable[[Node, list[Entry | None]], list[Entry | None]]:
    """From the output's gradient, the data, gamma and the saved statistics (outputs 1, 2);
    like MXNet, gradients arriving at the statistics outputs are ignored (only those: zeros)."""

    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0] if ograds[0] is not None else zeros_like(Entry(node, 0))
        reads = [node.inputs[0], node.inputs[1], Entry(node, 1), Entry(node, 2)]
        b = backward_node(backward, node, [g, *reads])
        return [Entry(b, 0), Entry(b, 1), Entry(b, 2)]

    return grad


# ---------------------------------------------------------------------------------------------
# LayerNorm


@dataclass(frozen=True, kw_only=True)
class LayerNormParams(Params):
    axis: int = field(default=-1, doc="The axis to normalise over (negative counts from the end).")
    eps: float = field(default=1e-5, doc="Epsilon added to the variance.")
    output_mean_var: bool = field(default=False, doc="Also output the mean and the std.")


def layer_norm_layout(p: LayerNormParams, d: tuple) -> Layout:
    ax = p.axis % len(d)
    post = size(d[ax + 1 :])
    return (size(d[:ax]), d[ax], post, post, d[ax])


def layer_norm_shape(p: LayerNormParams, ins: list, outs: list) -> tuple[list, list]:
    """gamma, beta: (data[axis],); mean, std: the data's shape with 1 on the axis."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    try:
        ax = norm_axis(p.axis, len(data))
    except RuleError:
        raise RuleError(
            f"axis {p.axis} is out of range for data of shape {shape_str(data)}"
        ) from None
    stat = (*data[:ax], 1, *data[ax + 1 :])
    return _gamma_beta("LayerNorm", ins, (data[ax],)), [data, stat, stat]


def layer_norm_reference(p: LayerNormParams, data, gamma, beta):
    lay = layer_norm_layout(p, data.shape)
    out, mu, _, sd = _reference_center(data, lay, _eps(p), gamma, beta)
    stat = list(data.shape)
    stat[p.axis % data.ndim] = 1
    dt = data.dtype
    return out.astype(dt), mu.reshape(stat).astype(dt), sd.reshape(stat).astype(dt)


def layer_norm_lowering(call: KernelCall) -> Lowered:
    _check_float("LayerNorm", call.in_dtypes[0])
    return _forward_launch(call, layer_norm_layout(call.params, call.in_shapes[0]),
                           mode="center", affine=True)


BACKWARD_LAYER_NORM = _backward_op("LayerNorm", LayerNormParams, layer_norm_layout, "std")

LAYER_NORM = register(
    OpDef(
        name="LayerNorm",
        params=LayerNormParams,
        inputs=("data", "gamma", "beta"),
        outputs=("output", "mean", "std"),
        num_visible_outputs=lambda p: 3 if p.output_mean_var else 1,
        infer_shape=layer_norm_shape,
        infer_type=same_dtype,
        reference=layer_norm_reference,
        kernels={DENSE: Kernel(layer_norm_lowering)},
        grad=_center_grad(BACKWARD_LAYER_NORM),
        aliases=("_npx_layer_norm",),
        doc="Layer normalisation over one axis: (x - mean) / sqrt(var + eps) * gamma + beta.",
        examples=(
            Example(((2, 3, 4), (4,), (4,))),
            # float16 where the statistics are visible: the table's gradient check differentiates
            # every visible output, and MXNet's gradient ignores the statistics' (see below).
            Example(((2, 3, 4), (3,), (3,)), {"axis": 1, "output_mean_var": True},
                    dtype="float16"),
            Example(((4, 5), (4,), (4,)), {"axis": 0, "eps": 1e-3}),
            Example(((3, 6), (6,), (6,)), dtype="float64"),
            Example(((5,), (5,), (5,)), {"axis": 0}),
        ),
        bad_params=({"axis": "x"}, {"eps": "small"}, {"output_mean_var": "maybe"},
                    {"num_groups": 2}),
    )
)


# ---------------------------------------------------------------------------------------------
# InstanceNorm


@dataclass(frozen=True, kw_only=True)
class InstanceNormParams(Params):
    eps: float = field(default=1e-3, doc="Epsilon added to the variance.")


def instance_norm_layout(p: InstanceNormParams, d: tuple) -> Layout:
    s = size(d[2:])
    return (d[0] * d[1], s, 1, s, d[1])


def instance_norm_shape(p: InstanceNormParams, ins: list, outs: list) -> tuple[list, list]:
    """gamma, beta: (C,); the hidden mean and var: (N, C)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 2:
        raise RuleError(
            f"data has shape {shape_str(data)}; InstanceNorm needs (batch, channel, ...) data"
        )
    stat = (data[0], data[1])
    return _gamma_beta("InstanceNorm", ins, (data[1],)), [data, stat, stat]


def instance_norm_reference(p: InstanceNormParams, data, gamma, beta):
    out, mu, var, _ = _reference_center(data, instance_norm_layout(p, data.shape), _eps(p),
                                        gamma, beta)
    stat = data.shape[:2]
    dt = data.dtype
    return out.astype(dt), mu.reshape(stat).astype(dt), var.reshape(stat).astype(dt)


def instance_norm_lowering(call: KernelCall) -> Lowered:
    _check_float("InstanceNorm", call.in_dtypes[0])
    return _forward_launch(call, instance_norm_layout(call.params, call.in_shapes[0]),
                           mode="center", affine=True, var_out=True)


BACKWARD_INSTANCE_NORM = _backward_op(
    "InstanceNorm", InstanceNormParams, instance_norm_layout, "var", var_in=True
)

INSTANCE_NORM = register(
    OpDef(
        name="InstanceNorm",
        params=InstanceNormParams,
        inputs=("data", "gamma", "beta"),
        outputs=("output", "mean", "var"),
        num_visible_outputs=1,
        infer_shape=instance_norm_shape,
        infer_type=same_dtype,
        reference=instance_norm_reference,
        kernels={DENSE: Kernel(instance_norm_lowering)},
        grad=_center_grad(BACKWARD_INSTANCE_NORM),
        doc="Instance normalisation: per (batch, channel), over the spatial axes, then the "
        "channel's gamma and beta. MXNet takes float32 data only; nnsym any float dtype.",
        examples=(
            Example(((2, 3, 4, 5), (3,), (3,))),
            Example(((2, 3, 6), (3,), (3,)), {"eps": 1e-5}),
            Example(((3, 4), (4,), (4,)), {"eps": 0.1}),
        ),
        bad_params=({"eps": "small"}, {"axis": 1}),
    )
)


# ---------------------------------------------------------------------------------------------
# GroupNorm


@dataclass(frozen=True, kw_only=True)
class GroupNormParams(Params):
    num_groups: int = field(default=1, lower=1, doc="Number of channel groups.")
    eps: float = field(default=1e-5, doc="Epsilon added to the variance.")
    output_mean_var: bool = field(default=False, doc="Also output the mean and the std.")


def group_norm_layout(p: GroupNormParams, d: tuple) -> Layout:
    g = p.num_groups
    r = d[1] // g * size(d[2:])
    return (d[0] * g, r, 1, r, g)


def group_norm_shape(p: GroupNormParams, ins: list, outs: list) -> tuple[list, list]:
    """gamma, beta: (num_groups,) (MXNet 1.9.1); mean, std: (N, num_groups)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 3:
        raise RuleError(
            f"data has shape {shape_str(data)}; GroupNorm needs (batch, channel, spatial...) "
            "data of at least 3 dimensions"
        )
    if data[1] is not None and data[1] % p.num_groups:
        raise RuleError(
            f"data {shape_str(data)} has {data[1]} channels, not divisible into "
            f"{p.num_groups} groups"
        )
    stat = (data[0], p.num_groups)
    return _gamma_beta("GroupNorm", ins, (p.num_groups,)), [data, stat, stat]


def group_norm_reference(p: GroupNormParams, data, gamma, beta):
    out, mu, _, sd = _reference_center(data, group_norm_layout(p, data.shape), _eps(p),
                                       gamma, beta)
    stat = (data.shape[0], p.num_groups)
    dt = data.dtype
    return out.astype(dt), mu.reshape(stat).astype(dt), sd.reshape(stat).astype(dt)


def group_norm_lowering(call: KernelCall) -> Lowered:
    _check_float("GroupNorm", call.in_dtypes[0])
    return _forward_launch(call, group_norm_layout(call.params, call.in_shapes[0]),
                           mode="center", affine=True)


BACKWARD_GROUP_NORM = _backward_op("GroupNorm", GroupNormParams, group_norm_layout, "std")

GROUP_NORM = register(
    OpDef(
        name="GroupNorm",
        params=GroupNormParams,
        inputs=("data", "gamma", "beta"),
        outputs=("output", "mean", "std"),
        num_visible_outputs=lambda p: 3 if p.output_mean_var else 1,
        infer_shape=group_norm_shape,
        infer_type=same_dtype,
        reference=group_norm_reference,
        kernels={DENSE: Kernel(group_norm_lowering)},
        grad=_center_grad(BACKWARD_GROUP_NORM),
        doc="Group normalisation: the channels split into num_groups groups, each normalised "
        "per batch entry over its channels and spatial axes; gamma and beta per group.",
        examples=(
            Example(((2, 4, 5), (1,), (1,))),
            Example(((2, 4, 3, 2), (2,), (2,)), {"num_groups": 2}),
            Example(((2, 4, 3), (4,), (4,)), {"num_groups": 4, "output_mean_var": True},
                    dtype="float16"),
            Example(((2, 6, 3), (3,), (3,)), {"num_groups": 3, "eps": 1e-3}, dtype="float64"),
        ),
        bad_params=({"num_groups": 0}, {"eps": "small"}, {"groups": 2}),
    )
)


# ---------------------------------------------------------------------------------------------
# L2Normalization


@dataclass(frozen=True, kw_only=True)
class L2NormalizationParams(Params):
    eps: float = field(default=1e-10, doc="Added to the sum of squares.")
    mode: str = field(
        default="instance", choices=("channel", "instance", "spatial"),
        doc="instance: over all but axis 0; channel: over axis 1; spatial: over axes 2...",
    )


def l2_layout(p: L2NormalizationParams, d: tuple) -> Layout:
    if p.mode == "instance":
        return (d[0], size(d[1:]), 1, 1, 1)
    if p.mode == "channel":
        return (d[0], d[1], size(d[2:]), 1, 1)
    return (d[0] * d[1], size(d[2:]), 1, 1, 1)


def l2_shape(p: L2NormalizationParams, ins: list, outs: list) -> tuple[list, list]:
    """The hidden norm: (N,) for instance, the data with 1 on axis 1 for channel, (N, C) for
    spatial (channel and spatial need 3-D data at least, as MXNet)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < (1 if p.mode == "instance" else 3):
        raise RuleError(
            f"data has shape {shape_str(data)}; L2Normalization mode {p.mode!r} needs at "
            "least 3 dimensions"
        )
    norm: tuple
    if p.mode == "instance":
        norm = (data[0],)
    elif p.mode == "channel":
        norm = (data[0], 1, *data[2:])
    else:
        norm = (data[0], data[1])
    return [data], [data, norm]


def l2_reference(p: L2NormalizationParams, data):
    a, r, b, _, _ = l2_layout(p, data.shape)
    v = data.astype(np.float64).reshape(a, r, b)
    n = np.sqrt((v * v).sum(axis=1, keepdims=True) + _eps(p))
    norm_shape = l2_shape(p, [data.shape], [None, None])[1][1]
    return (v / n).reshape(data.shape).astype(data.dtype), n.reshape(norm_shape).astype(
        data.dtype
    )


def l2_lowering(call: KernelCall) -> Lowered:
    _check_float("L2Normalization", call.in_dtypes[0])
    return _forward_launch(call, l2_layout(call.params, call.in_shapes[0]), mode="l2",
                           affine=False)


def l2_backward_lowering(call: KernelCall) -> Lowered:
    _check_float("L2Normalization's gradient", call.in_dtypes[1])
    return _backward_launch(call, l2_layout(call.params, call.in_shapes[1]), mode="l2")


BACKWARD_L2_NORMALIZATION = register(
    OpDef(
        name="_backward_L2Normalization",
        params=L2NormalizationParams,
        inputs=("ograd", "output", "norm"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1]]),
        kernels={DENSE: Kernel(l2_backward_lowering)},
        differentiable=False,
        doc="Gradient of L2Normalization from its output and norm: (g - y * sum g y) / norm.",
    )
)

L2_NORMALIZATION = register(
    OpDef(
        name="L2Normalization",
        params=L2NormalizationParams,
        inputs=("data",),
        outputs=("output", "norm"),
        num_visible_outputs=1,
        infer_shape=l2_shape,
        infer_type=same_dtype,
        reference=l2_reference,
        kernels={DENSE: Kernel(l2_lowering)},
        grad=node_gradient(BACKWARD_L2_NORMALIZATION, lambda n: [Entry(n, 0), Entry(n, 1)]),
        doc="Divides the data by its L2 norm sqrt(sum x^2 + eps), per instance, per position "
        "across channels, or per channel across the spatial axes.",
        examples=(
            Example(((2, 3, 4),)),
            Example(((3, 5),), {"eps": 1e-3}),
            Example(((2, 3, 4, 2),), {"mode": "channel"}),
            Example(((2, 3, 4, 2),), {"mode": "spatial"}, dtype="float64"),
        ),
        bad_params=({"mode": "batch"}, {"eps": "x"}, {"axis": 1}),
    )
)
