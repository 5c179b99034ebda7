"""Loss heads: SoftmaxOutput, the regression outputs, MakeLoss / make_loss and SVMOutput; the
losses smooth_l1 and softmax_cross_entropy.

Their forward pass is a plain function of the data (softmax, identity or sigmoid); the label
only matters to the gradient, which the head computes itself instead of taking an incoming one.
Their shape rules give the label a shape from the data, so labels never need to be declared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    elemwise_shape,
    known,
    merge_shape,
    prod,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, node_gradient, unary_gradient
from nnsym.ops.nn.activation import ACTIVATION, elementwise_launch, softmax_launch
from nnsym.types import Shape, shape_str

NORMALIZATIONS = ("batch", "null", "valid")


# ---------------------------------------------------------------------------------------------
# SoftmaxOutput


@dataclass(frozen=True, kw_only=True)
class SoftmaxOutputParams(Params):
    grad_scale: float = field(default=1.0, doc="Scale the gradient by this.")
    ignore_label: float = field(default=-1.0, doc="Label to ignore when use_ignore is set.")
    multi_output: bool = field(
        default=False, doc="Softmax over axis 1 of (n, k, x1, ..., xn) data: one per position."
    )
    use_ignore: bool = field(default=False, doc="Give entries labelled ignore_label no gradient.")
    preserve_shape: bool = field(default=False, doc="Softmax over the last axis only.")
    normalization: str = field(
        default="null", choices=NORMALIZATIONS, doc="How the gradient is normalised."
    )
    out_grad: bool = field(default=False, doc="Multiply the gradient by an incoming gradient.")
    smooth_alpha: float = field(
        default=0.0, lower=0.0, upper=1.0, doc="Label smoothing: spread alpha over other classes."
    )


def softmax_output_shape(p: SoftmaxOutputParams, ins: list, outs: list) -> tuple[list, list]:
    """out = data; the label holds class indices, or probabilities with the data's shape.

    Index labels: ``data.shape[:-1]``, or with ``multi_output`` ``(n, prod(data.shape[2:]))``;
    there a label of shape ``(n, *data.shape[2:])`` or ``(n, 1, *data.shape[2:])`` is accepted
    as well. Nothing flows back from the label or the output to the data (as in MXNet).
    """
    data, label = ins
    if data is None:
        return list(ins), list(outs)
    if len(data) == 0:
        raise RuleError("SoftmaxOutput needs data of at least 1 dimension")
    if not p.multi_output:
        # A label as large as the data holds probabilities; anything else, indices.
        if label is not None and len(label) == len(data):
            return [data, data], [data]
        return [data, data[:-1]], [data]
    if len(data) < 2:
        raise RuleError(
            f"SoftmaxOutput with multi_output needs data of at least 2 dimensions (batch, "
            f"classes, ...), got {shape_str(data)}"
        )
    flat = (data[0], prod(data[2:]))
    if label is None:
        return [data, flat], [data]
    accepted = (flat, (data[0], *data[2:]), (data[0], 1, *data[2:]), data)
    if not any(_compatible(label, s) for s in accepted):
        raise RuleError(
            f"label has shape {shape_str(label)}; with multi_output, data {shape_str(data)} "
            f"needs a label of shape {shape_str(accepted[0])} or {shape_str(accepted[1])}"
        )
    return [data, label], [data]


def _compatible(a: Shape, b: Shape) -> bool:
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def softmax_output_type(p: SoftmaxOutputParams, ins: list, outs: list) -> tuple[list, list]:
    """One dtype for data, label and output, taken from the data, else from the output."""
    t = ins[0] if ins[0] is not None else outs[0]
    if t is None:
        return list(ins), list(outs)
    return [t, t], [t]


def forward_dtype_first(p: Params, ins: list, outs: list) -> tuple[list, list]:
    """Every output takes the first input's dtype (the label keeps its own)."""
    t = ins[0] if ins[0] is not None else outs[0]
    return [t, ins[1]], [t] * len(outs)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    z = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)  # initial: empty axes
    e = np.exp(z)
    return np.asarray(e / np.sum(e, axis=axis, keepdims=True))


