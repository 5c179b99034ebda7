"""PSROIPooling and DeformablePSROIPooling: position-sensitive average pooling of 4-D data over
regions of interest (R-FCN), the deformable form with per-part learned bin offsets."""

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
_SCALE_DOC = "Feature-map size over image size (1 / total stride)."


@dataclass(frozen=True, kw_only=True)
class PSROIPoolingParams(Params):
    spatial_scale: float = field(lower=0.0, upper=1.0, doc=_SCALE_DOC)
    output_dim: int = field(lower=1, doc="Output channels.")
    pooled_size: int = field(lower=1, doc="Output grid side per roi.")
    group_size: int = field(default=0, lower=0, doc="Position-sensitive grid side; 0: pooled_size.")

    @property
    def groups(self) -> int:
        return self.group_size or self.pooled_size


@dataclass(frozen=True, kw_only=True)
class DeformablePSROIPoolingParams(Params):
    spatial_scale: float = field(lower=0.0, upper=1.0, doc=_SCALE_DOC)
    output_dim: int = field(lower=1, doc="Output channels.")
    group_size: int = field(lower=1, doc="Position-sensitive grid side.")
    pooled_size: int = field(lower=1, doc="Output grid side per roi.")
    part_size: int = field(default=0, lower=0, doc="Offset grid side; 0: pooled_size.")
    sample_per_part: int = field(default=1, lower=1, doc="Samples per bin along each axis.")
    trans_std: float = field(default=0.0, doc="Scale of the offsets (times the roi's size).")
    no_trans: bool = field(default=False, doc="No offsets input (plain bilinear PS pooling).")

    @property
    def groups(self) -> int:
        return self.group_size

    @property
    def parts(self) -> int:
        return self.part_size or self.pooled_size


def _check_data_rois(name: str, p: Any, data: Any, rois: Any) -> Any:
    if data is not None and len(data) != 4:
        raise RuleError(f"data has shape {shape_str(data)}; {name} needs 4-D (N, C, H, W)")
    if rois is not None and len(rois) != 2:
        raise RuleError(f"rois has shape {shape_str(rois)}; it must be (R, 5)")
    try:
        rois = merge_shape(rois, (None, 5))
    except RuleError:
        raise RuleError(
            f"rois has shape {shape_str(rois)}; each row must be [batch, x1, y1, x2, y2]"
        ) from None
    need = p.output_dim * p.groups * p.groups
    if data is not None and data[1] is not None and data[1] < need:
        raise RuleError(f"data has {data[1]} channels; output_dim * group_size^2 = {need} are read")
    return rois


def psroi_shape(p: PSROIPoolingParams, ins: list, outs: list) -> tuple[list, list]:
    data, rois = ins
    rois = _check_data_rois("PSROIPooling", p, data, rois)
    if rois is None:
        return [data, rois], list(outs)
    return [data, rois], [(rois[0], p.output_dim, p.pooled_size, p.pooled_size)]


def _classes(p: DeformablePSROIPoolingParams, trans: Any) -> int | None:
    if p.no_trans:
        return 1
    if trans is None or trans[1] is None:
        return None
    return int(trans[1]) // 2


