"""MXNet's deterministic image operators: ``_image_to_tensor``, ``_image_normalize``, the flips,
``_image_crop``, ``_image_resize`` and ``_image_adjust_lighting``.

Images are HWC (height, width, channels) or NHWC batches, as MXNet 1.9.1's operators take them:
to_tensor turns them into float32 CHW/NCHW divided by 255, normalize works on CHW/NCHW. Every
operator but resize lowers to one 4-D gather kernel (``image_gather.c.j2``): per output element
a source position from strides, offsets and flips, then ``(v - sub[c]) / div[c]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, pass_through
from nnsym.types import shape_str

# PCA of ImageNet's RGB pixels (AlexNet's lighting noise), as MXNet's adjust_lighting uses it.
EIGVAL = (55.46, 4.794, 1.148)
EIGVEC = ((-0.5675, 0.7192, 0.4009),
          (-0.5808, -0.0045, -0.8140),
          (-0.5836, -0.6948, 0.4203))
KERNEL_DTYPES = ("uint8", "int8", "int32", "int64", "float16", "float32", "float64")


# ---------------------------------------------------------------------------------------------
# Shared helpers


def _check_image(what: str, s: Any, ndims: tuple[int, ...] = (3, 4)) -> None:
    if s is not None and len(s) not in ndims:
        want = "(H, W, C) or (N, H, W, C)" if 4 in ndims else "(H, W, C)"
        raise RuleError(f"{what} has shape {shape_str(s)}; it must be an image {want}")


def comp_type(*dts: Any) -> str:
    """The kernels' compute type: double when a float64 is involved, else float."""
    return "double" if any(np.dtype(d) == np.float64 for d in dts) else "float"


def _int_limits(dt: np.dtype) -> tuple[float | None, float | None]:
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return float(info.min), float(info.max)
    return None, None


def gather_launch(call: KernelCall, dims: tuple[int, ...], strides: tuple[int, ...],
                  offs: tuple[int, ...], lims: tuple[int, ...], flips: tuple[int, ...],
                  cdim: int, sub: tuple[float, ...], div: tuple[float, ...],
                  coin: bool = False) -> Lowered:
    """One launch of ``image_gather.c.j2`` (see its header for the arguments)."""
    idt, odt = call.in_dtypes[0], call.out_dtypes[0]
    for dt in (idt, odt):
        if dt.name not in KERNEL_DTYPES:
            raise NoKernelError(f"image kernels take {KERNEL_DTYPES}, not {dt.name}")
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    lo, hi = _int_limits(odt)
    spec = KernelSpec.make("image/image_gather.c.j2", idtype=idt.name, odtype=odt.name,
                           comp=comp_type(idt, odt), nch=len(sub), req=call.req, lo=lo, hi=hi,
                           coin=coin)
    ia = (*dims, *strides, *offs, *lims, *flips, cdim)
    fa = (*map(float, sub), *map(float, div), *((0.0,) if coin else ()))
    return Lowered((Launch(spec, ia, fa, seed_slot=2 * len(sub) if coin else None),))


def _nhwc(s: tuple[int, ...]) -> tuple[int, int, int, int]:
    n, h, w, c = (1, *s) if len(s) == 3 else s
    return n, h, w, c


def _contiguous(d: tuple[int, ...]) -> tuple[int, ...]:
    return (d[1] * d[2] * d[3], d[2] * d[3], d[3], 1)


