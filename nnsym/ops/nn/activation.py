"""Activation, LeakyReLU, softmax and log_softmax.

The scalar expressions of every activation type live in the tables below, beside the operator
that uses them, so the kernel generator renders one text for C and CUDA and the gradient builder
takes the derivative from the same row. Forward expressions are in ``x`` (the input); backward
expressions give the input gradient from ``g`` (the output gradient), ``x`` and ``y`` (the
output). Parameters appear by name (``slope``, ``lower_bound``, ``upper_bound``); PReLU's
``gamma`` is the per-channel value broadcast along axis 1, and RReLU's ``mask`` is its hidden
output (the slope applied to each element).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import erf
from typing import Any, NamedTuple

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    elemwise_shape,
    norm_axis,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient, unary_gradient
from nnsym.ops.common.lowering import binary_grad_launch
from nnsym.types import Shape, shape_str


class ActExpr(NamedTuple):
    """One activation type: forward ``y = f(x)``, backward ``dx = f'(g, x, y)``, numpy reference."""

    forward: str
    backward: str
    reference: Callable[..., np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _softrelu(x: np.ndarray) -> np.ndarray:
    # NOTE: MXNet returns x itself above 20, where log1p(exp(x)) == x in float32 anyway.
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


# Activation(act_type=...). MXNet's relu/sigmoid/tanh/softrelu gradients read the output;
# softsign's reads the input.
ACTIVATION: dict[str, ActExpr] = {
    # NOTE: written so that NaN passes through (MXNet's relu is IsNan(a) || a > 0 ? a : 0).
    "relu": ActExpr("x <= 0 ? 0 : x", "y > 0 ? g : 0", lambda x: np.maximum(x, 0)),
    "sigmoid": ActExpr("1 / (1 + exp(-x))", "g * y * (1 - y)", _sigmoid),
    "tanh": ActExpr("tanh(x)", "g * (1 - y * y)", np.tanh),
    "softrelu": ActExpr("x > 20 ? x : log1p(exp(x))", "g * -expm1(-y)", _softrelu),
    "softsign": ActExpr(
        "x / (1 + fabs(x))",
        "g / ((1 + fabs(x)) * (1 + fabs(x)))",
        lambda x: x / (1 + np.abs(x)),
    ),
}

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_LAMBDA = 1.0507009873554804934193349852946
_SQRT1_2 = 0.7071067811865476  # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1 + np.vectorize(erf, otypes=[np.float64])(x * _SQRT1_2)))


# rrelu's slope at inference (also the value of its mask output), and in training.
RRELU_MEAN_SLOPE = "0.5 * (lower_bound + upper_bound)"
RRELU_RANDOM_SLOPE = (
    "(lower_bound + (upper_bound - lower_bound) * nnsym_uniform((uint64_t)seed, (uint64_t)i))"
)

# LeakyReLU(act_type=...). ``gamma`` (prelu) also has a gradient: the sum over every axis but 1
# of ``x > 0 ? 0 : x * g``. rrelu is written for inference, where the slope is the bounds' mean.
LEAKY_RELU: dict[str, ActExpr] = {
    "leaky": ActExpr(
        "x > 0 ? x : slope * x",
        "y > 0 ? g : slope * g",
        lambda x, slope: np.where(x > 0, x, slope * x),
    ),
    "elu": ActExpr(
        "x > 0 ? x : slope * expm1(x)",
        "y > 0 ? g : g * (y + slope)",
        lambda x, slope: np.where(x > 0, x, slope * np.expm1(np.minimum(x, 0))),
    ),
    "selu": ActExpr(
        f"x > 0 ? {SELU_LAMBDA!r} * x : {SELU_LAMBDA * SELU_ALPHA!r} * expm1(x)",
        f"y > 0 ? {SELU_LAMBDA!r} * g : g * (y + {SELU_LAMBDA * SELU_ALPHA!r})",
        lambda x, slope: SELU_LAMBDA * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0))),
    ),
    "gelu": ActExpr(
        f"0.5 * x * (1 + erf(x * {_SQRT1_2!r}))",
        f"g * (0.5 * (1 + erf(x * {_SQRT1_2!r})) + {_INV_SQRT_2PI!r} * x * exp(-0.5 * x * x))",
        lambda x, slope: _gelu(x),
    ),
    "prelu": ActExpr(
        "x > 0 ? x : gamma * x",
        "x > 0 ? g : gamma * g",
        lambda x, gamma: np.where(x > 0, x, gamma * x),
    ),
    "rrelu": ActExpr(
        f"x > 0 ? x : {RRELU_MEAN_SLOPE} * x",
        "y > 0 ? g : mask * g",
        lambda x, slope: np.where(x > 0, x, slope * x),
    ),
}


