"""MXNet's contrib variants of BatchNorm and Embedding: SyncBatchNorm (on one device, BatchNorm
over axis 1 with MXNet's extra ndev/key parameters), BatchNormWithReLU (BatchNorm then relu,
the relu's mask applied to the gradient) and SparseEmbedding (Embedding whose weight gradient
is always row_sparse; MXNet's deprecated name for Embedding(sparse_grad=True))."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, StypeRule, get_op, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops.common.grad import backward_node, node_gradient
from nnsym.ops.common.storage import dense_result
from nnsym.ops.nn.activation import ActivationParams, _activation_lowering
from nnsym.ops.nn.batch_norm import (
    PARAM_INPUTS,
    BatchNormParams,
    batch_norm_backward_lowering,
    batch_norm_lowering,
    batch_norm_reference,
    batch_norm_shape,
    batch_norm_type,
    batch_norm_v1_reference,
)
from nnsym.ops.nn.embedding import (
    EmbeddingParams,
    embedding_backward_lowering,
    embedding_grad_rsp,
    embedding_lowering,
    embedding_reference,
    embedding_shape,
    embedding_type,
)
from nnsym.types import DispatchMode, SType

_BN_INPUTS = ("data", *PARAM_INPUTS)
_BN_VAR_ATTRS = {
    "moving_mean": {"__init__": '["zero", {}]'},
    "moving_var": {"__init__": '["one", {}]'},
}


def _bn_reads(n: Node) -> list[Entry]:
    return [n.inputs[0], n.inputs[1], Entry(n, 1), Entry(n, 2), n.inputs[3], n.inputs[4]]


def _bn_backward(name: str, params: type[Params]) -> OpDef:
    return register(OpDef(
        name=name,
        params=params,
        inputs=("ograd", "data", "gamma", "mean", "invstd", "moving_mean", "moving_var"),
        outputs=("data_grad", "gamma_grad", "beta_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[2]]),
        kernels={DENSE: Kernel(batch_norm_backward_lowering)},
        train_mode=True,
        differentiable=False,
        doc=f"Gradient of {name[len('_backward_'):]}; in training it also moves the moving "
            "statistics.",
    ))


_BN_EXAMPLES = (
    Example(((2, 3, 4, 4), (3,), (3,), (3,), (3,)), low=0.1),
    Example(((2, 3, 4), (3,), (3,), (3,), (3,)), {"fix_gamma": False, "output_mean_var": True},
            low=0.1),
    Example(((2, 3, 5), (3,), (3,), (3,), (3,)), {"use_global_stats": True, "fix_gamma": False},
            dtype="float64", low=0.1),
)

# ---------------------------------------------------------------------------------------------
# SyncBatchNorm


@dataclass(frozen=True, kw_only=True)
class SyncBatchNormParams(Params):
    # MXNet declares eps and momentum as C floats: their defaults print at float precision.
    eps: float = field(default=0.00100000005, doc="Epsilon added to the variance.")
    momentum: float = field(default=0.899999976, doc="Momentum of the moving averages.")
    fix_gamma: bool = field(default=True, doc="Fix gamma to 1 (and its gradient to 0).")
    use_global_stats: bool = field(
        default=False, doc="Normalise with the moving statistics even in training.")
    output_mean_var: bool = field(
        default=False, doc="Also output the mean and the inverse standard deviation.")
    ndev: int = field(default=1, lower=1, doc="Devices synchronised (one here: no exchange).")
    key: str = field(doc="Hash key naming the synchronised layer (unused on one device).")

    axis: ClassVar[int] = 1
    # Its third output is the variance, as BatchNorm_v1's (checked against MXNet's values).
    out_var: ClassVar[bool] = True


BACKWARD_SYNC_BATCH_NORM = _bn_backward("_backward__contrib_SyncBatchNorm",
                                        SyncBatchNormParams)

SYNC_BATCH_NORM = register(OpDef(
    name="_contrib_SyncBatchNorm",
    params=SyncBatchNormParams,
    inputs=_BN_INPUTS,
    aux=("moving_mean", "moving_var"),
    outputs=("output", "mean", "var"),
    num_visible_outputs=lambda p: 3 if p.output_mean_var else 1,
    infer_shape=batch_norm_shape,
    infer_type=batch_norm_type,
    reference=batch_norm_v1_reference,
    kernels={DENSE: Kernel(batch_norm_lowering)},
    grad=node_gradient(BACKWARD_SYNC_BATCH_NORM, _bn_reads, to_inputs=(0, 1, 2)),
    train_mode=True,
    pinned_inputs=lambda p: {1: 1.0} if p.fix_gamma else {},
    input_var_attrs=_BN_VAR_ATTRS,
    doc="Batch normalisation over axis 1 synchronised across ndev devices; on one device it "
        "is BatchNorm over axis 1 (its third output, with output_mean_var, is the variance).",
    examples=tuple(dataclasses.replace(e, params={**e.params, "key": "bn0"})
                   for e in _BN_EXAMPLES),
    bad_params=({}, {"key": "k", "axis": 1}, {"key": "k", "ndev": 0}),
))


# ---------------------------------------------------------------------------------------------
# BatchNormWithReLU

RELU = ActivationParams(act_type="relu")


def batch_norm_relu_reference(p: BatchNormParams, data, gamma, beta, moving_mean, moving_var):
    out, mean, invstd = batch_norm_reference(p, data, gamma, beta, moving_mean, moving_var)
    return np.maximum(out, 0).astype(out.dtype), mean, invstd


def batch_norm_relu_lowering(call: KernelCall) -> Lowered:
    """BatchNorm's launch, then relu over its output in place (the output is pointer 5)."""
    if call.out_req(0) == "add":
        raise NoKernelError("BatchNormWithReLU writes its output; grad_req 'add' on it is not "
                            "supported")
    bn = batch_norm_lowering(call)
    shape, dt = call.out_shapes[0], call.out_dtypes[0]
    relu = _activation_lowering(KernelCall(RELU, (shape,), (dt,), (shape,), (dt,)))
    tail = tuple(dataclasses.replace(ln, args=(5, 5)) for ln in relu.launches)
    return Lowered((*bn.launches, *tail))


