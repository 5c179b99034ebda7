"""BatchNorm: per-channel normalisation with learned scale/shift and moving statistics (aux)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from nnsym.ir.graph import Entry
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    merge_shape,
    norm_axis,
    register,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.types import shape_str

PARAM_INPUTS = ("gamma", "beta", "moving_mean", "moving_var")


@dataclass(frozen=True, kw_only=True)
class BatchNormParams(Params):
    eps: float = field(default=1e-3, doc="Epsilon added to the variance to avoid division by 0.")
    momentum: float = field(default=0.9, doc="Momentum of the moving averages.")
    fix_gamma: bool = field(default=True, doc="Fix gamma to 1 (and its gradient to 0).")
    use_global_stats: bool = field(
        default=False, doc="Normalise with the moving statistics even in training."
    )
    output_mean_var: bool = field(
        default=False, doc="Also output the mean and the inverse standard deviation."
    )
    axis: int = field(default=1, doc="The channel axis (negative counts from the end).")
    cudnn_off: bool = field(default=False, doc="Do not use cuDNN (no effect in nnsym).")
    min_calib_range: float | None = field(
        default=None, doc="Calibrated minimum of the output, for quantized BatchNorm."
    )
    max_calib_range: float | None = field(
        default=None, doc="Calibrated maximum of the output, for quantized BatchNorm."
    )

    # BatchNorm_v1's third output is the variance (True in its params).
    out_var: ClassVar[bool] = False


def batch_norm_shape(p: BatchNormParams, ins: list, outs: list) -> tuple[list, list]:
    """gamma, beta, moving_mean, moving_var, mean and var are all ``(C,)``, C = data[axis]."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)  # MXNet needs the data's ndim to say anything
    try:
        ax = norm_axis(p.axis, len(data))
    except RuleError:
        raise RuleError(
            f"channel axis {p.axis} is out of range for data of shape {shape_str(data)}"
        ) from None
    c = data[ax]
    vec = (c,)
    new_ins = [data]
    for name, given in zip(PARAM_INPUTS, ins[1:]):
        # NOTE: MXNet overwrites these shapes without a check; a conflict here is an error.
        try:
            new_ins.append(merge_shape(given, vec))  # type: ignore[arg-type]
        except RuleError:
            raise RuleError(
                f"{name} has shape {shape_str(given)} but data {shape_str(data)} has "
                f"{'?' if c is None else c} channels on axis {p.axis}"
            ) from None
    return new_ins, [data, vec, vec]


def batch_norm_type(p: BatchNormParams, ins: list, outs: list) -> tuple[list, list]:
    """float16 data keeps float32 parameters, statistics and mean/var outputs (MXNet's AccReal)."""
    t = ins[0]
    if t is None:
        return list(ins), list(outs)
    t = np.dtype(t)
    if t.kind != "f":
        raise RuleError(f"BatchNorm supports floating-point data only, not {t.name}")
    tp = np.dtype(np.float32) if t == np.float16 else t
    for name, given in zip(PARAM_INPUTS, ins[1:]):
        if given is not None and np.dtype(given) != tp:
            raise RuleError(
                f"{name} has dtype {np.dtype(given).name} but {t.name} data needs {tp.name} "
                "parameters and statistics"
            )
    return [t, tp, tp, tp, tp], [t, tp, tp]


def batch_norm_reference(p: BatchNormParams, data, gamma, beta, moving_mean, moving_var):
    """Inference mode: normalise with the moving statistics. Like MXNet's forward with
    ``is_train=False``, the extra outputs are moving_mean and 1 / sqrt(moving_var + eps)."""
    ax = p.axis % data.ndim
    bshape = [1] * data.ndim
    bshape[ax] = -1
    tp = moving_mean.dtype
    invstd = 1.0 / np.sqrt(moving_var.astype(np.float64) + p.eps)
    scale = invstd if p.fix_gamma else invstd * gamma.astype(np.float64)
    out = (data.astype(np.float64) - moving_mean.reshape(bshape)) * scale.reshape(bshape)
    out = out + beta.astype(np.float64).reshape(bshape)
    return out.astype(data.dtype), moving_mean.astype(tp, copy=True), invstd.astype(tp)