# ---------------------------------------------------------------------------------------------
# Dense kernels: activation.c.j2 (elementwise table expressions), softmax.c.j2


def elementwise_launch(
    call: KernelCall,
    expr: str,
    fparams: Mapping[str, float] | None = None,
    *,
    gamma: bool = False,
    mask_expr: str | None = None,
) -> Launch:
    """One activation.c.j2 launch of a table expression over the node's first input.

    ``fparams`` maps parameter names used in ``expr`` to their (run-time) values. Shared with the
    loss heads, whose extra inputs (labels) the kernel does not read.
    """
    fparams = dict(fparams or {})
    spec = KernelSpec.make(
        "nn/activation.c.j2",
        expr=expr,
        fparams=tuple(fparams),
        in_dtype=call.in_dtypes[0].name,
        out_dtype=call.out_dtypes[0].name,
        req=call.req,
        n_in=len(call.in_shapes),
        gamma=gamma,
        mask_expr=mask_expr,
    )
    data = call.in_shapes[0]
    if gamma:
        gshape = prelu_gamma_shape(call.in_shapes[1], data)
        assert gshape is not None, (call.in_shapes[1], data)
        d0 = data[0] if data else 1
        d1 = data[1] if len(data) > 1 else 1
        g0 = int(gshape[0] or 1) if gshape else 1
        g1 = int(gshape[1] or 1) if len(gshape) > 1 else 1
        ia: tuple[int, ...] = (d0, d1, size(data[2:]), g1 if g0 > 1 else 0, 1 if g1 > 1 else 0)
    else:
        ia = (size(data),)
    return Launch(spec, ia=ia, fa=tuple(float(v) for v in fparams.values()))


def _activation_lowering(call: KernelCall) -> Lowered:
    return Lowered((elementwise_launch(call, ACTIVATION[call.params.act_type].forward),))


def _leaky_relu_lowering(call: KernelCall) -> Lowered:
    p: LeakyReLUParams = call.params
    expr = LEAKY_RELU[p.act_type].forward
    if p.act_type == "prelu":
        return Lowered((elementwise_launch(call, expr, gamma=True),))
    if p.act_type == "rrelu":
        bounds = {"lower_bound": p.lower_bound, "upper_bound": p.upper_bound}
        if not call.is_train:
            return Lowered((elementwise_launch(call, expr, bounds, mask_expr=RRELU_MEAN_SLOPE),))
        # Training: a slope per element drawn uniformly in [lower, upper] from a seed the runtime
        # sets before every run (fa[2]); the output and the mask compute the same draw.
        launch = elementwise_launch(
            call, f"x > 0 ? x : {RRELU_RANDOM_SLOPE} * x", {**bounds, "seed": 0.0},
            mask_expr=RRELU_RANDOM_SLOPE,
        )
        return Lowered((dataclasses.replace(launch, seed_slot=2),))
    fparams = {"slope": p.slope} if "slope" in expr else {}
    return Lowered((elementwise_launch(call, expr, fparams),))


