"""Dropout: zero entries with probability p in training (scaling the rest by 1 / (1 - p)).

With ``mode='always'`` the mask is random: each mask element is kept when a counter-based
generator (splitmix64 of a seed and the element's index) says so, the same in the C kernel and
in the numpy reference. The seed comes from the one seed source, ``nnsym.ops.common.rng``
(``seed`` here is its alias; ``nnsym.random.seed`` calls it), so ``seed(n)`` makes what follows
reproducible.
The seed is a run-time value (``Launch.seed_slot``): the runtime draws a fresh one before every
run, so a cached imperative call or a bound executor gets a new mask each time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nnsym.ir.graph import Entry
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.exprs import binary_lowering
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.common.rng import next_seed, seed
from nnsym.types import shape_str

__all__ = ["DROPOUT", "keep_flags", "next_seed", "seed"]


def keep_flags(mask_seed: int, pkeep: float, n: int) -> np.ndarray:
    """Which of ``n`` mask elements are kept: numpy twin of dropout.c.j2's generator."""
    golden = np.uint64(0x9E3779B97F4A7C15)
    z = np.uint64(mask_seed) + (np.arange(1, n + 1, dtype=np.uint64) * golden)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return np.asarray((z >> np.uint64(11)) < np.uint64(math.ceil(pkeep * 2.0**53)))


def _random(p: DropoutParams, is_train: bool = False) -> bool:
    """MXNet drops only when pkeep < 1, in training or with mode='always'."""
    return p.p > 0 and (p.mode == "always" or is_train)


@dataclass(frozen=True, kw_only=True)
class DropoutParams(Params):
    p: float = field(default=0.5, lower=0.0, upper=1.0, doc="Fraction of entries dropped.")
    mode: str = field(
        default="training",
        choices=("always", "training"),
        doc="Drop in training only, or also at inference.",
    )
    axes: tuple[int, ...] = field(
        default=(), doc="Axes along which one mask value is shared (variational dropout)."
    )
    cudnn_off: bool | None = field(default=False, doc="Do not use cuDNN (no effect in nnsym).")


def dropout_shape(p: DropoutParams, ins: list, outs: list) -> tuple[list, list]:
    """output = data; the hidden mask is the data's shape with each of ``axes`` set to 1."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    mask = list(data)
    for a in p.axes:
        if not 0 <= a < len(data):
            # NOTE: MXNet rejects negative axes here too.
            raise RuleError(
                f"Dropout axis {a} is out of range for data of shape {shape_str(data)} "
                f"(axes must be in [0, {len(data)}))"
            )
        mask[a] = 1
    return [data], [data, tuple(mask)]


def dropout_type(p: DropoutParams, ins: list, outs: list) -> tuple[list, list]:
    """output and mask take the data's dtype; nothing flows back to the data.

    MXNet raises when the data's dtype is unknown; nnsym leaves everything unknown instead.
    """
    t = ins[0]
    if t is None:
        return list(ins), list(outs)
    return [t], [t, t]


def _mask_shape(p: DropoutParams, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in p.axes else d for i, d in enumerate(shape))


def dropout_reference(p: DropoutParams, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inference: the identity, and a mask of ones (every entry kept).

    ``mode='always'`` with p > 0: a random mask holding 0 or 1 / (1 - p) (MXNet's mask holds the
    scale), seeded by ``next_seed()``, and ``out = data * mask``.
    """
    mask_shape = _mask_shape(p, data.shape)
    if not _random(p):
        return data.copy(), np.ones(mask_shape, dtype=data.dtype)
    pkeep = 1.0 - p.p
    comp = np.float32 if data.dtype == np.float16 else data.dtype
    keep = keep_flags(next_seed(), pkeep, size(mask_shape)).reshape(mask_shape)
    scale = np.asarray(1.0 / pkeep if pkeep > 0 else 0.0).astype(comp).astype(data.dtype)
    mask = np.where(keep, scale, np.zeros((), data.dtype)).astype(data.dtype)
    out = (data.astype(comp) * mask.astype(comp)).astype(data.dtype)
    return out, mask


