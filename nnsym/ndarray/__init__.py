"""``nnsym.nd``: NDArray, creation functions and one imperative function per operator."""

from __future__ import annotations

from typing import Any

from nnsym.ndarray.ndarray import NDArray, arange, array, empty, full, invoke, ones, zeros
from nnsym.ndarray.ops import populate as _populate

globals().update(_populate())


def __getattr__(name: str) -> Any:
    raise AttributeError(f"nnsym.nd has no operator or attribute {name!r}")


__all__ = ["NDArray", "arange", "array", "empty", "full", "invoke", "ones", "zeros"]