def saturate(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """The kernels' cast: integer outputs clamped then truncated."""
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = np.clip(v, info.min, info.max)
    out: np.ndarray = v.astype(dt)
    return out


def _ctype_of(*dts: Any) -> type:
    return np.float64 if comp_type(*dts) == "double" else np.float32


# ---------------------------------------------------------------------------------------------
# to_tensor


def to_tensor_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    s = ins[0]
    _check_image("data", s)
    if s is None:
        return list(ins), list(outs)
    out = (s[2], s[0], s[1]) if len(s) == 3 else (s[0], s[3], s[1], s[2])
    return [s], [out]


def to_tensor_reference(p: Any, x: np.ndarray) -> np.ndarray:
    ct = _ctype_of(x.dtype, np.float32)
    y = x.astype(ct) / ct(255)
    axes = (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)
    return np.ascontiguousarray(y.transpose(axes)).astype(np.float32)


def to_tensor_lowering(call: KernelCall) -> Lowered:
    n, h, w, c = _nhwc(call.in_shapes[0])
    src = (h * w * c, 1, w * c, c)
    return gather_launch(call, (n, c, h, w), src, (0,) * 4, (n, c, h, w), (0,) * 4, 1,
                         (0.0,), (255.0,))


TO_TENSOR = register(OpDef(
    name="_image_to_tensor",
    params=NoParams,
    inputs=("data",),
    infer_shape=to_tensor_shape,
    infer_type=lambda p, ins, outs: (list(ins), [np.dtype(np.float32)]),
    reference=to_tensor_reference,
    kernels={DENSE: Kernel(to_tensor_lowering)},
    # NOTE: MXNet 1.9.1 declares a gradient that fails on every call (it is shaped like the
    # output); nnsym declares none.
    doc="An HWC (or NHWC) image as a float32 CHW (NCHW) tensor divided by 255.",
    examples=(
        Example(((4, 5, 3),), dtype="uint8", ints={0: (0, 256)}),
        Example(((2, 3, 4, 2),), dtype="uint8", ints={0: (0, 256)}),
        Example(((3, 2, 5),), low=0.0, high=255.0),
        Example(((2, 3, 1),), dtype="float64", low=0.0, high=255.0),
    ),
    bad_params=({"x": 1},),
))


# ---------------------------------------------------------------------------------------------
# normalize


@dataclass(frozen=True, kw_only=True)
class NormalizeParams(Params):
    mean: tuple[float, ...] = field(default=(0.0, 0.0, 0.0, 0.0),
                                    doc="Per-channel means (1 or C values).")
    std: tuple[float, ...] = field(default=(1.0, 1.0, 1.0, 1.0),
                                   doc="Per-channel standard deviations (1 or C values).")

    def __post_init__(self) -> None:
        if not self.mean or not self.std:
            raise ValueError("mean and std need at least one value each")


def _per_channel(what: str, v: tuple[float, ...], c: int) -> tuple[float, ...]:
    if len(v) == 1:
        return v * c
    if len(v) != c:
        raise RuleError(f"{what} has {len(v)} values {v}; an input with {c} channels needs 1 "
                        f"or {c}")
    return v


def normalize_shape(p: NormalizeParams, ins: list, outs: list) -> tuple[list, list]:
    s = ins[0] if ins[0] is not None else outs[0]
    if s is None:
        return list(ins), list(outs)
    if len(s) not in (3, 4):
        raise RuleError(f"data has shape {shape_str(s)}; normalize takes (C, H, W) or "
                        "(N, C, H, W)")
    c = s[-3]
    if c is not None:
        if c not in (1, 3):
            raise RuleError(f"data has shape {shape_str(s)}; its channel axis (-3) must have 1 "
                            "or 3 channels (MXNet 1.9.1)")
        _per_channel("mean", p.mean, c)
        _per_channel("std", p.std, c)
    return [s], [s]


def _normalize_consts(p: NormalizeParams, c: int) -> tuple[tuple[float, ...], ...]:
    return _per_channel("mean", p.mean, c), _per_channel("std", p.std, c)


def normalize_reference(p: NormalizeParams, x: np.ndarray) -> np.ndarray:
    c = x.shape[-3]
    mean, std = _normalize_consts(p, c)
    ct = _ctype_of(x.dtype)
    m: np.ndarray = np.asarray(mean, ct).reshape(c, 1, 1)
    s: np.ndarray = np.asarray(std, ct).reshape(c, 1, 1)
    return saturate((x.astype(ct) - m) / s, x.dtype)


def _chw_lowering(call: KernelCall, shape: tuple[int, ...], sub: tuple[float, ...],
                  div: tuple[float, ...]) -> Lowered:
    d = (1, *shape) if len(shape) == 3 else tuple(shape)
    return gather_launch(call, d, _contiguous(d), (0,) * 4, d, (0,) * 4, 1, sub, div)


def normalize_lowering(call: KernelCall) -> Lowered:
    s = call.in_shapes[0]
    mean, std = _normalize_consts(call.params, s[-3])
    return _chw_lowering(call, s, mean, std)


def normalize_backward_lowering(call: KernelCall) -> Lowered:
    s = call.in_shapes[0]
    _, std = _normalize_consts(call.params, s[-3])
    return _chw_lowering(call, s, (0.0,) * len(std), std)


BACKWARD_NORMALIZE = register(OpDef(
    name="_backward_image_normalize",
    params=NormalizeParams,
    inputs=("ograd",),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: ([ins[0] or outs[0]], [ins[0] or outs[0]]),
    infer_type=lambda p, ins, outs: ([ins[0] or outs[0]], [ins[0] or outs[0]]),
    kernels={DENSE: Kernel(normalize_backward_lowering)},
    differentiable=False,
    doc="Gradient of _image_normalize: the output gradient over each channel's std.",
))


def normalize_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(BACKWARD_NORMALIZE, node, [g]), 0)]