def softmax_launch(
    call: KernelCall,
    dims: tuple[int, int, int],
    *,
    log: bool = False,
    temperature: float | None = None,
    use_length: bool = False,
) -> Launch:
    """One softmax.c.j2 launch over the middle axis of the ``(outer, L, inner)`` view ``dims``.

    The output is right after the inputs (SoftmaxOutput's label is never read).
    """
    outer, length, inner = dims
    in_dt, out_dt = call.in_dtypes[0], call.out_dtypes[0]
    comp = 8 if "float64" in (in_dt.name, out_dt.name) else 4
    spec = KernelSpec.make(
        "nn/softmax.c.j2",
        in_dtype=in_dt.name,
        out_dtype=out_dt.name,
        req=call.req,
        log=log,
        temperature=temperature is not None,
        use_length=use_length,
        len_dtype=call.in_dtypes[1].name if use_length else None,
        n_in=len(call.in_shapes),
        par_min=PAR_MIN,
    )
    ws = inner * 16 + comp * (length * inner + 2 * inner)
    fa = (float(temperature),) if temperature is not None else ()
    return Launch(spec, ia=(outer, length, inner), fa=fa, workspace=ws)


def _softmax_lowering(log: bool, negate: bool = False):
    def lower(call: KernelCall) -> Lowered:
        p: SoftmaxParams = call.params
        d = call.in_shapes[0]
        ax = p.axis % len(d) if d else 0
        dims = (size(d[:ax]), d[ax] if d else 1, size(d[ax + 1 :]))
        t = p.temperature
        if negate:  # softmin: the softmax of x / -t
            t = -(t if t is not None else 1.0)
        launch = softmax_launch(call, dims, log=log, temperature=t, use_length=bool(p.use_length))
        return Lowered((launch,))

    return lower


# ---------------------------------------------------------------------------------------------
# Activation


@dataclass(frozen=True, kw_only=True)
class ActivationParams(Params):
    act_type: str = field(choices=tuple(sorted(ACTIVATION)), doc="Activation function.")


def activation_reference(p: ActivationParams, data: np.ndarray) -> np.ndarray:
    y = ACTIVATION[p.act_type].reference(data.astype(np.float64))
    return np.asarray(y).astype(data.dtype)


ACTIVATION_OP = register(
    OpDef(
        name="Activation",
        params=ActivationParams,
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        reference=activation_reference,
        kernels={DENSE: Kernel(_activation_lowering)},
        grad=unary_gradient("Activation", lambda p: ACTIVATION[p.act_type].backward,
                            ActivationParams),
        aliases=("_npx_activation",),
        doc="Elementwise activation: relu, sigmoid, tanh, softrelu or softsign "
        "(expressions in ACTIVATION).",
        examples=(
            *(Example(((2, 3),), {"act_type": t}) for t in sorted(ACTIVATION)),
            Example(((2, 3, 4, 5),), {"act_type": "relu"}),
            Example(((3, 4),), {"act_type": "softrelu"}, low=-30.0, high=30.0),
            Example(((3, 4),), {"act_type": "tanh"}, dtype="float64"),
        ),
        bad_params=({"act_type": "bogus"}, {}, {"act_type": "relu", "slope": 0.1}),
    )
)


# ---------------------------------------------------------------------------------------------
# LeakyReLU


@dataclass(frozen=True, kw_only=True)
class LeakyReLUParams(Params):
    act_type: str = field(
        default="leaky", choices=tuple(sorted(LEAKY_RELU)), doc="Activation function."
    )
    slope: float = field(default=0.25, doc="Slope of the negative part (leaky) or alpha (elu).")
    lower_bound: float = field(default=0.125, doc="Lower bound of rrelu's random slope.")
    upper_bound: float = field(default=0.334, doc="Upper bound of rrelu's random slope.")


def leaky_relu_inputs(p: LeakyReLUParams) -> tuple[str, ...]:
    return ("data", "gamma") if p.act_type == "prelu" else ("data",)


