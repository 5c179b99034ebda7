"""Embedding: look up rows of a (input_dim, output_dim) weight by integer-valued indices."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, StypeRule, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ir.storage import Env, Rsp, Storage, StorageCall
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.common.storage import dense_result, to_dense
from nnsym.types import DispatchMode, SType

# MXNet also accepts bfloat16, which numpy (and so nnsym) has no dtype for.
EMBEDDING_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8", "uint8")


@dataclass(frozen=True, kw_only=True)
class EmbeddingParams(Params):
    input_dim: int = field(lower=1, doc="Vocabulary size: indices lie in [0, input_dim).")
    output_dim: int = field(lower=1, doc="Length of each embedding vector.")
    dtype: str = field(
        default="float32",
        kind="dtype",
        choices=EMBEDDING_DTYPES,
        doc="Dtype of the weight and the output when neither is known otherwise.",
    )
    sparse_grad: bool = field(
        default=False, doc="Give the weight a row_sparse gradient (only the rows looked up)."
    )


def embedding_shape(p: EmbeddingParams, ins: list, outs: list) -> tuple[list, list]:
    """weight = (input_dim, output_dim); out = data.shape + (output_dim,).

    Like MXNet, nothing is said (not even the weight) before the data's ndim is known.
    """
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    return [data, (p.input_dim, p.output_dim)], [(*data, p.output_dim)]


def embedding_type(p: EmbeddingParams, ins: list, outs: list) -> tuple[list, list]:
    """The weight's or the output's dtype if one is known, else the ``dtype`` parameter.

    The indices' dtype is free (float32 indices are common). MXNet raises when the indices'
    dtype is unknown; nnsym decides the weight and output anyway.
    """
    w, o = ins[1], outs[0]
    if w is not None and o is not None and w != o:
        raise RuleError(
            f"weight has dtype {np.dtype(w).name} but the output has {np.dtype(o).name}; "
            "they must be the same"
        )
    t = w if w is not None else o if o is not None else np.dtype(p.dtype)
    return [ins[0], t], [t]


def embedding_reference(p: EmbeddingParams, data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Indices are truncated toward zero and clipped to [0, input_dim - 1], as MXNet does."""
    idx = np.clip(data.astype(np.int64), 0, p.input_dim - 1)
    return weight[idx]


def embedding_lowering(call: KernelCall) -> Lowered:
    """A row gather (memcpy per index; in add mode a vectorised row sum)."""
    p: EmbeddingParams = call.params
    spec = KernelSpec.make(
        "nn/embedding.c.j2",
        idx_dtype=call.in_dtypes[0].name,
        dtype=call.out_dtypes[0].name,
        req=call.req,
    )
    ia = (size(call.in_shapes[0]), p.output_dim, p.input_dim)
    return Lowered((Launch(spec, ia=ia),))


def embedding_backward_lowering(call: KernelCall) -> Lowered:
    p: EmbeddingParams = call.params
    spec = KernelSpec.make("nn/embedding_backward.c.j2", idx_dtype=call.in_dtypes[1].name,
                           dtype=call.out_dtypes[0].name, req=call.out_req(0))
    return Lowered((Launch(spec, ia=(size(call.in_shapes[1]), p.output_dim, p.input_dim)),))


def embedding_grad_rsp(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """Embedding's row_sparse weight gradient: for each distinct row looked up (indices
    truncated and clipped as the forward does), the sum of the output-gradient rows that looked
    it up, in lookup order."""
    p = call.params
    g, data = to_dense(ins[0]), to_dense(ins[1])
    d = int(p.output_dim)
    dt = call.out_dtypes[0]
    idx = np.clip(np.trunc(data.reshape(-1)) if data.dtype.kind == "f" else data.reshape(-1),
                  0, p.input_dim - 1).astype(np.int64)
    rows = np.ascontiguousarray(g).reshape(-1, d)
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    if sorted_idx.size:
        starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
        ids = sorted_idx[starts]
        vals = np.add.reduceat(rows[order], starts, axis=0).astype(dt, copy=False)
    else:
        ids = np.zeros(0, np.int64)
        vals = np.zeros((0, d), dt)
    return [Rsp(np.ascontiguousarray(vals), ids, tuple(call.out_shapes[0]))]


BACKWARD_EMBEDDING = register(
    OpDef(
        name="_backward_Embedding",
        params=EmbeddingParams,
        inputs=("ograd", "data"),
        outputs=("weight_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [(p.input_dim, p.output_dim)]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
        kernels={DENSE: Kernel(embedding_backward_lowering)},
        # sparse_grad: a row_sparse gradient holding only the rows looked up (MXNET-FACTS 4.6)
        stype_rules=(
            StypeRule((SType.DEFAULT, SType.DEFAULT), (SType.ROW_SPARSE,),
                      DispatchMode.FCOMPUTE_EX, when=lambda p: p.sparse_grad,
                      kernel=embedding_grad_rsp),
        ),
        differentiable=False,
        doc="Gradient of Embedding's weight: output-gradient rows summed into the rows looked "
        "up (row_sparse with sparse_grad=True: only those rows are stored).",
    )
)


# The indices get no gradient; the weight the looked-up rows' sums.
embedding_grad = node_gradient(BACKWARD_EMBEDDING, lambda n: n.inputs[:1], to_inputs=(1,))


EMBEDDING = register(
    OpDef(
        name="Embedding",
        params=EmbeddingParams,
        inputs=("data", "weight"),
        infer_shape=embedding_shape,
        infer_type=embedding_type,
        reference=embedding_reference,
        kernels={DENSE: Kernel(embedding_lowering)},
        grad=embedding_grad,
        # a row_sparse weight is looked up directly (its absent rows are zeros)
        stype_rules=(
            StypeRule((SType.DEFAULT, SType.ROW_SPARSE), (SType.DEFAULT,),
                      DispatchMode.FCOMPUTE_EX, kernel=dense_result),
        ),
        aliases=("_npx_embedding", "_sparse_Embedding"),
        sparse=True,
        doc="Maps integer indices to rows of a learned (input_dim, output_dim) weight.",
        examples=(
            Example(((2, 3), (10, 4)), {"input_dim": 10, "output_dim": 4}, ints={0: (0, 10)}),
            Example(((5,), (10, 4)), {"input_dim": 10, "output_dim": 4}, ints={0: (0, 10)}),
            Example(
                ((2, 3, 4), (7, 2)),
                {"input_dim": 7, "output_dim": 2, "sparse_grad": True},
                ints={0: (0, 7)},
            ),
            Example(
                ((2, 3), (10, 4)),
                {"input_dim": 10, "output_dim": 4, "dtype": "float64"},
                dtype="float64",
                ints={0: (0, 10)},
            ),
        ),
        bad_params=(
            {"input_dim": 0, "output_dim": 4},
            {"input_dim": 10},
            {"input_dim": 10, "output_dim": 4, "dtype": "int16"},
            {"input_dim": 10, "output_dim": 4, "sparse": True},
        ),
    )
)
