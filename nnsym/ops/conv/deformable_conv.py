"""DeformableConvolution and ModulatedDeformableConvolution (Deformable ConvNets v1 and v2):
2-D convolution whose taps sample the data bilinearly at learned offsets (v2: scaled by a
learned mask), as a deformable im2col followed by Convolution's BLAS GEMM per group."""

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

FLOAT_DTYPES = ("float32", "float64")


@dataclass(frozen=True, kw_only=True)
class DeformableConvolutionParams(Params):
    kernel: tuple[int, ...] = field(lower=1, doc="Convolution kernel size (h, w).")
    stride: tuple[int, ...] = field(default=(), lower=1, doc="Stride (h, w); default 1.")
    dilate: tuple[int, ...] = field(default=(), lower=1, doc="Dilation (h, w); default 1.")
    pad: tuple[int, ...] = field(default=(), lower=0, doc="Zero padding (h, w); default 0.")
    num_filter: int = field(lower=1, doc="Number of output channels (filters).")
    num_group: int = field(default=1, lower=1, doc="Number of channel groups.")
    num_deformable_group: int = field(
        default=1, lower=1, doc="Number of channel groups sharing one set of offsets."
    )
    workspace: int = field(
        default=1024, lower=0, doc="Maximum temporary workspace in MB (no effect in nnsym)."
    )
    no_bias: bool = field(default=False, doc="Whether to leave out the bias term.")
    layout: str | None = field(
        default=None,
        choices=("NCW", "NCHW", "NCDHW"),
        doc="Data layout; only NCHW (2-D) is implemented, as in MXNet.",
    )

    def __post_init__(self) -> None:
        if len(self.kernel) != 2:
            raise ValueError(
                f"kernel={self.kernel}: deformable convolution is 2-D only (kernel (h, w))"
            )
        for name in ("stride", "dilate", "pad"):
            v = getattr(self, name)
            if v and len(v) != 2:
                raise ValueError(f"{name}={v} must have 2 entries, as kernel={self.kernel}")
        if self.layout not in (None, "NCHW"):
            raise ValueError(f"layout={self.layout}: deformable convolution supports NCHW only")
        if self.num_filter % self.num_group:
            raise ValueError(
                f"num_filter={self.num_filter} is not divisible by num_group={self.num_group}"
            )

    @property
    def strides(self) -> tuple[int, ...]:
        return self.stride or (1, 1)

    @property
    def dilates(self) -> tuple[int, ...]:
        return self.dilate or (1, 1)

    @property
    def pads(self) -> tuple[int, ...]:
        return self.pad or (0, 0)


@dataclass(frozen=True, kw_only=True)
class ModulatedDeformableConvolutionParams(DeformableConvolutionParams):
    im2col_step: int = field(
        default=64, lower=0, doc="Images per im2col step in MXNet (no effect in nnsym)."
    )


def _modulated(p: Any) -> bool:
    return isinstance(p, ModulatedDeformableConvolutionParams)


def deformable_inputs(p: Any) -> tuple[str, ...]:
    names = ("data", "offset", *(("mask",) if _modulated(p) else ()), "weight")
    return names if p.no_bias else (*names, "bias")


def _conform(name: str, given: Any, want: tuple, why: str) -> Any:
    if given is not None and len(given) != len(want):
        raise RuleError(f"{name} has shape {shape_str(given)}; {why} needs {shape_str(want)}")
    try:
        return merge_shape(given, want)
    except RuleError:
        raise RuleError(
            f"{name} has shape {shape_str(given)}; {why} needs {shape_str(want)}"
        ) from None


