"""Convolution and Pooling over 1-D, 2-D and 3-D spatial data (channel-first or channel-last).

Both operators work in a canonical ``(N, C, *spatial)`` order internally; a channel-last layout
(``NWC``, ``NHWC``, ``NDHWC``) only moves the channel axis, so one conversion pair serves both.

Convolution's kernels are two templates, each choosing its kernel by the literal ``algo``:
``conv_forward.c.j2`` ("per_image": im2col + GEMM per image; "batched": several images per
GEMM; "depthwise": a direct kernel) and ``conv_backward.c.j2`` ("per_image", "batched"; also
Deconvolution's, see deconv.py).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    merge_shape,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import PAR_MIN, KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.common.products import transposed_product
from nnsym.types import Shape, shape_str

# Default layout by number of spatial dimensions (MXNet picks it from the kernel's length).
DEFAULT_LAYOUT = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _channel_last(layout: str) -> bool:
    return layout[1] != "C"


# Elements of one im2col chunk (the column matrix of some output rows): bounds the workspace
# of large images; measured as fast as whole images (3x3, 64 channels, 56x56), while chunks
# of 256K elements were 30% slower (more, smaller GEMM calls).
COL_CHUNK = 1 << 20


def _pad3(t: tuple[int, ...] | list[int], fill: int) -> list[int]:
    return [fill] * (3 - len(t)) + [int(v) for v in t]


def _ncx(shape: tuple[int, ...], layout: str) -> list[int]:
    """A known shape in ``layout`` -> canonical ``[N, C, *spatial]``."""
    s = [int(d) for d in shape]
    return [s[0], s[-1], *s[1:-1]] if _channel_last(layout) else s


def to_ncx(shape: Shape, layout: str) -> Shape:
    """``shape`` in ``layout`` -> canonical ``(N, C, *spatial)``."""
    if not _channel_last(layout):
        return shape
    return (shape[0], shape[-1], *shape[1:-1])


def from_ncx(shape: Shape, layout: str) -> Shape:
    """Canonical ``(N, C, *spatial)`` -> ``layout``."""
    if not _channel_last(layout):
        return shape
    return (shape[0], *shape[2:], shape[1])


def _check_lengths(what: str, kernel: tuple[int, ...], **tuples: tuple[int, ...]) -> None:
    for name, t in tuples.items():
        if t and len(t) != len(kernel):
            raise ValueError(
                f"{name}={t} must have as many entries as kernel={kernel} ({len(kernel)}) "
                f"or be left empty for {what}"
            )


def _conform(name: str, given: Shape | None, want: Shape, why: str) -> Shape:
    """Merge ``want`` into ``given`` or say which input disagrees and why."""
    try:
        merged = merge_shape(given, want)
    except RuleError:
        raise RuleError(
            f"{name} has shape {shape_str(given)} but {why} needs {shape_str(want)}"
        ) from None
    assert merged is not None
    return merged


# ---------------------------------------------------------------------------------------------
# Convolution


@dataclass(frozen=True, kw_only=True)
class ConvolutionParams(Params):
    kernel: tuple[int, ...] = field(
        lower=1, doc="Convolution kernel size: (w,), (h, w) or (d, h, w)."
    )
    stride: tuple[int, ...] = field(
        default=(), lower=1, doc="Convolution stride; defaults to 1 for each dimension."
    )
    dilate: tuple[int, ...] = field(
        default=(), lower=1, doc="Convolution dilation; defaults to 1 for each dimension."
    )
    pad: tuple[int, ...] = field(
        default=(), lower=0, doc="Zero padding on both sides; defaults to no padding."
    )
    num_filter: int = field(lower=1, doc="Number of output channels (filters).")
    num_group: int = field(default=1, lower=1, doc="Number of channel groups.")
    workspace: int = field(
        default=1024, lower=0, doc="Maximum temporary workspace in MB (no effect in nnsym)."
    )
    no_bias: bool = field(default=False, doc="Whether to leave out the bias term.")
    cudnn_tune: str | None = field(
        default=None,
        choices=("off", "limited_workspace", "fastest"),
        doc="cuDNN algorithm selection (accepted for compatibility; no effect in nnsym).",
    )
    cudnn_off: bool = field(default=False, doc="Turn off cuDNN (no effect in nnsym).")
    layout: str | None = field(
        default=None,
        choices=("NCW", "NCHW", "NCDHW", "NHWC", "NDHWC"),
        doc="Layout of data, weight and output; default NCW, NCHW or NCDHW by kernel length.",
    )

    def __post_init__(self) -> None:
        k = len(self.kernel)
        if k not in (1, 2, 3):
            raise ValueError(
                f"{k}-D convolution is not supported: kernel={self.kernel} must have 1, 2 or 3 "
                "entries"
            )
        _check_lengths(
            "convolution", self.kernel, stride=self.stride, dilate=self.dilate, pad=self.pad
        )
        if self.layout is not None and len(self.layout) != k + 2:
            raise ValueError(f"layout {self.layout} does not fit a {k}-D kernel {self.kernel}")
        if self.num_filter % self.num_group:
            raise ValueError(
                f"num_filter={self.num_filter} is not divisible by num_group={self.num_group}"
            )

    @property
    def data_layout(self) -> str:
        return self.layout or DEFAULT_LAYOUT[len(self.kernel)]

    @property
    def strides(self) -> tuple[int, ...]:
        return self.stride or (1,) * len(self.kernel)

    @property
    def dilates(self) -> tuple[int, ...]:
        return self.dilate or (1,) * len(self.kernel)

    @property
    def pads(self) -> tuple[int, ...]:
        return self.pad or (0,) * len(self.kernel)

    @property
    def dilated_kernel(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilates))


def convolution_inputs(p: ConvolutionParams) -> tuple[str, ...]:
    return ("data", "weight") if p.no_bias else ("data", "weight", "bias")


def convolution_shape(p: ConvolutionParams, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's ConvolutionShape: weight and bias from data, output from data, and back from the
    output the batch size and (where the stride is 1) the spatial sizes of data."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)  # MXNet needs the data's ndim to say anything
    nd, layout = len(p.kernel), p.data_layout
    if len(data) != nd + 2:
        raise RuleError(
            f"data has shape {shape_str(data)} but a {nd}-D convolution (kernel={p.kernel}) "
            f"needs {nd + 2}-D data in layout {layout}"
        )
    n, c, *xs = to_ncx(data, layout)
    g, f = p.num_group, p.num_filter
    if c is not None and c % g:
        raise RuleError(
            f"data has shape {shape_str(data)} with {c} channels, not divisible by num_group={g}"
        )
    geometry = list(zip(p.dilated_kernel, p.strides, p.pads))
    osz: list[int | None] = []
    for x, (dk, s, pd) in zip(xs, geometry):
        if x is None:
            osz.append(None)
            continue
        if dk > x + 2 * pd:
            raise RuleError(
                f"kernel={p.kernel} (dilated size {dk}) exceeds data {shape_str(data)} padded "
                f"to {x + 2 * pd} by pad={p.pads}"
            )
        osz.append((x + 2 * pd - dk) // s + 1)
    out = from_ncx((n, f, *osz), layout)
    if outs[0] is not None:
        try:
            out = merge_shape(outs[0], out)  # type: ignore[assignment]
        except RuleError:
            raise RuleError(
                f"output has shape {shape_str(outs[0])} but data {shape_str(data)} gives "
                f"{shape_str(out)}"
            ) from None
    # Backward: the batch size always, a spatial size only where the stride is 1.
    on, _, *oxs = to_ncx(out, layout)
    filled: list[int | None] = []
    for x, o, (dk, s, pd) in zip(xs, oxs, geometry):
        if x is None and o is not None and s == 1:
            x = o + dk - 1 - 2 * pd
            if x < 1:
                raise RuleError(
                    f"output has shape {shape_str(out)}, which no data can give with "
                    f"kernel={p.kernel}, pad={p.pads}"
                )
        filled.append(x)
    new_data = from_ncx((n if n is not None else on, c, *filled), layout)
    why = f"data {shape_str(data)} with num_filter={f}, num_group={g}, kernel={p.kernel}"
    weight = from_ncx((f, None if c is None else c // g, *p.kernel), layout)
    new_ins = [new_data, _conform("weight", ins[1], weight, why)]
    if not p.no_bias:
        new_ins.append(_conform("bias", ins[2], (f,), f"num_filter={f}"))
    return new_ins, [out]


def convolution_type(p: ConvolutionParams, ins: list, outs: list) -> tuple[list, list]:
    """Every input and the output take the data's dtype (MXNet does not infer it backwards)."""
    t = ins[0]
    if t is None:
        return list(ins), list(outs)
    return [t] * len(ins), [t]


