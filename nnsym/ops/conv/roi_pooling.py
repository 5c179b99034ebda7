"""ROIPooling: max pooling of 4-D data over regions of interest into a fixed (h, w) grid."""

from __future__ import annotations

import math
from dataclasses import dataclass

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
class ROIPoolingParams(Params):
    pooled_size: tuple[int, ...] = field(lower=1, doc="Output grid (h, w) per roi.")
    spatial_scale: float = field(
        lower=0.0, upper=1.0, doc="Feature-map size over image size (1 / total stride)."
    )

    def __post_init__(self) -> None:
        if len(self.pooled_size) != 2:
            raise ValueError(f"pooled_size={self.pooled_size} must be (h, w)")


def roi_pooling_shape(p: ROIPoolingParams, ins: list, outs: list) -> tuple[list, list]:
    data, rois = ins
    if data is not None and len(data) != 4:
        raise RuleError(f"data has shape {shape_str(data)}; ROIPooling needs 4-D (N, C, H, W)")
    if rois is not None and len(rois) != 2:
        raise RuleError(f"rois has shape {shape_str(rois)}; it must be (R, 5)")
    try:
        rois = merge_shape(rois, (None, 5))
    except RuleError:
        raise RuleError(
            f"rois has shape {shape_str(rois)}; each row must be [batch, x1, y1, x2, y2]"
        ) from None
    if data is None or rois is None:
        return [data, rois], list(outs)
    out = (rois[0], data[1], *p.pooled_size)
    return [data, rois], [out, out]


def roi_pooling_type(p: ROIPoolingParams, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0] if ins[0] is not None else ins[1]
    return [t, t], [t, t]


def _round(v: float) -> float:
    """C's round(): halves away from zero."""
    return math.copysign(math.floor(abs(v) + 0.5), v)


def roi_pooling_reference(p: ROIPoolingParams, data: np.ndarray, rois: np.ndarray):
    """Returns (output, maxidx): maxidx is h * W + w in the channel plane, -1 for empty bins."""
    n, c, hh, ww = data.shape
    ph_n, pw_n = p.pooled_size
    ct = np.float32 if data.dtype == np.float16 else data.dtype.type
    out = np.zeros((rois.shape[0], c, ph_n, pw_n), data.dtype)
    arg = np.full(out.shape, -1, data.dtype)
    scale = ct(p.spatial_scale)
    for r, roi in enumerate(rois.astype(ct)):
        b = int(roi[0])
        x1, y1, x2, y2 = (int(_round(roi[k] * scale)) for k in (1, 2, 3, 4))
        bh = ct(max(y2 - y1 + 1, 1)) / ct(ph_n)
        bw = ct(max(x2 - x1 + 1, 1)) / ct(pw_n)
        if not 0 <= b < n:
            continue
        for ph in range(ph_n):
            hs = min(max(math.floor(ct(ph) * bh) + y1, 0), hh)
            he = min(max(math.ceil(ct(ph + 1) * bh) + y1, 0), hh)
            for pw in range(pw_n):
                ws = min(max(math.floor(ct(pw) * bw) + x1, 0), ww)
                we = min(max(math.ceil(ct(pw + 1) * bw) + x1, 0), ww)
                if he <= hs or we <= ws:
                    continue
                win = data[b, :, hs:he, ws:we].reshape(c, -1)
                k = win.argmax(axis=1)
                out[r, :, ph, pw] = win[np.arange(c), k]
                arg[r, :, ph, pw] = (hs + k // (we - ws)) * ww + ws + k % (we - ws)
    return out, arg


def _geometry(data: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    return (*data, out[0], out[2], out[3])


def roi_pooling_lowering(call: KernelCall) -> Lowered:
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"ROIPooling has dense kernels for {FLOAT_DTYPES}, not {dt}")
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("conv/roi_pool.c.j2", dtype=dt)
    ia = _geometry(call.in_shapes[0], call.out_shapes[0])
    return Lowered((Launch(spec, ia, (float(call.params.spatial_scale),)),))


def roi_pooling_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, rois, maxidx, data (shape only), dx]."""
    data = call.in_shapes[3]
    if size(data) == 0:
        return Lowered()
    spec = KernelSpec.make(
        "conv/roi_pool_backward.c.j2", dtype=call.out_dtypes[0].name, req=call.out_req(0)
    )
    ia = _geometry(data, call.in_shapes[0])
    return Lowered((Launch(spec, ia, args=(0, 1, 2, 4)),))


BACKWARD_ROI_POOLING = register(
    OpDef(
        name="_backward_ROIPooling",
        params=ROIPoolingParams,
        inputs=("ograd", "rois", "maxidx", "data"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[3] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
        ignore_inputs=(3,),
        kernels={DENSE: Kernel(roi_pooling_backward_lowering)},
        differentiable=False,
        doc="Gradient of ROIPooling: each output gradient to its max cell.",
    )
)


def roi_pooling_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The data gets the gradient; the rois (coordinates) get none."""
    g = ograds[0]
    assert g is not None
    b = backward_node(
        BACKWARD_ROI_POOLING, node, [g, node.inputs[1], Entry(node, 1), node.inputs[0]]
    )
    return [Entry(b, 0), None]


ROI_POOLING = register(
    OpDef(
        name="ROIPooling",
        params=ROIPoolingParams,
        inputs=("data", "rois"),
        outputs=("output", "maxidx"),
        num_visible_outputs=1,
        infer_shape=roi_pooling_shape,
        infer_type=roi_pooling_type,
        reference=roi_pooling_reference,
        kernels={DENSE: Kernel(roi_pooling_lowering)},
        grad=roi_pooling_grad,
        doc="Max pooling over regions of interest [batch, x1, y1, x2, y2] scaled to the data.",
        # The rois take integer values in [0, 3): batch 0..2 (2 is out of range and gives
        # zeros) and corners 0..2.
        examples=(
            Example(((2, 3, 6, 7), (5, 5)), {"pooled_size": (2, 2), "spatial_scale": 1.0},
                    ints={1: (0, 3)}),
            Example(((1, 2, 5, 5), (3, 5)), {"pooled_size": (3, 2), "spatial_scale": 1.0},
                    ints={1: (0, 3)}, dtype="float64"),
        ),
        bad_params=(
            {"pooled_size": (2, 2)},
            {"spatial_scale": 1.0},
            {"pooled_size": (2,), "spatial_scale": 1.0},
            {"pooled_size": (0, 2), "spatial_scale": 1.0},
            {"pooled_size": (2, 2), "spatial_scale": 2.0},
        ),
    )
)