def dpsroi_shape(p: DeformablePSROIPoolingParams, ins: list, outs: list) -> tuple[list, list]:
    data, rois = ins[0], ins[1]
    rois = _check_data_rois("DeformablePSROIPooling", p, data, rois)
    res = [data, rois]
    if not p.no_trans:
        trans = ins[2]
        if trans is not None and len(trans) != 4:
            raise RuleError(
                f"trans has shape {shape_str(trans)}; it must be (R, 2 * classes, part, part)"
            )
        if rois is not None:  # the class count (trans[1]) only the trans input can say
            trans = merge_shape(trans, (rois[0], None, p.parts, p.parts))
        if trans is not None and trans[1] is not None:
            if trans[1] == 0 or trans[1] % 2 or p.output_dim % (trans[1] // 2):
                raise RuleError(
                    f"trans has {trans[1]} channels; it must be 2 * classes, classes dividing "
                    f"output_dim = {p.output_dim}"
                )
        res.append(trans)
    if rois is None:
        return res, list(outs)
    return res, [(rois[0], p.output_dim, p.pooled_size, p.pooled_size)]


def roi_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    t = next((x for x in [*ins, outs[0]] if x is not None), None)
    return [t] * len(ins), [t]


def _round(v: float) -> float:
    """C's round(): halves away from zero."""
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _roi_box(roi: np.ndarray, scale: Any, ct: Any, shift: bool) -> tuple:
    off = ct(0.5) if shift else ct(0)
    sw = ct(_round(roi[1])) * scale - off
    sh = ct(_round(roi[2])) * scale - off
    ew = (ct(_round(roi[3])) + ct(1)) * scale - off
    eh = (ct(_round(roi[4])) + ct(1)) * scale - off
    return sw, sh, max(ew - sw, ct(0.1)), max(eh - sh, ct(0.1))


def _group_channel(ctop: int, ph: int, pw: int, p_: int, g: int, ct: Any) -> int:
    gw = min(max(math.floor(ct(pw) * ct(g) / ct(p_)), 0), g - 1)
    gh = min(max(math.floor(ct(ph) * ct(g) / ct(p_)), 0), g - 1)
    return int((ctop * g + gh) * g + gw)


def _ct(dtype: np.dtype) -> Any:
    return np.float32 if dtype == np.float16 else dtype.type


def psroi_reference(p: PSROIPoolingParams, data: np.ndarray, rois: np.ndarray) -> np.ndarray:
    n, _, hh, ww = data.shape
    ct = _ct(data.dtype)
    pp, g = p.pooled_size, p.groups
    out = np.zeros((rois.shape[0], p.output_dim, pp, pp), ct)
    xs = data.astype(ct)
    for r, roi in enumerate(rois.astype(ct)):
        b = int(roi[0])
        if not 0 <= b < n:
            continue
        sw, sh, rw, rh = _roi_box(roi, ct(p.spatial_scale), ct, shift=False)
        bh, bw = rh / ct(pp), rw / ct(pp)
        for ph in range(pp):
            hs = min(max(math.floor(ct(ph) * bh + sh), 0), hh)
            he = min(max(math.ceil(ct(ph + 1) * bh + sh), 0), hh)
            for pw in range(pp):
                ws = min(max(math.floor(ct(pw) * bw + sw), 0), ww)
                we = min(max(math.ceil(ct(pw + 1) * bw + sw), 0), ww)
                if he <= hs or we <= ws:
                    continue
                for ctop in range(p.output_dim):
                    c = _group_channel(ctop, ph, pw, pp, g, ct)
                    win = xs[b, c, hs:he, ws:we]
                    out[r, ctop, ph, pw] = win.sum(dtype=ct) / ct(win.size)
    return out.astype(data.dtype)


def _dpsroi_samples(
    p: DeformablePSROIPoolingParams,
    roi: np.ndarray,
    tr: Any,
    r: int,
    ctop: int,
    ph: int,
    pw: int,
    hw: tuple[int, int],
    ct: Any,
) -> list:
    """The in-range samples (h, w) of one bin, clamped into the data."""
    hh, ww = hw
    pp, ps, spp = p.pooled_size, p.parts, p.sample_per_part
    sw, sh, rw, rh = _roi_box(roi, ct(p.spatial_scale), ct, shift=True)
    bh, bw = rh / ct(pp), rw / ct(pp)
    sbh, sbw = bh / ct(spp), bw / ct(spp)
    tx = ty = ct(0)
    if tr is not None:
        ncls = tr.shape[1] // 2
        cls = ctop // (p.output_dim // ncls)
        parth = math.floor(ct(ph) / ct(pp) * ct(ps))
        partw = math.floor(ct(pw) / ct(pp) * ct(ps))
        tx = tr[r, 2 * cls, parth, partw] * ct(p.trans_std)
        ty = tr[r, 2 * cls + 1, parth, partw] * ct(p.trans_std)
    wst = ct(pw) * bw + sw + tx * rw
    hst = ct(ph) * bh + sh + ty * rh
    pts = []
    for ih in range(spp):
        for iw in range(spp):
            w, h = wst + ct(iw) * sbw, hst + ct(ih) * sbh
            if w < -0.5 or w > ww - 0.5 or h < -0.5 or h > hh - 0.5:
                continue
            pts.append((min(max(h, ct(0)), ct(hh - 1)), min(max(w, ct(0)), ct(ww - 1))))
    return pts


def dpsroi_reference(
    p: DeformablePSROIPoolingParams,
    data: np.ndarray,
    rois: np.ndarray,
    trans: np.ndarray | None = None,
) -> np.ndarray:
    n, _, hh, ww = data.shape
    ct = _ct(data.dtype)
    pp = p.pooled_size
    out = np.zeros((rois.shape[0], p.output_dim, pp, pp), ct)
    xs = data.astype(ct)
    tr = None if p.no_trans or trans is None else trans.astype(ct)
    for r, roi in enumerate(rois.astype(ct)):
        b = int(roi[0])
        if not 0 <= b < n:
            continue
        for ctop in range(p.output_dim):
            for ph in range(pp):
                for pw in range(pp):
                    pts = _dpsroi_samples(p, roi, tr, r, ctop, ph, pw, (hh, ww), ct)
                    if not pts:
                        continue
                    pl = xs[b, _group_channel(ctop, ph, pw, pp, p.groups, ct)]
                    acc = ct(0)
                    for h, w in pts:
                        y0, y1, x0, x1 = math.floor(h), math.ceil(h), math.floor(w), math.ceil(w)
                        dy, dx = h - ct(y0), w - ct(x0)
                        acc += (
                            (ct(1) - dx) * (ct(1) - dy) * pl[y0, x0]
                            + (ct(1) - dx) * dy * pl[y1, x0]
                            + dx * (ct(1) - dy) * pl[y0, x1]
                            + dx * dy * pl[y1, x1]
                        )
                    out[r, ctop, ph, pw] = acc / ct(len(pts))
    return out.astype(data.dtype)


def _check_dtype(name: str, dt: str) -> None:
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"{name} has dense kernels for {FLOAT_DTYPES}, not {dt}")