def dropout_lowering(call: KernelCall) -> Lowered:
    """Identity and ones (inference), or a random mask seeded at run time (mode='always')."""
    p: DropoutParams = call.params
    data = call.in_shapes[0]
    n, mn = size(data), size(call.out_shapes[1])
    dtype, req = call.out_dtypes[0].name, call.req
    if not _random(p, call.is_train):
        spec = KernelSpec.make("nn/dropout.c.j2", dtype=dtype, req=req, random=False, ndim=0)
        return Lowered((Launch(spec, ia=(n, mn)),))
    fa = (1.0 - p.p, 0.0)  # fa[1], the seed, is drawn by the runtime before every run
    groups = _broadcast_groups(data, p.axes)
    if len(groups) == 1 and not groups[0][1]:
        spec = KernelSpec.make("nn/dropout.c.j2", dtype=dtype, req=req, random=True, ndim=0)
        return Lowered((Launch(spec, ia=(n,), fa=fa, seed_slot=1),))
    shp, mst = _group_strides(groups)
    spec = KernelSpec.make("nn/dropout.c.j2", dtype=dtype, req=req, random=True, ndim=len(shp))
    item = 4 if dtype == "float16" else call.out_dtypes[0].itemsize
    return Lowered((Launch(spec, ia=(n, mn, *shp, *mst), fa=fa, workspace=mn * item,
                           seed_slot=1),))


def dropout_backward_lowering(call: KernelCall) -> Lowered:
    """dx = g * mask (the mask broadcast along ``axes``): elemwise_mul's kernel."""
    return binary_lowering(call, "a * b")


BACKWARD_DROPOUT = register(
    OpDef(
        name="_backward_Dropout",
        params=DropoutParams,
        inputs=("ograd", "mask"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
        inplace=((0, 0),),
        kernels={DENSE: Kernel(dropout_backward_lowering)},
        differentiable=False,
        doc="Gradient of Dropout: the output gradient times the mask.",
    )
)


dropout_grad = node_gradient(BACKWARD_DROPOUT, lambda n: [Entry(n, 1)])


def _broadcast_groups(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[tuple[int, bool]]:
    """(size, shares one mask value) runs of the data's axes: size-1 axes dropped, neighbours
    of the same kind merged. Never empty."""
    groups: list[tuple[int, bool]] = []
    for i, d in enumerate(shape):
        if d == 1:
            continue
        b = i in axes
        if groups and groups[-1][1] == b:
            groups[-1] = (groups[-1][0] * d, b)
        else:
            groups.append((d, b))
    return groups or [(1, False)]


def _group_strides(groups: list[tuple[int, bool]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Group sizes and the mask's stride along each (0 where the mask is shared)."""
    strides = []
    step = 1
    for d, b in reversed(groups):
        strides.append(0 if b else step)
        step *= 1 if b else d
    return tuple(d for d, _ in groups), tuple(reversed(strides))


DROPOUT = register(
    OpDef(
        name="Dropout",
        params=DropoutParams,
        outputs=("output", "mask"),
        num_visible_outputs=1,
        infer_shape=dropout_shape,
        infer_type=dropout_type,
        inplace=((0, 0),),
        reference=dropout_reference,
        kernels={DENSE: Kernel(dropout_lowering)},
        grad=dropout_grad,
        train_mode=True,
        aliases=("_npx_dropout",),
        doc="Randomly zeroes entries in training; the identity at inference unless mode='always'.",
        examples=(
            Example(((2, 3),)),
            Example(((2, 3, 4, 5),), {"p": 0.3}),
            # NOTE: p > 0 with mode='always' draws a new mask seed per call (see the kernel tests)
            Example(((2, 3),), {"p": 0.0, "mode": "always"}),
            Example(((2, 3, 4, 5),), {"p": 0.5, "axes": (2, 3)}),
            Example(((2, 3),), {"p": 0.0, "cudnn_off": True}, dtype="float64"),
        ),
        bad_params=({"p": 1.5}, {"p": -0.1}, {"mode": "inference"}, {"axes": "x"}),
    )
)