def leaky_relu_outputs(p: LeakyReLUParams) -> tuple[str, ...]:
    return ("output", "mask") if p.act_type == "rrelu" else ("output",)


def leaky_relu_shape(p: LeakyReLUParams, ins: list, outs: list) -> tuple[list, list]:
    """Outputs (and rrelu's mask) have the data's shape; prelu's gamma defaults to ``(C,)``.

    A gamma given with another shape is kept if it broadcasts (``prelu_gamma_shape``).
    Nothing flows back from the outputs to the data (as in MXNet).
    """
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    new_ins = [data]
    if p.act_type == "prelu":
        gamma = ins[1]
        if gamma is None:
            if len(data) < 2:
                raise RuleError(
                    f"prelu needs data with a channel axis (at least 2 dimensions) to infer "
                    f"gamma, got data of shape {shape_str(data)}"
                )
            gamma = (data[1],)
        elif prelu_gamma_shape(gamma, data) is None:
            # NOTE: MXNet accepts this at inference and fails when it runs.
            raise RuleError(
                f"cannot broadcast gamma of shape {shape_str(gamma)} to data of shape "
                f"{shape_str(data)} (gamma lies along axes 0-1, ending at the channel axis)"
            )
        new_ins.append(gamma)
    return new_ins, [data] * len(outs)


def prelu_gamma_shape(gamma: Shape, data: Shape) -> Shape | None:
    """gamma's shape laid over the data (MXNet's expand_shape), or None if it does not fit.

    gamma's axes match data axes 0 and 1 only, right to left; each must equal the data's
    dimension or be 1. So ``(C,)`` lies along axis 1 and ``(1,)`` broadcasts everywhere.
    """
    out: list[int | None] = [1] * len(data)
    s = len(gamma) - 1
    for i in range(len(data) - 1, -1, -1):
        if s >= 0 and i <= 1:
            g, d = gamma[s], data[i]
            if g == 1 or g is None or d is None or g == d:
                out[i] = g
                s -= 1
    return tuple(out) if s == -1 else None