NORMALIZE = register(OpDef(
    name="_image_normalize",
    params=NormalizeParams,
    inputs=("data",),
    infer_shape=normalize_shape,
    infer_type=lambda p, ins, outs: ([ins[0] or outs[0]], [ins[0] or outs[0]]),
    reference=normalize_reference,
    kernels={DENSE: Kernel(normalize_lowering)},
    grad=normalize_grad,
    doc="(data - mean[c]) / std[c] over a CHW (or NCHW) tensor.",
    examples=(
        Example(((3, 4, 5),), {"mean": (0.5, -0.25, 1.0), "std": (1.0, 2.0, 0.5)}),
        Example(((2, 3, 2, 3),), {"mean": (0.5,), "std": (2.0, 0.5, 4.0)}),
        Example(((1, 3, 2),), {"mean": (0.25,), "std": (0.5,)}, dtype="float64"),
        Example(((3, 2, 2),), {"mean": (10.0, 20.0, 30.0), "std": (3.0,)}, dtype="uint8",
                ints={0: (30, 256)}),
    ),
    bad_params=({"mean": ()}, {"std": "x"}, {"mean": (1.0,), "sd": (1.0,)}),
))


# ---------------------------------------------------------------------------------------------
# flips


def hwc_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """A same-shape operator over one (H, W, C) image (MXNet 1.9.1 takes no batch here)."""
    s = ins[0] if ins[0] is not None else outs[0]
    _check_image("data", s, (3,))
    return [s], [s]


def same_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0] if ins[0] is not None else outs[0]
    return [t], [t]


def flip_lowering(axis: int, coin: bool = False) -> Any:
    def lower(call: KernelCall) -> Lowered:
        d = (1, *call.in_shapes[0])
        flips = tuple(int(k == axis + 1) for k in range(4))
        return gather_launch(call, d, _contiguous(d), (0,) * 4, d, flips, 3, (0.0,), (1.0,),
                             coin=coin)

    return lower


def _flip_grad(op_name: str) -> Any:
    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        return [Entry(backward_node(op_name, node, [g]), 0)]

    return grad


FLIPS: dict[str, OpDef] = {}
for _name, _axis, _doc in (("flip_left_right", 1, "Mirrors an (H, W, C) image left to right."),
                           ("flip_top_bottom", 0, "Mirrors an (H, W, C) image top to bottom.")):
    FLIPS[_name] = register(OpDef(
        name=f"_image_{_name}",
        params=NoParams,
        inputs=("data",),
        infer_shape=hwc_shape,
        infer_type=same_type,
        reference=lambda p, x, _a=_axis: np.flip(x, axis=_a).copy(),
        kernels={DENSE: Kernel(flip_lowering(_axis))},
        grad=_flip_grad(f"_image_{_name}"),  # a flip is its own gradient
        doc=_doc,
        examples=(
            Example(((4, 5, 3),)),
            Example(((3, 2, 1),), dtype="float64"),
            Example(((2, 3, 3),), dtype="uint8", ints={0: (0, 256)}),
        ),
        bad_params=({"axis": 1},),
    ))


# ---------------------------------------------------------------------------------------------
# crop


@dataclass(frozen=True, kw_only=True)
class CropParams(Params):
    x: int = field(doc="Left boundary of the cropping area.")
    y: int = field(doc="Top boundary of the cropping area.")
    width: int = field(doc="Width of the cropping area.")
    height: int = field(doc="Height of the cropping area.")

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"width ({self.width}) and height ({self.height}) must be > 0")
        if self.x < 0 or self.y < 0:
            raise ValueError(f"x ({self.x}) and y ({self.y}) must be >= 0")


