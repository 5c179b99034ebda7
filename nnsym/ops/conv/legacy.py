"""Pooling_v1: MXNet's legacy pooling (2-D, channel-first).

It differs from Pooling in two ways, both kept: max pooling pads with zeros (a padded cell can
win the max, and then no data cell gets the gradient), and avg pooling always divides by the
whole kernel, also where a 'full' window hangs past the padded data. Convolution_v1 computes
what Convolution does and is registered as its alias (``conv.py``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from nnsym.ir.graph import Entry
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.conv.conv import (
    pooling_backward_lowering,
    pooling_lowering,
    pooling_shape,
    pooling_type,
)
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class PoolingV1Params(Params):
    kernel: tuple[int, ...] = field(default=(), lower=1, doc="Pooling window (y, x).")
    pool_type: str = field(
        default="max", choices=("avg", "max", "sum"), doc="Pooling type to apply."
    )
    global_pool: bool = field(
        default=False, doc="Pool over the whole spatial extent, ignoring kernel/stride/pad."
    )
    pooling_convention: str = field(
        default="valid", choices=("full", "valid"), doc="Output size rule: floor or ceil."
    )
    stride: tuple[int, ...] = field(default=(), lower=1, doc="Stride; defaults to 1.")
    pad: tuple[int, ...] = field(default=(), lower=0, doc="Zero padding; defaults to none.")

    # What the shared Pooling shape rule and lowerings read.
    layout: ClassVar[None] = None
    p_value: ClassVar[None] = None
    count_include_pad: ClassVar[None] = None
    zero_pad: ClassVar[bool] = True
    full_kernel: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.global_pool:
            return
        k = len(self.kernel)
        if k != 2:
            # NOTE: MXNet accepts a 3-D kernel in shape inference but fails when it runs.
            raise ValueError(f"kernel={self.kernel} must be (y, x): Pooling_v1 is 2-D only")
        for name, t in (("stride", self.stride), ("pad", self.pad)):
            if t and len(t) < k:
                raise ValueError(f"{name}={t} has fewer entries than kernel={self.kernel}")

    @property
    def strides(self) -> tuple[int, ...]:
        return self.stride[: len(self.kernel)] or (1,) * len(self.kernel)

    @property
    def pads(self) -> tuple[int, ...]:
        return self.pad[: len(self.kernel)] or (0,) * len(self.kernel)


def pooling_v1_shape(p: PoolingV1Params, ins: list, outs: list) -> tuple[list, list]:
    """Pooling's rule, for 4-D (N, C, y, x) data only."""
    if ins[0] is not None and len(ins[0]) != 4:
        raise RuleError(f"data has shape {shape_str(ins[0])}; Pooling_v1 needs 4-D (N, C, y, x)")
    return pooling_shape(p, ins, outs)  # type: ignore[arg-type]


def _out_size(p: PoolingV1Params, x: int, k: int, s: int, pd: int) -> int:
    if p.pooling_convention == "valid":
        return (x + 2 * pd - k) // s + 1
    return -(-(x + 2 * pd - k) // s) + 1


def pooling_v1_reference(p: PoolingV1Params, data: np.ndarray) -> np.ndarray:
    """Pool the zero-padded data; windows are clipped to it, avg divides by the kernel size."""
    spatial = data.shape[2:]
    if p.global_pool:
        kernel, strides, pads = spatial, (1,) * len(spatial), (0,) * len(spatial)
        osz: tuple[int, ...] = (1,) * len(spatial)
    else:
        kernel, strides, pads = p.kernel, p.strides, p.pads
        osz = tuple(_out_size(p, *a) for a in zip(spatial, kernel, strides, pads))
    padded = np.pad(data.astype(np.float64), [(0, 0), (0, 0), *((q, q) for q in pads)])
    axes = tuple(range(2, data.ndim))
    out = np.empty(data.shape[:2] + osz)
    for pos in itertools.product(*(range(o) for o in osz)):
        region: tuple[Any, ...] = (
            Ellipsis,
            *(slice(o * s, o * s + k) for o, s, k in zip(pos, strides, kernel)),
        )
        win = padded[region]
        if p.pool_type == "max":
            v = win.max(axis=axes)
        else:
            v = win.sum(axis=axes)
            if p.pool_type == "avg":
                v = v / math.prod(kernel)
        at: tuple[Any, ...] = (Ellipsis, *pos)
        out[at] = v
    return out.astype(data.dtype)


BACKWARD_POOLING_V1 = register(
    OpDef(
        name="_backward_Pooling_v1",
        params=PoolingV1Params,
        inputs=("ograd", "data", "output"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        kernels={DENSE: Kernel(pooling_backward_lowering)},
        differentiable=False,
        doc="Gradient of Pooling_v1.",
    )
)


POOLING_V1 = register(
    OpDef(
        name="Pooling_v1",
        params=PoolingV1Params,
        inputs=("data",),
        infer_shape=pooling_v1_shape,
        infer_type=pooling_type,
        reference=pooling_v1_reference,
        kernels={DENSE: Kernel(pooling_lowering)},
        grad=node_gradient(BACKWARD_POOLING_V1, lambda n: [n.inputs[0], Entry(n, 0)]),
        doc="Legacy max/avg/sum pooling: zero padding, avg over the whole kernel.",
        examples=(
            Example(((2, 3, 7, 7),), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
            Example(
                ((2, 3, 7, 7),),
                {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"},
            ),
            Example(
                ((1, 2, 7, 6),),
                {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "full",
                 "pool_type": "avg"},
            ),
            Example(
                ((1, 2, 7, 7),),
                {"kernel": (3, 2), "stride": (2, 2), "pad": (1, 1), "pooling_convention": "full"},
            ),
            Example(((2, 3, 5, 4),), {"kernel": (2, 2), "pool_type": "sum", "pad": (1, 1)}),
            Example(((2, 3, 6, 5),), {"global_pool": True, "pool_type": "avg"}),
            Example(((2, 3, 6, 6),), {"kernel": (2, 2), "pad": (1, 1)}, dtype="float64"),
        ),
        bad_params=(
            {},
            {"kernel": (2,)},
            {"kernel": (2, 2, 2)},
            {"kernel": (2, 2), "pool_type": "lp"},
            {"kernel": (2, 2), "pooling_convention": "same"},
            {"kernel": (2, 2), "layout": "NCHW"},
            {"kernel": (2, 2), "stride": (2,)},
        ),
    )
)