def batch_norm_lowering(call: KernelCall) -> Lowered:
    """One pass over the data viewed as (outer, C, inner) around the channel axis."""
    p: BatchNormParams = call.params
    shape = call.in_shapes[0]
    ax = p.axis % len(shape)
    c = shape[ax]
    spec = KernelSpec.make(
        "nn/batch_norm.c.j2",
        dtype=call.in_dtypes[0].name,
        pdtype=call.in_dtypes[3].name,
        req=call.req,
        fix_gamma=p.fix_gamma,
        train=call.is_train and not p.use_global_stats,
        out_var=p.out_var,
        par_min=PAR_MIN,
    )
    ia = (size(shape[:ax]), c, size(shape[ax + 1 :]))
    return Lowered((Launch(spec, ia, (float(p.eps),), workspace=8 * max(3 * c, 1)),))


def batch_norm_backward_lowering(call: KernelCall) -> Lowered:
    p: BatchNormParams = call.params
    shape = call.in_shapes[1]
    ax = p.axis % len(shape)
    spec = KernelSpec.make(
        "nn/batch_norm_backward.c.j2",
        dtype=call.in_dtypes[1].name,
        pdtype=call.in_dtypes[2].name,
        fix_gamma=p.fix_gamma,
        train=call.is_train and not p.use_global_stats,
        out_var=p.out_var,
        req_x=call.out_req(0),
        req_g=call.out_req(1),
        req_b=call.out_req(2),
        par_min=PAR_MIN,
    )
    ia = (size(shape[:ax]), shape[ax], size(shape[ax + 1 :]))
    # MXNet's BatchNormParam.momentum is a C float: the moving statistics move by 0.9f, not 0.9
    return Lowered((Launch(spec, ia, (float(p.eps), float(np.float32(p.momentum)))),))