def softmax_output_reference(
    p: SoftmaxOutputParams, data: np.ndarray, label: np.ndarray
) -> np.ndarray:
    """The forward output: the softmax. Without flags over all but axis 0, as MXNet does."""
    x = data.astype(np.float64)
    n = x.shape[0]
    if p.multi_output:  # NOTE: explicit sizes: -1 is ambiguous for empty data
        y = _softmax(x.reshape(n, x.shape[1], int(np.prod(x.shape[2:]))), 1)
    elif p.preserve_shape:
        y = _softmax(x, -1)
    else:
        y = _softmax(x.reshape(n, int(np.prod(x.shape[1:]))), 1)
    return y.reshape(data.shape).astype(data.dtype)


def softmax_output_lowering(call: KernelCall) -> Lowered:
    """The softmax over (outer, L, inner) views of the data, as the reference picks the axis."""
    return Lowered((softmax_launch(call, _softmax_dims(call.params, call.in_shapes[0])),))


def _softmax_dims(p: SoftmaxOutputParams, d: tuple[int, ...]) -> tuple[int, int, int]:
    """(outer, L, inner): the softmax runs over L."""
    if p.multi_output:
        return (d[0], d[1], size(d[2:]))
    if p.preserve_shape:
        return (size(d[:-1]), d[-1], 1)
    return (d[0], size(d[1:]), 1)


def softmax_output_backward_lowering(call: KernelCall) -> Lowered:
    """p = [output, label, data grad]: (softmax - one-hot label) * grad_scale / normalisation."""
    p: SoftmaxOutputParams = call.params
    out, label = call.in_shapes
    if size(out) == 0:
        return Lowered()
    spec = KernelSpec.make(
        "nn/softmax_output_backward.c.j2", dtype=call.out_dtypes[0].name, req=call.out_req(0),
        prob_label=tuple(label) == tuple(out), use_ignore=p.use_ignore,
        normalization=p.normalization, smooth=p.smooth_alpha > 0, par_min=PAR_MIN,
    )
    ia = (*_softmax_dims(p, out), out[0] if out else 1)
    # MXNet 1.9.1 divides a multi_output gradient by the spatial size too, except with
    # normalization 'valid' (whose count already covers every position)
    scale = p.grad_scale
    if p.multi_output and p.normalization != "valid":
        scale /= max(ia[2], 1)
    return Lowered((Launch(spec, ia, (scale, p.ignore_label, p.smooth_alpha)),))


def loss_backward_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    """(output, label) -> data grad with the output's shape."""
    out = ins[0] if ins[0] is not None else outs[0]
    return [out, ins[1]], [out]


BACKWARD_SOFTMAX_OUTPUT = register(
    OpDef(
        name="_backward_SoftmaxOutput",
        params=SoftmaxOutputParams,
        inputs=("output", "label"),
        outputs=("data_grad",),
        infer_shape=loss_backward_shape,
        infer_type=forward_dtype_first,
        inplace=((0, 0),),
        kernels={DENSE: Kernel(softmax_output_backward_lowering)},
        differentiable=False,
        doc="Gradient of SoftmaxOutput against its label.",
    )
)


def loss_grad(backward: OpDef) -> Callable[[Node, list[Entry | None]], list[Entry | None]]:
    """A loss head's gradient: from its output and label only (incoming gradients ignored);
    the label gets none."""

    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        b = backward_node(backward, node, [Entry(node, 0), node.inputs[1]])
        return [Entry(b, 0), None]

    return grad


