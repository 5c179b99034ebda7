"""Dropout: zero entries with probability p in training (scaling the rest by 1 / (1 - p))."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.ops.params import Params, field
from nnsym.ops.registry import Example, OpDef, RuleError, register
from nnsym.types import shape_str


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


def dropout_reference(p: DropoutParams, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inference: the identity, and a mask of ones (every entry kept)."""
    mask_shape = tuple(1 if i in p.axes else d for i, d in enumerate(data.shape))
    return data.copy(), np.ones(mask_shape, dtype=data.dtype)


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
        aliases=("_npx_dropout",),
        doc="Randomly zeroes entries in training; the identity at inference unless mode='always'.",
        examples=(
            Example(((2, 3),)),
            Example(((2, 3, 4, 5),), {"p": 0.3}),
            Example(((2, 3),), {"p": 0.5, "mode": "always"}),
            Example(((2, 3, 4, 5),), {"p": 0.5, "axes": (2, 3)}),
            Example(((2, 3),), {"p": 0.0, "cudnn_off": True}, dtype="float64"),
        ),
        bad_params=({"p": 1.5}, {"p": -0.1}, {"mode": "inference"}, {"axes": "x"}),
    )
)
