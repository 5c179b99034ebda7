"""quantize, quantize_v2, dequantize, requantize: float32 <-> int8/uint8 with float32 ranges.

The arithmetic follows what MXNet 1.9.1's pip build (oneDNN) computes where it runs; where that
build crashes or is inconsistent nnsym follows MXNet's reference CPU kernels (see
docs/differences-from-mxnet.md, "Quantization").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient

F32 = np.float32
QLIMITS = {"int8": (-128, 127), "uint8": (0, 255)}
RANGE_T = "quantization/qrange.c.j2"
ELEM_T = "quantization/quantize.c.j2"
OUTS3 = ("output0", "output1", "output2")  # MXNet's default names: no FListOutputNames
# The outputs of the quantized operators: the int8/uint8/int32 result and its float range
RANGED_OUTPUTS = ("output", "min_output", "max_output")


def maxabs(lo: np.ndarray | float, hi: np.ndarray | float) -> np.float32:
    """MaxAbs of a quantized range, as MXNet computes it: max(|min|, |max|) of the range
    inputs' first elements, in float32 (the whole family uses this one)."""
    a = float(abs(F32(np.asarray(lo).reshape(-1)[0])))
    b = float(abs(F32(np.asarray(hi).reshape(-1)[0])))
    m: np.float32 = np.float32(max(a, b))
    return m


def int8_product_type(op: str, no_bias: bool, ins: list) -> tuple[list, list]:
    """The dtype rule of the int8 products (quantized_fully_connected, quantized_conv): int8
    or uint8 data, int8 weight (and bias), float32 ranges; int32 output with a float32 range."""
    nd = 2 if no_bias else 3
    d = ins[0]
    if d is not None and np.dtype(d).name not in ("int8", "uint8"):
        raise RuleError(f"data has dtype {np.dtype(d).name}; {op} takes int8 or uint8")
    for i, name in list(enumerate(("weight", "bias"), 1))[: nd - 1]:
        if ins[i] is not None and np.dtype(ins[i]) != np.int8:
            raise RuleError(f"{name} has dtype {np.dtype(ins[i]).name}; it must be int8")
    for i in range(nd, len(ins)):
        if ins[i] is not None and np.dtype(ins[i]) != np.float32:
            raise RuleError(f"range input {i} has dtype {np.dtype(ins[i]).name}; ranges are "
                            "float32")
    i8, f = np.dtype("int8"), np.dtype("float32")
    return [d, *[i8] * (nd - 1), *[f] * (len(ins) - nd)], [np.dtype("int32"), f, f]


def _round_half_away(t: np.ndarray) -> np.ndarray:
    r: np.ndarray = np.where(t < 0, -np.floor(-t + F32(0.5)), np.floor(t + F32(0.5)))
    return r.astype(F32)


def _finish(r: np.ndarray, m: np.float32, out_type: str) -> np.ndarray:
    lo, hi = QLIMITS[out_type]
    r = np.clip(r, lo, hi)
    if m == 0:
        r = np.zeros_like(r)
    return r.astype(out_type)


def _scalar(v: float | np.floating) -> np.ndarray:
    return np.array([v], F32)


def _scalar_ranges(ins: list, n_data: int = 1) -> list:
    """Inputs after the data are (1,)-shaped ranges."""
    return [ins[0], *(merge_shape(s, (1,)) for s in ins[n_data:])]


def _range_type_check(ins: list, which: tuple[int, ...]) -> None:
    for i in which:
        if ins[i] is not None and np.dtype(ins[i]) != np.float32:
            raise RuleError(f"input {i} (a range) has dtype {np.dtype(ins[i]).name}; it must be "
                            "float32")


def _elem_launch(mode: str, idtype: str, odtype: str, k: str, req: str, n: int,
                 args: tuple[int, ...]) -> Launch:
    qlo, qhi = QLIMITS.get(odtype, (0, 0))
    spec = KernelSpec.make(ELEM_T, mode=mode, idtype=idtype, odtype=odtype, k=k, qlo=qlo,
                           qhi=qhi, req=req)
    return Launch(spec, (n,), args=args)


def _range_launch(src: str, sym: bool, req: str, n: int, args: tuple[int, ...],
                  fa: tuple[float, ...] = ()) -> Launch:
    return Launch(KernelSpec.make(RANGE_T, src=src, sym=sym, req=req), (n,), fa, args=args)


