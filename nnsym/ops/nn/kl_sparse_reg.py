"""IdentityAttachKLSparseReg: identity forward; the backward adds a KL sparseness penalty."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.ops.common.lowering import copy_lowering
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class KLSparseRegParams(Params):
    sparseness_target: float = field(default=0.1, doc="The target mean activation.")
    penalty: float = field(default=0.001, doc="Weight of the sparseness penalty.")
    momentum: float = field(default=0.9, doc="Momentum of the moving average activation.")


def kl_shape(p: KLSparseRegParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0] if ins[0] is not None else outs[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 2:
        raise RuleError(f"data has shape {shape_str(data)}; it needs a channel axis 1")
    try:
        avg = merge_shape(ins[1], (data[1],))
    except RuleError:
        raise RuleError(
            f"moving_avg has shape {shape_str(ins[1])} but data {shape_str(data)} has "
            f"{data[1]} channels"
        ) from None
    return [data, avg], [data]


def kl_type(p: KLSparseRegParams, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0] if ins[0] is not None else outs[0]
    return [t, t], [t]


def kl_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, output, moving_avg, dx]: the average moves first, then the gradient."""
    p: KLSparseRegParams = call.params
    dt = call.out_dtypes[0].name
    if dt not in ("float16", "float32", "float64"):
        raise NoKernelError(f"IdentityAttachKLSparseReg's gradient needs float data, not {dt}")
    shape = call.in_shapes[1]
    if size(shape) == 0:
        return Lowered()
    ia = (shape[0], shape[1], size(shape[2:]))
    fa = (float(p.sparseness_target), float(p.penalty), float(np.float32(p.momentum)))
    update = KernelSpec.make("nn/kl_sparse_reg.c.j2", dtype=dt, stage="update", req="write")
    grad = KernelSpec.make("nn/kl_sparse_reg.c.j2", dtype=dt, stage="grad", req=call.out_req(0))
    return Lowered((Launch(update, ia, fa), Launch(grad, ia, fa)))


def kl_forward_lowering(call: KernelCall) -> Lowered:
    """A copy of the data (moving_avg is not read)."""
    low = copy_lowering(call)
    return Lowered(tuple(Launch(la.spec, la.ia, la.fa, args=(0, 2)) for la in low.launches))


BACKWARD_KL = register(
    OpDef(
        name="_backward_IdentityAttachKLSparseReg",
        params=KLSparseRegParams,
        inputs=("ograd", "output", "moving_avg"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        kernels={DENSE: Kernel(kl_backward_lowering)},
        train_mode=True,
        differentiable=False,
        doc="Gradient of IdentityAttachKLSparseReg; also moves the moving average (aux).",
    )
)


def kl_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_KL, node, [g, Entry(node, 0), node.inputs[1]])
    return [Entry(b, 0), None]


def kl_reference(p: KLSparseRegParams, data: np.ndarray, moving_avg: np.ndarray) -> np.ndarray:
    return np.array(data, copy=True)


KL_SPARSE_REG = register(
    OpDef(
        name="IdentityAttachKLSparseReg",
        params=KLSparseRegParams,
        inputs=("data", "moving_avg"),
        aux=("moving_avg",),
        infer_shape=kl_shape,
        infer_type=kl_type,
        reference=kl_reference,
        kernels={DENSE: Kernel(kl_forward_lowering)},
        grad=kl_grad,
        # NOTE: the gradient is not the derivative of the output (the penalty is a regulariser
        # added in backward), so a numeric gradient check does not apply.
        differentiable=False,
        doc="Identity whose gradient adds a KL-divergence sparseness penalty per channel (axis "
        "1), against a moving average of the mean activation (aux moving_avg).",
        examples=(
            Example(((4, 3), (3,)), low=0.1, high=0.9),
            Example(((2, 3, 4), (3,)), {"penalty": 0.01, "momentum": 0.5}, low=0.1, high=0.9),
        ),
        bad_params=({"penalty": "x"}, {"target": 0.1}),
    )
)