SOFTMAX_OUTPUT = register(
    OpDef(
        name="SoftmaxOutput",
        params=SoftmaxOutputParams,
        inputs=("data", "label"),
        infer_shape=softmax_output_shape,
        infer_type=softmax_output_type,
        inplace=((0, 0),),
        reference=softmax_output_reference,
        kernels={DENSE: Kernel(softmax_output_lowering)},
        grad=loss_grad(BACKWARD_SOFTMAX_OUTPUT),
        loss=True,
        aliases=("Softmax",),
        doc="Softmax with a cross-entropy gradient against the label (a loss head).",
        examples=(
            Example(((4, 10), (4,)), ints={1: (0, 10)}),
            Example(((4, 10), (4, 10)), low=0.0, high=1.0),
            Example(((2, 3, 4, 5), (2, 20)), {"multi_output": True}, ints={1: (0, 3)}),
            Example(((2, 3, 4, 5), (2, 4, 5)), {"multi_output": True}, ints={1: (0, 3)}),
            Example(((2, 3, 4), (2, 3)), {"preserve_shape": True}, ints={1: (0, 4)}),
            Example(((2, 3, 4), (2, 3)), ints={1: (0, 4)}),
            Example(
                ((4, 10), (4,)),
                {
                    "grad_scale": 2.0,
                    "ignore_label": -1,
                    "use_ignore": True,
                    "normalization": "valid",
                    "smooth_alpha": 0.1,
                },
                ints={1: (0, 10)},
            ),
            Example(((4, 10), (4,)), dtype="float64", ints={1: (0, 10)}),
        ),
        bad_params=(
            {"normalization": "mean"},
            {"smooth_alpha": 1.5},
            {"multi_output": "several"},
            {"axis": 1},
        ),
    )
)


# ---------------------------------------------------------------------------------------------
# LinearRegressionOutput, LogisticRegressionOutput, MAERegressionOutput


@dataclass(frozen=True, kw_only=True)
class RegressionOutputParams(Params):
    grad_scale: float = field(default=1.0, doc="Scale the gradient by this.")


def regression_output_shape(p: RegressionOutputParams, ins: list, outs: list) -> tuple[list, list]:
    """out = data; the label defaults to the data's shape, or ``(n,)`` for ``(n, 1)`` data.

    A given label may have any shape with the data's batch size and number of elements (an
    unknown batch dimension is taken from the data). Like MXNet, nothing is said before the
    data's shape is fully known.
    """
    data, label = ins
    if not known(data):
        return list(ins), list(outs)
    if len(data) == 0:
        raise RuleError("a regression output needs data of at least 1 dimension")
    if label is None:
        label = (data[0],) if len(data) == 2 and data[1] == 1 else data
    else:
        size = prod(label)
        if (
            len(label) == 0
            or (label[0] is not None and label[0] != data[0])
            or (size is not None and size != prod(data))
        ):
            raise RuleError(
                f"label has shape {shape_str(label)} but data {shape_str(data)} needs a label "
                f"with batch size {data[0]} and {prod(data)} elements"
            )
        label = (data[0], *label[1:])
    return [data, label], [data]


