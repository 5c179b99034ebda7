"""MXNet's ``_contrib_AdaptiveAvgPooling2D`` and ``_contrib_BilinearResize2D`` over NCHW data,
with their gradients (``_backward_contrib_*``), each written as a gather so the C kernel and
its CUDA twin sum in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")


def _check_nchw(s: Any) -> None:
    if s is not None and len(s) != 4:
        raise RuleError(f"data has shape {shape_str(s)}; it must be 4-D (N, C, H, W)")


def _float_kernel(call: KernelCall) -> str:
    dt = str(call.out_dtypes[0].name)
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"kernels for {FLOAT_DTYPES}, not {dt}")
    return dt


def _ctype(dt: np.dtype) -> type:
    return np.float64 if dt == np.float64 else np.float32


# ---------------------------------------------------------------------------------------------
# AdaptiveAvgPooling2D


@dataclass(frozen=True, kw_only=True)
class AdaptiveAvgPoolingParams(Params):
    output_size: tuple[int, ...] = field(
        default=(), lower=1, doc="int (output size) or a tuple of int for output (height, width).")

    def __post_init__(self) -> None:
        if len(self.output_size) > 2:
            raise ValueError(f"output_size={self.output_size} must have at most 2 values")


def pool_out_hw(p: AdaptiveAvgPoolingParams) -> tuple[int, int]:
    o = p.output_size
    if not o:
        return 1, 1
    return (o[0], o[0]) if len(o) == 1 else (o[0], o[1])


def adaptive_shape(p: AdaptiveAvgPoolingParams, ins: list, outs: list) -> tuple[list, list]:
    s = ins[0]
    _check_nchw(s)
    if s is None:
        return list(ins), list(outs)
    return [s], [(s[0], s[1], *pool_out_hw(p))]


def _bins(n_in: int, n_out: int) -> list[tuple[int, int]]:
    return [((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)) for i in range(n_out)]


def adaptive_reference(p: AdaptiveAvgPoolingParams, x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = pool_out_hw(p)
    ct = _ctype(x.dtype)
    xs: np.ndarray = x.astype(ct)
    out: np.ndarray = np.zeros((n, c, oh, ow), ct)
    for i, (hs, he) in enumerate(_bins(h, oh)):
        for j, (ws, we) in enumerate(_bins(w, ow)):
            out[:, :, i, j] = xs[:, :, hs:he, ws:we].sum(axis=(2, 3), dtype=ct) / ct(
                (he - hs) * (we - ws))
    return out.astype(x.dtype)


def _pool_launch(call: KernelCall, data: tuple[int, ...], out: tuple[int, ...],
                 backward: bool) -> Lowered:
    dt = _float_kernel(call)
    if size(data) == 0 or size(out) == 0:
        return Lowered()
    spec = KernelSpec.make("image/adaptive_avg_pool.c.j2", dtype=dt, backward=backward,
                           req=call.req)
    return Lowered((Launch(spec, (data[0] * data[1], data[2], data[3], out[2], out[3])),))


BACKWARD_ADAPTIVE = register(OpDef(
    name="_backward_contrib_AdaptiveAvgPooling2D",
    params=AdaptiveAvgPoolingParams,
    inputs=("ograd", "data"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
    ignore_inputs=(1,),
    kernels={DENSE: Kernel(lambda call: Lowered(tuple(
        Launch(ln.spec, ln.ia, ln.fa, args=(0, 2)) for ln in _pool_launch(
            call, call.in_shapes[1], call.in_shapes[0], True).launches)))},
    differentiable=False,
    doc="Gradient of AdaptiveAvgPooling2D: each bin's gradient spread evenly over its cells.",
))


def adaptive_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(BACKWARD_ADAPTIVE, node, [g, node.inputs[0]]), 0)]


ADAPTIVE_AVG_POOLING = register(OpDef(
    name="_contrib_AdaptiveAvgPooling2D",
    params=AdaptiveAvgPoolingParams,
    inputs=("data",),
    infer_shape=adaptive_shape,
    infer_type=lambda p, ins, outs: ([ins[0] or outs[0]], [ins[0] or outs[0]]),
    reference=adaptive_reference,
    kernels={DENSE: Kernel(lambda call: _pool_launch(call, call.in_shapes[0],
                                                     call.out_shapes[0], False))},
    grad=adaptive_grad,
    doc="Average pooling of NCHW data into a fixed (height, width) grid of (overlapping) bins.",
    examples=(
        Example(((2, 3, 5, 7),), {"output_size": (2, 3)}),
        Example(((1, 2, 4, 4),), {"output_size": 3}, dtype="float64"),
        Example(((1, 1, 3, 5),), {}),
        Example(((2, 1, 3, 2),), {"output_size": (5, 4)}),
    ),
    bad_params=({"output_size": (1, 2, 3)}, {"output_size": (0,)}, {"size": 2}),
))


# ---------------------------------------------------------------------------------------------
# BilinearResize2D

MODES = ("like", "odd_scale", "size", "to_even_down", "to_even_up", "to_odd_down", "to_odd_up")


@dataclass(frozen=True, kw_only=True)
class BilinearResizeParams(Params):
    height: int = field(default=1, lower=1, doc="Output height (mode 'size' without scales).")
    width: int = field(default=1, lower=1, doc="Output width (mode 'size' without scales).")
    scale_height: float | None = field(
        default=None, doc="Height scale (modes 'size' with scale_width, and 'odd_scale').")
    scale_width: float | None = field(
        default=None, doc="Width scale (modes 'size' with scale_height, and 'odd_scale').")
    mode: str = field(default="size", choices=MODES, doc="How the output size is chosen.")
    align_corners: bool = field(default=True, doc="Map the corner pixels onto each other.")

    def __post_init__(self) -> None:
        if (self.scale_height is None) != (self.scale_width is None) and self.mode in (
                "size", "odd_scale"):
            raise ValueError("scale_height and scale_width must be given together")
        if self.mode == "odd_scale" and self.scale_height is None:
            raise ValueError("mode 'odd_scale' needs scale_height and scale_width")
        for s in (self.scale_height, self.scale_width):
            if s is not None and not s > 0:
                raise ValueError(f"scales must be positive, got {s}")


def resize_inputs(p: BilinearResizeParams) -> tuple[str, ...]:
    return ("data", "like") if p.mode == "like" else ("data",)


def _side(p: BilinearResizeParams, n: int, target: int, scale: float | None) -> int:
    m = p.mode
    if m == "size":
        return int(n * scale) if scale is not None else target
    if m == "odd_scale":
        assert scale is not None
        return int((n - 1) * scale + 1) if n % 2 else int(n * scale)
    odd = n % 2 == 1
    return {"to_even_down": n - odd, "to_even_up": n + odd,
            "to_odd_down": n - (not odd), "to_odd_up": n + (not odd)}[m]


def bilinear_shape(p: BilinearResizeParams, ins: list, outs: list) -> tuple[list, list]:
    s = ins[0]
    _check_nchw(s)
    if p.mode == "like":
        like = ins[1]
        _check_nchw(like)
        if s is None or like is None:
            return list(ins), list(outs)
        return [s, like], [(s[0], s[1], like[2], like[3])]
    if s is None:
        return list(ins), list(outs)
    if s[2] is None or s[3] is None:
        return [s], [(s[0], s[1], None, None)]
    oh = _side(p, s[2], p.height, p.scale_height)
    ow = _side(p, s[3], p.width, p.scale_width)
    if oh < 1 or ow < 1:
        raise RuleError(f"the output would be {oh} x {ow} for data {shape_str(s)}")
    return [s], [(s[0], s[1], oh, ow)]


def _ratio(n_in: int, n_out: int, align: bool) -> float:
    if align:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return n_in / n_out


def _src(n_in: int, n_out: int, align: bool, ct: type) -> tuple[np.ndarray, ...]:
    r = ct(_ratio(n_in, n_out, align))
    d: np.ndarray = np.arange(n_out).astype(ct)
    s = r * d if align else np.maximum(r * (d + ct(0.5)) - ct(0.5), ct(0))
    i0 = s.astype(np.int64)
    i1 = i0 + (i0 < n_in - 1)
    return i0, i1, (s - i0.astype(ct)).astype(ct)


def bilinear_reference(p: BilinearResizeParams, x: np.ndarray,
                       like: np.ndarray | None = None) -> np.ndarray:
    (oh, ow), = ([like.shape[2:]] if like is not None
                 else [bilinear_shape(p, [x.shape], [None])[1][0][2:]])
    ct = _ctype(x.dtype)
    h0, h1, lh = _src(x.shape[2], oh, p.align_corners, ct)
    w0, w1, lw = _src(x.shape[3], ow, p.align_corners, ct)
    xs: np.ndarray = x.astype(ct)
    one = ct(1)
    lh_, lw_ = lh[:, None], lw[None, :]

    def at(hh: np.ndarray, ww: np.ndarray) -> np.ndarray:
        out: np.ndarray = xs[:, :, hh[:, None], ww[None, :]]
        return out

    v = (one - lh_) * ((one - lw_) * at(h0, w0) + lw_ * at(h0, w1)) + lh_ * (
        (one - lw_) * at(h1, w0) + lw_ * at(h1, w1))
    return np.asarray(v).astype(x.dtype)


def _resize_launch(call: KernelCall, data: tuple[int, ...], out: tuple[int, ...],
                   backward: bool) -> Lowered:
    dt = _float_kernel(call)
    if size(data) == 0 or size(out) == 0:
        return Lowered()
    al = bool(call.params.align_corners)
    tmpl = "bilinear_resize2d_backward" if backward else "bilinear_resize2d"
    spec = KernelSpec.make(f"image/{tmpl}.c.j2", dtype=dt, req=call.req)
    ia = (data[0] * data[1], data[2], data[3], out[2], out[3], int(al))
    fa = (_ratio(data[2], out[2], al), _ratio(data[3], out[3], al))
    return Lowered((Launch(spec, ia, fa),))


def bilinear_lowering(call: KernelCall) -> Lowered:
    low = _resize_launch(call, call.in_shapes[0], call.out_shapes[0], False)
    n_in = len(call.in_shapes)
    return Lowered(tuple(Launch(ln.spec, ln.ia, ln.fa, args=(0, n_in)) for ln in low.launches))


def bilinear_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data (shape only), dx]."""
    low = _resize_launch(call, call.in_shapes[1], call.in_shapes[0], True)
    return Lowered(tuple(Launch(ln.spec, ln.ia, ln.fa, args=(0, 2)) for ln in low.launches))


