"""LRN: local response normalisation across channels (axis 1).

out = data * norm ** -beta with norm = knorm + alpha / nsize * (sum of data ** 2 over the
nsize channels centred on each channel, clipped at the ends). ``norm`` is a second, hidden
output (MXNet's ``tmp_norm``) that the gradient reads.

MXNet 1.9.1's own kernel accepts odd nsize only; its oneDNN (MKLDNN) path, which the default
CPU builds run for 2-D and 4-D float32 data, also takes an even nsize, summing over the
nsize - 1 channels centred on each channel and still scaling by alpha / nsize. nnsym follows
the oneDNN path: the window is (nsize - 1) // 2 channels to either side, for every nsize.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True, kw_only=True)
class LRNParams(Params):
    alpha: float = field(default=1e-4, doc="The variance scaling parameter alpha.")
    beta: float = field(default=0.75, doc="The power parameter beta.")
    knorm: float = field(default=2.0, doc="The additive parameter k.")
    nsize: int = field(lower=1, doc="Normalisation window width in channels.")

    @property
    def half(self) -> int:
        return (self.nsize - 1) // 2


def lrn_shape(p: LRNParams, ins: list, outs: list) -> tuple[list, list]:
    """Both outputs have the data's shape (forward only, as MXNet's LRNShape)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 2:
        raise RuleError(
            f"data has shape {shape_str(data)}; LRN normalises across channels (axis 1) and "
            "needs at least 2-D data"
        )
    return [data], [data, data]


def lrn_type(p: LRNParams, ins: list, outs: list) -> tuple[list, list]:
    return list(ins), [ins[0], ins[0]]


def _window_sum(v: np.ndarray, half: int) -> np.ndarray:
    """Sum over channels c - half .. c + half (clipped) along axis 1."""
    c = v.shape[1]
    csum = np.concatenate([np.zeros_like(v[:, :1]), np.cumsum(v, axis=1)], axis=1)
    lo = np.maximum(np.arange(c) - half, 0)
    hi = np.minimum(np.arange(c) + half + 1, c)
    res: np.ndarray = np.take(csum, hi, axis=1) - np.take(csum, lo, axis=1)
    return res


def lrn_reference(p: LRNParams, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = data.astype(np.float64)
    norm = p.knorm + p.alpha / p.nsize * _window_sum(x * x, p.half)
    return (x * norm**-p.beta).astype(data.dtype), norm.astype(data.dtype)


def _layout(shape: tuple[int, ...]) -> tuple[int, int, int]:
    return int(shape[0]), int(shape[1]), size(shape[2:])


def lrn_lowering(call: KernelCall) -> Lowered:
    """p = [data, output, norm]; the data viewed as (N, C, S)."""
    p: LRNParams = call.params
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"LRN has dense kernels for {FLOAT_DTYPES}, not {dt}")
    n, c, s = _layout(call.in_shapes[0])
    if n * c * s == 0:
        return Lowered()
    spec = KernelSpec.make("nn/lrn.c.j2", dtype=dt, req=call.out_req(0), req_norm=call.out_req(1))
    ws = (c * s + 16) * (8 if dt == "float64" else 4)
    return Lowered((Launch(spec, (n, c, s, p.half, p.nsize),
                           (float(p.alpha), float(p.beta), float(p.knorm)), workspace=ws),))


def lrn_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data, norm, data grad]."""
    p: LRNParams = call.params
    dt = call.out_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"LRN's gradient has dense kernels for {FLOAT_DTYPES}, not {dt}")
    n, c, s = _layout(call.in_shapes[1])
    if n * c * s == 0:
        return Lowered()
    spec = KernelSpec.make("nn/lrn_backward.c.j2", dtype=dt, req=call.out_req(0))
    ws = (c * s + s + 32) * (8 if dt == "float64" else 4)
    return Lowered((Launch(spec, (n, c, s, p.half, p.nsize),
                           (float(p.alpha), float(p.beta), float(p.knorm)), workspace=ws),))


BACKWARD_LRN = register(
    OpDef(
        name="_backward_LRN",
        params=LRNParams,
        inputs=("ograd", "data", "norm"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        kernels={DENSE: Kernel(lrn_backward_lowering)},
        differentiable=False,
        doc="Gradient of LRN, from the data and the forward's norm.",
    )
)


# The gradient reads the data and the hidden norm output (MXNet's LRNGrad); no gradient flows
# into the norm output.
lrn_grad = node_gradient(BACKWARD_LRN, lambda n: [n.inputs[0], Entry(n, 1)])


LRN = register(
    OpDef(
        name="LRN",
        params=LRNParams,
        inputs=("data",),
        outputs=("output", "tmp_norm"),
        num_visible_outputs=1,
        infer_shape=lrn_shape,
        infer_type=lrn_type,
        reference=lrn_reference,
        kernels={DENSE: Kernel(lrn_lowering)},
        grad=lrn_grad,
        doc="Local response normalisation across channels: data / (knorm + alpha / nsize * "
        "sum of squares over nsize neighbouring channels) ** beta. Dense kernels: float16, "
        "float32, float64; any data with a channel axis 1 (MXNet runs 4-D, and 2-D float32).",
        examples=(
            Example(((2, 7, 3, 4),), {"nsize": 3}),
            Example(((2, 6, 3, 3),), {"nsize": 5, "alpha": 0.5, "beta": 0.9, "knorm": 1.5}),
            Example(((3, 5),), {"nsize": 3, "alpha": 1.0}),
            Example(((2, 4, 5),), {"nsize": 1, "alpha": 2.0, "beta": 0.5, "knorm": 1.0}),
            Example(((1, 5, 2, 3),), {"nsize": 9, "alpha": 1.0, "beta": 0.5, "knorm": 1.0}),
            Example(((2, 7, 2, 2),), {"nsize": 4, "alpha": 1.0, "beta": 0.5, "knorm": 1.0}),
            Example(((2, 5, 3, 2),), {"nsize": 3, "alpha": 0.3}, dtype="float64"),
        ),
        bad_params=(
            {},
            {"nsize": 0},
            {"nsize": -1},
            {"nsize": 3, "alpha": "big"},
            {"nsize": 3, "size": 3},
        ),
    )
)