BACKWARD_BATCH_NORM_RELU = _bn_backward("_backward__contrib_BatchNormWithReLU", BatchNormParams)


def batch_norm_relu_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """relu's mask (output > 0) on the output gradient, then BatchNorm's gradient."""
    g = ograds[0]
    assert g is not None
    relu_bwd = get_op("_backward_Activation")
    masked = backward_node(relu_bwd, node, [g, Entry(node, 0)], params=RELU,
                           suffix="_relu_backward")
    b = backward_node(BACKWARD_BATCH_NORM_RELU, node, [Entry(masked, 0), *_bn_reads(node)])
    return [Entry(b, 0), Entry(b, 1), Entry(b, 2), None, None]


BATCH_NORM_RELU = register(OpDef(
    name="_contrib_BatchNormWithReLU",
    params=BatchNormParams,
    inputs=_BN_INPUTS,
    aux=("moving_mean", "moving_var"),
    outputs=("output", "mean", "var"),
    num_visible_outputs=lambda p: 3 if p.output_mean_var else 1,
    infer_shape=batch_norm_shape,
    infer_type=batch_norm_type,
    reference=batch_norm_relu_reference,
    kernels={DENSE: Kernel(batch_norm_relu_lowering)},
    grad=batch_norm_relu_grad,
    train_mode=True,
    pinned_inputs=lambda p: {1: 1.0} if p.fix_gamma else {},
    input_var_attrs=_BN_VAR_ATTRS,
    doc="BatchNorm followed by relu (MXNet's fused form).",
    examples=(*_BN_EXAMPLES,
              Example(((2, 4, 3), (3,), (3,), (3,), (3,)), {"axis": -1}, low=0.1)),
    bad_params=({"axis": "x"}, {"key": "k"}),
))


# ---------------------------------------------------------------------------------------------
# SparseEmbedding

BACKWARD_SPARSE_EMBEDDING = register(OpDef(
    name="_backward_SparseEmbedding",
    params=EmbeddingParams,
    inputs=("ograd", "data"),
    outputs=("weight_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [(p.input_dim, p.output_dim)]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
    kernels={DENSE: Kernel(embedding_backward_lowering)},
    stype_rules=(StypeRule((SType.DEFAULT, SType.DEFAULT), (SType.ROW_SPARSE,),
                           DispatchMode.FCOMPUTE_EX, kernel=embedding_grad_rsp),),
    differentiable=False,
    doc="Gradient of SparseEmbedding's weight: row_sparse, only the rows looked up.",
))

SPARSE_EMBEDDING = register(OpDef(
    name="_contrib_SparseEmbedding",
    params=EmbeddingParams,
    inputs=("data", "weight"),
    infer_shape=embedding_shape,
    infer_type=embedding_type,
    reference=embedding_reference,
    kernels={DENSE: Kernel(embedding_lowering)},
    grad=node_gradient(BACKWARD_SPARSE_EMBEDDING, lambda n: n.inputs[:1], to_inputs=(1,)),
    stype_rules=(StypeRule((SType.DEFAULT, SType.ROW_SPARSE), (SType.DEFAULT,),
                           DispatchMode.FCOMPUTE_EX, kernel=dense_result),),
    doc="Embedding with a row_sparse weight gradient whatever sparse_grad says (MXNet's "
        "deprecated form of Embedding(sparse_grad=True)).",
    examples=(
        Example(((2, 3), (10, 4)), {"input_dim": 10, "output_dim": 4}, ints={0: (0, 10)}),
        Example(((5,), (6, 3)), {"input_dim": 6, "output_dim": 3, "dtype": "float64"},
                dtype="float64", ints={0: (0, 6)}),
    ),
    bad_params=({"input_dim": 10}, {"input_dim": 0, "output_dim": 4}),
))