def _need_float32(call: KernelCall, op: str) -> None:
    dt = call.in_dtypes[0].name
    if dt != "float32":
        raise NoKernelError(f"{op} quantizes float32 data, not {dt}")


# ---------------------------------------------------------------------------------- quantize


@dataclass(frozen=True, kw_only=True)
class QuantizeParams(Params):
    out_type: str = field(default="uint8", choices=("int8", "uint8"), doc="Output data type.")


def quantize_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    new = _scalar_ranges(ins)
    return new, [new[0] if new[0] is not None else outs[0], (1,), (1,)]


def quantize_type(p: QuantizeParams, ins: list, outs: list) -> tuple[list, list]:
    if ins[0] is not None and np.dtype(ins[0]) != np.float32:
        raise RuleError(f"data has dtype {np.dtype(ins[0]).name}; quantize takes float32")
    _range_type_check(ins, (1, 2))
    f = np.dtype("float32")
    return [f, f, f], [np.dtype(p.out_type), f, f]


def quantize_reference(p: QuantizeParams, data: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    m = maxabs(lo, hi)
    x = data.astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        if p.out_type == "int8":
            t = x * (F32(127) / m)
            r = _round_half_away(t)
            return _finish(r, m, "int8"), _scalar(-m), _scalar(m)
        t = x * (F32(255) / m)
        r = np.floor(t + F32(0.5))
    return (_finish(r, m, "uint8"), np.asarray(lo, F32).reshape(1).copy(),
            np.asarray(hi, F32).reshape(1).copy())


def quantize_lowering(call: KernelCall) -> Lowered:
    _need_float32(call, "quantize")
    p: QuantizeParams = call.params
    n = size(call.in_shapes[0])
    int8 = p.out_type == "int8"
    launches = [_range_launch("inputs", int8, call.req, n, (1, 2, 4, 5))]
    if n:
        launches.append(_elem_launch("q_int8" if int8 else "q_uint8", "float32", p.out_type,
                                     "127.0" if int8 else "255.0", call.req, n, (0, 1, 2, 3)))
    return Lowered(tuple(launches))


QUANTIZE = register(
    OpDef(
        name="_contrib_quantize",
        params=QuantizeParams,
        inputs=("data", "min_range", "max_range"),
        outputs=OUTS3,
        infer_shape=quantize_shape,
        infer_type=quantize_type,
        reference=quantize_reference,
        kernels={DENSE: Kernel(quantize_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Quantizes float32 data to int8 (x * 127 / MaxAbs(range), rounded, clamped) or "
        "uint8 (x * 255 / MaxAbs(range), negatives to 0).",
        examples=(
            Example(((3, 5), (1,), (1,)), {"out_type": "int8"}),
            Example(((2, 3, 4), (1,), (1,)), {"out_type": "uint8"}),
            Example(((7,), (1,), (1,)), {}),
        ),
        bad_params=({"out_type": "int32"}, {"out_type": "auto"}),
    )
)


# ------------------------------------------------------------------------------- quantize_v2


@dataclass(frozen=True, kw_only=True)
class QuantizeV2Params(Params):
    out_type: str = field(
        default="int8", choices=("auto", "int8", "uint8"),
        doc="Output data type; auto: uint8 when min_calib_range >= 0, else int8.",
    )
    min_calib_range: float | None = field(default=None, doc="Calibrated minimum (float32).")
    max_calib_range: float | None = field(default=None, doc="Calibrated maximum (float32).")

    def __post_init__(self) -> None:
        if (self.min_calib_range is None) != (self.max_calib_range is None):
            raise ValueError("min_calib_range and max_calib_range are given together or not "
                             "at all")


def quantize_v2_out_type(p: QuantizeV2Params) -> str:
    if p.out_type != "auto":
        return p.out_type
    if p.min_calib_range is not None and p.min_calib_range >= 0:
        return "uint8"
    return "int8"


def quantize_v2_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    return [ins[0] if ins[0] is not None else outs[0]], [ins[0] or outs[0], (1,), (1,)]


def quantize_v2_type(p: QuantizeV2Params, ins: list, outs: list) -> tuple[list, list]:
    if ins[0] is not None and np.dtype(ins[0]) != np.float32:
        raise RuleError(f"data has dtype {np.dtype(ins[0]).name}; quantize_v2 takes float32 "
                        "(nnsym has no int8/uint8 pass-through)")
    f = np.dtype("float32")
    return [f], [np.dtype(quantize_v2_out_type(p)), f, f]


def quantize_v2_reference(p: QuantizeV2Params, data: np.ndarray):
    x = data.astype(F32)
    if p.min_calib_range is not None:
        lo, hi = F32(p.min_calib_range), F32(p.max_calib_range)
    elif x.size:
        lo, hi = F32(x.min()), F32(x.max())
    else:
        lo = hi = F32(0)
    m = F32(max(abs(lo), abs(hi)))
    ot = quantize_v2_out_type(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ot == "int8":
            r = np.rint(x * (F32(127.5) / m))
            return _finish(r, m, "int8"), _scalar(-m), _scalar(m)
        r = np.rint(x * (F32(255.5) / m))
    return _finish(r, m, "uint8"), _scalar(lo), _scalar(hi)


def quantize_v2_lowering(call: KernelCall) -> Lowered:
    _need_float32(call, "quantize_v2")
    p: QuantizeV2Params = call.params
    ot = quantize_v2_out_type(p)
    n = size(call.in_shapes[0])
    int8 = ot == "int8"
    if p.min_calib_range is not None and p.max_calib_range is not None:
        rng = _range_launch("fa", int8, call.req, n, (2, 3),
                            (float(p.min_calib_range), float(p.max_calib_range)))
    else:
        rng = _range_launch("data", int8, call.req, n, (0, 2, 3))
    launches = [rng]
    if n:
        if call.req == "add":
            raise NoKernelError("quantize_v2 writes its outputs; it cannot add to them")
        launches.append(_elem_launch("v2_int8" if int8 else "v2_uint8", "float32", ot,
                                     "127.5" if int8 else "255.5", "write", n, (0, 2, 3, 1)))
    return Lowered(tuple(launches))


QUANTIZE_V2 = register(
    OpDef(
        name="_contrib_quantize_v2",
        params=QuantizeV2Params,
        inputs=("data",),
        outputs=OUTS3,
        infer_shape=quantize_v2_shape,
        infer_type=quantize_v2_type,
        reference=quantize_v2_reference,
        kernels={DENSE: Kernel(quantize_v2_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Quantizes float32 data to int8/uint8 with a calibrated range, or the data's own "
        "min and max when none is given.",
        examples=(
            Example(((3, 5),), {}),
            Example(((2, 3, 4),), {"out_type": "uint8"}),
            Example(((4, 5),), {"min_calib_range": -1.0, "max_calib_range": 1.5}),
            Example(((4, 5),), {"out_type": "auto", "min_calib_range": 0.0,
                                "max_calib_range": 1.5}),
            Example(((6,),), {"out_type": "uint8", "min_calib_range": -0.5,
                              "max_calib_range": 1.0}),
        ),
        bad_params=({"out_type": "int32"}, {"min_calib_range": 0.0}),
    )
)


# -------------------------------------------------------------------------------- dequantize


@dataclass(frozen=True, kw_only=True)
class DequantizeParams(Params):
    out_type: str = field(default="float32", choices=("float32",), doc="Output data type.")


def dequantize_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    new = _scalar_ranges(ins)
    if new[0] is None:
        new[0] = outs[0]
    return new, [new[0]]


def dequantize_type(p: DequantizeParams, ins: list, outs: list) -> tuple[list, list]:
    if ins[0] is not None and np.dtype(ins[0]).name not in QLIMITS:
        raise RuleError(f"data has dtype {np.dtype(ins[0]).name}; dequantize takes int8 or "
                        "uint8")
    _range_type_check(ins, (1, 2))
    f = np.dtype("float32")
    return [ins[0], f, f], [f]


DEQ_K = {"int8": "127.5", "uint8": "255.5"}


def dequantize_reference(p: DequantizeParams, data: np.ndarray, lo: np.ndarray,
                         hi: np.ndarray) -> np.ndarray:
    m = maxabs(lo, hi)
    out: np.ndarray = data.astype(F32) * (m / F32(DEQ_K[data.dtype.name]))
    return out.astype(F32)


def dequantize_lowering(call: KernelCall) -> Lowered:
    dt = call.in_dtypes[0].name
    if dt not in DEQ_K:
        raise NoKernelError(f"dequantize takes int8 or uint8 data, not {dt}")
    n = size(call.in_shapes[0])
    if not n:
        return Lowered()
    return Lowered((_elem_launch("dq", dt, "float32", DEQ_K[dt], call.req, n, (0, 1, 2, 3)),))


DEQUANTIZE = register(
    OpDef(
        name="_contrib_dequantize",
        params=DequantizeParams,
        inputs=("data", "min_range", "max_range"),
        infer_shape=dequantize_shape,
        infer_type=dequantize_type,
        reference=dequantize_reference,
        kernels={DENSE: Kernel(dequantize_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Dequantizes int8 (q * MaxAbs(range) / 127.5) or uint8 (q * MaxAbs(range) / 255.5) "
        "data to float32, as MXNet 1.9.1's oneDNN build does.",
        examples=(
            Example(((3, 5), (1,), (1,)), {}, in_dtypes=("int8", "float32", "float32"),
                    ints={0: (-128, 128)}),
            Example(((2, 6), (1,), (1,)), {}, in_dtypes=("uint8", "float32", "float32"),
                    ints={0: (0, 256)}),
        ),
        bad_params=({"out_type": "float16"},),
    )
)


# -------------------------------------------------------------------------------- requantize


@dataclass(frozen=True, kw_only=True)
class RequantizeParams(QuantizeV2Params):
    pass


def requantize_type(p: RequantizeParams, ins: list, outs: list) -> tuple[list, list]:
    if ins[0] is not None and np.dtype(ins[0]) != np.int32:
        raise RuleError(f"data has dtype {np.dtype(ins[0]).name}; requantize takes int32")
    _range_type_check(ins, (1, 2))
    if quantize_v2_out_type(p) != "int8":
        raise RuleError("requantize to uint8 (out_type='uint8', or 'auto' with a non-negative "
                        "calibrated range) is not implemented in nnsym; use int8")
    f = np.dtype("float32")
    return [np.dtype("int32"), f, f], [np.dtype("int8"), f, f]


def requantize_reference(p: RequantizeParams, data: np.ndarray, lo: np.ndarray,
                         hi: np.ndarray):
    s_in = maxabs(lo, hi) / F32(2147483648.0)
    if p.min_calib_range is not None:
        r = F32(max(abs(F32(p.min_calib_range)), abs(F32(p.max_calib_range))))
    elif data.size:
        r = F32(max(abs(F32(data.min()) * s_in), abs(F32(data.max()) * s_in)))
    else:
        r = F32(0)
    v = data.astype(F32) * s_in
    with np.errstate(divide="ignore", invalid="ignore"):
        q = _round_half_away(v * (F32(127) / r))
    return _finish(q, r, "int8"), _scalar(-r), _scalar(r)


def requantize_lowering(call: KernelCall) -> Lowered:
    dt = call.in_dtypes[0].name
    if dt != "int32":
        raise NoKernelError(f"requantize takes int32 data, not {dt}")
    p: RequantizeParams = call.params
    n = size(call.in_shapes[0])
    if p.min_calib_range is not None and p.max_calib_range is not None:
        rng = _range_launch("fa", True, "write", n, (4, 5),
                            (float(p.min_calib_range), float(p.max_calib_range)))
    else:
        rng = _range_launch("int32", True, "write", n, (0, 1, 2, 4, 5))
    if call.req == "add":
        raise NoKernelError("requantize writes its outputs; it cannot add to them")
    launches = [rng]
    if n:
        launches.append(_elem_launch("rq", "int32", "int8", "127.0", "write", n,
                                     (0, 1, 2, 4, 5, 3)))
    return Lowered(tuple(launches))


REQUANTIZE = register(
    OpDef(
        name="_contrib_requantize",
        params=RequantizeParams,
        inputs=("data", "min_range", "max_range"),
        outputs=OUTS3,
        infer_shape=quantize_shape,
        infer_type=requantize_type,
        reference=requantize_reference,
        kernels={DENSE: Kernel(requantize_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Requantizes int32 data (range MaxAbs(min_range, max_range) over 2^31) to int8 over "
        "the calibrated range, or the data's own range when none is given.",
        examples=(
            Example(((3, 5), (1,), (1,)), {}, in_dtypes=("int32", "float32", "float32"),
                    ints={0: (-2**31, 2**31 - 1)}),
            Example(((4, 4), (1,), (1,)), {"min_calib_range": -0.5, "max_calib_range": 0.8},
                    in_dtypes=("int32", "float32", "float32"),
                    ints={0: (-2**31, 2**31 - 1)}),
        ),
        bad_params=({"out_type": "int32"}, {"max_calib_range": 1.0}),
    )
)