def _regression_reference(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def reference(p: RegressionOutputParams, data: np.ndarray, label: np.ndarray) -> np.ndarray:
        return np.asarray(fn(data.astype(np.float64))).astype(data.dtype)

    return reference


def identity_lowering(call: KernelCall) -> Lowered:
    return Lowered((elementwise_launch(call, "x"),))


def sigmoid_lowering(call: KernelCall) -> Lowered:
    return Lowered((elementwise_launch(call, ACTIVATION["sigmoid"].forward),))


# Gradient expressions of the regression heads in g (the output) and x (the label).
REGRESSION_GRAD = {
    "LinearRegressionOutput": "(g - x) * scale",
    "LogisticRegressionOutput": "(g - x) * scale",
    "MAERegressionOutput": "(g > x ? 1 : (g < x ? -1 : 0)) * scale",
}


def regression_backward_lowering(expr: str) -> Callable[[KernelCall], Lowered]:
    def lower(call: KernelCall) -> Lowered:
        """p = [output, label, data grad]; scale = grad_scale / (label size / batch), as MXNet."""
        out, label = call.in_shapes
        n = size(out)
        if n == 0:
            return Lowered()
        per_row = size(label) // label[0] if label and label[0] else 1
        spec = KernelSpec.make("common/elemwise_backward.c.j2", expr=expr, fparams=("scale",),
                               uses_x=True, uses_y=False, dtype=call.out_dtypes[0].name,
                               req=call.out_req(0))
        return Lowered((Launch(spec, (n,), (call.params.grad_scale / max(per_row, 1),)),))

    return lower


def _regression_op(
    name: str, fn: Callable[[np.ndarray], np.ndarray], lowering: Callable, doc: str
) -> OpDef:
    backward = register(
        OpDef(
            name=f"_backward_{name}",
            params=RegressionOutputParams,
            inputs=("output", "label"),
            outputs=("data_grad",),
            infer_shape=loss_backward_shape,
            infer_type=forward_dtype_first,
            inplace=((0, 0),),
            kernels={DENSE: Kernel(regression_backward_lowering(REGRESSION_GRAD[name]))},
            differentiable=False,
            doc=f"Gradient of {name} against its label.",
        )
    )
    return OpDef(
        name=name,
        params=RegressionOutputParams,
        inputs=("data", "label"),
        infer_shape=regression_output_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        reference=_regression_reference(fn),
        kernels={DENSE: Kernel(lowering)},
        grad=loss_grad(backward),
        loss=True,
        aliases=(f"_sparse_{name}",),
        sparse=True,
        doc=doc,
        examples=(
            Example(((4, 1), (4,))),
            Example(((4, 3), (4, 3))),
            Example(((4,), (4,))),
            Example(((4, 3), (4, 3, 1)), {"grad_scale": 0.5}),
            Example(((4, 3), (4, 3)), dtype="float64"),
        ),
        bad_params=({"grad_scale": "big"}, {"normalization": "batch"}),
    )


LINEAR_REGRESSION_OUTPUT = register(
    _regression_op(
        "LinearRegressionOutput",
        lambda x: x,
        identity_lowering,
        "Identity forward; squared-error gradient (data - label) against the label.",
    )
)
LOGISTIC_REGRESSION_OUTPUT = register(
    _regression_op(
        "LogisticRegressionOutput",
        lambda x: 1.0 / (1.0 + np.exp(-x)),
        sigmoid_lowering,
        "Sigmoid forward; logistic gradient (sigmoid(data) - label) against the label.",
    )
)
MAE_REGRESSION_OUTPUT = register(
    _regression_op(
        "MAERegressionOutput",
        lambda x: x,
        identity_lowering,
        "Identity forward; absolute-error gradient sign(data - label) against the label.",
    )
)


# ---------------------------------------------------------------------------------------------
# MakeLoss


@dataclass(frozen=True, kw_only=True)
class MakeLossParams(Params):
    grad_scale: float = field(default=1.0, doc="The gradient of the loss (before normalisation).")
    valid_thresh: float = field(
        default=0.0, doc="With normalization='valid', entries above this count as valid."
    )
    normalization: str = field(
        default="null", choices=NORMALIZATIONS, doc="How the gradient is normalised."
    )


def make_loss_shape(p: MakeLossParams, ins: list, outs: list) -> tuple[list, list]:
    """out = data, once the data's number of dimensions is known (nothing flows back)."""
    return list(ins), [ins[0] if ins[0] is not None else outs[0]]


def forward_dtype(p: Params, ins: list, outs: list) -> tuple[list, list]:
    """out = data's dtype; the output's dtype does not flow back to the data (as in MXNet)."""
    return list(ins), [ins[0] if ins[0] is not None else outs[0]] * len(outs)


def make_loss_reference(p: MakeLossParams, data: np.ndarray) -> np.ndarray:
    return np.array(data, copy=True)


def make_loss_backward_lowering(call: KernelCall) -> Lowered:
    """p = [data, data grad]: grad_scale, normalised by the batch size or the number of valid
    entries (data > valid_thresh, counted by the kernel)."""
    p: MakeLossParams = call.params
    d = call.in_shapes[0]
    n = size(d)
    if n == 0:
        return Lowered()
    spec = KernelSpec.make("nn/make_loss_backward.c.j2", dtype=call.out_dtypes[0].name,
                           req=call.out_req(0), normalization=p.normalization)
    return Lowered((Launch(spec, (n, d[0] if d else 1), (p.grad_scale, p.valid_thresh)),))


BACKWARD_MAKE_LOSS = register(
    OpDef(
        name="_backward_MakeLoss",
        params=MakeLossParams,
        inputs=("data",),
        outputs=("data_grad",),
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        kernels={DENSE: Kernel(make_loss_backward_lowering)},
        differentiable=False,
        doc="Gradient of MakeLoss: grad_scale, normalised.",
    )
)


def make_loss_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    # NOTE: reads the data only for 'valid' normalisation; otherwise for its shape.
    return [Entry(backward_node(BACKWARD_MAKE_LOSS, node, [node.inputs[0]]), 0)]


MAKE_LOSS = register(
    OpDef(
        name="MakeLoss",
        params=MakeLossParams,
        infer_shape=make_loss_shape,
        infer_type=forward_dtype,
        inplace=((0, 0),),
        reference=make_loss_reference,
        kernels={DENSE: Kernel(identity_lowering)},
        grad=make_loss_grad,
        loss=True,
        doc="Marks its input as a loss: identity forward, gradient grad_scale (normalised).",
        examples=(
            Example(((2, 3),)),
            Example(((2, 3),), {"grad_scale": 0.5, "normalization": "batch"}),
            Example(((4,),), {"normalization": "valid", "valid_thresh": 0.1}, dtype="float64"),
        ),
        bad_params=({"normalization": "mean"}, {"grad_scale": "x"}, {"scale": 1.0}),
    )
)


# ---------------------------------------------------------------------------------------------
# make_loss


def make_loss_lower_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    # MXNet's make_loss: the gradient is ones_like(data) whatever arrives; MakeLoss's backward
    # with its default parameters (grad_scale 1, no normalisation) writes exactly that.
    return [Entry(backward_node(BACKWARD_MAKE_LOSS, node, [node.inputs[0]]), 0)]


MAKE_LOSS_LOWER = register(
    OpDef(
        name="make_loss",
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        reference=lambda p, data: np.array(data, copy=True),
        kernels={DENSE: Kernel(identity_lowering)},
        grad=make_loss_lower_grad,
        loss=True,
        aliases=("_sparse_make_loss",),
        doc="Marks its input as a loss: identity forward, gradient ones (the incoming gradient "
        "is ignored).",
        examples=(Example(((2, 3),)), Example(((4,),), dtype="float64")),
        bad_params=({"grad_scale": 1.0},),
    )
)


# ---------------------------------------------------------------------------------------------
# smooth_l1


@dataclass(frozen=True, kw_only=True)
class SmoothL1Params(Params):
    scalar: float = field(default=1.0, doc="sigma: quadratic for |x| < 1 / sigma^2.")


SMOOTH_L1_EXPR = ("(x > 1.0 / (scalar * scalar) ? x - 0.5 / (scalar * scalar) : "
                  "(x < -1.0 / (scalar * scalar) ? -x - 0.5 / (scalar * scalar) : "
                  "0.5 * x * x * (scalar * scalar)))")
# Spelled so that a NaN's bits do not depend on the compiler (the CUDA twin is checked bit for
# bit against the C kernel): a NaN x is returned as is, and -g rather than g * -1.0 (which gcc
# may turn into a negation, flipping a NaN g's sign where a multiplication keeps it).
SMOOTH_L1_GRAD = ("(x != x ? x : (x > 1.0 / (scalar * scalar) ? g : "
                  "(x < -1.0 / (scalar * scalar) ? -g : g * ((scalar * scalar) * x))))")


def smooth_l1_reference(p: SmoothL1Params, data: np.ndarray) -> np.ndarray:
    x, s2 = data.astype(np.float64), p.scalar * p.scalar
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(x > 1 / s2, x - 0.5 / s2,
                     np.where(x < -1 / s2, -x - 0.5 / s2, 0.5 * x * x * s2))
    return y.astype(data.dtype)


SMOOTH_L1 = register(
    OpDef(
        name="smooth_l1",
        params=SmoothL1Params,
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        reference=smooth_l1_reference,
        kernels={DENSE: Kernel(
            lambda call: Lowered((elementwise_launch(call, SMOOTH_L1_EXPR,
                                                     {"scalar": call.params.scalar}),)))},
        grad=unary_gradient("smooth_l1", SMOOTH_L1_GRAD, SmoothL1Params, ("scalar",)),
        aliases=("_npx_smooth_l1",),
        doc="Smooth L1 (Huber) loss, elementwise: 0.5 (sigma x)^2 for |x| < 1 / sigma^2, else "
        "|x| - 0.5 / sigma^2 (sigma = scalar).",
        examples=(
            Example(((3, 4),)),
            Example(((2, 5),), {"scalar": 2.0}),
            Example(((6,),), {"scalar": 0.5}, dtype="float64"),
        ),
        bad_params=({"scalar": "x"}, {"sigma": 1.0}),
    )
)


# ---------------------------------------------------------------------------------------------
# softmax_cross_entropy


def softmax_cross_entropy_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    """(N, K) data and (N,) label -> (1,)."""
    data, label = ins
    if data is not None and len(data) != 2:
        raise RuleError(f"softmax_cross_entropy needs 2-D data, got {shape_str(data)}")
    if label is not None and len(label) != 1:
        raise RuleError(f"softmax_cross_entropy needs a 1-D label, got {shape_str(label)}")
    if data is not None and label is not None and None not in (data[0], label[0]) \
            and data[0] != label[0]:
        raise RuleError(
            f"label has shape {shape_str(label)} but data {shape_str(data)} has {data[0]} rows"
        )
    return list(ins), [(1,)]


def softmax_cross_entropy_reference(p: Params, data: np.ndarray, label: np.ndarray):
    x = data.astype(np.float64)
    z = x - x.max(axis=1, keepdims=True, initial=-np.inf)
    prob = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    lab = label.astype(np.int64)
    ok = (lab >= 0) & (lab < x.shape[1])
    picked = np.where(ok, prob[np.arange(len(lab)), np.clip(lab, 0, max(x.shape[1] - 1, 0))], 0)
    return np.array([-np.log(np.maximum(picked, 1e-8)).sum()]).astype(data.dtype)


def _sce_spec(call: KernelCall, template: str, data_at: int) -> KernelSpec:
    return KernelSpec.make(template, dtype=call.in_dtypes[data_at].name,
                           ldtype=call.in_dtypes[data_at + 1].name, req=call.out_req(0))


def softmax_cross_entropy_lowering(call: KernelCall) -> Lowered:
    n, k = call.in_shapes[0]
    spec = _sce_spec(call, "nn/softmax_cross_entropy.c.j2", 0)
    return Lowered((Launch(spec, (n, k)),))


def softmax_cross_entropy_backward_lowering(call: KernelCall) -> Lowered:
    n, k = call.in_shapes[1]
    if n * k == 0:
        return Lowered()
    spec = _sce_spec(call, "nn/softmax_cross_entropy_backward.c.j2", 1)
    return Lowered((Launch(spec, (n, k)),))


BACKWARD_SOFTMAX_CROSS_ENTROPY = register(
    OpDef(
        name="_backward_softmax_cross_entropy",
        inputs=("ograd", "data", "label"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1]]),
        kernels={DENSE: Kernel(softmax_cross_entropy_backward_lowering)},
        differentiable=False,
        doc="Gradient of softmax_cross_entropy: (softmax(data) - one-hot(label)) * ograd.",
    )
)