BACKWARD_BATCH_NORM = register(
    OpDef(
        name="_backward_BatchNorm",
        params=BatchNormParams,
        inputs=("ograd", "data", "gamma", "mean", "invstd", "moving_mean", "moving_var"),
        outputs=("data_grad", "gamma_grad", "beta_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
        kernels={DENSE: Kernel(batch_norm_backward_lowering)},
        train_mode=True,
        differentiable=False,
        doc="Gradient of BatchNorm; in training it also moves the moving statistics.",
    )
)


# From the saved mean and inverse std (the forward's extra outputs); the moving statistics
# (aux states) get no gradient.
batch_norm_grad = node_gradient(
    BACKWARD_BATCH_NORM,
    lambda n: [n.inputs[0], n.inputs[1], Entry(n, 1), Entry(n, 2), n.inputs[3], n.inputs[4]],
    to_inputs=(0, 1, 2),
)


BATCH_NORM = register(
    OpDef(
        name="BatchNorm",
        params=BatchNormParams,
        inputs=("data", *PARAM_INPUTS),
        aux=("moving_mean", "moving_var"),
        outputs=("output", "mean", "var"),
        num_visible_outputs=lambda p: 3 if p.output_mean_var else 1,
        infer_shape=batch_norm_shape,
        infer_type=batch_norm_type,
        reference=batch_norm_reference,
        kernels={DENSE: Kernel(batch_norm_lowering)},
        grad=batch_norm_grad,
        train_mode=True,
        pinned_inputs=lambda p: {1: 1.0} if p.fix_gamma else {},
        aliases=("_npx_batch_norm",),
        input_var_attrs={
            "moving_mean": {"__init__": '["zero", {}]'},
            "moving_var": {"__init__": '["one", {}]'},
        },
        doc="Batch normalisation over the channel axis, with moving mean/var as aux states.",
        # Positive values throughout keep moving_var > 0.
        examples=(
            Example(((2, 3, 4, 4), (3,), (3,), (3,), (3,)), low=0.1),
            Example(((2, 3, 4, 4), (3,), (3,), (3,), (3,)), {"fix_gamma": False}, low=0.1),
            Example(((4, 5), (5,), (5,), (5,), (5,)), {"eps": 1e-5, "momentum": 0.8}, low=0.1),
            Example(
                ((2, 3, 4), (4,), (4,), (4,), (4,)),
                {"axis": -1, "fix_gamma": False, "output_mean_var": True},
                low=0.1,
            ),
            Example(
                ((2, 3, 5, 4, 2), (3,), (3,), (3,), (3,)),
                {"use_global_stats": True, "fix_gamma": False},
                low=0.1,
            ),
            Example(((2, 3, 4), (3,), (3,), (3,), (3,)), dtype="float64", low=0.1),
        ),
        bad_params=(
            {"axis": "x"},
            {"eps": "small"},
            {"fix_gamma": "maybe"},
            {"momentum": 0.9, "moment": 0.9},
        ),
    )
)


# ---------------------------------------------------------------------------------------------
# BatchNorm_v1: MXNet's legacy BatchNorm (channel axis 1). It computes what BatchNorm does, but
# its third output is the variance (the batch's in training, moving_var in inference), not the
# inverse standard deviation.


@dataclass(frozen=True, kw_only=True)
class BatchNormV1Params(Params):
    eps: float = field(default=1e-3, doc="Epsilon added to the variance to avoid division by 0.")
    momentum: float = field(default=0.9, doc="Momentum of the moving averages.")
    fix_gamma: bool = field(default=True, doc="Fix gamma to 1 (and its gradient to 0).")
    use_global_stats: bool = field(
        default=False, doc="Normalise with the moving statistics even in training."
    )
    output_mean_var: bool = field(
        default=False, doc="Also output the mean and the variance."
    )

    axis: ClassVar[int] = 1
    out_var: ClassVar[bool] = True


def batch_norm_v1_reference(p: BatchNormV1Params, data, gamma, beta, moving_mean, moving_var):
    """Inference mode: as BatchNorm's, with moving_var itself as the third output."""
    out, mean, _ = batch_norm_reference(p, data, gamma, beta, moving_mean, moving_var)  # type: ignore[arg-type]
    return out, mean, moving_var.astype(moving_mean.dtype, copy=True)


BACKWARD_BATCH_NORM_V1 = register(
    OpDef(
        name="_backward_BatchNorm_v1",
        params=BatchNormV1Params,
        inputs=("ograd", "data", "gamma", "mean", "var", "moving_mean", "moving_var"),
        outputs=("data_grad", "gamma_grad", "beta_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
        kernels={DENSE: Kernel(batch_norm_backward_lowering)},
        train_mode=True,
        differentiable=False,
        doc="Gradient of BatchNorm_v1; in training it also moves the moving statistics.",
    )
)


BATCH_NORM_V1 = register(
    OpDef(
        name="BatchNorm_v1",
        params=BatchNormV1Params,
        inputs=("data", *PARAM_INPUTS),
        aux=("moving_mean", "moving_var"),
        outputs=("output", "mean", "var"),
        num_visible_outputs=lambda p: 3 if p.output_mean_var else 1,
        infer_shape=batch_norm_shape,
        infer_type=batch_norm_type,
        reference=batch_norm_v1_reference,
        kernels={DENSE: Kernel(batch_norm_lowering)},
        grad=node_gradient(
            BACKWARD_BATCH_NORM_V1,
            lambda n: [n.inputs[0], n.inputs[1], Entry(n, 1), Entry(n, 2), n.inputs[3],
                       n.inputs[4]],
            to_inputs=(0, 1, 2),
        ),
        train_mode=True,
        pinned_inputs=lambda p: {1: 1.0} if p.fix_gamma else {},
        input_var_attrs={
            "moving_mean": {"__init__": '["zero", {}]'},
            "moving_var": {"__init__": '["one", {}]'},
        },
        doc="Legacy batch normalisation over axis 1; its extra outputs are mean and variance.",
        examples=(
            Example(((2, 3, 4, 4), (3,), (3,), (3,), (3,)), low=0.1),
            Example(
                ((2, 3, 4), (3,), (3,), (3,), (3,)),
                {"fix_gamma": False, "output_mean_var": True},
                low=0.1,
            ),
            Example(
                ((2, 3, 5, 4), (3,), (3,), (3,), (3,)),
                {"use_global_stats": True, "fix_gamma": False, "eps": 1e-4},
                low=0.1,
            ),
        ),
        bad_params=({"axis": 1}, {"eps": "small"}, {"fix_gamma": "maybe"}),
    )
)
