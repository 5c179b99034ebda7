"""Loss heads: SoftmaxOutput, the regression outputs and MakeLoss.

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
    prod,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
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
        normalization=p.normalization, smooth=p.smooth_alpha > 0,
    )
    ia = (*_softmax_dims(p, out), out[0] if out else 1)
    return Lowered((Launch(spec, ia, (p.grad_scale, p.ignore_label, p.smooth_alpha)),))


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