def leaky_relu_reference(
    p: LeakyReLUParams, data: np.ndarray, gamma: np.ndarray | None = None
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Inference: rrelu uses the mean slope, and its mask holds that slope for every element."""
    x = data.astype(np.float64)
    fn = LEAKY_RELU[p.act_type].reference
    if p.act_type == "prelu":
        assert gamma is not None
        gshape = prelu_gamma_shape(gamma.shape, data.shape)
        assert gshape is not None, (gamma.shape, data.shape)
        y = fn(x, gamma.astype(np.float64).reshape(gshape))
    elif p.act_type == "rrelu":
        slope = 0.5 * (p.lower_bound + p.upper_bound)
        out = np.asarray(fn(x, slope)).astype(data.dtype)
        return out, np.full(data.shape, slope, dtype=data.dtype)
    else:
        y = fn(x, p.slope)
    return np.asarray(y).astype(data.dtype)


_LEAKY_GRAD = unary_gradient("LeakyReLU", lambda p: LEAKY_RELU[p.act_type].backward,
                             LeakyReLUParams, ("slope",))


def prelu_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data, gamma, data grad, gamma grad]: dx = x > 0 ? g : gamma * g, and gamma's
    gradient sums g * x where x <= 0 over the axes gamma is broadcast along."""
    _, data, gamma = call.in_shapes
    laid = prelu_gamma_shape(gamma, data)
    assert laid is not None
    exprs = ("a > 0 ? g : b * g", "a > 0 ? 0 : g * a")
    return Lowered((binary_grad_launch(call, data, tuple(int(d or 1) for d in laid), exprs),))


BACKWARD_PRELU = register(
    OpDef(
        name="_backward_LeakyReLU_prelu",
        params=LeakyReLUParams,
        inputs=("ograd", "data", "gamma"),
        outputs=("data_grad", "gamma_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1], ins[2]]),
        kernels={DENSE: Kernel(prelu_backward_lowering)},
        differentiable=False,
        doc="Gradient of LeakyReLU(act_type='prelu'), gamma's included.",
    )
)


def rrelu_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, output, mask, data grad, (mask grad: never computed)]: the slope each
    element had is in the forward's mask (random in training, the mean at inference)."""
    shape = call.in_shapes[1]
    launch = binary_grad_launch(call, shape, shape, ("a > 0 ? g : b * g", "0"),
                                reqs=(call.out_req(0), "null"))
    return Lowered((launch,))


BACKWARD_RRELU = register(
    OpDef(
        name="_backward_LeakyReLU_rrelu",
        params=LeakyReLUParams,
        inputs=("ograd", "output", "mask"),
        outputs=("data_grad", "mask_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1], ins[2]]),
        kernels={DENSE: Kernel(rrelu_backward_lowering)},
        differentiable=False,
        doc="Gradient of LeakyReLU(act_type='rrelu') from the slopes in its mask output.",
    )
)

_GRADS = {
    "prelu": node_gradient(BACKWARD_PRELU),
    "rrelu": node_gradient(BACKWARD_RRELU, lambda n: [Entry(n, 0), Entry(n, 1)], to_inputs=(0,)),
}


def leaky_relu_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    return _GRADS.get(node.params.act_type, _LEAKY_GRAD)(node, ograds)


LEAKY_RELU_OP = register(
    OpDef(
        name="LeakyReLU",
        params=LeakyReLUParams,
        inputs=leaky_relu_inputs,
        outputs=leaky_relu_outputs,
        infer_shape=leaky_relu_shape,
        infer_type=same_dtype,
        # NOTE: MXNet offers no in-place forward for prelu; the planner's single-reader rule
        # keeps it safe here since the backward pass reads data and gamma.
        inplace=((0, 0),),
        reference=leaky_relu_reference,
        kernels={DENSE: Kernel(_leaky_relu_lowering)},
        grad=leaky_relu_grad,
        train_mode=True,
        aliases=("_npx_leaky_relu",),
        input_var_attrs={"gamma": {"__init__": '["Constant", {"value": 0.25}]'}},
        doc="Leaky rectifiers: leaky, elu, selu, gelu, prelu (learned gamma per channel) and "
        "rrelu (random slope; a hidden mask output). Expressions in LEAKY_RELU.",
        examples=(
            Example(((2, 3),), {"act_type": "leaky", "slope": 0.1}),
            Example(((2, 3, 4, 5),)),
            Example(((2, 3),), {"act_type": "elu", "slope": 1.0}),
            Example(((2, 3),), {"act_type": "selu"}),
            Example(((2, 3),), {"act_type": "gelu"}),
            Example(((2, 3, 4, 4), (3,)), {"act_type": "prelu"}),
            Example(((2, 5), (5,)), {"act_type": "prelu"}),
            Example(((2, 3, 4, 4), (1,)), {"act_type": "prelu"}),
            Example(((2, 3),), {"act_type": "rrelu", "lower_bound": 0.1, "upper_bound": 0.3}),
            Example(((2, 3),), {"act_type": "elu"}, dtype="float64"),
        ),
        bad_params=({"act_type": "relu"}, {"slope": "steep"}, {"act_type": "leaky", "alpha": 1}),
    )
)


# ---------------------------------------------------------------------------------------------
# softmax, log_softmax


@dataclass(frozen=True, kw_only=True)
class SoftmaxParams(Params):
    axis: int = field(default=-1, doc="The axis to normalise over.")
    temperature: float | None = field(default=None, doc="Divide the input by this first.")
    dtype: str | None = field(
        default=None,
        kind="dtype",
        choices=("float16", "float32", "float64"),
        doc="Output dtype (None: the input's).",
    )
    use_length: bool | None = field(
        default=False, doc="Take a second input 'length': how many entries along axis count."
    )


def softmax_inputs(p: SoftmaxParams) -> tuple[str, ...]:
    return ("data", "length") if p.use_length else ("data",)


def softmax_shape(p: SoftmaxParams, ins: list, outs: list) -> tuple[list, list]:
    """out = data; ``length`` is data without the softmax axis (``(1,)`` for 1-D data).

    The axis is checked only when a length input needs it (MXNet does not check it otherwise).
    The output does not flow back to the data (MXNet keeps a private copy of the data shape).
    """
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    new_ins = [data]
    if len(ins) > 1:
        try:
            ax = norm_axis(p.axis, len(data))
        except RuleError:
            raise RuleError(
                f"softmax axis {p.axis} is out of range for data of shape {shape_str(data)}"
            ) from None
        new_ins.append((1,) if len(data) == 1 else (*data[:ax], *data[ax + 1 :]))
    return new_ins, [data]


def softmax_type(p: SoftmaxParams, ins: list, outs: list) -> tuple[list, list]:
    """The ``dtype`` parameter if given (and the data defaults to it), else the data's dtype.

    ``length`` is left alone (MXNet requires an integer type there at run time only).
    """
    if p.dtype is not None:
        out = np.dtype(p.dtype)
        return [ins[0] if ins[0] is not None else out, *ins[1:]], [out]
    return list(ins), [ins[0] if ins[0] is not None else outs[0]]


def log_softmax_type(p: SoftmaxParams, ins: list, outs: list) -> tuple[list, list]:
    if p.use_length:
        raise RuleError("log_softmax has no length input; use_length must be False")
    return softmax_type(p, ins, outs)


def _softmax(p: SoftmaxParams, data: np.ndarray, length: np.ndarray | None, log: bool):
    x = data.astype(np.float64)
    if p.temperature is not None:
        x = x / p.temperature
    ax = p.axis % data.ndim
    valid = np.ones(x.shape, dtype=bool)
    if length is not None:
        pos = np.arange(x.shape[ax]).reshape([-1 if i == ax else 1 for i in range(x.ndim)])
        lengths = length.astype(np.int64).reshape(()) if x.ndim == 1 else length.astype(np.int64)
        valid = pos < np.expand_dims(lengths, ax)
    z = np.where(valid, x, -np.inf)
    z = z - np.max(z, axis=ax, keepdims=True, initial=-np.inf)  # initial: empty axes
    lse = np.log(np.sum(np.exp(z), axis=ax, keepdims=True))
    y = z - lse if log else np.exp(z - lse)
    y = np.where(valid, y, 0.0)
    return y.astype(p.dtype if p.dtype is not None else data.dtype)


def softmax_reference(p: SoftmaxParams, data: np.ndarray, length: np.ndarray | None = None):
    """Entries past ``length`` along the axis are 0."""
    return _softmax(p, data, length, log=False)


def log_softmax_reference(p: SoftmaxParams, data: np.ndarray):
    return _softmax(p, data, None, log=True)


def _softmax_backward_lowering(log: bool, negate: bool = False) -> Any:
    def lower(call: KernelCall) -> Lowered:
        """p = [ograd, output, data, data grad] over the forward's (outer, L, inner) view;
        ``negate``: softmin, the softmax of -x / t."""
        p: SoftmaxParams = call.params
        d = call.in_shapes[0]
        ax = p.axis % len(d) if d else 0
        spec = KernelSpec.make("nn/softmax_backward.c.j2", in_dtype=call.in_dtypes[0].name,
                               out_dtype=call.out_dtypes[0].name, req=call.out_req(0), log=log,
                               par_min=PAR_MIN)
        ia = (size(d[:ax]), d[ax] if d else 1, size(d[ax + 1 :]))
        t = p.temperature if p.temperature is not None else 1.0
        return Lowered((Launch(spec, ia, ((-1.0 if negate else 1.0) / t,)),))

    return lower


def _softmax_gradient(name: str, log: bool, negate: bool = False) -> Any:
    op = register(
        OpDef(
            name=f"_backward_{name}",
            params=SoftmaxParams,
            inputs=("ograd", "output", "data"),
            outputs=("data_grad",),
            infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
            infer_type=lambda p, ins, outs: (list(ins), [ins[2] or outs[0]]),
            ignore_inputs=(2,),
            kernels={DENSE: Kernel(_softmax_backward_lowering(log, negate))},
            differentiable=False,
            doc=f"Gradient of {name} from its output.",
        )
    )

    # With use_length the masked positions' outputs are 0, which zeroes their gradient and keeps
    # them out of the sum; the lengths get no gradient.
    return node_gradient(op, lambda n: [Entry(n, 0), n.inputs[0]], to_inputs=(0,))


SOFTMAX = register(
    OpDef(
        name="softmax",
        params=SoftmaxParams,
        inputs=softmax_inputs,
        infer_shape=softmax_shape,
        infer_type=softmax_type,
        inplace=((0, 0),),
        reference=softmax_reference,
        kernels={DENSE: Kernel(_softmax_lowering(log=False))},
        grad=_softmax_gradient("softmax", log=False),
        aliases=("_npx_softmax",),
        doc="exp(x / t) normalised to sum 1 along an axis.",
        examples=(
            Example(((2, 3, 4),)),
            Example(((2, 3, 4),), {"axis": 0}),
            Example(((2, 3, 4),), {"axis": 1, "temperature": 2.0}),
            Example(((2, 3),), {"dtype": "float64"}),
            Example(((2, 3), (2,)), {"use_length": True}, ints={1: (1, 4)}),
            Example(((2, 5, 3), (2, 3)), {"use_length": True, "axis": 1}, ints={1: (1, 6)}),
            Example(((2, 3),), dtype="float64"),
        ),
        bad_params=({"dtype": "int32"}, {"axis": 1.5}, {"use_length": "sometimes"}),
    )
)

LOG_SOFTMAX = register(
    OpDef(
        name="log_softmax",
        params=SoftmaxParams,
        infer_shape=softmax_shape,
        infer_type=log_softmax_type,
        inplace=((0, 0),),
        reference=log_softmax_reference,
        kernels={DENSE: Kernel(_softmax_lowering(log=True))},
        grad=_softmax_gradient("log_softmax", log=True),
        aliases=("_npx_log_softmax",),
        doc="log(softmax(x)), computed stably.",
        examples=(
            Example(((2, 3, 4),)),
            Example(((2, 3, 4),), {"axis": -2, "temperature": 0.5}),
            Example(((2, 3),), {"dtype": "float32"}, dtype="float16"),
        ),
        bad_params=({"dtype": "int8"}, {"temperature": "hot"}),
    )
)


def softmin_reference(p: SoftmaxParams, data: np.ndarray, length: np.ndarray | None = None):
    """softmax(-x / t); entries past ``length`` along the axis are 0."""
    t = p.temperature if p.temperature is not None else 1.0
    return _softmax(dataclasses.replace(p, temperature=-t), data, length, log=False)


SOFTMIN = register(
    OpDef(
        name="softmin",
        params=SoftmaxParams,
        inputs=softmax_inputs,
        infer_shape=softmax_shape,
        infer_type=softmax_type,
        inplace=((0, 0),),
        reference=softmin_reference,
        kernels={DENSE: Kernel(_softmax_lowering(log=False, negate=True))},
        grad=_softmax_gradient("softmin", log=False, negate=True),
        doc="softmax(-x / t) along an axis: small entries get large weights.",
        examples=(
            Example(((2, 3, 4),)),
            Example(((2, 3),), {"axis": 0, "temperature": 2.0}),
            Example(((2, 3), (2,)), {"use_length": True}, ints={1: (1, 4)}),
            Example(((3, 4),), {"dtype": "float64"}),
        ),
        bad_params=({"dtype": "int32"}, {"axis": 1.5}),
    )
)


# ---------------------------------------------------------------------------------------------
# SoftmaxActivation


@dataclass(frozen=True, kw_only=True)
class SoftmaxActivationParams(Params):
    mode: str = field(
        default="instance", choices=("channel", "instance"),
        doc="instance: softmax over the last axis; channel: over axis 1 at every position.",
    )


def _softmax_activation_dims(p: SoftmaxActivationParams, d: tuple) -> tuple[int, int, int]:
    """(outer, L, inner): instance mode is MXNet's FlatTo2D, a softmax over the last axis."""
    if p.mode == "channel":
        return (d[0], d[1], size(d[2:]))
    return (size(d[:-1]), d[-1] if d else 1, 1)


def softmax_activation_shape(p: SoftmaxActivationParams, ins: list, outs: list):
    """out = data; channel mode needs 3-D data at least (MXNet checks at run time)."""
    if p.mode == "channel" and ins[0] is not None and len(ins[0]) < 3:
        raise RuleError(
            f"data has shape {shape_str(ins[0])}; SoftmaxActivation with mode='channel' needs "
            "at least 3 dimensions"
        )
    return elemwise_shape(p, ins, outs)


def softmax_activation_reference(p: SoftmaxActivationParams, data: np.ndarray) -> np.ndarray:
    o, n, i = _softmax_activation_dims(p, data.shape)
    x = data.astype(np.float64).reshape(o, n, i)
    z = np.exp(x - x.max(axis=1, keepdims=True, initial=-np.inf))
    y: np.ndarray = (z / z.sum(axis=1, keepdims=True)).reshape(data.shape)
    return y.astype(data.dtype)


def softmax_activation_lowering(call: KernelCall) -> Lowered:
    dims = _softmax_activation_dims(call.params, call.in_shapes[0])
    return Lowered((softmax_launch(call, dims),))


def softmax_activation_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, output, data (not read), data grad]."""
    spec = KernelSpec.make("nn/softmax_backward.c.j2", in_dtype=call.in_dtypes[0].name,
                           out_dtype=call.out_dtypes[0].name, req=call.out_req(0), log=False,
                           par_min=PAR_MIN)
    ia = _softmax_activation_dims(call.params, call.in_shapes[0])
    return Lowered((Launch(spec, ia, (1.0,)),))


BACKWARD_SOFTMAX_ACTIVATION = register(
    OpDef(
        name="_backward_SoftmaxActivation",
        params=SoftmaxActivationParams,
        inputs=("ograd", "output", "data"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        ignore_inputs=(2,),
        kernels={DENSE: Kernel(softmax_activation_backward_lowering)},
        differentiable=False,
        doc="Gradient of SoftmaxActivation from its output.",
    )
)

SOFTMAX_ACTIVATION = register(
    OpDef(
        name="SoftmaxActivation",
        params=SoftmaxActivationParams,
        infer_shape=softmax_activation_shape,
        infer_type=same_dtype,
        reference=softmax_activation_reference,
        kernels={DENSE: Kernel(softmax_activation_lowering)},
        grad=node_gradient(BACKWARD_SOFTMAX_ACTIVATION, lambda n: [Entry(n, 0), n.inputs[0]]),
        doc="Softmax over the last axis (mode 'instance') or per position across channels "
        "(axis 1, mode 'channel'). Deprecated in MXNet in favour of softmax.",
        examples=(
            Example(((2, 3, 4),)),
            Example(((2, 3, 2, 2),), {"mode": "channel"}),
            Example(((3, 5, 2),), {"mode": "channel"}, dtype="float64"),
            Example(((4,),), dtype="float64"),
        ),
        bad_params=({"mode": "batch"}, {"axis": 1}),
    )
)
