"""Shared helpers of the CUDA tests: inputs for a kernel variant, running its C kernel, bitwise
and ulp comparisons."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.devtools.cuda.codegen import Variant

# Elements of the unary and backward test launches (more than 3 x 32 threads: every grid-stride
# loop runs two or three times).
N = 200
GRID, BLOCK = 3, 32

_FLOAT_SPECIALS = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 2.5, -2.5, np.inf, -np.inf,
                   np.nan, 1e-3, 20.0, -20.0, 0.1)


def launch_shape(v: Variant) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Pointer shapes and ``ia`` of the test launch: unary and backward kernels take only n,
    so they run on N elements; binary kernels keep the shapes their lowering recorded."""
    if v.family == "binary":
        return v.ptr_shapes, v.ia
    return tuple((N,) for _ in v.ptr_shapes), (N,)


def _values(rng: np.random.Generator, dt: np.dtype, shape: tuple[int, ...],
            shift: int, nonzero: bool = False) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    if nonzero and dt.kind in "iub":
        a = rng.integers(1, 2 if dt.kind == "b" else 4, n)
    elif dt.kind == "f":
        a = rng.uniform(-3.0, 3.0, n)
        for k, s in enumerate(_FLOAT_SPECIALS):
            a[(k * 3 + shift) % n] = s
    elif dt.kind == "b":
        a = rng.integers(0, 2, n)
    elif dt.kind == "u":
        a = rng.integers(0, 4, n)
        a[shift % n] = 0
    else:  # small signed values: results stay in range (no undefined conversions)
        a = rng.integers(-3, 4, n)
        a[shift % n] = 0
        a[(shift + 1) % n] = -1
    return np.asarray(a).astype(dt).reshape(shape)


def make_arrays(v: Variant, seed: int = 0) -> list[np.ndarray]:
    """Inputs (random, with special values) then the output (prefilled: read by req=add).

    Integer inputs of backward kernels are positive: their derivative expressions divide by
    x, 1 + x or 2 * y unguarded (``g / x``), which traps (SIGFPE) on 0 in C and CUDA alike."""
    shapes, _ = launch_shape(v)
    rng = np.random.default_rng(zlib.crc32(v.name.encode()) + seed)
    out = []
    for k, (shape, dt) in enumerate(zip(shapes, v.ptr_dtypes)):
        nonzero = v.family == "backward" and k < len(shapes) - 1
        out.append(_values(rng, np.dtype(dt), shape, 5 * k, nonzero))
    return out


def run_c(func: Any, ffi: Any, arrays: Sequence[np.ndarray], ia: Sequence[int],
          fa: Sequence[float]) -> None:
    """Call a C kernel ``void f(void *const *p, const int64_t *ia, const double *fa)``."""
    p = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in arrays])
    func(p, ffi.new("int64_t[]", list(ia) or [0]), ffi.new("double[]", list(fa) or [0.0]))


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between two float arrays (NaN/NaN: 0, NaN/number:
    huge); integer arrays: the absolute difference."""
    if a.dtype.kind != "f":
        return np.abs(a.astype(np.int64) - b.astype(np.int64))
    itype = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    mask = np.int64(2 ** (8 * a.dtype.itemsize - 1) - 1)

    def line(x: np.ndarray) -> np.ndarray:  # sign-magnitude bits -> a monotonic integer line
        bits = x.view(itype).astype(np.int64)
        mag = bits & mask
        return np.where(bits < 0, -mag, mag)

    with np.errstate(over="ignore"):
        d = np.abs(line(a) - line(b))
    both_nan = np.isnan(a) & np.isnan(b)
    one_nan = np.isnan(a) ^ np.isnan(b)
    d = np.where(both_nan, 0, d)
    return np.asarray(np.where(one_nan, np.iinfo(np.int64).max, d))


def calls_any(expr: str, names: Sequence[str]) -> bool:
    """Whether a scalar expression calls one of the named functions."""
    return any(re.search(rf"\b{re.escape(n)}\s*\(", expr) for n in names)


# Math functions whose CUDA (libdevice) and glibc results may differ in the last bits: results
# of expressions calling them are compared with a tolerance on a device. The others (sqrt, fabs,
# floor, ceil, round, trunc, fmin, fmax, copysign, fmod...) are exact on both.
INEXACT_MATH = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "cbrt", "sin", "cos",
                "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                "erf", "erfc", "tgamma", "lgamma", "pow", "atan2", "hypot", "nnsym_erfinv")


# Integer (or bool: uint8_t) results computed in floating point: where the float is out of the
# target type's range, or NaN, the conversion is undefined in C and C++. x86 code wraps it
# through int32 (or gives INT_MIN), CUDA saturates it (NaN: 0), and an expression may go on
# computing with the converted value (clip's bounds, power's gradient, add-mode stores). On a
# device these integer outputs are not compared with C; the kernels' float outputs are
# (docs/gpu.md, "Tolerances"). A kernel is in this class when it calls a math function
# (INEXACT_MATH) or its name matches below: the float-math kernels without such a call that an
# H200 run showed differing (rsqrt: sqrt; softmax's, SVMOutput's and the regression outputs'
# gradients; fft; cumsum's gradient into bool/uint8; image colour jitter in int32; clip).
UNDEFINED_CONVERSIONS = re.compile(
    r"nnk_(backward_)?(broadcast_)?power_|nnk_rsqrt_|nnk_clip_|nnk_erfinv_"
    r"|nnk_backward_(LinearRegression|MAERegression|Softmax|SVM)Output_"
    r"|nnk_(backward_)?(log_)?softmax_|nnk_backward_SoftmaxActivation_"
    r"|nnk_contrib_i?fft_|nnk_backward_np_cumsum_|nnk_image_random_(hue|color_jitter)_")


def undefined_conversion(name: str, out: np.ndarray, float_math: bool = False) -> bool:
    """Whether a kernel's output is an integer/bool result of floating-point math, exempt from
    the device comparison (:data:`UNDEFINED_CONVERSIONS`); ``float_math``: the kernel calls
    a math function."""
    return out.dtype.kind in "iub" and (
        float_math or UNDEFINED_CONVERSIONS.match(name) is not None)


def close(mine: np.ndarray, theirs: np.ndarray, scale: float = 1.0) -> bool:
    """Within a few ulp of the computing type (NaN equal to NaN); integer results computed in
    double and truncated may be one off at an integer boundary."""
    if mine.dtype.kind != "f":
        return bool(np.all(np.abs(mine.astype(np.int64) - theirs.astype(np.int64)) <= 1))
    rtol, atol = {np.dtype(np.float16): (2e-3, 1e-3), np.dtype(np.float32): (1e-5, 1e-6),
                  np.dtype(np.float64): (1e-12, 1e-14)}[mine.dtype]
    return bool(np.all(np.isclose(mine, theirs, rtol=rtol * scale, atol=atol * scale,
                                  equal_nan=True)))


def same_values(mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Bitwise equal except NaN payloads and signs (a device writes its canonical NaN)."""
    if mine.dtype.kind != "f":
        return same_bits(mine, theirs)
    nan_m, nan_t = np.isnan(mine), np.isnan(theirs)
    if not np.array_equal(nan_m, nan_t):
        return False
    itype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[mine.dtype.itemsize]
    return bool(np.all((mine.view(itype) == theirs.view(itype)) | nan_m))
