"""Correlation: FlowNet's correlation of two feature maps over a grid of displacements."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True, kw_only=True)
class CorrelationParams(Params):
    kernel_size: int = field(default=1, lower=1, doc="Side of the compared patches (odd).")
    max_displacement: int = field(default=1, lower=0, doc="Largest displacement compared.")
    stride1: int = field(default=1, lower=1, doc="Stride over data1's positions.")
    stride2: int = field(default=1, lower=1, doc="Stride between compared displacements.")
    pad_size: int = field(default=0, lower=0, doc="Zero padding of both inputs.")
    is_multiply: bool = field(default=True, doc="Multiply the patches (else |difference|).")

    def __post_init__(self) -> None:
        if self.kernel_size % 2 == 0:
            raise ValueError(f"kernel_size={self.kernel_size} must be odd")

    @property
    def radius(self) -> int:
        return self.max_displacement // self.stride2

    @property
    def grid_width(self) -> int:
        return 2 * self.radius + 1


def _top(p: CorrelationParams, x: int) -> int:
    border = p.max_displacement + (p.kernel_size - 1) // 2
    return math.ceil((x + 2 * p.pad_size - 2 * border) / p.stride1)


def correlation_shape(p: CorrelationParams, ins: list, outs: list) -> tuple[list, list]:
    try:
        data = merge_shape(ins[0], ins[1])
    except RuleError:
        raise RuleError(
            f"data1 {shape_str(ins[0])} and data2 {shape_str(ins[1])} must have one shape"
        ) from None
    if data is None:
        return list(ins), list(outs)
    if len(data) != 4:
        raise RuleError(f"data has shape {shape_str(data)}; Correlation needs (N, C, H, W)")
    th = None if data[2] is None else _top(p, data[2])
    tw = None if data[3] is None else _top(p, data[3])
    if (th is not None and th < 1) or (tw is not None and tw < 1):
        raise RuleError(
            f"data {shape_str(data)} padded by {p.pad_size} is too small for "
            f"max_displacement={p.max_displacement} and kernel_size={p.kernel_size}"
        )
    return [data, data], [(data[0], p.grid_width**2, th, tw)]


def correlation_reference(p: CorrelationParams, data1: np.ndarray,
                          data2: np.ndarray) -> np.ndarray:
    n, c, h, w = data1.shape
    th, tw = _top(p, h), _top(p, w)
    k, gw, r, pd = p.kernel_size, p.grid_width, p.radius, p.pad_size
    a = np.pad(data1.astype(np.float64), [(0, 0), (0, 0), (pd, pd), (pd, pd)])
    b = np.pad(data2.astype(np.float64), [(0, 0), (0, 0), (pd, pd), (pd, pd)])
    big = p.max_displacement + k + th * p.stride1 + pd  # room for displaced windows
    b = np.pad(b, [(0, 0), (0, 0), (0, big), (0, big)])
    out = np.zeros((n, gw * gw, th, tw))
    for tc in range(gw * gw):
        oy, ox = (tc // gw - r) * p.stride2, (tc % gw - r) * p.stride2
        for i in range(th):
            for j in range(tw):
                y1, x1 = i * p.stride1 + p.max_displacement, j * p.stride1 + p.max_displacement
                pa = a[:, :, y1 : y1 + k, x1 : x1 + k]
                y2, x2 = y1 + oy, x1 + ox
                pb = b[:, :, y2 : y2 + k, x2 : x2 + k] if y2 >= 0 and x2 >= 0 else None
                if pb is None or pb.shape != pa.shape:
                    pb = _window(b, y2, x2, k, pa.shape)
                v = pa * pb if p.is_multiply else np.abs(pa - pb)
                out[:, tc, i, j] = v.sum(axis=(1, 2, 3)) / (k * k * c)
    return out.astype(data1.dtype)


def _window(b: np.ndarray, y: int, x: int, k: int, shape: tuple[int, ...]) -> np.ndarray:
    """b[:, :, y:y+k, x:x+k] with zeros where it leaves b (negative corners)."""
    win = np.zeros(shape)
    for dy in range(k):
        for dx in range(k):
            yy, xx = y + dy, x + dx
            if 0 <= yy < b.shape[2] and 0 <= xx < b.shape[3]:
                win[:, :, dy, dx] = b[:, :, yy, xx]
    return win


def _ia(p: CorrelationParams, data: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    return (*data, out[2], out[3], p.kernel_size, p.max_displacement, p.stride1, p.stride2,
            p.pad_size, p.radius, p.grid_width)


def _dtype(call: KernelCall) -> str:
    dt = str(call.in_dtypes[0].name)
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"Correlation has dense kernels for {FLOAT_DTYPES}, not {dt}")
    return dt


def correlation_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    p: CorrelationParams = call.params
    spec = KernelSpec.make("conv/correlation.c.j2", dtype=_dtype(call), stage="forward",
                           mult=p.is_multiply, req=call.req, req_1="", req_2="")
    return Lowered((Launch(spec, _ia(p, call.in_shapes[0], call.out_shapes[0])),))


def correlation_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data1, data2, d1, d2]."""
    g, data = call.in_shapes[0], call.in_shapes[1]
    if size(data) == 0:
        return Lowered()
    p: CorrelationParams = call.params
    spec = KernelSpec.make("conv/correlation.c.j2", dtype=_dtype(call), stage="backward",
                           mult=p.is_multiply, req="", req_1=call.out_req(0),
                           req_2=call.out_req(1))
    return Lowered((Launch(spec, _ia(p, data, g)),))


def _same_type(p: object, ins: list, outs: list) -> tuple[list, list]:
    t = next((v for v in (*ins, *outs) if v is not None), None)
    return [t] * len(ins), [t] * len(outs)


BACKWARD_CORRELATION = register(
    OpDef(
        name="_backward_Correlation",
        params=CorrelationParams,
        inputs=("ograd", "data1", "data2"),
        outputs=("data1_grad", "data2_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2]]),
        infer_type=_same_type,
        kernels={DENSE: Kernel(correlation_backward_lowering)},
        differentiable=False,
        doc="Gradient of Correlation, to both inputs.",
    )
)


CORRELATION = register(
    OpDef(
        name="Correlation",
        params=CorrelationParams,
        inputs=("data1", "data2"),
        infer_shape=correlation_shape,
        infer_type=_same_type,
        reference=correlation_reference,
        kernels={DENSE: Kernel(correlation_lowering)},
        grad=node_gradient(BACKWARD_CORRELATION),
        doc="FlowNet correlation: patch products (or |differences|) over displacements.",
        examples=(
            Example(((2, 3, 5, 6), (2, 3, 5, 6))),
            Example(((1, 2, 7, 8), (1, 2, 7, 8)),
                    {"kernel_size": 3, "max_displacement": 2, "stride1": 2, "pad_size": 2}),
            Example(((1, 2, 6, 6), (1, 2, 6, 6)),
                    {"kernel_size": 3, "max_displacement": 2, "stride2": 2, "pad_size": 1,
                     "is_multiply": False}, dtype="float64"),
        ),
        bad_params=({"kernel_size": 2}, {"stride1": 0}, {"pad_size": -1}),
    )
)
