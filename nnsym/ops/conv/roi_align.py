"""ROIAlign and RROIAlign: bilinear-sampled average pooling of 4-D data over (rotated) regions
of interest into a fixed (h, w) grid."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True, kw_only=True)
class ROIAlignParams(Params):
    pooled_size: tuple[int, ...] = field(lower=1, doc="Output grid (h, w) per roi.")
    spatial_scale: float = field(
        lower=0.0, upper=1.0, doc="Feature-map size over image size (1 / total stride)."
    )
    sample_ratio: int = field(
        default=-1, doc="Samples per bin along each axis; <= 0: ceil(roi size / pooled size)."
    )
    position_sensitive: bool = field(
        default=False, doc="Each bin reads its own channel group (R-FCN's PS-RoI pooling)."
    )
    aligned: bool = field(default=False, doc="Shift by half a pixel (Detectron2's alignment).")

    def __post_init__(self) -> None:
        if len(self.pooled_size) != 2:
            raise ValueError(f"pooled_size={self.pooled_size} must be (h, w)")


@dataclass(frozen=True, kw_only=True)
class RROIAlignParams(Params):
    pooled_size: tuple[int, ...] = field(lower=1, doc="Output grid (h, w) per roi.")
    spatial_scale: float = field(
        lower=0.0, upper=1.0, doc="Feature-map size over image size (1 / total stride)."
    )
    sampling_ratio: int = field(
        default=-1, doc="Samples per bin along each axis; <= 0: ceil(roi size / pooled size)."
    )

    def __post_init__(self) -> None:
        if len(self.pooled_size) != 2:
            raise ValueError(f"pooled_size={self.pooled_size} must be (h, w)")


def _roi_shape(name: str, width: int, row: str) -> Any:
    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        data, rois = ins
        if data is not None and len(data) != 4:
            raise RuleError(f"data has shape {shape_str(data)}; {name} needs 4-D (N, C, H, W)")
        if rois is not None and len(rois) != 2:
            raise RuleError(f"rois has shape {shape_str(rois)}; it must be (R, {width})")
        try:
            rois = merge_shape(rois, (None, width))
        except RuleError:
            raise RuleError(f"rois has shape {shape_str(rois)}; each row must be {row}") from None
        if data is None or rois is None:
            return [data, rois], list(outs)
        ph, pw = p.pooled_size
        c = data[1]
        if getattr(p, "position_sensitive", False) and c is not None:
            if c % (ph * pw):
                raise RuleError(
                    f"data has {c} channels; position_sensitive needs a multiple of "
                    f"pooled_size[0] * pooled_size[1] = {ph * pw}"
                )
            c //= ph * pw
        return [data, rois], [(rois[0], c, ph, pw)]

    return rule


def roi_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0] if ins[0] is not None else ins[1] if ins[1] is not None else outs[0]
    return [t, t], [t]


def _bilinear(plane: np.ndarray, y: Any, x: Any, ct: Any) -> tuple | None:
    """MXNet's border rules: None more than one cell outside, else (weights, corner cells)."""
    h, w = plane.shape[-2:]
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return None
    y, x = max(y, ct(0)), max(x, ct(0))
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = ct(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = ct(xl)
    else:
        xh = xl + 1
    ly, lx = ct(y - ct(yl)), ct(x - ct(xl))
    hy, hx = ct(1) - ly, ct(1) - lx
    return (hy * hx, hy * lx, ly * hx, ly * lx), ((yl, xl), (yl, xh), (yh, xl), (yh, xh))


def _grid(extent: Any, pooled: int, ratio: int) -> int:
    return ratio if ratio > 0 else math.ceil(extent / pooled)


def _samples(p: Any, roi: np.ndarray, ct: Any, rotated: bool) -> Any:
    """Per bin (ph, pw): the sample points (y, x) and the sample count."""
    ph_n, pw_n = p.pooled_size
    scale = ct(p.spatial_scale)
    if rotated:
        cw, ch, rw, rh = (ct(roi[k] * scale) for k in (1, 2, 3, 4))
        theta = ct(ct(roi[5]) * ct(math.pi) / ct(180))
        ratio = p.sampling_ratio
        rw, rh = max(rw, ct(1)), max(rh, ct(1))
        sh, sw = -rh / ct(2), -rw / ct(2)
        cos_t, sin_t = ct(np.cos(theta)), ct(np.sin(theta))
    else:
        off = ct(0.5) if p.aligned else ct(0)
        sw, sh, ew, eh = (ct(roi[k] * scale) - off for k in (1, 2, 3, 4))
        rw, rh = ew - sw, eh - sh
        if not p.aligned:
            rw, rh = max(rw, ct(1)), max(rh, ct(1))
        ratio = p.sample_ratio
    bh, bw = rh / ct(ph_n), rw / ct(pw_n)
    gh, gw = _grid(rh, ph_n, ratio), _grid(rw, pw_n, ratio)
    cnt = ct(max(gh * gw, 1))
    for ph in range(ph_n):
        for pw in range(pw_n):
            pts = []
            for iy in range(gh):
                yy = sh + ct(ph) * bh + (ct(iy) + ct(0.5)) * bh / ct(gh)
                for ix in range(gw):
                    xx = sw + ct(pw) * bw + (ct(ix) + ct(0.5)) * bw / ct(gw)
                    if rotated:
                        pts.append((yy * cos_t - xx * sin_t + ch, xx * cos_t + yy * sin_t + cw))
                    else:
                        pts.append((yy, xx))
            yield ph, pw, pts, cnt


def _channel(p: Any, c: int, ph: int, pw: int) -> int:
    if getattr(p, "position_sensitive", False):
        return int((c * p.pooled_size[0] + ph) * p.pooled_size[1] + pw)
    return c


def _align_reference(p: Any, data: np.ndarray, rois: np.ndarray, rotated: bool) -> np.ndarray:
    n = data.shape[0]
    ct = np.float32 if data.dtype == np.float16 else data.dtype.type
    out_shape = _roi_shape("", rois.shape[1], "")(p, [data.shape, rois.shape], [None])[1][0]
    out = np.zeros(out_shape, ct)
    xs = data.astype(ct)
    for r, roi in enumerate(rois.astype(ct)):
        b = int(roi[0])
        if not 0 <= b < n:
            continue
        for ph, pw, pts, cnt in _samples(p, roi, ct, rotated):
            for co in range(out.shape[1]):
                plane = xs[b, _channel(p, co, ph, pw)]
                acc = ct(0)
                for y, x in pts:
                    s = _bilinear(plane, y, x, ct)
                    if s is not None:
                        ws, cells = s
                        acc += sum((w * plane[i] for w, i in zip(ws, cells)), ct(0))
                out[r, co, ph, pw] = acc / cnt
    return out.astype(data.dtype)


def roi_align_reference(p: ROIAlignParams, data: np.ndarray, rois: np.ndarray) -> np.ndarray:
    return _align_reference(p, data, rois, rotated=False)


def rroi_align_reference(p: RROIAlignParams, data: np.ndarray, rois: np.ndarray) -> np.ndarray:
    return _align_reference(p, data, rois, rotated=True)


def _geometry(p: Any, data: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    rotated = isinstance(p, RROIAlignParams)
    ratio = p.sampling_ratio if rotated else p.sample_ratio
    ps = 0 if rotated else int(p.position_sensitive)
    aligned = 0 if rotated else int(p.aligned)
    return (*data, out[0], out[1], out[2], out[3], ratio, ps, aligned)


def _check_dtype(name: str, dt: str) -> None:
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"{name} has dense kernels for {FLOAT_DTYPES}, not {dt}")


def roi_align_lowering(call: KernelCall) -> Lowered:
    rotated = isinstance(call.params, RROIAlignParams)
    dt = call.in_dtypes[0].name
    _check_dtype("RROIAlign" if rotated else "ROIAlign", dt)
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("conv/roi_align.c.j2", dtype=dt, req=call.req, rotated=rotated)
    ia = _geometry(call.params, call.in_shapes[0], call.out_shapes[0])
    return Lowered((Launch(spec, ia, (float(call.params.spatial_scale),)),))


def roi_align_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, rois, data (shape only), dx]."""
    _check_dtype("ROIAlign", call.out_dtypes[0].name)
    data = call.in_shapes[2]
    if size(data) == 0:
        return Lowered()
    spec = KernelSpec.make(
        "conv/roi_align_backward.c.j2", dtype=call.out_dtypes[0].name, req=call.out_req(0)
    )
    ia = _geometry(call.params, data, call.in_shapes[0])
    return Lowered((Launch(spec, ia, (float(call.params.spatial_scale),), args=(0, 1, 3)),))


BACKWARD_ROI_ALIGN = register(
    OpDef(
        name="_backward_ROIAlign",
        params=ROIAlignParams,
        inputs=("ograd", "rois", "data"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[2] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
        ignore_inputs=(2,),
        kernels={DENSE: Kernel(roi_align_backward_lowering)},
        differentiable=False,
        doc="Gradient of ROIAlign: each output gradient spread over its samples' corners.",
    )
)


def roi_align_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The data gets the gradient; the rois (coordinates) get none, as in MXNet."""
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_ROI_ALIGN, node, [g, node.inputs[1], node.inputs[0]])
    return [Entry(b, 0), None]


