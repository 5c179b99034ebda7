"""quantized_batch_norm: int8/uint8 data normalised with the moving statistics into int8 over
the calibrated output range, as MXNet 1.9.1's oneDNN kernel computes. Parameters and shape rule
are BatchNorm's own (taken from the registry: operator families do not import each other)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, get_op, merge_shape, register
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS

# NOTE: nnsym.ops imports the nn family (BatchNorm) before this one.
BATCH_NORM = get_op("BatchNorm")
F32 = np.float32
INPUTS = ("data", "gamma", "beta", "moving_mean", "moving_var", "min_data", "max_data")


def _need_calib(p: Any) -> None:
    if p.min_calib_range is None or p.max_calib_range is None:
        raise RuleError("quantized_batch_norm needs min_calib_range and max_calib_range (MXNet "
                        "supports no uncalibrated mode)")


def quantized_batch_norm_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    _need_calib(p)
    assert BATCH_NORM.infer_shape is not None
    new_ins, new_outs = BATCH_NORM.infer_shape(p, list(ins[:5]), [outs[0], None, None])
    return [*new_ins, merge_shape(ins[5], (1,)), merge_shape(ins[6], (1,))], \
        [new_outs[0], (1,), (1,)]


def quantized_batch_norm_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    if d is not None and np.dtype(d).name not in ("int8", "uint8"):
        raise RuleError(f"data has dtype {np.dtype(d).name}; quantized_batch_norm takes int8 or "
                        "uint8")
    for i in range(1, 7):
        if ins[i] is not None and np.dtype(ins[i]) != np.float32:
            raise RuleError(f"{INPUTS[i]} has dtype {np.dtype(ins[i]).name}; it must be float32")
    f = np.dtype("float32")
    return [d, *[f] * 6], [np.dtype("int8"), f, f]


def _axis(p: Any, ndim: int) -> int:
    ax: int = p.axis + ndim if p.axis < 0 else p.axis
    return ax


def quantized_batch_norm_reference(p: Any, data: np.ndarray, gamma: np.ndarray,
                                   beta: np.ndarray, mean: np.ndarray, var: np.ndarray,
                                   lo: np.ndarray, hi: np.ndarray):
    try:
        _need_calib(p)
    except RuleError as e:
        raise ValueError(str(e)) from None
    x = data.astype(F32)
    if data.dtype == np.uint8:  # oneDNN's reorder to int8 first
        x = np.clip(np.rint((x * F32(F32(127.5) / F32(255.5))).astype(F32)), -128, 127)
    ma = F32(max(abs(F32(lo.reshape(-1)[0])), abs(F32(hi.reshape(-1)[0]))))
    clo, chi = F32(p.min_calib_range), F32(p.max_calib_range)
    mo = F32(max(abs(clo), abs(chi)))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = (1.0 / np.sqrt(var.astype(np.float64) + p.eps)).astype(F32)
        w = (((gamma * inv).astype(F32) * ma).astype(F32) / mo).astype(F32)
        s = (((beta - ((mean * gamma).astype(F32) * inv).astype(F32)).astype(F32) * F32(127.5))
             .astype(F32) / mo).astype(F32)
        sm = (w / F32(np.sqrt(F32(1) + F32(p.eps)))).astype(F32)
        shape = [1] * data.ndim
        shape[_axis(p, data.ndim)] = -1
        q = ((sm.reshape(shape) * x).astype(F32) + s.reshape(shape)).astype(F32)
        q = np.clip(np.nan_to_num(np.rint(q), nan=0.0), -128, 127)
    return q.astype(np.int8), np.array([clo], F32), np.array([chi], F32)


def quantized_batch_norm_lowering(call: KernelCall) -> Lowered:
    p: Any = call.params
    dt = call.in_dtypes[0].name
    if dt not in ("int8", "uint8"):
        raise NoKernelError(f"quantized_batch_norm takes int8 or uint8 data, not {dt}")
    if call.req == "add":
        raise NoKernelError("quantized_batch_norm writes its outputs; it cannot add to them")
    shape = call.in_shapes[0]
    ax = _axis(p, len(shape))
    inner = size(shape[ax + 1:])
    spec = KernelSpec.make("quantization/qbn.c.j2", idtype=dt)
    fa = (float(p.eps), float(p.min_calib_range), float(p.max_calib_range))
    return Lowered((Launch(spec, (size(shape), shape[ax], inner), fa),))


QUANTIZED_BATCH_NORM = register(
    OpDef(
        name="_contrib_quantized_batch_norm",
        params=BATCH_NORM.params,
        inputs=INPUTS,
        aux=("moving_mean", "moving_var"),
        outputs=RANGED_OUTPUTS,
        infer_shape=quantized_batch_norm_shape,
        infer_type=quantized_batch_norm_type,
        reference=quantized_batch_norm_reference,
        kernels={DENSE: Kernel(quantized_batch_norm_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="BatchNorm of int8/uint8 data with the moving statistics (gamma always applied), "
        "int8 over the calibrated output range.",
        examples=(
            Example(((2, 3, 4, 4), (3,), (3,), (3,), (3,), (1,), (1,)),
                    {"min_calib_range": -3.0, "max_calib_range": 3.0}, low=0.1, high=2.0,
                    in_dtypes=("int8",) + ("float32",) * 6, ints={0: (-128, 128)}),
            Example(((2, 4, 5), (4,), (4,), (4,), (4,), (1,), (1,)),
                    {"min_calib_range": -1.0, "max_calib_range": 5.0, "fix_gamma": False},
                    low=0.1, high=2.0, in_dtypes=("uint8",) + ("float32",) * 6,
                    ints={0: (0, 256)}),
        ),
        bad_params=({"axis": "x"},),
    )
)