def _psroi_ia(p: PSROIPoolingParams, data: tuple[int, ...], rois: tuple[int, ...]) -> tuple:
    return (*data, rois[0], p.output_dim, p.pooled_size, p.groups)


def psroi_lowering(call: KernelCall) -> Lowered:
    dt = call.in_dtypes[0].name
    _check_dtype("PSROIPooling", dt)
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("conv/psroi_pool.c.j2", dtype=dt, req=call.req)
    ia = _psroi_ia(call.params, call.in_shapes[0], call.in_shapes[1])
    return Lowered((Launch(spec, ia, (float(call.params.spatial_scale),)),))


def psroi_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, rois, data (shape only), dx]."""
    _check_dtype("PSROIPooling", call.out_dtypes[0].name)
    data = call.in_shapes[2]
    if size(data) == 0:
        return Lowered()
    spec = KernelSpec.make(
        "conv/psroi_pool_backward.c.j2", dtype=call.out_dtypes[0].name, req=call.out_req(0)
    )
    ia = _psroi_ia(call.params, data, call.in_shapes[1])
    return Lowered((Launch(spec, ia, (float(call.params.spatial_scale),), args=(0, 1, 3)),))


def _dpsroi_ia(p: DeformablePSROIPoolingParams, data: tuple, rois: tuple, trans: Any) -> tuple:
    ncls = 1 if p.no_trans else trans[1] // 2
    return (*data, rois[0], p.output_dim, p.pooled_size, p.groups, p.parts, p.sample_per_part, ncls)


def dpsroi_lowering(call: KernelCall) -> Lowered:
    p = call.params
    dt = call.in_dtypes[0].name
    _check_dtype("DeformablePSROIPooling", dt)
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make(
        "conv/deformable_psroi.c.j2", dtype=dt, req=call.req, trans=not p.no_trans
    )
    trans = None if p.no_trans else call.in_shapes[2]
    ia = _dpsroi_ia(p, call.in_shapes[0], call.in_shapes[1], trans)
    return Lowered((Launch(spec, ia, (float(p.spatial_scale), float(p.trans_std))),))


def dpsroi_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data, rois, (trans,) ddata(, dtrans)]."""
    p = call.params
    _check_dtype("DeformablePSROIPooling", call.out_dtypes[0].name)
    data = call.in_shapes[1]
    if size(data) == 0:
        return Lowered()
    trans = None if p.no_trans else call.in_shapes[3]
    spec = KernelSpec.make(
        "conv/deformable_psroi_backward.c.j2",
        dtype=call.out_dtypes[0].name,
        req_d=call.out_req(0),
        req_t="null" if p.no_trans else call.out_req(1),
        trans=not p.no_trans,
    )
    ia = _dpsroi_ia(p, data, call.in_shapes[2], trans)
    return Lowered((Launch(spec, ia, (float(p.spatial_scale), float(p.trans_std))),))