# Example rois take integer values: batch indices in range (N is at least the range's size),
# corners that may be reversed or equal (MXNet's at-least-one-cell rule). No aligned example
# here: MXNet aborts on an aligned roi without positive size (tests/ops/test_roi_align.py).
ROI_ALIGN = register(
    OpDef(
        name="_contrib_ROIAlign",
        params=ROIAlignParams,
        inputs=("data", "rois"),
        infer_shape=_roi_shape("ROIAlign", 5, "[batch, x1, y1, x2, y2]"),
        infer_type=roi_type,
        reference=roi_align_reference,
        kernels={DENSE: Kernel(roi_align_lowering)},
        grad=roi_align_grad,
        doc="Average of bilinear samples over regions of interest [batch, x1, y1, x2, y2].",
        examples=(
            Example(
                ((3, 3, 6, 7), (4, 5)),
                {"pooled_size": (2, 2), "spatial_scale": 0.9},
                ints={1: (0, 3)},
            ),
            Example(
                ((4, 2, 5, 5), (3, 5)),
                {"pooled_size": (3, 2), "spatial_scale": 0.65, "sample_ratio": 2},
                ints={1: (0, 4)},
                dtype="float64",
            ),
            Example(
                ((2, 8, 5, 6), (3, 5)),
                {
                    "pooled_size": (2, 2),
                    "spatial_scale": 0.7,
                    "position_sensitive": True,
                    "sample_ratio": 3,
                },
                ints={1: (0, 2)},
            ),
        ),
        bad_params=(
            {"pooled_size": (2, 2)},
            {"spatial_scale": 1.0},
            {"pooled_size": (2,), "spatial_scale": 1.0},
            {"pooled_size": (0, 2), "spatial_scale": 1.0},
            {"pooled_size": (2, 2), "spatial_scale": 1.5},
            {"pooled_size": (2, 2), "spatial_scale": 1.0, "sample_ratio": "x"},
        ),
    )
)

RROI_ALIGN = register(
    OpDef(
        name="_contrib_RROIAlign",
        params=RROIAlignParams,
        inputs=("data", "rois"),
        infer_shape=_roi_shape("RROIAlign", 6, "[batch, cx, cy, w, h, angle]"),
        infer_type=roi_type,
        reference=rroi_align_reference,
        kernels={DENSE: Kernel(roi_align_lowering)},
        doc="ROIAlign over rotated regions [batch, cx, cy, w, h, angle (degrees)]; no gradient "
        "(MXNet registers none).",
        examples=(
            Example(
                ((3, 2, 6, 7), (4, 6)),
                {"pooled_size": (2, 2), "spatial_scale": 0.9},
                ints={1: (0, 3)},
            ),
            Example(
                ((4, 2, 5, 5), (3, 6)),
                {"pooled_size": (3, 2), "spatial_scale": 0.65, "sampling_ratio": 2},
                ints={1: (0, 4)},
                dtype="float64",
            ),
        ),
        bad_params=(
            {"pooled_size": (2, 2)},
            {"pooled_size": (2, 2, 1), "spatial_scale": 1.0},
            {"pooled_size": (2, 2), "spatial_scale": 1.0, "sample_ratio": 2},
        ),
    )
)
