"""quantized_fully_connected: int8/uint8 data times int8 weights, accumulated in int32, with the
int8 bias rescaled to the product's scale. The shape rule is FullyConnected's own (called
through the registry: operator families do not import each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, get_op, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS, int8_product_type, maxabs

F32 = np.float32
# MXNet 1.9.1's scales (kInt8Range, kUint8Range) and the levels of its output range (127, 255)
SCALE_RANGE = {"int8": F32(127.5), "uint8": F32(255.5)}
LEVELS = {"int8": F32(127), "uint8": F32(255)}


@dataclass(frozen=True, kw_only=True)
class QuantizedFullyConnectedParams(Params):
    num_hidden: int = field(lower=1, doc="Number of hidden units (output features).")
    no_bias: bool = field(default=False, doc="Whether to leave out the bias term.")
    flatten: bool = field(
        default=True, doc="Flatten all but the first axis of data (else use only the last)."
    )


def _fc(p: QuantizedFullyConnectedParams) -> tuple[OpDef, Params]:
    fc = get_op("FullyConnected")
    make: Any = fc.params
    return fc, make(num_hidden=p.num_hidden, no_bias=p.no_bias, flatten=p.flatten)


def quantized_fully_connected_inputs(p: QuantizedFullyConnectedParams) -> tuple[str, ...]:
    if p.no_bias:
        return ("data", "weight", "min_data", "max_data", "min_weight", "max_weight")
    return ("data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight",
            "min_bias", "max_bias")


def quantized_fully_connected_shape(p: QuantizedFullyConnectedParams, ins: list, outs: list
                                    ) -> tuple[list, list]:
    nd = 2 if p.no_bias else 3
    fc, fp = _fc(p)
    assert fc.infer_shape is not None
    new_ins, new_outs = fc.infer_shape(fp, list(ins[:nd]), [outs[0]])
    ranges = [merge_shape(s, (1,)) for s in ins[nd:]]
    return [*new_ins, *ranges], [new_outs[0], (1,), (1,)]


def quantized_fully_connected_type(p: QuantizedFullyConnectedParams, ins: list, outs: list
                                   ) -> tuple[list, list]:
    return int8_product_type("quantized_fully_connected", p.no_bias, ins)


def quantized_fully_connected_reference(p: QuantizedFullyConnectedParams, *ins: np.ndarray):
    data, weight = ins[0], ins[1]
    dt = data.dtype.name
    if p.no_bias:
        dlo, dhi, wlo, whi = ins[2:6]
    else:
        bias, dlo, dhi, wlo, whi, blo, bhi = ins[2:9]
    x = data.reshape(data.shape[0], -1) if p.flatten else data
    acc = x.astype(np.int64) @ weight.astype(np.int64).T
    dm, wm = maxabs(dlo, dhi), maxabs(wlo, whi)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if not p.no_bias:
            ds = F32(SCALE_RANGE[dt] / dm)
            ws = F32(SCALE_RANGE["int8"] / wm)
            r = F32(F32(F32(ds * ws) * maxabs(blo, bhi)) / SCALE_RANGE["int8"])
            b = (bias.astype(F32) * r).astype(F32)
            b = np.trunc(np.clip(np.where(np.isnan(b), 0, b).astype(np.float64), -2**31,
                                 2**31 - 1))
            acc = acc + b.astype(np.int64).reshape(-1)
        one = F32(F32(dm / LEVELS[dt]) * F32(wm / LEVELS["int8"]))
        hi = F32(one * F32(2147483648.0))
    out = acc.astype(np.int32)  # NOTE: int32 accumulation wraps
    return out, np.array([-hi], F32), np.array([hi], F32)


def quantized_fully_connected_lowering(call: KernelCall) -> Lowered:
    p: QuantizedFullyConnectedParams = call.params
    dt = call.in_dtypes[0].name
    if dt not in SCALE_RANGE:
        raise NoKernelError(f"quantized_fully_connected takes int8 or uint8 data, not {dt}")
    if call.req == "add":
        raise NoKernelError("quantized_fully_connected writes its outputs; it cannot add to "
                            "them")
    k = call.in_shapes[1][1]
    n = p.num_hidden
    m = size(call.out_shapes[0]) // n
    spec = KernelSpec.make("quantization/qfc.c.j2", idtype=dt, bias=not p.no_bias,
                           sr=str(SCALE_RANGE[dt]), lv=str(LEVELS[dt]))
    return Lowered((Launch(spec, (m, k, n)),))


_I = ("int8", "int8", "int8", "float32", "float32", "float32", "float32", "float32", "float32")
_R = {0: (-128, 128), 1: (-128, 128), 2: (-128, 128)}

QUANTIZED_FULLY_CONNECTED = register(
    OpDef(
        name="_contrib_quantized_fully_connected",
        params=QuantizedFullyConnectedParams,
        inputs=quantized_fully_connected_inputs,
        outputs=RANGED_OUTPUTS,
        infer_shape=quantized_fully_connected_shape,
        infer_type=quantized_fully_connected_type,
        reference=quantized_fully_connected_reference,
        kernels={DENSE: Kernel(quantized_fully_connected_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="FullyConnected over int8 (or uint8) data and int8 weights: int32 products plus "
        "the bias rescaled by data_scale * weight_scale * MaxAbs(bias range) / 127.5 "
        "(truncated); range MaxAbs(data) / 127 * MaxAbs(weight) / 127 * 2^31 (255 for uint8).",
        examples=(
            Example(((2, 5), (3, 5), (3,), (1,), (1,), (1,), (1,), (1,), (1,)),
                    {"num_hidden": 3}, in_dtypes=_I, ints=_R),
            # NOTE: no no_bias example here: the MXNet fixture maker passes inputs
            # positionally, and MXNet's creator then feeds min_data into bias (tests/quantization
            # covers no_bias against MXNet with named inputs)
            Example(((2, 3, 4), (6, 12), (6,), (1,), (1,), (1,), (1,), (1,), (1,)),
                    {"num_hidden": 6}, in_dtypes=("uint8",) + _I[1:],
                    ints={0: (0, 256), 1: (-128, 128), 2: (-128, 128)}),
            Example(((2, 3, 4), (5, 4), (5,), (1,), (1,), (1,), (1,), (1,), (1,)),
                    {"num_hidden": 5, "flatten": False}, in_dtypes=_I, ints=_R),
        ),
        bad_params=({}, {"num_hidden": 0}),
    )
)