def _conv_ncx(x: np.ndarray, w: np.ndarray, p: ConvolutionParams) -> np.ndarray:
    nd, g = len(p.kernel), p.num_group
    x = np.pad(x, [(0, 0), (0, 0), *[(q, q) for q in p.pads]])
    spatial = tuple(range(2, 2 + nd))
    win = sliding_window_view(x, p.dilated_kernel, axis=spatial)  # (N, C, *o_full, *dk)
    steps: tuple[Any, ...] = (
        Ellipsis,
        *[slice(None, None, s) for s in p.strides],
        *[slice(None, None, d) for d in p.dilates],
    )
    win = win[steps]  # (N, C, *o, *k): positions every stride, window cells every dilation
    n, c = x.shape[:2]
    osz = win.shape[2 : 2 + nd]
    f = w.shape[0]
    win = win.reshape(n, g, c // g, *osz, *p.kernel)
    wg = w.reshape(g, f // g, c // g, *p.kernel)
    o_ix, k_ix = "xyz"[:nd], "ijk"[:nd]
    y: np.ndarray = np.einsum(f"ngc{o_ix}{k_ix},gfc{k_ix}->ngf{o_ix}", win, wg)
    return y.reshape(n, f, *osz)


def convolution_reference(p: ConvolutionParams, data, weight, bias=None):
    layout = p.data_layout
    if _channel_last(layout):
        data, weight = np.moveaxis(data, -1, 1), np.moveaxis(weight, -1, 1)
    acc = np.float64 if data.dtype.kind == "f" else np.int64
    y = _conv_ncx(data.astype(acc), weight.astype(acc), p)
    if bias is not None:
        y = y + bias.astype(acc).reshape(1, -1, *([1] * len(p.kernel)))
    if _channel_last(layout):
        y = np.moveaxis(y, 1, -1)
    return y.astype(data.dtype)


# ---------------------------------------------------------------------------------------------
# Convolution (forward and gradients) with several images per GEMM, for small outputs
#
# ``convolution_lowering`` runs im2col and one GEMM per image: for a layer whose per-image output
# ``P = OD * OH * OW`` is small (late ResNet stages: 2x2 or 4x4 outputs of 256 or 512 filters)
# each of those GEMMs has ``P`` columns and re-reads the whole weight, a memory-bound product
# repeated once per image. These lowerings build the column matrix of a block of ``nb`` images
# (``K x nb*P``), run one GEMM per group and block, and scatter the ``F x nb*P`` result into the
# images' outputs (the backward gathers the output gradient the other way, then one GEMM for the
# weight gradient and one for the column gradient per block, and col2im).
#
# They take the same ``KernelCall`` and pointers as ``convolution_lowering`` /
# ``convolution_backward_lowering`` and return None where they do not apply (channel-last
# layouts, float16, depthwise, one image, empty outputs) or do not pay (``FORWARD_MAX_P``,
# ``BACKWARD_MAX_P``, fewer than two images per block), so a caller can try them first and fall
# back to the per-image kernels.

# Largest per-image output (OD * OH * OW) batched. Measured with
# benchmarks/bench_conv_batched.py (float32, 8 images, 2 cores): the forward gains 2-2.6x at
# P = 4 (ResNet stage 4), 10-25% at P = 16..64 and 2-30% at P = 256, where a per-image GEMM
# already has enough columns; past it the scatter pass and a block's column matrix falling out
# of cache can cost more than the weight reads saved (3 -> 64 channels 3x3: 10% slower at
# P = 1024, 18% at 2304). The backward gained at every size up to P = 2304 (2-3x at P = 4,
# 5-70% beyond: one im2col and two GEMMs per block rather than per image) and lost 10% at
# P = 4096 with 3 -> 64 channels, where gathering the output gradient costs more than im2col.
#
# Past 256 the forward is batched up to FORWARD_WIDE_MAX_P when the column matrix has at least
# FORWARD_WIDE_MIN_K rows: a product of 2 * K flops per output element then outweighs the
# scatter pass's read and write of it. One process alternating the two paths (8 images, 2
# cores, ms): ResNet's 7x7 stride-2 stem 3 -> 64 at 64x64 (P = 1024, K = 147) 1.91 -> 1.50,
# 64 -> 64 3x3 at 32x32 (K = 576) 5.07 -> 4.30, 16 -> 32 3x3 at 32x32 (K = 144) 1.19 -> 0.84,
# 8 -> 32 (K = 72) 0.55 -> 0.47; but 3 -> 64 3x3 (K = 27) 0.43 -> 0.47, and at P = 2304
# (64 -> 64 at 48x48) no change.
FORWARD_MAX_P = 256
FORWARD_WIDE_MAX_P = 1024
FORWARD_WIDE_MIN_K = 64
BACKWARD_MAX_P = 2304
# Elements of the block's buffers (column matrix plus the group's output / output-gradient
# block): the same bound as the per-image kernel's im2col chunks.
BATCH_CHUNK = COL_CHUNK


def _batched_geometry(p: ConvolutionParams, data: tuple[int, ...], out: tuple[int, ...],
                      max_p: int) -> tuple[list[int], int, int, int, int] | None:
    """(ia without NB, N, K, Fg, P), or None when the batched kernels do not apply."""
    layout = p.data_layout
    if _channel_last(layout):
        return None
    n, c, *xs = _ncx(data, layout)
    _, f, *osz = _ncx(out, layout)
    g = p.num_group
    if c == g == f:  # depthwise: a direct kernel of its own
        return None
    k = (c // g) * math.prod(p.kernel)
    pp = size(osz)
    if n < 2 or pp == 0 or k == 0 or pp > max_p:
        return None
    ia = [
        n, c, f, g, *_pad3(xs, 1), *_pad3(osz, 1), *_pad3(p.kernel, 1), *_pad3(p.strides, 1),
        *_pad3(p.pads, 0), *_pad3(p.dilates, 1),
    ]
    return ia, n, k, f // g, pp


def _block(n: int, k: int, fg: int, pp: int, chunk: int) -> int:
    """Images per block: as many as keep (K + Fg) * nb * P within ``chunk``, split evenly."""
    most = max(1, min(n, chunk // max(1, (k + fg) * pp)))
    blocks = -(-n // most)
    return -(-n // blocks)


def _up16(v: int) -> int:
    """``v`` elements rounded up to 16: the kernels start each workspace block 64-byte aligned."""
    return (v + 15) // 16 * 16


def _workspace(k: int, fg: int, nb: int, pp: int, itemsize: int) -> int:
    return (_up16(k * nb * pp) + _up16(fg * nb * pp)) * itemsize


def batched_forward_lowering(call: KernelCall, chunk: int = BATCH_CHUNK) -> Lowered | None:
    """Convolution's forward with ``nb`` images per GEMM; None where it does not apply or pay.
    Pointers as ``convolution_lowering``: [data, weight, (bias,) out, workspace]."""
    p: ConvolutionParams = call.params
    dt = call.in_dtypes[0].name
    if dt not in ("float32", "float64") or size(call.out_shapes[0]) == 0:
        return None
    geo = _batched_geometry(p, call.in_shapes[0], call.out_shapes[0], FORWARD_WIDE_MAX_P)
    if geo is None:
        return None
    ia, n, k, fg, pp = geo
    if pp > FORWARD_MAX_P and k < FORWARD_WIDE_MIN_K:
        return None
    nb = _block(n, k, fg, pp, chunk)
    if nb < 2:
        return None
    spec = KernelSpec.make(
        "conv/conv_forward.c.j2", algo="batched", dtype=dt, req=call.req, bias=not p.no_bias,
        par_min=PAR_MIN,
    )
    ws = _workspace(k, fg, nb, pp, np.dtype(dt).itemsize)
    return Lowered((Launch(spec, (*ia, nb), workspace=ws),))


def batched_backward_lowering(call: KernelCall, chunk: int = BATCH_CHUNK) -> Lowered | None:
    """Convolution's gradients with ``nb`` images per GEMM; None where it does not apply or pay.
    Pointers as ``convolution_backward_lowering``: [ograd, data, weight, data grad, weight grad,
    (bias grad), workspace]; each gradient's write mode from ``call.out_req`` ("null": not
    computed)."""
    p: ConvolutionParams = call.params
    dt = call.out_dtypes[0].name
    if dt not in ("float32", "float64"):
        return None
    g, data, _ = call.in_shapes
    geo = _batched_geometry(p, data, g, BACKWARD_MAX_P)
    if geo is None:
        return None
    ia, n, k, fg, pp = geo
    nb = _block(n, k, fg, pp, chunk)
    if nb < 2:
        return None
    bias = not p.no_bias
    # the weight gradient's product transposed, dWᵀ[K, Fg] = col . gbᵀ, into the workspace
    # (ops/common/products.py): ResNet-18's 64-filter layers' dW 550 -> 450 us (nd.dot)
    dw_t = call.out_req(1) != "null" and transposed_product(fg, k, nb * pp, True)
    spec = KernelSpec.make(
        "conv/conv_backward.c.j2", algo="batched", dtype=dt, req_x=call.out_req(0),
        req_w=call.out_req(1), req_b=call.out_req(2) if bias else "null", bias=bias,
        par_min=PAR_MIN, dw_t=dw_t,
    )
    isz = np.dtype(dt).itemsize
    ws = _workspace(k, fg, nb, pp, isz) + (_up16(k * fg) * isz if dw_t else 0)
    return Lowered((Launch(spec, (*ia, nb), workspace=max(ws, 16)),))


# Dense kernels work on spatial dims padded to three (d, h, w) with size-1 leading dims.
FLOAT_DTYPES = ("float16", "float32", "float64")
def convolution_lowering(call: KernelCall) -> Lowered:
    """The batched kernel where it applies and pays (several images per GEMM for small
    outputs), else ``per_image_lowering``."""
    batched = batched_forward_lowering(call)
    return batched if batched is not None else per_image_lowering(call)


def per_image_lowering(call: KernelCall) -> Lowered:
    """im2col + GEMM per image, chunk of output rows and group; a direct kernel for depthwise
    convolution (one input and one output channel per group)."""
    p: ConvolutionParams = call.params
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"Convolution has dense kernels for {FLOAT_DTYPES}, not {dt}")
    layout = p.data_layout
    cl = _channel_last(layout)
    n, c, *xs = _ncx(call.in_shapes[0], layout)
    _, f, *osz = _ncx(call.out_shapes[0], layout)
    g = p.num_group
    ia = [
        n,
        c,
        f,
        g,
        *_pad3(xs, 1),
        *_pad3(osz, 1),
        *_pad3(p.kernel, 1),
        *_pad3(p.strides, 1),
        *_pad3(p.pads, 0),
        *_pad3(p.dilates, 1),
    ]
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    acc = 8 if dt == "float64" else 4
    ow = ia[9]
    bias = not p.no_bias
    # NOTE: direct only for one input and one output channel per group: with more filters per
    # group, one shared column matrix and a GEMM win (8x for 32 filters of one channel).
    if c == g == f:
        spec = KernelSpec.make(
            "conv/conv_forward.c.j2", algo="depthwise", dtype=dt, req=call.req, bias=bias,
            channel_last=cl,
        )
        ws = (c + 16) * (math.prod(p.kernel) + 1) if cl else max(ow, 16)
        return Lowered((Launch(spec, tuple(ia), workspace=ws * acc),))
    widen = dt == "float16"
    k = (c // g) * math.prod(p.kernel)
    rows = ia[7] * ia[8]
    rc = max(1, min(rows, COL_CHUNK // max(1, k * ow)))
    direct = (
        not widen
        and all(v == 1 for v in p.kernel)
        and all(v == 1 for v in p.strides)
        and not any(p.pads)
    )

    elems = (_up16(f * k) + f * rc * ow if widen else 0) + (0 if direct else _up16(k * rc * ow))
    spec = KernelSpec.make(
        "conv/conv_forward.c.j2", algo="per_image", dtype=dt, req=call.req, bias=bias,
        channel_last=cl,
    )
    return Lowered((Launch(spec, (*ia, rc, int(direct)), workspace=max(elems, 16) * acc),))


def convolution_backward_lowering(call: KernelCall) -> Lowered:
    """The batched kernel where it applies and pays, else ``per_image_backward_lowering``."""
    batched = batched_backward_lowering(call)
    return batched if batched is not None else per_image_backward_lowering(call)


def per_image_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data, weight, data grad, weight grad, (bias grad), workspace]."""
    p: ConvolutionParams = call.params
    dt = call.out_dtypes[0].name
    layout = p.data_layout
    if dt not in ("float32", "float64"):
        raise NoKernelError(f"Convolution's gradient has kernels for float32/float64, not {dt}")
    g, data, _ = call.in_shapes
    n, c, *xs = _ncx(data, layout)
    _, f, *osz = _ncx(g, layout)
    ia = (n, c, f, p.num_group, *_pad3(xs, 1), *_pad3(osz, 1), *_pad3(p.kernel, 1),
          *_pad3(p.strides, 1), *_pad3(p.pads, 0), *_pad3(p.dilates, 1))
    k = (c // p.num_group) * math.prod(p.kernel)
    ws = 2 * k * size(osz) * np.dtype(dt).itemsize
    bias = not p.no_bias
    spec = KernelSpec.make(
        "conv/conv_backward.c.j2", algo="per_image", dtype=dt, req_x=call.out_req(0),
        req_w=call.out_req(1), req_b=call.out_req(2) if bias else "null", bias=bias,
        channel_last=_channel_last(layout),
    )
    return Lowered((Launch(spec, ia, workspace=max(ws, 16)),))


def convolution_backward_outputs(p: ConvolutionParams) -> tuple[str, ...]:
    return ("data_grad", "weight_grad") + (() if p.no_bias else ("bias_grad",))


BACKWARD_CONVOLUTION = register(
    OpDef(
        name="_backward_Convolution",
        params=ConvolutionParams,
        inputs=("ograd", "data", "weight"),
        outputs=convolution_backward_outputs,
        infer_shape=lambda p, ins, outs: (
            list(ins),
            [ins[1] or outs[0], ins[2] or outs[1]] + ([] if p.no_bias else [(p.num_filter,)]),
        ),
        infer_type=same_dtype,
        kernels={DENSE: Kernel(convolution_backward_lowering)},
        differentiable=False,
        doc="Gradient of Convolution: im2col + GEMM for the weights, GEMM + col2im for the data.",
    )
)


convolution_grad = node_gradient(BACKWARD_CONVOLUTION, lambda n: n.inputs[:2])


CONVOLUTION = register(
    OpDef(
        name="Convolution",
        params=ConvolutionParams,
        inputs=convolution_inputs,
        infer_shape=convolution_shape,
        infer_type=convolution_type,
        reference=convolution_reference,
        kernels={DENSE: Kernel(convolution_lowering)},
        grad=convolution_grad,
        # NOTE: Convolution_v1 (MXNet's legacy 2-D/3-D operator) computes the same values.
        aliases=("_npx_convolution", "Convolution_v1"),
        doc="N-D convolution (cross-correlation) of (N+2)-D data with optional groups.",
        examples=(
            Example(((2, 3, 10), (4, 3, 3), (4,)), {"kernel": (3,), "num_filter": 4}),
            Example(
                ((2, 4, 11), (6, 2, 3)),
                {
                    "kernel": (3,),
                    "num_filter": 6,
                    "num_group": 2,
                    "stride": (2,),
                    "pad": (1,),
                    "dilate": (2,),
                    "no_bias": True,
                },
            ),
            Example(((2, 3, 7, 7), (5, 3, 3, 3), (5,)), {"kernel": (3, 3), "num_filter": 5}),
            Example(
                ((1, 3, 9, 8), (4, 3, 3, 2), (4,)),
                {
                    "kernel": (3, 2),
                    "num_filter": 4,
                    "stride": (2, 1),
                    "pad": (1, 0),
                    "dilate": (1, 2),
                },
            ),
            Example(  # depthwise
                ((2, 4, 6, 6), (4, 1, 3, 3), (4,)),
                {"kernel": (3, 3), "num_filter": 4, "num_group": 4, "pad": (1, 1)},
            ),
            Example(
                ((2, 6, 5, 5), (4, 3, 1, 1)),
                {"kernel": (1, 1), "num_filter": 4, "num_group": 2, "no_bias": True},
            ),
            Example(
                ((2, 5, 5, 3), (4, 3, 3, 3), (4,)),
                {"kernel": (3, 3), "num_filter": 4, "layout": "NHWC"},
            ),
            Example(
                ((1, 2, 5, 6, 4), (3, 2, 3, 2, 3), (3,)),
                {"kernel": (3, 2, 3), "num_filter": 3, "stride": (1, 2, 1), "pad": (1, 0, 1)},
            ),
            Example(
                ((2, 3, 6, 6), (4, 3, 3, 3), (4,)),
                {"kernel": (3, 3), "num_filter": 4},
                dtype="float64",
            ),
        ),
        bad_params=(
            {"num_filter": 4},
            {"kernel": (3, 3)},
            {"kernel": (3, 3), "num_filter": 0},
            {"kernel": (), "num_filter": 4},
            {"kernel": (3, 3, 3, 3), "num_filter": 4},
            {"kernel": (0, 3), "num_filter": 4},
            {"kernel": (3, 3), "num_filter": 4, "stride": (1,)},
            {"kernel": (3, 3), "num_filter": 4, "stride": (0, 1)},
            {"kernel": (3, 3), "num_filter": 4, "dilate": (1, 1, 1)},
            {"kernel": (3, 3), "num_filter": 4, "pad": (-1, 0)},
            {"kernel": (3, 3), "num_filter": 6, "num_group": 4},
            {"kernel": (3, 3), "num_filter": 4, "num_group": 0},
            {"kernel": (3,), "num_filter": 4, "layout": "NCHW"},
            {"kernel": (3,), "num_filter": 4, "layout": "NWC"},
            {"kernel": (3, 3), "num_filter": 4, "cudnn_tune": "slowest"},
        ),
    )
)


# ---------------------------------------------------------------------------------------------
# Pooling


@dataclass(frozen=True, kw_only=True)
class PoolingParams(Params):
    kernel: tuple[int, ...] = field(
        default=(), lower=1, doc="Pooling window: (x,), (y, x) or (d, y, x)."
    )
    pool_type: str = field(
        default="max", choices=("avg", "lp", "max", "sum"), doc="Pooling type to apply."
    )
    global_pool: bool = field(
        default=False, doc="Pool over the whole spatial extent, ignoring kernel/stride/pad."
    )
    cudnn_off: bool = field(default=False, doc="Turn off cuDNN pooling (no effect in nnsym).")
    pooling_convention: str = field(
        default="valid",
        choices=("full", "same", "valid"),
        doc="Output size rule: valid (floor), full (ceil), same (ceil(x / stride), 1-D only).",
    )
    stride: tuple[int, ...] = field(
        default=(), lower=1, doc="Stride; defaults to 1 for each dimension."
    )
    pad: tuple[int, ...] = field(default=(), lower=0, doc="Padding; defaults to none.")
    p_value: int | None = field(default=None, doc="p of Lp pooling (1, 2 or 3).")
    count_include_pad: bool | None = field(
        default=None,
        doc="avg pooling: count padded cells in the divisor (default: true).",
    )
    layout: str | None = field(
        default=None,
        choices=("NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC"),
        doc="Layout of data and output; default NCW, NCHW or NCDHW by data ndim.",
    )

    def __post_init__(self) -> None:
        k = len(self.kernel)
        if k > 3:
            raise ValueError(
                f"{k}-D pooling is not supported: kernel={self.kernel} must have 1, 2 or 3 entries"
            )
        if self.pool_type == "lp" and self.p_value is None:
            raise ValueError("pool_type='lp' needs p_value")
        if self.global_pool:
            return  # kernel, stride and pad are ignored
        if k == 0:
            raise ValueError("kernel is required unless global_pool=True")
        # NOTE: MXNet reads only the first len(kernel) entries, so longer tuples are accepted.
        for name, t in (("stride", self.stride), ("pad", self.pad)):
            if t and len(t) < k:
                raise ValueError(f"{name}={t} has fewer entries than kernel={self.kernel}")
        if self.layout is not None and len(self.layout) != k + 2:
            raise ValueError(f"layout {self.layout} does not fit a {k}-D kernel {self.kernel}")
        if self.pooling_convention == "same":
            if k != 1:
                raise ValueError("pooling_convention='same' supports 1-D pooling only")
            if any(self.pad):
                raise ValueError(f"pooling_convention='same' does not allow pad={self.pad}")

    @property
    def strides(self) -> tuple[int, ...]:
        return self.stride[: len(self.kernel)] or (1,) * len(self.kernel)

    @property
    def pads(self) -> tuple[int, ...]:
        return self.pad[: len(self.kernel)] or (0,) * len(self.kernel)

    # Pooling_v1's differences (its params say True): max sees the padding's zeros, avg divides
    # by the whole kernel.
    zero_pad: ClassVar[bool] = False
    full_kernel: ClassVar[bool] = False


def _pool_out(p: PoolingParams, x: int, k: int, s: int, pd: int) -> int:
    if p.pooling_convention == "valid":
        return (x + 2 * pd - k) // s + 1
    if p.pooling_convention == "full":
        return -(-(x + 2 * pd - k) // s) + 1
    return -(-(x + 2 * pd) // s)  # same


def pooling_shape(p: PoolingParams, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's PoolingShape: forward only (the data is never inferred from the output)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if not 3 <= len(data) <= 5:
        raise RuleError(
            f"data has shape {shape_str(data)}; pooling needs 3-D (N, C, x), 4-D (N, C, y, x) "
            "or 5-D (N, C, d, y, x) data"
        )
    if p.pooling_convention == "same" and len(data) != 3:
        raise RuleError(
            f"pooling_convention='same' supports 1-D pooling only; data has shape {shape_str(data)}"
        )
    layout = p.layout or DEFAULT_LAYOUT[len(data) - 2]
    if p.global_pool:
        c_axis = len(data) - 1 if _channel_last(layout) else 1
        return [data], [tuple(d if i in (0, c_axis) else 1 for i, d in enumerate(data))]
    nd = len(p.kernel)
    if len(data) != nd + 2:
        raise RuleError(
            f"data has shape {shape_str(data)} but a {nd}-D pooling (kernel={p.kernel}) needs "
            f"{nd + 2}-D data"
        )
    n, c, *xs = to_ncx(data, layout)
    osz: list[int | None] = []
    for x, k, s, pd in zip(xs, p.kernel, p.strides, p.pads):
        if x is None:
            osz.append(None)
            continue
        if k > x + 2 * pd:
            raise RuleError(
                f"kernel={p.kernel} exceeds data {shape_str(data)} padded to {x + 2 * pd} by "
                f"pad={p.pads}"
            )
        osz.append(_pool_out(p, x, k, s, pd))
    return [data], [from_ncx((n, c, *osz), layout)]


def pooling_type(p: PoolingParams, ins: list, outs: list) -> tuple[list, list]:
    """The output takes the data's dtype (forward only, as in MXNet)."""
    return list(ins), [ins[0]]


def pooling_reference(p: PoolingParams, data):
    layout = p.layout or DEFAULT_LAYOUT[data.ndim - 2]
    x = np.moveaxis(data, -1, 1) if _channel_last(layout) else data
    spatial = x.shape[2:]
    if p.global_pool:
        kernel, strides, pads = spatial, (1,) * len(spatial), (0,) * len(spatial)
        osz: tuple[int, ...] = (1,) * len(spatial)
    else:
        kernel, strides, pads = p.kernel, p.strides, p.pads
        osz = tuple(_pool_out(p, *a) for a in zip(spatial, kernel, strides, pads))
    acc = x.astype(np.float64)
    out = np.empty(x.shape[:2] + osz, dtype=np.float64)
    include_pad = p.count_include_pad is None or p.count_include_pad
    # NOTE: windows start at o * stride - pad and are clipped to the padded input; cells past
    # it (the 'full' and 'same' overhang) count in no divisor, as in MXNet's CPU kernels.
    for pos in itertools.product(*(range(o) for o in osz)):
        lo, hi, size_pad = [], [], 1
        for o, xs, k, s, pd in zip(pos, spatial, kernel, strides, pads):
            start = o * s - pd
            end = min(start + k, xs + pd)
            size_pad *= end - start
            lo.append(max(start, 0))
            hi.append(min(end, xs))
        region: tuple[Any, ...] = (Ellipsis, *[slice(a, b) for a, b in zip(lo, hi)])
        win = acc[region]
        axes = tuple(range(2, 2 + len(spatial)))
        size = math.prod(b - a for a, b in zip(lo, hi))
        if p.pool_type == "max":
            v = win.max(axis=axes) if size else np.full(x.shape[:2], -np.inf)
        elif p.pool_type == "sum":
            v = win.sum(axis=axes)
        elif p.pool_type == "avg":
            v = win.sum(axis=axes) / (size_pad if include_pad else size)
        else:  # lp: MXNet implements p = 1, 2, 3 (no absolute value: p = 1 is a plain sum)
            q = p.p_value
            if q not in (1, 2, 3):
                raise ValueError(f"Lp pooling supports p_value 1, 2 or 3, not {q}")
            v = (win**q).sum(axis=axes)
            v = np.sqrt(v) if q == 2 else np.cbrt(v) if q == 3 else v
        at: tuple[Any, ...] = (Ellipsis, *pos)
        out[at] = v
    if _channel_last(layout):
        out = np.moveaxis(out, 1, -1)
    return out.astype(data.dtype)


def pooling_lowering(call: KernelCall) -> Lowered:
    """One kernel per layout family: channel-first rows, channel-last positions, or a flat
    reduction per plane for global pooling of channel-first data."""
    p: PoolingParams = call.params
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"Pooling has dense kernels for {FLOAT_DTYPES}, not {dt}")
    shape = call.in_shapes[0]
    layout = p.layout or DEFAULT_LAYOUT[len(shape) - 2]
    cl = _channel_last(layout)
    n, c, *xs = _ncx(shape, layout)
    _, _, *osz = _ncx(call.out_shapes[0], layout)
    if p.global_pool:
        kernel, strides, pads = tuple(xs), (1,) * len(xs), (0,) * len(xs)
    else:
        kernel, strides, pads = p.kernel, p.strides, p.pads
    q = 0
    if p.pool_type == "lp":
        q = int(p.p_value or 0)
        if q not in (1, 2, 3):
            raise ValueError(f"Lp pooling supports p_value 1, 2 or 3, not {p.p_value}")
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    ia = (
        n,
        c,
        *_pad3(xs, 1),
        *_pad3(osz, 1),
        *_pad3(kernel, 1),
        *_pad3(strides, 1),
        *_pad3(pads, 0),
    )
    spec = KernelSpec.make(
        "conv/pool.c.j2",
        dtype=dt,
        req=call.req,
        pool_type=p.pool_type,
        p_value=q,
        include_pad=p.pool_type == "avg" and p.count_include_pad is not False,
        zero_pad=p.zero_pad and p.pool_type == "max",
        full_kernel=p.full_kernel and p.pool_type == "avg",
        channel_last=cl,
        flat=p.global_pool and not cl,
    )
    return Lowered((Launch(spec, ia, workspace=8 * max(16, ia[7], c)),))


def _ncx_strides(shape: tuple[int, ...], layout: str) -> list[int]:
    """Element strides of (N, C, D, H, W) (spatial padded to three; missing dims stride 0)."""
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= shape[i]
    n, c, *sp = _ncx(tuple(st), layout)
    return [n, c, *([0] * (3 - len(sp))), *sp]


def pooling_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data, output, data grad]; the forward's geometry, both layouts."""
    p: PoolingParams = call.params
    g, data, _ = call.in_shapes
    layout = p.layout or DEFAULT_LAYOUT[len(data) - 2]
    n, c, *xs = _ncx(data, layout)
    _, _, *osz = _ncx(g, layout)
    if p.global_pool:
        kernel, strides, pads = tuple(xs), (1,) * len(xs), (0,) * len(xs)
    else:
        kernel, strides, pads = p.kernel, p.strides, p.pads
    ia = (n, c, *_pad3(xs, 1), *_pad3(osz, 1), *_pad3(kernel, 1), *_pad3(strides, 1),
          *_pad3(pads, 0), *_ncx_strides(data, layout), *_ncx_strides(g, layout))
    spec = KernelSpec.make(
        "conv/pool_backward.c.j2", dtype=call.out_dtypes[0].name, req=call.out_req(0),
        pool_type=p.pool_type, p_value=int(p.p_value or 0),
        include_pad=p.pool_type == "avg" and p.count_include_pad is not False,
        zero_pad=p.zero_pad and p.pool_type == "max",
        full_kernel=p.full_kernel and p.pool_type == "avg",
    )
    return Lowered((Launch(spec, ia),))


BACKWARD_POOLING = register(
    OpDef(
        name="_backward_Pooling",
        params=PoolingParams,
        inputs=("ograd", "data", "output"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        kernels={DENSE: Kernel(pooling_backward_lowering)},
        differentiable=False,
        doc="Gradient of Pooling (max: to the selected cell; avg and sum: spread).",
    )
)


pooling_grad = node_gradient(BACKWARD_POOLING, lambda n: [n.inputs[0], Entry(n, 0)])


POOLING = register(
    OpDef(
        name="Pooling",
        params=PoolingParams,
        inputs=("data",),
        infer_shape=pooling_shape,
        infer_type=pooling_type,
        reference=pooling_reference,
        kernels={DENSE: Kernel(pooling_lowering)},
        grad=pooling_grad,
        aliases=("_npx_pooling",),
        doc="Max, average, sum or Lp pooling over 1-D, 2-D or 3-D windows.",
        examples=(
            Example(((2, 3, 8, 8),), {"kernel": (2, 2), "stride": (2, 2)}),
            Example(((2, 3, 7, 7),), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
            Example(
                ((2, 3, 7, 7),),
                {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"},
            ),
            Example(
                ((2, 3, 7, 6),),
                {
                    "kernel": (3, 3),
                    "stride": (2, 2),
                    "pad": (1, 1),
                    "pool_type": "avg",
                    "count_include_pad": False,
                },
            ),
            Example(
                ((1, 2, 7, 7),),
                {
                    "kernel": (2, 2),
                    "stride": (2, 2),
                    "pooling_convention": "full",
                    "pool_type": "avg",
                },
            ),
            Example(
                ((1, 2, 7, 7),),
                {"kernel": (3, 2), "stride": (2, 2), "pad": (1, 0), "pooling_convention": "full"},
            ),
            Example(((2, 3, 5, 4),), {"kernel": (2, 2), "pool_type": "sum"}),
            Example(((2, 3, 6, 5),), {"global_pool": True, "pool_type": "avg"}),
            Example(((2, 3, 6, 5),), {"global_pool": True, "kernel": (1, 1)}),
            Example(((2, 3, 10),), {"kernel": (3,), "stride": (2,), "pool_type": "max"}),
            Example(((2, 3, 10),), {"kernel": (3,), "pad": (1,), "pool_type": "avg"}),
            Example(((2, 3, 10),), {"global_pool": True, "pool_type": "sum"}),
            Example(((2, 10, 3),), {"kernel": (3,), "stride": (2,), "layout": "NWC"}),
            Example(
                ((2, 6, 6, 3),),
                {"kernel": (2, 2), "stride": (2, 2), "layout": "NHWC", "pool_type": "avg"},
            ),
            Example(((1, 2, 4, 5, 6),), {"kernel": (2, 2, 3), "stride": (2, 2, 3)}),
            Example(((2, 3, 9),), {"kernel": (3,), "stride": (2,), "pooling_convention": "same"}),
            Example(
                ((2, 3, 8),),
                {"kernel": (4,), "stride": (3,), "pooling_convention": "same", "pool_type": "avg"},
            ),
            Example(((2, 3, 5, 5),), {"kernel": (2, 2), "pool_type": "lp", "p_value": 2}),
            Example(((2, 3, 5, 5),), {"kernel": (2, 2), "pool_type": "lp", "p_value": 1}),
            Example(((2, 3, 6, 6),), {"kernel": (2, 2), "stride": (2, 2)}, dtype="float64"),
        ),
        bad_params=(
            {},
            {"kernel": (2, 2, 2, 2)},
            {"kernel": (0, 2)},
            {"kernel": (2, 2), "stride": (0, 1)},
            {"kernel": (2, 2), "stride": (2,)},
            {"kernel": (2, 2), "pad": (-1, 0)},
            {"kernel": (2, 2), "pool_type": "median"},
            {"kernel": (2, 2), "pool_type": "lp"},
            {"kernel": (2, 2), "pooling_convention": "ceil"},
            {"kernel": (2, 2), "pooling_convention": "same"},
            {"kernel": (2,), "pooling_convention": "same", "pad": (1,)},
            {"kernel": (2, 2), "layout": "NCW"},
            {"kernel": (2, 2), "layout": "NCHWD"},
        ),
    )
)
