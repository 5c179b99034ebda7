"""quantize_asym: float32 data to uint8 with a scale and a shift (asymmetric quantization)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient

F32 = np.float32


@dataclass(frozen=True, kw_only=True)
class QuantizeAsymParams(Params):
    min_calib_range: float | None = field(default=None, doc="Calibrated minimum (float32).")
    max_calib_range: float | None = field(default=None, doc="Calibrated maximum (float32).")


def _calibrated(p: QuantizeAsymParams) -> bool:
    return p.min_calib_range is not None and p.max_calib_range is not None


def quantize_asym_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0] if ins[0] is not None else outs[0]
    return [data], [data, (1,), (1,)]


def quantize_asym_type(p: Params, ins: list, outs: list) -> tuple[list, list]:
    if ins[0] is not None and np.dtype(ins[0]) != np.float32:
        raise RuleError(f"data has dtype {np.dtype(ins[0]).name}; quantize_asym takes float32")
    f = np.dtype("float32")
    return [f], [np.dtype("uint8"), f, f]


def quantize_asym_scale_shift(lo: np.float32, hi: np.float32) -> tuple[np.float32, np.float32]:
    """scale = 255 / (hi - lo), shift = 255 - hi * scale, in float32."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = F32(F32(255) / F32(hi - lo))
        shift = F32(F32(255) - F32(hi * scale))
    return scale, shift


def quantize_asym_reference(p: QuantizeAsymParams, data: np.ndarray):
    x = data.astype(F32)
    if _calibrated(p):
        lo, hi = F32(p.min_calib_range), F32(p.max_calib_range)
    elif x.size:
        lo, hi = F32(x.min()), F32(x.max())
    else:
        lo = hi = F32(0)
    scale, shift = quantize_asym_scale_shift(lo, hi)
    with np.errstate(invalid="ignore", over="ignore"):
        t = np.rint((x * scale).astype(F32) + shift).astype(F32)
        t = np.where(np.isnan(t), F32(0), np.clip(t, 0, 255))
    return t.astype(np.uint8), np.array([scale], F32), np.array([shift], F32)


def quantize_asym_lowering(call: KernelCall) -> Lowered:
    dt = call.in_dtypes[0].name
    if dt != "float32":
        raise NoKernelError(f"quantize_asym quantizes float32 data, not {dt}")
    if call.req == "add":
        raise NoKernelError("quantize_asym writes its outputs; it cannot add to them")
    p: QuantizeAsymParams = call.params
    n = size(call.in_shapes[0])
    calib = _calibrated(p)
    fa = (float(p.min_calib_range), float(p.max_calib_range)) if calib else ()  # type: ignore[arg-type]
    rng = KernelSpec.make("quantization/qasym_range.c.j2", calib=calib)
    launches = [Launch(rng, (n,), fa, args=(0, 2, 3))]
    if n:
        spec = KernelSpec.make("quantization/qasym.c.j2")
        launches.append(Launch(spec, (n,), args=(0, 2, 3, 1)))
    return Lowered(tuple(launches))


QUANTIZE_ASYM = register(
    OpDef(
        name="_contrib_quantize_asym",
        params=QuantizeAsymParams,
        inputs=("data",),
        outputs=("output", "scale", "shift"),
        infer_shape=quantize_asym_shape,
        infer_type=quantize_asym_type,
        reference=quantize_asym_reference,
        kernels={DENSE: Kernel(quantize_asym_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Quantizes float32 data to uint8 as round(x * scale + shift), saturated, with "
        "scale = 255 / (max - min) and shift = 255 - max * scale over the calibrated range or "
        "the data's own.",
        examples=(
            Example(((2, 3, 4),), {}),
            Example(((3, 5),), {"min_calib_range": -1.0, "max_calib_range": 1.5}),
            Example(((1, 4, 6),), {"min_calib_range": 0.0, "max_calib_range": 1.0}),
        ),
        bad_params=({"min_calib_range": "x"},),
    )
)
