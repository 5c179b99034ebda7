"""Deconvolution (transposed convolution) over 1-D, 2-D and 3-D spatial data.

Deconvolution is Convolution's data gradient: its forward runs Convolution's backward kernel
(GEMM + col2im, ``conv_backward.c.j2``'s "per_image" kernel with only the data gradient
enabled), and its gradients are Convolution's forward (the data gradient, through
``convolution_lowering``: im2col + GEMM, or the direct depthwise kernel) and Convolution's
weight gradient (im2col + GEMM, the same backward kernel with only the weight gradient
enabled). Only the bias needs a kernel of its
own (``deconv_bias.c.j2``). The geometry maps one to one: a Deconvolution from ``C`` to ``F``
channels with weight ``(C, F / num_group, *kernel)`` is the transpose of a Convolution from
``F`` to ``C`` channels whose weight is that same array.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.conv.conv import (
    DEFAULT_LAYOUT,
    ConvolutionParams,
    _channel_last,
    _check_lengths,
    _conform,
    _ncx,
    _pad3,
    convolution_lowering,
    convolution_type,
    from_ncx,
    to_ncx,
)
from nnsym.types import shape_str

GEMM_DTYPES = ("float32", "float64")


@dataclass(frozen=True, kw_only=True)
class DeconvolutionParams(Params):
    kernel: tuple[int, ...] = field(
        lower=1, doc="Deconvolution kernel size: (w,), (h, w) or (d, h, w)."
    )
    stride: tuple[int, ...] = field(
        default=(), lower=1,
        doc="The stride of the corresponding convolution; defaults to 1 for each dimension.",
    )
    dilate: tuple[int, ...] = field(
        default=(), lower=1, doc="Dilation of the kernel; defaults to 1 for each dimension."
    )
    pad: tuple[int, ...] = field(
        default=(), lower=0,
        doc="Zero padding of the corresponding convolution (removed from both ends of the "
        "output); ignored when target_shape is set. Defaults to no padding.",
    )
    adj: tuple[int, ...] = field(
        default=(), lower=0,
        doc="Extra output cells at the end of each dimension (each < stride); ignored when "
        "target_shape is set.",
    )
    target_shape: tuple[int, ...] = field(
        default=(), lower=0,
        doc="Output spatial shape: (w,), (h, w) or (d, h, w); pad and adj are then derived "
        "from it (used when any entry is non-zero).",
    )
    num_filter: int = field(lower=1, doc="Number of output channels.")
    num_group: int = field(default=1, lower=1, doc="Number of channel groups.")
    workspace: int = field(
        default=512, lower=0, doc="Maximum temporary workspace in MB (no effect in nnsym)."
    )
    no_bias: bool = field(default=True, doc="Whether to leave out the bias term.")
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
                f"{k}-D deconvolution is not supported: kernel={self.kernel} must have 1, 2 or "
                "3 entries"
            )
        _check_lengths("deconvolution", self.kernel, stride=self.stride, dilate=self.dilate,
                       pad=self.pad, adj=self.adj)
        if self.target_shape and len(self.target_shape) < k:
            raise ValueError(
                f"target_shape={self.target_shape} has fewer entries than kernel={self.kernel}"
            )
        if self.layout is not None and len(self.layout) != k + 2:
            raise ValueError(f"layout {self.layout} does not fit a {k}-D kernel {self.kernel}")
        if self.num_filter % self.num_group:
            raise ValueError(
                f"num_filter={self.num_filter} is not divisible by num_group={self.num_group}"
            )
        if k == 3 and math.prod(self.dilates) != 1:
            raise ValueError(f"dilate={self.dilate} is not supported in 3-D deconvolution")
        if not self.uses_target:
            for a, s in zip(self.adjs, self.strides):
                if a >= s:
                    raise ValueError(
                        f"adj={self.adjs} must be smaller than stride={self.strides} in every "
                        "dimension"
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
    def adjs(self) -> tuple[int, ...]:
        return self.adj or (0,) * len(self.kernel)

    @property
    def dilated_kernel(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilates))

    @property
    def uses_target(self) -> bool:
        """MXNet derives pad and adj from target_shape when any of its entries is non-zero."""
        return any(self.target_shape)

    def pad_adj(self, xs: Sequence[int | None]) -> list[tuple[int, int] | None]:
        """(pad, adj) per spatial dimension for input sizes ``xs`` (None where unknown)."""
        if not self.uses_target:
            pads = self.pad or (0,) * len(self.kernel)
            return list(zip(pads, self.adjs))
        res: list[tuple[int, int] | None] = []
        for x, s, dk, t in zip(xs, self.strides, self.dilated_kernel, self.target_shape):
            if x is None:
                res.append(None)
                continue
            full = s * (x - 1) + dk
            if full < t:
                raise RuleError(
                    f"target_shape={self.target_shape} is too big: input size {x} gives at "
                    f"most {full} with kernel={self.kernel}, stride={self.strides}"
                )
            extra = full - t
            res.append(((extra + 1) // 2, extra % 2))
        return res

    def pads_for(self, xs: Sequence[int]) -> tuple[int, ...]:
        pa = self.pad_adj(xs)
        return tuple(v[0] for v in pa if v is not None)

    def as_convolution(self, pads: tuple[int, ...], channels: int) -> ConvolutionParams:
        """The Convolution this deconvolution transposes (from num_filter to ``channels``)."""
        return ConvolutionParams(
            kernel=self.kernel, stride=self.strides, dilate=self.dilates, pad=pads,
            num_filter=channels, num_group=self.num_group, no_bias=True, layout=self.data_layout,
        )


def deconvolution_inputs(p: DeconvolutionParams) -> tuple[str, ...]:
    return ("data", "weight") if p.no_bias else ("data", "weight", "bias")


def deconvolution_shape(p: DeconvolutionParams, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's DeconvolutionShape: weight, bias and output from the data (forward only)."""
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    nd, layout = len(p.kernel), p.data_layout
    if len(data) != nd + 2:
        raise RuleError(
            f"data has shape {shape_str(data)} but a {nd}-D deconvolution (kernel={p.kernel}) "
            f"needs {nd + 2}-D data in layout {layout}"
        )
    n, c, *xs = to_ncx(data, layout)
    g, f = p.num_group, p.num_filter
    if c is not None and c % g:
        raise RuleError(
            f"data has shape {shape_str(data)} with {c} channels, not divisible by num_group={g}"
        )
    osz: list[int | None] = []
    for x, s, dk, pa in zip(xs, p.strides, p.dilated_kernel, p.pad_adj(xs)):
        if x is None or pa is None:
            osz.append(None)
            continue
        pad, adj = pa
        if adj >= s:
            raise RuleError(
                f"target_shape={p.target_shape} needs adj={adj}, which must be smaller than "
                f"stride {s}"
            )
        o = s * (x - 1) + dk - 2 * pad + adj
        if o < 0:
            raise RuleError(
                f"data {shape_str(data)} gives no output with kernel={p.kernel}, "
                f"stride={p.strides}, pad={pad}"
            )
        osz.append(o)
    out = from_ncx((n, f, *osz), layout)
    if p.uses_target:
        for got, t in zip(osz, p.target_shape):
            if got is not None and t > 0 and got != t:
                raise RuleError(f"target_shape={p.target_shape} cannot be reached")
    if outs[0] is not None:
        try:
            out = merge_shape(outs[0], out)  # type: ignore[assignment]
        except RuleError:
            raise RuleError(
                f"output has shape {shape_str(outs[0])} but data {shape_str(data)} gives "
                f"{shape_str(out)}"
            ) from None
    why = f"data {shape_str(data)} with num_filter={f}, num_group={g}, kernel={p.kernel}"
    weight = from_ncx((c, f // g, *p.kernel), layout)
    new_ins = [data, _conform("weight", ins[1], weight, why)]
    if not p.no_bias:
        new_ins.append(_conform("bias", ins[2], (f,), f"num_filter={f}"))
    return new_ins, [out]


def deconvolution_reference(p: DeconvolutionParams, data, weight, bias=None):
    """Scatter form: every input cell adds ``data * weight`` over its kernel window of the
    (uncropped) output, which is then cropped by pad (and extended by adj)."""
    layout = p.data_layout
    cl = _channel_last(layout)
    if cl:
        data, weight = np.moveaxis(data, -1, 1), np.moveaxis(weight, -1, 1)
    acc = np.float64 if data.dtype.kind == "f" else np.int64
    x, w = data.astype(acc), weight.astype(acc)
    n, c, *xs = x.shape
    g, f, nd = p.num_group, p.num_filter, len(p.kernel)
    pa = p.pad_adj(xs)
    pads = [v[0] for v in pa if v is not None]
    adjs = [v[1] for v in pa if v is not None]
    full = [s * (xi - 1) + dk + a for xi, s, dk, a in zip(xs, p.strides, p.dilated_kernel, adjs)]
    osz = [fl - 2 * pd for fl, pd in zip(full, pads)]
    buf = np.zeros((n, f, *[max(fl, 0) for fl in full]), acc)
    xg = x.reshape(n, g, c // g, *xs)
    wg = w.reshape(g, c // g, f // g, *p.kernel)
    sp = "xyz"[:nd]
    for kk in itertools.product(*(range(k) for k in p.kernel)):
        tap: tuple[Any, ...] = (Ellipsis, *kk)
        y = np.einsum(f"ngc{sp},gcf->ngf{sp}", xg, wg[tap]).reshape(n, f, *xs)
        at: tuple[Any, ...] = (
            Ellipsis,
            *[slice(k * d, k * d + s * (xi - 1) + 1, s)
              for k, d, s, xi in zip(kk, p.dilates, p.strides, xs)],
        )
        if all(xi > 0 for xi in xs):
            buf[at] += y
    crop: tuple[Any, ...] = (
        Ellipsis, *[slice(pd, pd + max(o, 0)) for pd, o in zip(pads, osz)]
    )
    out = buf[crop]
    if bias is not None:
        out = out + bias.astype(acc).reshape(1, -1, *([1] * nd))
    if cl:
        out = np.moveaxis(out, 1, -1)
    return out.astype(data.dtype)


def _geometry(p: DeconvolutionParams, data: tuple[int, ...], out: tuple[int, ...]) -> tuple:
    """Integer arguments of Convolution's templates for the transposed convolution: its data is
    this output (F channels), its output this data (C channels)."""
    layout = p.data_layout
    n, c, *xs = _ncx(data, layout)
    _, f, *osz = _ncx(out, layout)
    pads = p.pads_for(xs)
    ia = (n, f, c, p.num_group, *_pad3(osz, 1), *_pad3(xs, 1), *_pad3(p.kernel, 1),
          *_pad3(p.strides, 1), *_pad3(pads, 0), *_pad3(p.dilates, 1))
    k = (f // p.num_group) * math.prod(p.kernel)
    return ia, k * size(xs), pads, c


def _col2im_spec(dt: str, cl: bool, req_x: str, req_w: str) -> KernelSpec:
    return KernelSpec.make(
        "conv/conv_backward.c.j2", algo="per_image", dtype=dt, req_x=req_x, req_w=req_w,
        req_b="null", bias=False, channel_last=cl,
    )


def _bias_launch(dt: str, cl: bool, mode: str, req: str, shape: tuple[int, ...],
                 layout: str, args: tuple[int, ...]) -> Launch:
    n, f, *sp = _ncx(shape, layout)
    spec = KernelSpec.make("conv/deconv_bias.c.j2", dtype=dt, mode=mode, req=req, channel_last=cl)
    return Launch(spec, (n, f, size(sp)), args=args)


def deconvolution_lowering(call: KernelCall) -> Lowered:
    """Convolution's data gradient (GEMM + col2im per image and group), then the bias.
    Node pointers: [data, weight, (bias,) out]."""
    p: DeconvolutionParams = call.params
    dt = call.in_dtypes[0].name
    if dt not in GEMM_DTYPES:
        raise NoKernelError(f"Deconvolution has dense kernels for {GEMM_DTYPES}, not {dt}")
    out = call.out_shapes[0]
    if size(out) == 0:
        return Lowered()
    cl = _channel_last(p.data_layout)
    ia, kp, _, _ = _geometry(p, call.in_shapes[0], out)
    o = 2 if p.no_bias else 3
    # conv_backward's p = [ograd, data, weight, dx, dw, workspace]: ograd is this data, dx this
    # output; data and dw are not read with req_w="null" (any valid pointer will do).
    launches = [Launch(_col2im_spec(dt, cl, call.req, "null"), ia, args=(0, 0, 1, o, o),
                       workspace=max(2 * kp * np.dtype(dt).itemsize, 16))]
    if not p.no_bias:
        launches.append(_bias_launch(dt, cl, "add", "add", out, p.data_layout, (2, 3)))
    return Lowered(tuple(launches))


def deconvolution_backward_lowering(call: KernelCall) -> Lowered:
    """Node pointers: [ograd, data, weight, data grad, weight grad, (bias grad)].

    data grad: Convolution's forward of ograd with the same weight; weight grad: Convolution's
    weight gradient with ograd as its data and this data as its output gradient; bias grad:
    ograd summed over everything but the channel."""
    p: DeconvolutionParams = call.params
    dt = call.out_dtypes[0].name
    if dt not in GEMM_DTYPES:
        raise NoKernelError(f"Deconvolution's gradient has kernels for {GEMM_DTYPES}, not {dt}")
    g, data, weight = call.in_shapes
    layout = p.data_layout
    cl = _channel_last(layout)
    ia, kp, pads, c = _geometry(p, data, g)
    launches: list[Launch] = []
    req_x, req_w = call.out_req(0), call.out_req(1)
    if req_x != "null" and size(data):
        conv = KernelCall(p.as_convolution(pads, c), (g, weight), call.in_dtypes[:1] * 2,
                          (data,), call.out_dtypes[:1], req_x)
        for ln in convolution_lowering(conv).launches:  # pointers [data, weight, out]
            launches.append(dataclasses.replace(ln, args=(0, 2, 3)))
    if req_w != "null" and size(weight):
        # conv_backward: ograd = this data, data = this ograd, dx unused (req_x="null").
        launches.append(Launch(_col2im_spec(dt, cl, "null", req_w), ia, args=(1, 0, 2, 4, 4),
                               workspace=max(2 * kp * np.dtype(dt).itemsize, 16)))
    if not p.no_bias and call.out_req(2) != "null":
        launches.append(_bias_launch(dt, cl, "grad", call.out_req(2), g, layout, (0, 5)))
    return Lowered(tuple(launches))


def deconvolution_backward_outputs(p: DeconvolutionParams) -> tuple[str, ...]:
    return ("data_grad", "weight_grad") + (() if p.no_bias else ("bias_grad",))


BACKWARD_DECONVOLUTION = register(
    OpDef(
        name="_backward_Deconvolution",
        params=DeconvolutionParams,
        inputs=("ograd", "data", "weight"),
        outputs=deconvolution_backward_outputs,
        infer_shape=lambda p, ins, outs: (
            list(ins),
            [ins[1] or outs[0], ins[2] or outs[1]] + ([] if p.no_bias else [(p.num_filter,)]),
        ),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0]] * (2 if p.no_bias else 3)),
        kernels={DENSE: Kernel(deconvolution_backward_lowering)},
        differentiable=False,
        doc="Gradient of Deconvolution: Convolution's forward for the data, Convolution's "
        "weight gradient for the weight.",
    )
)


deconvolution_grad = node_gradient(BACKWARD_DECONVOLUTION, lambda n: n.inputs[:2])


DECONVOLUTION = register(
    OpDef(
        name="Deconvolution",
        params=DeconvolutionParams,
        inputs=deconvolution_inputs,
        infer_shape=deconvolution_shape,
        infer_type=convolution_type,
        reference=deconvolution_reference,
        kernels={DENSE: Kernel(deconvolution_lowering)},
        grad=deconvolution_grad,
        aliases=("_npx_deconvolution",),
        doc="Transposed convolution (the gradient of Convolution with respect to its data) of "
        "(N+2)-D data, 1-D to 3-D, with optional groups, dilation, adj and target_shape. "
        "Dense kernels: float32 and float64.",
        examples=(
            Example(((2, 3, 5), (3, 4, 3)), {"kernel": (3,), "num_filter": 4}),
            Example(
                ((2, 4, 5), (4, 3, 3), (6,)),
                {"kernel": (3,), "num_filter": 6, "num_group": 2, "stride": (2,), "pad": (1,),
                 "dilate": (2,), "adj": (1,), "no_bias": False},
            ),
            Example(((2, 3, 4, 4), (3, 5, 3, 3), (5,)),
                    {"kernel": (3, 3), "num_filter": 5, "no_bias": False}),
            Example(
                ((1, 3, 4, 5), (3, 2, 3, 2)),
                {"kernel": (3, 2), "num_filter": 2, "stride": (2, 3), "pad": (1, 0),
                 "adj": (1, 2), "dilate": (1, 2)},
            ),
            Example(  # target_shape: pad and adj derived from it
                ((2, 2, 4, 4), (2, 3, 4, 4)),
                {"kernel": (4, 4), "num_filter": 3, "stride": (2, 2), "target_shape": (9, 8)},
            ),
            Example(  # depthwise
                ((2, 4, 5, 5), (4, 1, 3, 3), (4,)),
                {"kernel": (3, 3), "num_filter": 4, "num_group": 4, "stride": (2, 2),
                 "pad": (1, 1), "no_bias": False},
            ),
            Example(
                ((2, 4, 4, 3), (3, 3, 3, 2), (2,)),
                {"kernel": (3, 3), "num_filter": 2, "stride": (2, 1), "layout": "NHWC",
                 "no_bias": False},
            ),
            Example(((1, 2, 3, 3, 2), (2, 2, 2, 3, 2)),
                    {"kernel": (2, 3, 2), "num_filter": 2, "stride": (2, 1, 2), "pad": (0, 1, 0)}),
            Example(
                ((2, 6, 3, 4), (6, 2, 3, 3), (4,)),
                {"kernel": (3, 3), "num_filter": 4, "num_group": 2, "stride": (2, 2),
                 "pad": (1, 1), "no_bias": False},
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
            {"kernel": (3, 3), "num_filter": 4, "adj": (1,)},
            {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "adj": (2, 1)},
            {"kernel": (3, 3), "num_filter": 4, "pad": (-1, 0)},
            {"kernel": (3, 3), "num_filter": 4, "target_shape": (8,)},
            {"kernel": (3, 3), "num_filter": 6, "num_group": 4},
            {"kernel": (3, 3), "num_filter": 4, "num_group": 0},
            {"kernel": (3,), "num_filter": 4, "layout": "NCHW"},
            {"kernel": (3, 3, 3), "num_filter": 4, "dilate": (2, 1, 1)},
            {"kernel": (3, 3), "num_filter": 4, "cudnn_tune": "slowest"},
            {"kernel": (3, 3), "num_filter": 4, "workspace": -1},
        ),
    )
)
