"""Shapes, dtypes, storage types and dispatch modes, and their MXNet boundary forms."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from nnsym.errors import DTypeError, ShapeError

# A shape inside nnsym: ``None`` = unknown number of dimensions; a ``None`` dim = unknown size.
# MXNet's legacy boundary form uses ``()`` and ``0`` for those; see ``to_mx_shape``.
Dim = int | None
Shape = tuple[Dim, ...]

# MXNet's dims and element counts are int64 (dim_t / index_t); byte sizes must fit too.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class SType(enum.Enum):
    """Storage type; values are MXNet's ``__storage_type__`` flags."""

    DEFAULT = 0
    ROW_SPARSE = 1
    CSR = 2

    @property
    def label(self) -> str:
        return {0: "default", 1: "row_sparse", 2: "csr"}[self.value]

    @classmethod
    def parse(cls, v: SType | str | int) -> SType:
        if isinstance(v, SType):
            return v
        if isinstance(v, str):
            for s in cls:
                if s.label == v or str(s.value) == v:
                    return s
        elif isinstance(v, int):
            return cls(v)
        raise ValueError(f"unknown storage type {v!r}; expected default, row_sparse or csr")


class DispatchMode(enum.Enum):
    """How a node runs, decided by storage-type inference."""

    FCOMPUTE = "fcompute"
    FCOMPUTE_EX = "fcompute_ex"
    FALLBACK = "fcompute_fallback"
    VARIABLE = "variable"


# MXNet's mshadow type flags (``__dtype__`` and the .params format).
_FLAG_TO_NAME = {
    0: "float32",
    1: "float64",
    2: "float16",
    3: "uint8",
    4: "int32",
    5: "int8",
    6: "int64",
    7: "bool",
    8: "int16",
    9: "uint16",
    10: "uint32",
    11: "uint64",
}
_NAME_TO_FLAG = {v: k for k, v in _FLAG_TO_NAME.items()}


def dtype_of(v: Any) -> np.dtype:
    """A numpy dtype from a numpy/Python type, a name or MXNet's integer type flag."""
    if isinstance(v, np.dtype):
        dt = v
    elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        if int(v) not in _FLAG_TO_NAME:
            raise DTypeError(f"unknown MXNet dtype flag {v}")
        dt = np.dtype(_FLAG_TO_NAME[int(v)])
    elif isinstance(v, str) and v.lstrip("-").isdigit():
        return dtype_of(int(v))
    else:
        try:
            dt = np.dtype(v)
        except TypeError as e:
            raise DTypeError(f"unknown dtype {v!r}") from e
    if dt.name not in _NAME_TO_FLAG:
        raise DTypeError(
            f"dtype {dt.name} is not supported; supported: {', '.join(sorted(_NAME_TO_FLAG))}"
        )
    return dt


def dtype_flag(dt: np.dtype) -> int:
    return _NAME_TO_FLAG[np.dtype(dt).name]


def to_mx_shape(s: Shape | None) -> tuple[int, ...]:
    """MXNet's legacy form: unknown ndim -> ``()``, unknown dim -> ``0``."""
    if s is None:
        return ()
    return tuple(0 if d is None else d for d in s)


def from_mx_shape(s: Any) -> Shape | None:
    """Inverse of ``to_mx_shape``: ``()``/``None`` -> unknown, ``0``/-1 -> unknown dim."""
    if s is None:
        return None
    t = tuple(s)
    if not t:
        return None
    out = tuple(None if (d is None or int(d) <= 0) else int(d) for d in t)
    check_dims(out)
    return out


def check_dims(s: Shape | None) -> None:
    """Every dimension, and the element count, fit in int64 (MXNet's index type)."""
    if s is None:
        return
    big = [d for d in s if d is not None and d > INT64_MAX]
    if big:
        raise ShapeError(f"shape {shape_str(s)}: dimension {big[0]} does not fit in int64 "
                         f"(at most {INT64_MAX})")
    n = 1
    for d in s:
        n *= d or 1
    if n > INT64_MAX:
        raise ShapeError(f"shape {shape_str(s)}: {n} elements do not fit in int64")


def check_bytes(s: Shape | None, dtype: Any) -> None:
    """The byte size of a known shape of ``dtype`` fits in int64 (else no allocation can hold
    it, and kernels' byte offsets overflow)."""
    if s is None or any(d is None for d in s) or dtype is None:
        return
    n = 1
    for d in s:
        n *= d  # type: ignore[operator]
    nbytes = n * np.dtype(dtype).itemsize
    if nbytes > INT64_MAX:
        raise ShapeError(f"shape {shape_str(s)} of {np.dtype(dtype).name}: {n} elements, "
                         f"{nbytes} bytes, more than int64 can address")


def shape_known(s: Shape | None) -> bool:
    return s is not None and all(d is not None for d in s)


def shape_str(s: Shape | None) -> str:
    if s is None:
        return "?"
    inner = ", ".join("?" if d is None else str(d) for d in s)
    return f"({inner},)" if len(s) == 1 else f"({inner})"