SOFTMAX_CROSS_ENTROPY = register(
    OpDef(
        name="softmax_cross_entropy",
        inputs=("data", "label"),
        infer_shape=softmax_cross_entropy_shape,
        infer_type=forward_dtype_first,
        reference=softmax_cross_entropy_reference,
        kernels={DENSE: Kernel(softmax_cross_entropy_lowering)},
        # The label gets no gradient (MXNet refuses one).
        grad=node_gradient(BACKWARD_SOFTMAX_CROSS_ENTROPY, to_inputs=(0,)),
        doc="Sum over the batch of the cross entropy -log(softmax(data)[label]) (each term "
        "at most -log(1e-8), as MXNet); shape (1,).",
        examples=(
            Example(((4, 5), (4,)), ints={1: (0, 5)}),
            Example(((3, 2), (3,)), dtype="float64", ints={1: (0, 2)}),
        ),
        bad_params=({"axis": 1},),
    )
)


# ---------------------------------------------------------------------------------------------
# SVMOutput


@dataclass(frozen=True, kw_only=True)
class SVMOutputParams(Params):
    margin: float = field(default=1.0, doc="The margin of the hinge loss.")
    regularization_coefficient: float = field(default=1.0, doc="Scale of the gradient.")
    use_linear: bool = field(default=False, doc="L1-SVM (hinge) instead of L2-SVM (squared).")


