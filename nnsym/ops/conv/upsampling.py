"""UpSampling of NCHW data: nearest-neighbour (any number of inputs) or bilinear.

nearest: the output is (N, C, H0 * scale, W0 * scale) from the first input's (H0, W0); every
input is repeated up to that size (its own integer factor, the same along height and width)
and the results are concatenated along the channels (``multi_input_mode='concat'``) or added
(``'sum'``, every input with the same number of channels).

bilinear: MXNet's deconvolution with a (C, 1, k, k) weight input, k = 2 * scale - scale % 2,
stride scale, pad ceil((scale - 1) / 2), one group per channel (num_filter must equal the
number of channels); nnsym runs it on Deconvolution's kernels. The weight's ``__init__``
attribute is set to ``["bilinear", {}]`` as MXNet does (on the second input, whatever the
sample type).

Stricter than MXNet 1.9.1 (which accepts these in shape inference and then fails at run
time): every input of a nearest UpSampling has the first one's batch size and the same factor
along height and width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import MAX_COUNT, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.conv.conv import _conform
from nnsym.ops.conv.deconv import (
    DeconvolutionParams,
    deconvolution_backward_lowering,
    deconvolution_lowering,
    deconvolution_reference,
)
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")
BILINEAR_INIT = '["bilinear", {}]'


@dataclass(frozen=True, kw_only=True)
class UpSamplingParams(Params):
    scale: int = field(lower=1, doc="Up sampling scale (height and width).")
    num_filter: int = field(
        default=0,
        doc="bilinear only: the number of channels (the deconvolution's filters and groups).",
    )
    sample_type: str = field(choices=("bilinear", "nearest"), doc="Upsampling method.")
    multi_input_mode: str = field(
        default="concat",
        choices=("concat", "sum"),
        doc="nearest with several inputs: concatenate the upsampled inputs along the channels "
        "or add them.",
    )
    num_args: int = field(
        lower=1,
        upper=MAX_COUNT,
        doc="Number of inputs to upsample (nearest); bilinear takes data and weight.",
    )
    workspace: int = field(
        default=512, lower=0, doc="Temporary workspace in MB (no effect in nnsym)."
    )

    def __post_init__(self) -> None:
        if self.bilinear and self.num_filter < 1:
            raise ValueError(
                f"sample_type='bilinear' needs num_filter >= 1 (the number of channels), not "
                f"{self.num_filter}"
            )

    @property
    def bilinear(self) -> bool:
        return self.sample_type == "bilinear"

    @property
    def bilinear_kernel(self) -> int:
        return 2 * self.scale - self.scale % 2

    def as_deconvolution(self) -> DeconvolutionParams:
        """The Deconvolution that bilinear upsampling runs (MXNet's GetDeconvolutionParam)."""
        k, s = self.bilinear_kernel, self.scale
        pad = math.ceil((s - 1) / 2)
        return DeconvolutionParams(
            kernel=(k, k), stride=(s, s), pad=(pad, pad), dilate=(1, 1),
            num_filter=self.num_filter, num_group=self.num_filter, no_bias=True,
        )


def upsampling_inputs(p: UpSamplingParams) -> tuple[str, ...]:
    if p.bilinear:
        return ("data", "weight")
    return tuple(f"arg{i}" for i in range(p.num_args))


def _factor(o: int | None, x: int | None, what: str, i: int) -> int | None:
    """The integer factor from an input size to the output size (None while unknown)."""
    if o is None or x is None:
        return None
    if x == 0 and o == 0:
        return 1  # an empty input: nothing to repeat
    if x == 0 or o % x or o < x:
        raise RuleError(
            f"input {i} has {what} {x}, which does not divide the output {what} {o}"
        )
    return o // x


def upsampling_shape(p: UpSamplingParams, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's UpSamplingShape: the output from the inputs (forward only); bilinear also
    gives the weight its shape."""
    d = ins[0]
    if d is None:
        return list(ins), list(outs)
    for i, s in enumerate(ins[:1] if p.bilinear else ins):
        if s is not None and len(s) != 4:
            raise RuleError(
                f"input {i} has shape {shape_str(s)}; UpSampling needs 4-D (batch, channel, y, "
                "x) data"
            )
    n, c, h, w = d
    oh = None if h is None else h * p.scale
    ow = None if w is None else w * p.scale
    if p.bilinear:
        nf = p.num_filter
        if c is not None and c != nf:
            raise RuleError(
                f"data has shape {shape_str(d)} with {c} channels but bilinear upsampling has "
                f"num_filter={nf}; they must be equal"
            )
        k = p.bilinear_kernel
        weight = _conform("weight", ins[1], (c, 1, k, k), f"data {shape_str(d)}, scale={p.scale}")
        return [d, weight], [(n, c, oh, ow)]
    total: int | None = 0
    common: int | None = None
    for i, s in enumerate(ins):
        if s is None:
            total = None
            continue
        ni, ci, hi, wi = s
        if n is not None and ni is not None and ni != n:
            raise RuleError(
                f"input {i} has shape {shape_str(s)} but input 0 has batch size {n}"
            )
        fh = _factor(oh, hi, "height", i)
        fw = _factor(ow, wi, "width", i)
        if fh is not None and fw is not None and fh != fw and hi and wi:
            raise RuleError(
                f"input {i} has shape {shape_str(s)}: its height needs factor {fh} and its "
                f"width factor {fw} to reach ({oh}, {ow}); they must be equal"
            )
        if p.multi_input_mode == "sum":
            if ci is not None:
                if common is not None and common != ci:
                    raise RuleError(
                        f"input {i} has {ci} channels, input(s) before it {common}: "
                        "multi_input_mode='sum' needs the same number of channels"
                    )
                common = ci
        elif total is not None:
            total = None if ci is None else total + ci
    oc = common if p.multi_input_mode == "sum" else total
    return list(ins), [(n, oc, oh, ow)]


def upsampling_type(p: UpSamplingParams, ins: list, outs: list) -> tuple[list, list]:
    """Every input and the output take the first input's dtype (MXNet's UpSamplingType)."""
    t = ins[0]
    if t is None:
        return list(ins), list(outs)
    return [t] * len(ins), [t]


def upsampling_reference(p: UpSamplingParams, *inputs: np.ndarray) -> np.ndarray:
    if p.bilinear:
        return deconvolution_reference(p.as_deconvolution(), *inputs)  # type: ignore[no-any-return]
    x0 = inputs[0]
    oh = x0.shape[2] * p.scale
    ups = []
    for x in inputs:
        f = oh // x.shape[2] if x.shape[2] else 1
        ups.append(x.repeat(f, axis=2).repeat(f, axis=3))
    if p.multi_input_mode == "sum":
        acc = np.float64 if x0.dtype.kind == "f" else x0.dtype
        return np.sum([u.astype(acc) for u in ups], axis=0).astype(x0.dtype)  # type: ignore[no-any-return]
    return np.concatenate(ups, axis=1)


def _nearest_ia(p: UpSamplingParams, pieces: tuple[tuple[int, ...], ...],
                out: tuple[int, ...]) -> tuple[int, ...]:
    """[K, N, OC, OH, OW, then per input: C, H, W, factor, channel offset]."""
    n, oc, oh, ow = out
    ia = [len(pieces), n, oc, oh, ow]
    off = 0
    for s in pieces:
        _, c, h, w = s
        ia += [c, h, w, oh // h if h else 1, 0 if p.multi_input_mode == "sum" else off]
        off += c
    return tuple(ia)


def upsampling_lowering(call: KernelCall) -> Lowered:
    p: UpSamplingParams = call.params
    if p.bilinear:
        return deconvolution_lowering(
            KernelCall(p.as_deconvolution(), call.in_shapes, call.in_dtypes, call.out_shapes,
                       call.out_dtypes, call.req, call.reqs)
        )
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"UpSampling has dense kernels for {FLOAT_DTYPES}, not {dt}")
    out = call.out_shapes[0]
    if size(out) == 0:
        return Lowered()
    spec = KernelSpec.make("conv/upsampling_nearest.c.j2", dtype=dt, req=call.req,
                           sum=p.multi_input_mode == "sum")
    return Lowered((Launch(spec, _nearest_ia(p, call.in_shapes, out)),))


def upsampling_backward_lowering(call: KernelCall) -> Lowered:
    """bilinear: Deconvolution's gradient (pointers [ograd, data, weight, data grad, weight
    grad]); nearest: pointers [ograd, the inputs (shapes only), their gradients]."""
    p: UpSamplingParams = call.params
    if p.bilinear:
        return deconvolution_backward_lowering(
            KernelCall(p.as_deconvolution(), call.in_shapes, call.in_dtypes, call.out_shapes,
                       call.out_dtypes, call.req, call.reqs)
        )
    dt = call.out_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"UpSampling's gradient has dense kernels for {FLOAT_DTYPES}, not {dt}")
    k = len(call.out_shapes)
    reqs = tuple(call.out_req(i) for i in range(k))
    if all(r == "null" for r in reqs):
        return Lowered()
    spec = KernelSpec.make("conv/upsampling_nearest_backward.c.j2", dtype=dt, reqs=reqs,
                           sum=p.multi_input_mode == "sum")
    ia = _nearest_ia(p, call.out_shapes, call.in_shapes[0])
    return Lowered((Launch(spec, ia, args=(0, *range(k + 1, 2 * k + 1))),))


def _backward_inputs(p: UpSamplingParams) -> tuple[str, ...]:
    return ("ograd", *upsampling_inputs(p))


def _backward_outputs(p: UpSamplingParams) -> tuple[str, ...]:
    return tuple(f"{n}_grad" for n in upsampling_inputs(p))


def _backward_shape(p: UpSamplingParams, ins: list, outs: list) -> tuple[list, list]:
    return list(ins), [i or o for i, o in zip(ins[1:], outs)]


BACKWARD_UPSAMPLING = register(
    OpDef(
        name="_backward_UpSampling",
        params=UpSamplingParams,
        inputs=_backward_inputs,
        outputs=_backward_outputs,
        infer_shape=_backward_shape,
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or o for o in outs]),
        # nearest reads the inputs for their shapes only
        ignore_inputs=lambda p: () if p.bilinear else tuple(range(1, p.num_args + 1)),
        kernels={DENSE: Kernel(upsampling_backward_lowering)},
        differentiable=False,
        doc="Gradient of UpSampling: window sums of the output gradient (nearest), "
        "Deconvolution's gradient (bilinear).",
    )
)


upsampling_grad = node_gradient(BACKWARD_UPSAMPLING)


UPSAMPLING = register(
    OpDef(
        name="UpSampling",
        params=UpSamplingParams,
        inputs=upsampling_inputs,
        key_var_num_args="num_args",
        infer_shape=upsampling_shape,
        infer_type=upsampling_type,
        reference=upsampling_reference,
        kernels={DENSE: Kernel(upsampling_lowering)},
        grad=upsampling_grad,
        input_var_attrs={"arg1": {"__init__": BILINEAR_INIT},
                         "weight": {"__init__": BILINEAR_INIT}},
        doc="Nearest-neighbour upsampling of one or more NCHW inputs (concatenated or summed), "
        "or bilinear upsampling (a per-channel deconvolution with a given weight). Dense "
        "kernels: nearest float16/float32/float64, bilinear float32/float64.",
        examples=(
            Example(((2, 3, 4, 5),), {"scale": 2, "sample_type": "nearest", "num_args": 1}),
            Example(((1, 2, 3, 2),), {"scale": 3, "sample_type": "nearest", "num_args": 1}),
            Example(
                ((2, 3, 4, 4), (2, 2, 2, 2), (2, 1, 8, 8)),
                {"scale": 2, "sample_type": "nearest", "num_args": 3},
            ),
            Example(
                ((2, 3, 2, 2), (2, 3, 1, 1)),
                {"scale": 3, "sample_type": "nearest", "num_args": 2, "multi_input_mode": "sum"},
            ),
            Example(((2, 2, 3, 3),), {"scale": 2, "sample_type": "nearest", "num_args": 1},
                    dtype="float64"),
            Example(((1, 3, 3, 4), (3, 1, 4, 4)),
                    {"scale": 2, "sample_type": "bilinear", "num_filter": 3, "num_args": 2}),
            Example(((2, 2, 3, 2), (2, 1, 5, 5)),
                    {"scale": 3, "sample_type": "bilinear", "num_filter": 2, "num_args": 2},
                    dtype="float64"),
        ),
        bad_params=(
            {},
            {"scale": 2, "num_args": 1},
            {"sample_type": "nearest", "num_args": 1},
            {"scale": 0, "sample_type": "nearest", "num_args": 1},
            {"scale": 2, "sample_type": "linear", "num_args": 1},
            {"scale": 2, "sample_type": "nearest", "num_args": 0},
            {"scale": 2, "sample_type": "nearest", "num_args": 2, "multi_input_mode": "max"},
            {"scale": 2, "sample_type": "bilinear", "num_args": 2},
            {"scale": 2, "sample_type": "bilinear", "num_args": 2, "num_filter": -1},
        ),
    )
)
