"""sample_multinomial (categories drawn from rows of probabilities) and _shuffle (the rows of an
array in a random order), on the random family's seed (see ``sample.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, elemwise_shape, register
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, no_gradient
from nnsym.ops.common.rng import next_seed

MULTINOMIAL_DTYPES = ("float16", "float32", "float64", "int32", "uint8")


@dataclass(frozen=True, kw_only=True)
class MultinomialParams(Params):
    shape: tuple[int, ...] = field(default=(), doc="Samples per distribution.")
    get_prob: bool = field(
        default=False, doc="Also return the log-probability of each sample."
    )
    dtype: str = field(
        default="int32", kind="dtype", choices=MULTINOMIAL_DTYPES, doc="Dtype of the samples."
    )


def multinomial_outputs(p: MultinomialParams) -> tuple[str, ...]:
    return ("output0", "output1") if p.get_prob else ("output",)  # MXNet's default names


def _multinomial_out(data: tuple[int, ...], p: MultinomialParams) -> tuple[int, ...]:
    out = (*data[:-1], *p.shape)
    return out if out else (1,)


def multinomial_shape(p: MultinomialParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 1 or len(data) > 5:
        raise RuleError(
            f"data must have 1 to 5 dimensions (the last: the categories), got {len(data)}")
    out = _multinomial_out(data, p)
    return [data], [out] * len(outs)


def multinomial_type(p: MultinomialParams, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0]
    if t is not None and np.dtype(t).kind != "f":
        raise RuleError(f"probabilities must be floating point, got {np.dtype(t)}")
    res = [np.dtype(p.dtype)]
    if p.get_prob:
        res.append(t)
    return list(ins), res


def multinomial_reference(p: MultinomialParams, data: np.ndarray) -> Any:
    rng = np.random.default_rng(next_seed())
    k = data.shape[-1]
    rows = data.reshape(-1, k).astype(np.float64)
    per = size(p.shape)
    u = rng.random((rows.shape[0], per))
    cum = np.cumsum(rows, axis=1)
    idx = np.minimum((u[:, :, None] >= cum[:, None, :]).sum(axis=2), k - 1)
    shape = _multinomial_out(data.shape, p)
    out = idx.reshape(shape).astype(p.dtype)
    if not p.get_prob:
        return out
    logp = np.log(np.take_along_axis(rows, idx, axis=1)).reshape(shape).astype(data.dtype)
    return out, logp


def multinomial_lowering(call: KernelCall) -> Lowered:
    p: MultinomialParams = call.params
    data = call.in_shapes[0]
    k = data[-1]
    n = size(call.out_shapes[0])
    spec = KernelSpec.make("random/multinomial.c.j2", dtype=call.in_dtypes[0].name,
                           odtype=call.out_dtypes[0].name, get_prob=p.get_prob, req=call.req)
    return Lowered((Launch(spec, ia=(n, k, size(p.shape)), fa=(0.0,), seed_slot=0),))


def multinomial_backward_lowering(call: KernelCall) -> Lowered:
    data = call.in_shapes[1]
    k = data[-1] if data else 1
    rows = size(data) // k if k else 0
    per = size(call.in_shapes[0]) // rows if rows else 0
    spec = KernelSpec.make("random/multinomial_backward.c.j2", dtype=call.in_dtypes[1].name,
                           sdtype=call.in_dtypes[2].name, req=call.req)
    return Lowered((Launch(spec, ia=(rows, k, per)),))


def multinomial_backward_reference(p: MultinomialParams, og: np.ndarray, data: np.ndarray,
                                   samples: np.ndarray) -> np.ndarray:
    k = data.shape[-1]
    x = data.reshape(-1, k)
    g = np.zeros_like(x)
    idx = np.clip(samples.reshape(x.shape[0], -1).astype(np.int64), 0, k - 1)
    contrib = og.reshape(x.shape[0], -1) / np.take_along_axis(x, idx, axis=1)
    for r in range(x.shape[0]):
        np.add.at(g[r], idx[r], contrib[r].astype(g.dtype))
    return g.reshape(data.shape)


BACKWARD_SAMPLE_MULTINOMIAL = register(OpDef(
    name="_backward_sample_multinomial",
    params=MultinomialParams,
    inputs=("ograd", "data", "samples"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
    reference=multinomial_backward_reference,
    kernels={DENSE: Kernel(multinomial_backward_lowering)},
    differentiable=False,
    doc="Gradient of sample_multinomial's log-probabilities w.r.t. the probabilities.",
))


def multinomial_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """Only the log-probabilities (get_prob) carry a gradient: d log p[t] / d p[t] = 1 / p[t]
    at each sampled category t, as MXNet's; the samples carry none."""
    if not node.params.get_prob or ograds[1] is None:
        return [None]
    b = backward_node(BACKWARD_SAMPLE_MULTINOMIAL, node,
                      [ograds[1], node.inputs[0], Entry(node, 0)])
    return [Entry(b, 0)]


SAMPLE_MULTINOMIAL = register(OpDef(
    name="_sample_multinomial",
    params=MultinomialParams,
    inputs=("data",),
    outputs=multinomial_outputs,
    infer_shape=multinomial_shape,
    infer_type=multinomial_type,
    reference=multinomial_reference,
    kernels={DENSE: Kernel(multinomial_lowering)},
    grad=multinomial_grad,
    differentiable=False,  # random: not checked by central differences (tests/random checks it)
    random=True,
    aliases=("sample_multinomial",),
    doc="Categories drawn from each row of probabilities (the last axis; rows sum to 1).",
    examples=(
        Example(((3, 4),), {"shape": (5,)}, low=0.25, high=0.25),
        Example(((2, 3, 2),), {"shape": (2, 2), "get_prob": True, "dtype": "float32"},
                dtype="float64", low=0.5, high=0.5),
        Example(((4,),), {}, low=0.25, high=0.25),
    ),
    bad_params=({"dtype": "int64"}, {"get_prob": "maybe"}),
))


def shuffle_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[0]
    rows = shape[0] if shape else 1
    m = size(shape[1:]) if shape else 1
    spec = KernelSpec.make("random/shuffle.c.j2", dtype=call.in_dtypes[0].name, req=call.req)
    return Lowered((Launch(spec, ia=(rows, m), fa=(0.0,), workspace=8 * max(rows, 1),
                           seed_slot=0),))


def shuffle_reference(p: Any, data: np.ndarray) -> np.ndarray:
    if data.ndim == 0:
        return np.array(data)
    return np.asarray(data[np.random.default_rng(next_seed()).permutation(data.shape[0])])


SHUFFLE = register(OpDef(
    name="_shuffle",
    params=NoParams,
    inputs=("data",),
    infer_shape=elemwise_shape,
    infer_type=lambda p, ins, outs: ([ins[0] or outs[0]], [ins[0] or outs[0]]),
    reference=shuffle_reference,
    kernels={DENSE: Kernel(shuffle_lowering)},
    grad=no_gradient,
    differentiable=False,
    random=True,
    aliases=("shuffle",),
    doc="The rows (slices along the first axis) of data in a random order.",
    examples=(Example(((6, 3),)), Example(((5,),), dtype="float64"),
              Example(((4, 2, 3),), dtype="int32", ints={0: (0, 100)})),
))