def deformable_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) != 4:
        raise RuleError(f"data has shape {shape_str(data)}; it must be 4-D (N, C, H, W)")
    n, c, h, w = data
    g, dg, f = p.num_group, p.num_deformable_group, p.num_filter
    for what, v in (("num_group", g), ("num_deformable_group", dg)):
        if c is not None and c % v:
            raise RuleError(f"data has {c} channels, not divisible by {what}={v}")
    osz: list[int | None] = []
    for x, k, s, pd, dl in zip((h, w), p.kernel, p.strides, p.pads, p.dilates):
        dk = (k - 1) * dl + 1
        if x is None:
            osz.append(None)
        elif dk > x + 2 * pd:
            raise RuleError(
                f"kernel={p.kernel} (dilated size {dk}) exceeds data {shape_str(data)} padded "
                f"to {x + 2 * pd} by pad={p.pads}"
            )
        else:
            osz.append((x + 2 * pd - dk) // s + 1)
    out = (n, f, *osz)
    if outs[0] is not None:
        out = _conform("output", outs[0], out, f"data {shape_str(data)}")
    kk = p.kernel[0] * p.kernel[1]
    why = f"data {shape_str(data)} with kernel={p.kernel}, num_deformable_group={dg}"
    new = [data, _conform("offset", ins[1], (n, 2 * dg * kk, *osz), why)]
    if _modulated(p):
        new.append(_conform("mask", ins[2], (n, dg * kk, *osz), why))
    wi = len(new)
    new.append(
        _conform(
            "weight",
            ins[wi],
            (f, None if c is None else c // g, *p.kernel),
            f"data {shape_str(data)} with num_filter={f}, num_group={g}",
        )
    )
    if not p.no_bias:
        new.append(_conform("bias", ins[wi + 1], (f,), f"num_filter={f}"))
    return new, [out]


def deformable_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    t = next((x for x in [*ins, outs[0]] if x is not None), None)
    return [t] * len(ins), [t]


def _bilinear(pl: np.ndarray, hi: float, wi: float, v2: bool) -> float:
    hh, ww = pl.shape
    if v2:
        if not (hi > -1 and wi > -1 and hi < hh and wi < ww):
            return 0.0
        yl, xl = math.floor(hi), math.floor(wi)
        yh, xh = yl + 1, xl + 1
    else:
        if not (hi >= 0 and wi >= 0 and hi < hh and wi < ww):
            return 0.0
        yl, xl = math.floor(hi), math.floor(wi)
        yh, xh = yl + 1, xl + 1
        if yl >= hh - 1:
            yl = yh = hh - 1
            hi = yl
        if xl >= ww - 1:
            xl = xh = ww - 1
            wi = xl
    ly, lx = hi - yl, wi - xl

    def v(a: int, b: int) -> float:
        return float(pl[a, b]) if 0 <= a < hh and 0 <= b < ww else 0.0

    return (
        (1 - ly) * (1 - lx) * v(yl, xl)
        + (1 - ly) * lx * v(yl, xh)
        + ly * (1 - lx) * v(yh, xl)
        + ly * lx * v(yh, xh)
    )


def deformable_reference(p: Any, data: np.ndarray, offset: np.ndarray, *rest: np.ndarray):
    """Deformable im2col then a grouped matrix product, in float64."""
    v2 = _modulated(p)
    mask = rest[0] if v2 else None
    weight = rest[1 if v2 else 0]
    bias = None if p.no_bias else rest[-1]
    n, c, _, _ = data.shape
    kh, kw = p.kernel
    oh, ow = offset.shape[2:]
    kk, dg = kh * kw, p.num_deformable_group
    cpd = c // dg
    x, off = data.astype(np.float64), offset.astype(np.float64)
    col = np.zeros((n, c, kk, oh, ow))
    for b in range(n):
        for ch in range(c):
            g = ch // cpd
            for k in range(kk):
                i, j = divmod(k, kw)
                for y in range(oh):
                    for z in range(ow):
                        hi = y * p.strides[0] - p.pads[0] + i * p.dilates[0]
                        wi = z * p.strides[1] - p.pads[1] + j * p.dilates[1]
                        hi += off[b, (g * kk + k) * 2, y, z]
                        wi += off[b, (g * kk + k) * 2 + 1, y, z]
                        s = _bilinear(x[b, ch], hi, wi, v2)
                        if mask is not None:
                            s *= float(mask[b, g * kk + k, y, z])
                        col[b, ch, k, y, z] = s
    ng, f = p.num_group, p.num_filter
    cg, fg = c // ng, f // ng
    out = np.zeros((n, f, oh * ow))
    wt = weight.astype(np.float64)
    for g in range(ng):
        cm = col[:, g * cg : (g + 1) * cg].reshape(n, cg * kk, oh * ow)
        out[:, g * fg : (g + 1) * fg] = np.einsum(
            "fk,nkp->nfp", wt[g * fg : (g + 1) * fg].reshape(fg, cg * kk), cm
        )
    if bias is not None:
        out += bias.astype(np.float64)[None, :, None]
    return out.reshape(n, f, oh, ow).astype(data.dtype)


def _ia(p: Any, data: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    return (
        *data,
        p.num_filter,
        p.num_group,
        p.num_deformable_group,
        out[2],
        out[3],
        *p.kernel,
        *p.strides,
        *p.pads,
        *p.dilates,
    )


def _check_dtype(p: Any, dt: str) -> None:
    if dt not in FLOAT_DTYPES:
        name = "ModulatedDeformableConvolution" if _modulated(p) else "DeformableConvolution"
        raise NoKernelError(f"{name} has dense kernels for {FLOAT_DTYPES}, not {dt}")


def deformable_lowering(call: KernelCall) -> Lowered:
    p = call.params
    dt = call.in_dtypes[0].name
    _check_dtype(p, dt)
    data, out = call.in_shapes[0], call.out_shapes[0]
    if size(out) == 0:
        return Lowered()
    spec = KernelSpec.make(
        "conv/deformable_conv.c.j2",
        dtype=dt,
        req=call.req,
        bias=not p.no_bias,
        modulated=_modulated(p),
    )
    ws = data[1] * p.kernel[0] * p.kernel[1] * out[2] * out[3] * call.in_dtypes[0].itemsize
    return Lowered((Launch(spec, _ia(p, data, out), workspace=max(ws, 16)),))


def deformable_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data, offset, (mask,) weight, ddata, doffset, (dmask,) dweight, (dbias)]."""
    p = call.params
    dt = call.out_dtypes[0].name
    _check_dtype(p, dt)
    mod = _modulated(p)
    data, og = call.in_shapes[1], call.in_shapes[0]
    reqs = [call.out_req(i) for i in range(len(call.out_shapes))]
    req_x, req_o = reqs[0], reqs[1]
    req_m = reqs[2] if mod else "null"
    req_w = reqs[3 if mod else 2]
    req_b = "null" if p.no_bias else reqs[-1]
    ia = _ia(p, data, og)
    ws = data[1] * p.kernel[0] * p.kernel[1] * og[2] * og[3] * call.in_dtypes[0].itemsize
    common = {"dtype": dt, "bias": not p.no_bias, "modulated": mod}
    launches = []
    if req_x == "write" and size(data):
        launches.append(
            Launch(
                KernelSpec.make("conv/deformable_conv_backward.c.j2", phase="zero", **common), ia
            )
        )
    if size(data) and (req_x != "null" or req_o != "null" or req_m != "null"):
        spec = KernelSpec.make(
            "conv/deformable_conv_backward.c.j2",
            phase="data",
            dx_on=req_x != "null",
            req_o=req_o,
            req_m=req_m,
            **common,
        )
        launches.append(Launch(spec, ia, workspace=max(ws, 16)))
    if req_w != "null" or req_b != "null":
        spec = KernelSpec.make(
            "conv/deformable_conv_backward.c.j2", phase="weight", req_w=req_w, req_b=req_b, **common
        )
        launches.append(Launch(spec, ia, workspace=max(ws, 16)))
    return Lowered(tuple(launches))


def _backward_outputs(p: Any) -> tuple[str, ...]:
    names = ("data_grad", "offset_grad", *(("mask_grad",) if _modulated(p) else ()), "weight_grad")
    return names if p.no_bias else (*names, "bias_grad")


def _backward_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    grads = list(ins[1:])  # data, offset, (mask,) weight: each gradient has its input's shape
    if not p.no_bias:
        grads.append((p.num_filter,))
    return list(ins), grads


def _backward_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    return list(ins), [ins[0]] * len(outs)


def _make_backward(name: str, params: type[Params]) -> OpDef:
    return register(
        OpDef(
            name=name,
            params=params,
            inputs=lambda p: ("ograd", *deformable_inputs(p)[: 4 if _modulated(p) else 3]),
            outputs=_backward_outputs,
            infer_shape=_backward_shape,
            infer_type=_backward_type,
            kernels={DENSE: Kernel(deformable_backward_lowering)},
            differentiable=False,
            doc="Gradients of deformable convolution to data, offsets, (mask,) weight, bias.",
        )
    )


BACKWARD_DEFORMABLE = _make_backward(
    "_backward__contrib_DeformableConvolution", DeformableConvolutionParams
)
BACKWARD_MODULATED = _make_backward(
    "_backward__contrib_ModulatedDeformableConvolution", ModulatedDeformableConvolutionParams
)


def deformable_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    mod = _modulated(node.params)
    op = BACKWARD_MODULATED if mod else BACKWARD_DEFORMABLE
    reads = node.inputs[: 4 if mod else 3]
    b = backward_node(op, node, [g, *reads])
    return [Entry(b, i) for i in range(len(node.inputs))]


def _examples(mod: bool) -> tuple[Example, ...]:
    """Offsets in [-2, 2) move the taps across cells and off the data's edge; the masks take the
    same range (negative values too)."""

    def shapes(
        n: int,
        c: int,
        h: int,
        w: int,
        f: int,
        g: int,
        dg: int,
        k: tuple,
        o: tuple,
        bias: bool = True,
    ) -> tuple:
        kk = k[0] * k[1]
        s = [(n, c, h, w), (n, 2 * dg * kk, *o)]
        if mod:
            s.append((n, dg * kk, *o))
        s.append((f, c // g, *k))
        if bias:
            s.append((f,))
        return tuple(s)

    return (
        Example(
            shapes(2, 2, 4, 5, 3, 1, 1, (3, 3), (4, 5)),
            {"kernel": (3, 3), "pad": (1, 1), "num_filter": 3},
        ),
        Example(
            shapes(1, 4, 7, 6, 4, 2, 2, (2, 3), (4, 4), bias=False),
            {
                "kernel": (2, 3),
                "stride": (2, 1),
                "dilate": (2, 1),
                "pad": (1, 0),
                "num_filter": 4,
                "num_group": 2,
                "num_deformable_group": 2,
                "no_bias": True,
            },
            dtype="float64",
        ),
    )


_BAD = (
    {"num_filter": 2},
    {"kernel": (3, 3, 3), "num_filter": 2},
    {"kernel": (3, 3), "num_filter": 3, "num_group": 2},
    {"kernel": (3, 3), "num_filter": 2, "layout": "NHWC"},
)

DEFORMABLE_CONVOLUTION = register(
    OpDef(
        name="_contrib_DeformableConvolution",
        params=DeformableConvolutionParams,
        inputs=deformable_inputs,
        infer_shape=deformable_shape,
        infer_type=deformable_type,
        reference=deformable_reference,
        kernels={DENSE: Kernel(deformable_lowering)},
        grad=deformable_grad,
        doc="2-D convolution sampling the data at learned offsets (Deformable ConvNets).",
        examples=_examples(False),
        bad_params=_BAD,
    )
)

MODULATED_DEFORMABLE_CONVOLUTION = register(
    OpDef(
        name="_contrib_ModulatedDeformableConvolution",
        params=ModulatedDeformableConvolutionParams,
        inputs=deformable_inputs,
        infer_shape=deformable_shape,
        infer_type=deformable_type,
        reference=deformable_reference,
        kernels={DENSE: Kernel(deformable_lowering)},
        grad=deformable_grad,
        doc="Deformable convolution whose samples are scaled by a learned mask (DCN v2).",
        examples=_examples(True),
        bad_params=_BAD,
    )
)