def svm_output_shape(p: SVMOutputParams, ins: list, outs: list) -> tuple[list, list]:
    """out = data; the label is the data without its last axis (the classes)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) == 0:
        raise RuleError("SVMOutput needs data of at least 1 dimension")
    try:
        label = merge_shape(ins[1], data[:-1])
    except RuleError:
        raise RuleError(
            f"label has shape {shape_str(ins[1])} but data {shape_str(data)} needs "
            f"{shape_str(data[:-1])}"
        ) from None
    return [data, label], [data]


def svm_output_backward_lowering(call: KernelCall) -> Lowered:
    p: SVMOutputParams = call.params
    out = call.in_shapes[0]
    if size(out) == 0:
        return Lowered()
    spec = KernelSpec.make("nn/svm_output_backward.c.j2", dtype=call.out_dtypes[0].name,
                           ldtype=call.in_dtypes[1].name, req=call.out_req(0),
                           linear=p.use_linear)
    # MXNet's margin and coefficient are C floats.
    fa = (float(np.float32(p.margin)), float(np.float32(p.regularization_coefficient)))
    return Lowered((Launch(spec, (size(out[:-1]), out[-1]), fa),))


BACKWARD_SVM_OUTPUT = register(
    OpDef(
        name="_backward_SVMOutput",
        params=SVMOutputParams,
        inputs=("output", "label"),
        outputs=("data_grad",),
        infer_shape=loss_backward_shape,
        infer_type=forward_dtype_first,
        kernels={DENSE: Kernel(svm_output_backward_lowering)},
        differentiable=False,
        doc="Gradient of SVMOutput against its label (L1- or L2-SVM).",
    )
)

SVM_OUTPUT = register(
    OpDef(
        name="SVMOutput",
        params=SVMOutputParams,
        inputs=("data", "label"),
        infer_shape=svm_output_shape,
        infer_type=forward_dtype_first,
        inplace=((0, 0),),
        reference=lambda p, data, label: np.array(data, copy=True),
        kernels={DENSE: Kernel(identity_lowering)},
        grad=loss_grad(BACKWARD_SVM_OUTPUT),
        loss=True,
        doc="Identity forward; the gradient of a one-vs-rest hinge loss (L2-SVM, or L1-SVM "
        "with use_linear) against class labels over the last axis.",
        examples=(
            Example(((4, 5), (4,)), ints={1: (0, 5)}),
            Example(((2, 3, 4), (2, 3)), {"margin": 0.5, "use_linear": True}, ints={1: (0, 4)}),
            Example(((3, 2), (3,)), {"regularization_coefficient": 2.0}, dtype="float64",
                    ints={1: (0, 2)}),
        ),
        bad_params=({"margin": "wide"}, {"use_linear": "maybe"}, {"grad_scale": 1.0}),
    )
)
