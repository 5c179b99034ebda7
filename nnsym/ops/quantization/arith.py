"""quantized_elemwise_add and quantized_elemwise_mul: int8/uint8 operands with float32 ranges,
an int32 result (or int8/uint8 over a calibrated range, or float32 for mul)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS, maxabs
from nnsym.types import shape_str

F32 = np.float32
INPUTS = ("lhs", "rhs", "lhs_min", "lhs_max", "rhs_min", "rhs_max")
# MXNet 1.9.1's quantization ranges (quantization_utils.h): int8 127.5, uint8 255.5, int32 2^31
RANGE = {"int8": F32(127.5), "uint8": F32(255.5)}
INT32_RANGE = F32(2147483648.0)


@dataclass(frozen=True, kw_only=True)
class QuantizedElemwiseAddParams(Params):
    min_calib_range: float | None = field(default=None, doc="Calibrated output minimum.")
    max_calib_range: float | None = field(default=None, doc="Calibrated output maximum.")


@dataclass(frozen=True, kw_only=True)
class QuantizedElemwiseMulParams(QuantizedElemwiseAddParams):
    enable_float_output: bool = field(default=False, doc="Output float32 (one output).")


def _calibrated(p: QuantizedElemwiseAddParams) -> bool:
    return p.min_calib_range is not None and p.max_calib_range is not None



def _shape(op: str, n_out: int) -> Callable[[Params, list, list], tuple[list, list]]:
    def rule(p: Params, ins: list, outs: list) -> tuple[list, list]:
        lhs, rhs = ins[0], ins[1]
        if lhs is not None and rhs is not None and len(lhs) != len(rhs):
            raise RuleError(f"lhs {shape_str(lhs)} and rhs {shape_str(rhs)} differ; {op} does "
                            "not broadcast")
        data = merge_shape(merge_shape(lhs, rhs), outs[0])
        ranges = [merge_shape(s, (1,)) for s in ins[2:]]
        return [data, data, *ranges], [data, (1,), (1,)][:n_out]
    return rule


def _check_ranges(ins: list) -> None:
    for i, t in enumerate(ins[2:6], 2):
        if t is not None and np.dtype(t) != np.float32:
            raise RuleError(f"{INPUTS[i]} has dtype {np.dtype(t).name}; ranges are float32")


# ------------------------------------------------------------------- quantized_elemwise_add


def add_out_dtype(p: QuantizedElemwiseAddParams, dt: str) -> str:
    return dt if _calibrated(p) else "int32"


def quantized_elemwise_add_type(p: QuantizedElemwiseAddParams, ins: list, outs: list
                                ) -> tuple[list, list]:
    a, b = ins[0], ins[1]
    for name, t in (("lhs", a), ("rhs", b)):
        if t is not None and np.dtype(t).name not in RANGE:
            raise RuleError(f"{name} has dtype {np.dtype(t).name}; quantized_elemwise_add "
                            "takes int8 or uint8")
    if a is not None and b is not None and np.dtype(a) != np.dtype(b):
        raise RuleError(f"lhs is {np.dtype(a).name} and rhs {np.dtype(b).name}; nnsym's "
                        "quantized_elemwise_add takes operands of one dtype")
    _check_ranges(ins)
    dt = a if a is not None else b
    f = np.dtype("float32")
    out = None if dt is None else np.dtype(add_out_dtype(p, np.dtype(dt).name))
    return [dt, dt, f, f, f, f], [out, f, f]


def _add_scales(p: QuantizedElemwiseAddParams, dt: str, am: np.float32, bm: np.float32,
                odt: str) -> tuple[np.float32, np.float32, np.float32, np.float32]:
    k = RANGE[dt]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if _calibrated(p):
            lo, hi = F32(p.min_calib_range), F32(p.max_calib_range)
            ods = F32(RANGE[odt] / maxabs(lo, hi))
            s0 = F32(ods / F32(k / am))
            s1 = F32(ods / F32(k / bm))
            return s0, s1, lo, hi
        tot = F32(am + bm)
        den = F32(tot * k)
        s0 = F32(F32(am * INT32_RANGE) / den)
        s1 = F32(F32(bm * INT32_RANGE) / den)
        return s0, s1, F32(-tot), tot


def _saturate(v: np.ndarray, odt: str) -> np.ndarray:
    info = np.iinfo(odt)
    v = np.where(np.isnan(v), 0, v).astype(np.float64)
    out: np.ndarray = np.clip(v, info.min, info.max).astype(odt)
    return out


def quantized_elemwise_add_reference(p: QuantizedElemwiseAddParams, a: np.ndarray,
                                     b: np.ndarray, alo: np.ndarray, ahi: np.ndarray,
                                     blo: np.ndarray, bhi: np.ndarray):
    dt = a.dtype.name
    odt = add_out_dtype(p, dt)
    s0, s1, lo, hi = _add_scales(p, dt, maxabs(alo, ahi), maxabs(blo, bhi), odt)
    with np.errstate(invalid="ignore", over="ignore"):
        v = ((a.astype(F32) * s0).astype(F32) + (b.astype(F32) * s1).astype(F32)).astype(F32)
    out = _saturate(np.rint(v), odt)
    return out, np.array([lo], F32), np.array([hi], F32)


def _elem_lowering(call: KernelCall, op: str, allowed: tuple[str, ...]) -> Lowered:
    dt = call.in_dtypes[0].name
    if dt not in allowed or call.in_dtypes[1].name != dt:
        raise NoKernelError(f"quantized_elemwise_{op} has kernels for operands of one dtype in "
                            f"{allowed}, not {dt} and {call.in_dtypes[1].name}")
    if call.req == "add":
        raise NoKernelError(f"quantized_elemwise_{op} writes its outputs; it cannot add to them")
    p = call.params
    calib = _calibrated(p)
    fa = (float(p.min_calib_range), float(p.max_calib_range)) if calib else ()
    odt = call.out_dtypes[0].name
    spec = KernelSpec.make("quantization/qelem.c.j2", op=op, idtype=dt, odtype=odt,
                           k=str(RANGE[dt]), calib=calib, nout=len(call.out_dtypes))
    return Lowered((Launch(spec, (size(call.out_shapes[0]),), fa),))


QUANTIZED_ELEMWISE_ADD = register(
    OpDef(
        name="_contrib_quantized_elemwise_add",
        params=QuantizedElemwiseAddParams,
        inputs=INPUTS,
        outputs=RANGED_OUTPUTS,
        infer_shape=_shape("quantized_elemwise_add", 3),
        infer_type=quantized_elemwise_add_type,
        reference=quantized_elemwise_add_reference,
        kernels={DENSE: Kernel(lambda call: _elem_lowering(call, "add", ("int8", "uint8")))},
        differentiable=False,
        doc="Adds int8 (or uint8) operands rescaled to a common range: int32 over "
        "[-(MaxAbs(lhs) + MaxAbs(rhs)), +...], or the operands' type over a calibrated range "
        "(rounded to nearest even, saturated).",
        examples=(
            Example(((2, 3, 4), (2, 3, 4), (1,), (1,), (1,), (1,)), {},
                    in_dtypes=("int8", "int8", "float32", "float32", "float32", "float32"),
                    ints={0: (-128, 128), 1: (-128, 128)}),
            Example(((3, 5), (3, 5), (1,), (1,), (1,), (1,)),
                    {"min_calib_range": -2.0, "max_calib_range": 2.5},
                    in_dtypes=("int8", "int8", "float32", "float32", "float32", "float32"),
                    ints={0: (-128, 128), 1: (-128, 128)}),
            Example(((4, 3), (4, 3), (1,), (1,), (1,), (1,)), {},
                    in_dtypes=("uint8", "uint8", "float32", "float32", "float32", "float32"),
                    ints={0: (0, 256), 1: (0, 256)}),
        ),
        bad_params=({"min_calib_range": "x"}, {"enable_float_output": True}),
    )
)


# ------------------------------------------------------------------- quantized_elemwise_mul


def mul_out_dtype(p: QuantizedElemwiseMulParams) -> str:
    if p.enable_float_output:
        return "float32"
    return "int8" if _calibrated(p) else "int32"


def quantized_elemwise_mul_type(p: QuantizedElemwiseMulParams, ins: list, outs: list
                                ) -> tuple[list, list]:
    for name, t in (("lhs", ins[0]), ("rhs", ins[1])):
        if t is not None and np.dtype(t) != np.int8:
            raise RuleError(f"{name} has dtype {np.dtype(t).name}; quantized_elemwise_mul "
                            "takes int8")
    _check_ranges(ins)
    i8, f = np.dtype("int8"), np.dtype("float32")
    return [i8, i8, f, f, f, f], [np.dtype(mul_out_dtype(p)), f, f][:_mul_nout(p)]


def _mul_nout(p: QuantizedElemwiseMulParams) -> int:
    return 1 if p.enable_float_output else 3


def quantized_elemwise_mul_shape(p: QuantizedElemwiseMulParams, ins: list, outs: list
                                 ) -> tuple[list, list]:
    rule = _shape("quantized_elemwise_mul", _mul_nout(p))
    res: tuple[list, list] = rule(p, ins, outs)
    return res


def quantized_elemwise_mul_reference(p: QuantizedElemwiseMulParams, a: np.ndarray,
                                     b: np.ndarray, alo: np.ndarray, ahi: np.ndarray,
                                     blo: np.ndarray, bhi: np.ndarray):
    k = RANGE["int8"]
    ab = a.astype(np.int32) * b.astype(np.int32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ls, rs = F32(k / maxabs(alo, ahi)), F32(k / maxabs(blo, bhi))
        if p.enable_float_output:
            s = 1.0 / np.float64(ls) / np.float64(rs)
            return (ab.astype(np.float64) * s).astype(F32)
        if _calibrated(p):
            lo, hi = F32(p.min_calib_range), F32(p.max_calib_range)
            s32 = F32(F32(F32(k / maxabs(lo, hi)) / ls) / rs)
            v = (ab.astype(F32) * s32).astype(F32)
            # NOTE: MXNet casts float to int8 through int32, wrapping (not saturating)
            q = np.trunc(np.clip(np.where(np.isnan(v), 0, v).astype(np.float64), -2**31, 2**31 - 1))
            return (q.astype(np.int64).astype(np.int32).astype(np.int8), np.array([lo], F32),
                    np.array([hi], F32))
        one = F32(F32(maxabs(alo, ahi) / F32(127)) * F32(maxabs(blo, bhi) / F32(127)))
        hi = F32(one * INT32_RANGE)
    return ab, np.array([-hi], F32), np.array([hi], F32)


QUANTIZED_ELEMWISE_MUL = register(
    OpDef(
        name="_contrib_quantized_elemwise_mul",
        params=QuantizedElemwiseMulParams,
        inputs=INPUTS,
        outputs=lambda p: RANGED_OUTPUTS[:_mul_nout(p)],
        infer_shape=quantized_elemwise_mul_shape,
        infer_type=quantized_elemwise_mul_type,
        reference=quantized_elemwise_mul_reference,
        kernels={DENSE: Kernel(lambda call: _elem_lowering(call, "mul", ("int8",)))},
        grad=no_gradient,
        differentiable=False,
        doc="Multiplies int8 operands: the int32 products with range MaxAbs(lhs) / 127 * "
        "MaxAbs(rhs) / 127 * 2^31, int8 over a calibrated range, or float32.",
        examples=(
            Example(((2, 3, 4), (2, 3, 4), (1,), (1,), (1,), (1,)), {},
                    in_dtypes=("int8", "int8", "float32", "float32", "float32", "float32"),
                    ints={0: (-128, 128), 1: (-128, 128)}),
            Example(((3, 5), (3, 5), (1,), (1,), (1,), (1,)),
                    {"min_calib_range": -40.0, "max_calib_range": 40.0},
                    in_dtypes=("int8", "int8", "float32", "float32", "float32", "float32"),
                    ints={0: (-128, 128), 1: (-128, 128)}),
            Example(((4, 3), (4, 3), (1,), (1,), (1,), (1,)), {"enable_float_output": True},
                    in_dtypes=("int8", "int8", "float32", "float32", "float32", "float32"),
                    ints={0: (-128, 128), 1: (-128, 128)}),
        ),
        bad_params=({"enable_float_output": "maybe"},),
    )
)