def crop_shape(p: CropParams, ins: list, outs: list) -> tuple[list, list]:
    s = ins[0]
    _check_image("data", s)
    if s is None:
        return list(ins), list(outs)
    h, w = s[-3], s[-2]
    if s[-1] is not None and s[-1] not in (1, 3):
        raise RuleError(f"data has shape {shape_str(s)}; crop takes 1 or 3 channels "
                        "(MXNet 1.9.1)")
    if w is not None and p.x + p.width > w:
        raise RuleError(f"x + width = {p.x + p.width} is beyond the image width {w}")
    if h is not None and p.y + p.height > h:
        raise RuleError(f"y + height = {p.y + p.height} is beyond the image height {h}")
    return [s], [(*s[:-3], p.height, p.width, s[-1])]


def crop_reference(p: CropParams, x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x[..., p.y:p.y + p.height, p.x:p.x + p.width, :].copy()
    return out


def crop_lowering(call: KernelCall) -> Lowered:
    n, h, w, c = _nhwc(call.in_shapes[0])
    p = call.params
    return gather_launch(call, (n, p.height, p.width, c), _contiguous((n, h, w, c)),
                         (0, p.y, p.x, 0), (n, h, w, c), (0,) * 4, 3, (0.0,), (1.0,))


def crop_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data (shape only), dx]: dx is the gradient inside the box, 0 outside."""
    g = _nhwc(call.in_shapes[0])
    d = _nhwc(call.in_shapes[1])
    p = call.params
    low = gather_launch(call, d, _contiguous(g), (0, -p.y, -p.x, 0), g, (0,) * 4, 3,
                        (0.0,), (1.0,))
    return Lowered(tuple(Launch(ln.spec, ln.ia, ln.fa, args=(0, 2)) for ln in low.launches))


BACKWARD_CROP = register(OpDef(
    name="_backward_image_crop",
    params=CropParams,
    inputs=("ograd", "data"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
    ignore_inputs=(1,),
    kernels={DENSE: Kernel(crop_backward_lowering)},
    differentiable=False,
    doc="Gradient of _image_crop: the output gradient placed in the box, zeros elsewhere.",
))


def crop_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(BACKWARD_CROP, node, [g, node.inputs[0]]), 0)]


CROP = register(OpDef(
    name="_image_crop",
    params=CropParams,
    inputs=("data",),
    infer_shape=crop_shape,
    infer_type=same_type,
    reference=crop_reference,
    kernels={DENSE: Kernel(crop_lowering)},
    grad=crop_grad,
    doc="The (height, width) box at (y, x) of an HWC image or NHWC batch.",
    examples=(
        Example(((5, 6, 3),), {"x": 1, "y": 2, "width": 4, "height": 2}),
        Example(((2, 4, 4, 1),), {"x": 0, "y": 1, "width": 3, "height": 3}, dtype="float64"),
        Example(((4, 4, 3),), {"x": 2, "y": 0, "width": 2, "height": 4}, dtype="uint8",
                ints={0: (0, 256)}),
    ),
    bad_params=({"x": 0, "y": 0, "width": 0, "height": 2}, {"x": 0, "y": 0, "width": 2},
                {"x": -1, "y": 0, "width": 1, "height": 1}),
))


# ---------------------------------------------------------------------------------------------
# resize


@dataclass(frozen=True, kw_only=True)
class ResizeParams(Params):
    size: tuple[int, ...] = field(default=(), lower=1,
                                  doc="New size: (width, height), or (size,) for both edges.")
    keep_ratio: bool = field(
        default=False,
        doc="With a one-number size: resize the short edge to it and keep the aspect ratio.")
    interp: int = field(default=1, lower=0, upper=4,
                        doc="0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos (OpenCV's).")

    def __post_init__(self) -> None:
        if len(self.size) not in (1, 2):
            raise ValueError(f"size={self.size} must have 1 or 2 values")


def resize_hw(p: ResizeParams, h: int, w: int) -> tuple[int, int]:
    """(new height, new width)."""
    if len(p.size) == 2:
        return p.size[1], p.size[0]
    s = p.size[0]
    if not p.keep_ratio:
        return s, s
    if h > w:
        return h * s // w, s
    return s, w * s // h


def resize_shape(p: ResizeParams, ins: list, outs: list) -> tuple[list, list]:
    s = ins[0]
    _check_image("data", s)
    if s is None:
        return list(ins), list(outs)
    h, w = s[-3], s[-2]
    if len(p.size) == 1 and p.keep_ratio and (h is None or w is None):
        return [s], list(outs)
    oh, ow = resize_hw(p, h or 1, w or 1)
    return [s], [(*s[:-3], oh, ow, s[-1])]


def _cubic_weights(f: np.ndarray) -> np.ndarray:
    a = np.float32(-0.75)
    one = np.float32(1)
    w0 = ((a * (f + one) - 5 * a) * (f + one) + 8 * a) * (f + one) - 4 * a
    w1 = ((a + 2) * f - (a + 3)) * f * f + one
    w2 = ((a + 2) * (one - f) - (a + 3)) * (one - f) * (one - f) + one
    return np.stack([w0, w1, w2, one - w0 - w1 - w2], axis=-1).astype(np.float32)


def _lanczos4_weights(f: np.ndarray) -> np.ndarray:
    """OpenCV's interpolateLanczos4: 8 taps from sines in double, normalised in float32."""
    s45 = 0.70710678118654752440084436210485
    cs = ((1, 0), (-s45, -s45), (0, 1), (s45, -s45), (-1, 0), (s45, s45), (0, -1), (-s45, s45))
    out = np.zeros((len(f), 8), np.float32)
    for j, x in enumerate(f.astype(np.float32)):
        if x < np.float32(1.1920929e-07):
            out[j, 3] = 1
            continue
        y0 = -(float(x) + 3) * math.pi * 0.25
        s0, c0 = math.sin(y0), math.cos(y0)
        total = np.float32(0)
        for i in range(8):
            y = -(float(x) + 3 - i) * math.pi * 0.25
            out[j, i] = np.float32((cs[i][0] * s0 + cs[i][1] * c0) / (y * y))
            total = np.float32(total + out[j, i])
        out[j] *= np.float32(1) / total
    return out