BACKWARD_PSROI = register(
    OpDef(
        name="_backward__contrib_PSROIPooling",
        params=PSROIPoolingParams,
        inputs=("ograd", "rois", "data"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[2] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
        ignore_inputs=(2,),
        kernels={DENSE: Kernel(psroi_backward_lowering)},
        differentiable=False,
        doc="Gradient of PSROIPooling: each output gradient spread evenly over its bin.",
    )
)


def psroi_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The data gets the gradient; the rois (coordinates) get none, as in MXNet."""
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_PSROI, node, [g, node.inputs[1], node.inputs[0]])
    return [Entry(b, 0), None]


def _dpsroi_backward_shape(
    p: DeformablePSROIPoolingParams, ins: list, outs: list
) -> tuple[list, list]:
    return list(ins), [ins[1], *([] if p.no_trans else [ins[3]])]


BACKWARD_DPSROI = register(
    OpDef(
        name="_backward__contrib_DeformablePSROIPooling",
        params=DeformablePSROIPoolingParams,
        inputs=lambda p: ("ograd", "data", "rois", *(() if p.no_trans else ("trans",))),
        outputs=lambda p: ("data_grad", *(() if p.no_trans else ("trans_grad",))),
        infer_shape=_dpsroi_backward_shape,
        infer_type=lambda p, ins, outs: (list(ins), [ins[0]] * (1 if p.no_trans else 2)),
        kernels={DENSE: Kernel(dpsroi_backward_lowering)},
        differentiable=False,
        doc="Gradient of DeformablePSROIPooling to the data and the offsets.",
    )
)


def dpsroi_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The data and the offsets get gradients; the rois none, as in MXNet."""
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_DPSROI, node, [g, *node.inputs])
    if node.params.no_trans:
        return [Entry(b, 0), None]
    return [Entry(b, 0), None, Entry(b, 1)]


PSROI_POOLING = register(
    OpDef(
        name="_contrib_PSROIPooling",
        params=PSROIPoolingParams,
        inputs=("data", "rois"),
        infer_shape=psroi_shape,
        infer_type=roi_type,
        reference=psroi_reference,
        kernels={DENSE: Kernel(psroi_lowering)},
        grad=psroi_grad,
        doc="Position-sensitive average pooling over regions of interest (R-FCN).",
        # Integer rois: batch in range (N is at least the range's size), corners 0..3 and
        # scaled by spatial_scale.
        examples=(
            Example(
                ((3, 8, 6, 7), (4, 5)),
                {"spatial_scale": 1.0, "output_dim": 2, "pooled_size": 2},
                ints={1: (0, 3)},
            ),
            Example(
                ((4, 18, 6, 6), (3, 5)),
                {"spatial_scale": 0.6, "output_dim": 2, "pooled_size": 2, "group_size": 3},
                ints={1: (0, 4)},
                dtype="float64",
            ),
        ),
        bad_params=(
            {"spatial_scale": 0.5, "output_dim": 2},
            {"spatial_scale": 2.0, "output_dim": 2, "pooled_size": 2},
            {"spatial_scale": 0.5, "output_dim": 0, "pooled_size": 2},
        ),
    )
)

DEFORMABLE_PSROI_POOLING = register(
    OpDef(
        name="_contrib_DeformablePSROIPooling",
        params=DeformablePSROIPoolingParams,
        inputs=lambda p: ("data", "rois") if p.no_trans else ("data", "rois", "trans"),
        infer_shape=dpsroi_shape,
        infer_type=roi_type,
        reference=dpsroi_reference,
        kernels={DENSE: Kernel(dpsroi_lowering)},
        grad=dpsroi_grad,
        doc="Position-sensitive ROI pooling of bilinear samples whose bins move by learned "
        "offsets (Deformable ConvNets).",
        # Integer rois as for PSROIPooling; the offsets are real (samples off the integer
        # grid), times trans_std.
        examples=(
            Example(
                ((3, 8, 6, 7), (4, 5), (4, 2, 2, 2)),
                {
                    "spatial_scale": 1.0,
                    "output_dim": 2,
                    "group_size": 2,
                    "pooled_size": 2,
                    "sample_per_part": 2,
                    "trans_std": 0.1,
                },
                ints={1: (0, 3)},
            ),
            Example(
                ((4, 18, 7, 6), (3, 5), (3, 4, 3, 3)),
                {
                    "spatial_scale": 0.7,
                    "output_dim": 2,
                    "group_size": 3,
                    "pooled_size": 3,
                    "trans_std": 0.2,
                    "sample_per_part": 2,
                },
                ints={1: (0, 4)},
                dtype="float64",
            ),
            Example(
                ((2, 8, 6, 6), (3, 5)),
                {
                    "spatial_scale": 0.8,
                    "output_dim": 2,
                    "group_size": 2,
                    "pooled_size": 3,
                    "part_size": 2,
                    "no_trans": True,
                    "sample_per_part": 3,
                },
                ints={1: (0, 2)},
            ),
        ),
        bad_params=(
            {"spatial_scale": 0.5, "output_dim": 2, "pooled_size": 2},
            {"spatial_scale": 0.5, "output_dim": 2, "pooled_size": 2, "group_size": 0},
            {
                "spatial_scale": 0.5,
                "output_dim": 2,
                "pooled_size": 2,
                "group_size": 2,
                "sample_per_part": 0,
            },
        ),
    )
)