BACKWARD_BILINEAR = register(OpDef(
    name="_backward_contrib_BilinearResize2D",
    params=BilinearResizeParams,
    inputs=("ograd", "data"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
    ignore_inputs=(1,),
    kernels={DENSE: Kernel(bilinear_backward_lowering)},
    differentiable=False,
    doc="Gradient of BilinearResize2D with respect to data.",
))


def bilinear_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The data gets the gradient; a like input (shape only) none."""
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_BILINEAR, node, [g, node.inputs[0]])
    return [Entry(b, 0), *([None] * (len(node.inputs) - 1))]


BILINEAR_RESIZE_2D = register(OpDef(
    name="_contrib_BilinearResize2D",
    params=BilinearResizeParams,
    inputs=resize_inputs,
    infer_shape=bilinear_shape,
    infer_type=lambda p, ins, outs: ([ins[0] or outs[0]] * len(ins), [ins[0] or outs[0]]),
    ignore_inputs=lambda p: (1,) if p.mode == "like" else (),
    reference=bilinear_reference,
    kernels={DENSE: Kernel(bilinear_lowering)},
    grad=bilinear_grad,
    doc="Bilinear resize of NCHW data to a size, a scale, another array's size or a parity.",
    examples=(
        Example(((2, 1, 3, 4),), {"height": 5, "width": 6}),
        Example(((1, 2, 5, 6),), {"height": 3, "width": 4, "align_corners": False}),
        Example(((1, 2, 4, 5),), {"scale_height": 2.0, "scale_width": 0.6}, dtype="float64"),
        Example(((1, 1, 5, 6),), {"mode": "odd_scale", "scale_height": 2.0,
                                  "scale_width": 0.5}),
        Example(((1, 2, 3, 4), (2, 3, 6, 2)), {"mode": "like"}),
        Example(((1, 1, 5, 6),), {"mode": "to_even_down", "align_corners": False}),
        Example(((1, 1, 5, 6),), {"mode": "to_even_up"}),
        Example(((1, 1, 5, 6),), {"mode": "to_odd_down"}),
        Example(((1, 1, 5, 6),), {"mode": "to_odd_up", "align_corners": False}),
        Example(((1, 1, 4, 4),), {"height": 4, "width": 4}),
    ),
    bad_params=({"mode": "nearest"}, {"height": 0}, {"scale_height": 2.0},
                {"mode": "odd_scale"}, {"scale_height": -1.0, "scale_width": 1.0}),
))