def _area_taps(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's computeResizeAreaTab (downscaling): each output's box of input cells with their
    covered fractions over the box width, padded with zero-weight taps."""
    rows: list[list[tuple[int, float]]] = []
    for d in range(n_out):
        f1 = d * scale
        f2 = f1 + scale
        cell = min(scale, n_in - f1)
        s2 = min(math.floor(f2), n_in - 1)
        s1 = min(math.ceil(f1), s2)
        taps: list[tuple[int, float]] = []
        if s1 - f1 > 1e-3:
            taps.append((s1 - 1, float(np.float32((s1 - f1) / cell))))
        taps += [(k, float(np.float32(1.0 / cell))) for k in range(s1, s2)]
        if f2 - s2 > 1e-3:
            taps.append((s2, float(np.float32(min(min(f2 - s2, 1.0), cell) / cell))))
        rows.append(taps)
    k = max(len(t) for t in rows)
    idx = np.zeros((n_out, k), np.int64)
    w = np.zeros((n_out, k), np.float32)
    for d, taps in enumerate(rows):
        for j, (i, a) in enumerate(taps):
            idx[d, j], w[d, j] = i, a
    return idx, w


def _taps(n_in: int, n_out: int, interp: int,
          area_down: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Source indices (n_out, k) and float32 weights of one axis, as OpenCV computes them.
    ``area_down``: INTER_AREA with both axes downscaled (box averages); otherwise INTER_AREA
    is bilinear with OpenCV's area-mode sample positions."""
    inv = n_out / n_in
    scale = 1.0 / inv
    d = np.arange(n_out, dtype=np.float64)
    if interp == 0:
        idx = np.minimum(np.floor(d * scale).astype(np.int64), n_in - 1)
        return idx[:, None], np.ones((n_out, 1), np.float32)
    if interp == 3 and area_down:
        return _area_taps(n_in, n_out, scale)
    if interp == 3:
        s = np.floor(d * scale).astype(np.int64)
        f = ((d + 1) - (s + 1) * inv).astype(np.float32)
        f = np.where(f <= 0, np.float32(0), f - np.floor(f)).astype(np.float32)
    else:
        f = ((d + 0.5) * scale - 0.5).astype(np.float32)
        s = np.floor(f).astype(np.int64)
        f = (f - s.astype(np.float32)).astype(np.float32)
    if interp in (1, 3):
        f = np.where(s < 0, np.float32(0), f)
        s = np.maximum(s, 0)
        f = np.where(s >= n_in - 1, np.float32(0), f)
        s = np.minimum(s, n_in - 1)
        idx = np.stack([s, np.minimum(s + 1, n_in - 1)], axis=1)
        w = np.stack([np.float32(1) - f, f], axis=1).astype(np.float32)
        return idx, w
    ks = 4 if interp == 2 else 8
    idx = np.clip(s[:, None] + np.arange(1 - ks // 2, 1 + ks // 2)[None, :], 0, n_in - 1)
    return idx, (_cubic_weights(f) if interp == 2 else _lanczos4_weights(f))


def resize_tables(p: ResizeParams, h: int, w: int) -> tuple[np.ndarray, ...]:
    """(row indices, row weights, column indices, column weights) of a resize."""
    oh, ow = resize_hw(p, h, w)
    area_down = p.interp == 3 and oh <= h and ow <= w
    iy, wy = _taps(h, oh, p.interp, area_down)
    ix, wx = _taps(w, ow, p.interp, area_down)
    return iy, wy, ix, wx


def resize_reference(p: ResizeParams, x: np.ndarray) -> np.ndarray:
    batch = x if x.ndim == 4 else x[None]
    _, h, w, _ = batch.shape
    ct = _ctype_of(x.dtype)
    iy, wy, ix, wx = resize_tables(p, h, w)
    xs: np.ndarray = batch.astype(ct)
    # horizontal first, then vertical, summing taps in order as the kernel does
    t: np.ndarray = xs[:, :, ix[:, 0], :] * wx[None, None, :, 0, None].astype(ct)
    for k in range(1, ix.shape[1]):
        t = t + xs[:, :, ix[:, k], :] * wx[None, None, :, k, None].astype(ct)
    v: np.ndarray = wy[None, :, 0, None, None].astype(ct) * t[:, iy[:, 0], :, :]
    for k in range(1, iy.shape[1]):
        v = v + wy[None, :, k, None, None].astype(ct) * t[:, iy[:, k], :, :]
    if x.dtype == np.uint8:
        v = np.clip(np.rint(v), 0, 255)
    out: np.ndarray = v.astype(x.dtype)
    return out if x.ndim == 4 else out[0]


RESIZE_DTYPES = ("uint8", "float32", "float64")


def resize_lowering(call: KernelCall) -> Lowered:
    p = call.params
    idt, odt = call.in_dtypes[0], call.out_dtypes[0]
    if idt.name not in RESIZE_DTYPES:
        raise NoKernelError(f"resize takes {RESIZE_DTYPES} (as OpenCV), not {idt.name}")
    if size(call.out_shapes[0]) == 0 or size(call.in_shapes[0]) == 0:
        return Lowered()
    n, h, w, c = _nhwc(call.in_shapes[0])
    _, oh, ow, _ = _nhwc(call.out_shapes[0])
    iy, wy, ix, wx = resize_tables(p, h, w)
    spec = KernelSpec.make("image/image_resize.c.j2", idtype=idt.name, odtype=odt.name,
                           comp=comp_type(idt), req=call.req)
    ia = (n, h, w, c, oh, ow, iy.shape[1], ix.shape[1], *iy.ravel().tolist(),
          *ix.ravel().tolist())
    fa = (*wy.astype(np.float64).ravel().tolist(), *wx.astype(np.float64).ravel().tolist())
    return Lowered((Launch(spec, ia, fa),))


RESIZE = register(OpDef(
    name="_image_resize",
    params=ResizeParams,
    inputs=("data",),
    infer_shape=resize_shape,
    infer_type=same_type,
    reference=resize_reference,
    kernels={DENSE: Kernel(resize_lowering)},
    # NOTE: MXNet 1.9.1 declares a gradient that fails on every call; nnsym declares none.
    doc="Resizes an HWC image or NHWC batch as OpenCV's cv::resize (every interpolation).",
    examples=(
        Example(((4, 5, 3),), {"size": (7, 3)}, low=0.0, high=255.0),
        Example(((2, 6, 4, 2),), {"size": (3,), "keep_ratio": True, "interp": 0},
                low=0.0, high=255.0),
        Example(((5, 4, 1),), {"size": (6, 7), "interp": 2}, dtype="float64"),
        Example(((4, 6, 3),), {"size": (4,)}, dtype="uint8", ints={0: (0, 256)}),
        Example(((3, 3, 2),), {"size": (5, 2), "interp": 0}, dtype="uint8", ints={0: (0, 256)}),
        Example(((6, 9, 3),), {"size": (4, 3), "interp": 3}, low=0.0, high=255.0),
        Example(((3, 4, 1),), {"size": (6, 5), "interp": 3}, dtype="float64"),
        Example(((5, 4, 2),), {"size": (7, 3), "interp": 4}, low=0.0, high=255.0),
    ),
    bad_params=({"size": ()}, {"size": (2, 2, 2)}, {"size": (2,), "interp": 5},
                {"size": (0,)}),
))


# ---------------------------------------------------------------------------------------------
# adjust_lighting


def lighting_shift(alpha: tuple[float, ...]) -> tuple[float, float, float]:
    """The RGB offset: eigvec @ (alpha * eigval), in float32 as MXNet computes it."""
    ev = np.asarray(EIGVEC, np.float32)
    a = np.asarray(alpha, np.float32) * np.asarray(EIGVAL, np.float32)
    r = tuple(float(np.float32(sum(ev[i, k] * a[k] for k in range(3)))) for i in range(3))
    return r[0], r[1], r[2]


@dataclass(frozen=True, kw_only=True)
class AdjustLightingParams(Params):
    alpha: tuple[float, ...] = field(doc="The lighting alphas for the R, G, B channels.")

    def __post_init__(self) -> None:
        if len(self.alpha) != 3:
            raise ValueError(f"alpha={self.alpha} needs 3 values (R, G, B)")


def lighting_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    ins, outs = hwc_shape(p, ins, outs)
    s = ins[0]
    if s is not None and s[-1] is not None and s[-1] not in (1, 3):
        raise RuleError(f"data has shape {shape_str(s)}; its last axis must have 1 or 3 "
                        "channels")
    return ins, outs


def lighting_consts(shape: tuple[int, ...], alpha: tuple[float, ...]) -> tuple[float, ...]:
    """What the kernel subtracts per channel: minus the shift; a grey image is unchanged."""
    if shape[-1] == 1:
        return (0.0,)
    return tuple(-v for v in lighting_shift(alpha))


def lighting_reference(p: AdjustLightingParams, x: np.ndarray) -> np.ndarray:
    ct = _ctype_of(x.dtype)
    sub: np.ndarray = np.asarray(lighting_consts(x.shape, p.alpha), ct)
    return saturate(x.astype(ct) - sub, x.dtype)


def lighting_lowering(call: KernelCall) -> Lowered:
    s = call.in_shapes[0]
    d = (1, *s)
    sub = lighting_consts(s, call.params.alpha)
    return gather_launch(call, d, _contiguous(d), (0,) * 4, d, (0,) * 4, 3, sub,
                         (1.0,) * len(sub))


ADJUST_LIGHTING = register(OpDef(
    name="_image_adjust_lighting",
    params=AdjustLightingParams,
    inputs=("data",),
    infer_shape=lighting_shape,
    infer_type=same_type,
    reference=lighting_reference,
    kernels={DENSE: Kernel(lighting_lowering)},
    grad=pass_through,
    doc="AlexNet-style PCA lighting: adds eigvec @ (alpha * eigval) to an RGB (H, W, 3) image.",
    examples=(
        Example(((4, 5, 3),), {"alpha": (0.1, -0.2, 0.3)}, low=0.0, high=255.0),
        Example(((2, 3, 3),), {"alpha": (0.5, 0.0, -1.0)}, dtype="float64"),
        Example(((3, 3, 3),), {"alpha": (0.05, 0.02, -0.01)}, dtype="uint8",
                ints={0: (0, 256)}),
    ),
    bad_params=({}, {"alpha": (0.1, 0.2)}, {"alpha": "x"}),
))

__all__ = ["ADJUST_LIGHTING", "CROP", "FLIPS", "NORMALIZE", "RESIZE", "TO_TENSOR"]
