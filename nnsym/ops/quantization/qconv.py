"""quantized_conv: int8/uint8 NCHW/NCDHW data convolved with int8 weights, accumulated in
int32, plus the int8 bias as it is. Parameters and shape rule are Convolution's own (taken from
the registry: operator families do not import each other)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, get_op, merge_shape, register
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS, int8_product_type, maxabs

# NOTE: nnsym.ops imports the conv family (Convolution) before this one.
CONVOLUTION = get_op("Convolution")
F32 = np.float32


def quantized_conv_inputs(p: Any) -> tuple[str, ...]:
    if p.no_bias:
        return ("data", "weight", "min_data", "max_data", "min_weight", "max_weight")
    return ("data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight",
            "min_bias", "max_bias")


def _check(p: Any) -> None:
    if p.num_group != 1:
        raise RuleError(f"num_group={p.num_group}: quantized_conv supports num_group=1 only")
    if len(p.kernel) not in (2, 3) or p.layout not in (None, "NCHW", "NCDHW"):
        raise RuleError(f"kernel={p.kernel}, layout={p.layout}: quantized_conv supports 2-D "
                        "(NCHW) and 3-D (NCDHW) convolution")


def quantized_conv_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    _check(p)
    nd = 2 if p.no_bias else 3
    assert CONVOLUTION.infer_shape is not None
    new_ins, new_outs = CONVOLUTION.infer_shape(p, list(ins[:nd]), [outs[0]])
    ranges = [merge_shape(s, (1,)) for s in ins[nd:]]
    return [*new_ins, *ranges], [new_outs[0], (1,), (1,)]


def quantized_conv_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    return int8_product_type("quantized_conv", p.no_bias, ins)


def quantized_conv_reference(p: Any, *ins: np.ndarray):
    _check(p)
    data, weight = ins[0], ins[1]
    bias = None if p.no_bias else ins[2]
    nd = 2 if p.no_bias else 3
    dlo, dhi, wlo, whi = ins[nd: nd + 4]
    oshape = quantized_conv_shape(p, [data.shape, weight.shape, *[x.shape for x in ins[2:]]],
                                  [None, None, None])[1][0]
    k, s, dl, pd = p.kernel, p.strides, p.dilates, p.pads
    x = np.pad(data.astype(np.int64), [(0, 0), (0, 0), *[(q, q) for q in pd]])
    w = weight.astype(np.int64)
    out = np.zeros(oshape, np.int64)
    for pos in itertools.product(*(range(n) for n in k)):
        sl: list[slice] = [slice(o * dd, o * dd + (n - 1) * ss + 1, ss)
                           for o, dd, ss, n in zip(pos, dl, s, oshape[2:], strict=True)]
        at: tuple[Any, ...] = (slice(None), slice(None), *sl)
        wat: tuple[Any, ...] = (slice(None), slice(None), *pos)
        win, wk = x[at], w[wat]
        out += np.einsum("nc...,fc->nf...", win, wk)
    if bias is not None:
        out += bias.astype(np.int64).reshape((1, -1) + (1,) * len(k))
    with np.errstate(over="ignore"):
        one = F32(F32(maxabs(dlo, dhi) / F32(127)) * F32(maxabs(wlo, whi) / F32(127)))
        hi = F32(one * F32(2147483648.0))
    return out.astype(np.int32), np.array([-hi], F32), np.array([hi], F32)


def _pad3(t: tuple[int, ...], fill: int) -> tuple[int, ...]:
    return (fill,) * (3 - len(t)) + tuple(t)


def quantized_conv_lowering(call: KernelCall) -> Lowered:
    p: Any = call.params
    dt = call.in_dtypes[0].name
    if dt not in ("int8", "uint8"):
        raise NoKernelError(f"quantized_conv takes int8 or uint8 data, not {dt}")
    if call.req == "add":
        raise NoKernelError("quantized_conv writes its outputs; it cannot add to them")
    shape, oshape = call.in_shapes[0], call.out_shapes[0]
    ia = (shape[0], shape[1], oshape[1], *_pad3(tuple(shape[2:]), 1),
          *_pad3(tuple(oshape[2:]), 1), *_pad3(tuple(p.kernel), 1), *_pad3(tuple(p.strides), 1),
          *_pad3(tuple(p.dilates), 1), *_pad3(tuple(p.pads), 0))
    spec = KernelSpec.make("quantization/qconv.c.j2", idtype=dt, bias=not p.no_bias)
    return Lowered((Launch(spec, ia),))


_I = ("uint8", "int8", "int8", "float32", "float32", "float32", "float32", "float32", "float32")

QUANTIZED_CONV = register(
    OpDef(
        name="_contrib_quantized_conv",
        params=CONVOLUTION.params,
        inputs=quantized_conv_inputs,
        outputs=RANGED_OUTPUTS,
        infer_shape=quantized_conv_shape,
        infer_type=quantized_conv_type,
        reference=quantized_conv_reference,
        kernels={DENSE: Kernel(quantized_conv_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Convolution of uint8 (or int8) NCHW/NCDHW data with int8 weights: int32 sums plus "
        "the int8 bias as it is; range MaxAbs(data) / 127 * MaxAbs(weight) / 127 * 2^31.",
        examples=(
            Example(((1, 2, 4, 5), (3, 2, 2, 2), (3,), (1,), (1,), (1,), (1,), (1,), (1,)),
                    {"kernel": (2, 2), "num_filter": 3}, in_dtypes=_I,
                    ints={0: (0, 256), 1: (-128, 128), 2: (-128, 128)}),
            Example(((2, 3, 5, 5), (4, 3, 3, 3), (1,), (1,), (1,), (1,)),
                    {"kernel": (3, 3), "num_filter": 4, "no_bias": True, "pad": (1, 1),
                     "stride": (2, 1), "dilate": (1, 2)},
                    in_dtypes=("int8", "int8") + _I[3:7], ints={0: (-128, 128), 1: (-128, 128)}),
            Example(((1, 2, 3, 4, 4), (2, 2, 2, 2, 2), (2,), (1,), (1,), (1,), (1,), (1,), (1,)),
                    {"kernel": (2, 2, 2), "num_filter": 2}, in_dtypes=_I,
                    ints={0: (0, 256), 1: (-128, 128), 2: (-128, 128)}),
        ),
        bad_params=({"num_filter": 2}, {"kernel": (2, 2)}),
    )
)
