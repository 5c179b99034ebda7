"""Gradient compression: MXNet's 2bit quantisation with residual error feedback.

Each value of ``residual + grad`` at or above ``threshold`` is sent as ``+threshold``, at or
below ``-threshold`` as ``-threshold``, anything else as 0; what was not sent stays in the
residual for the next push. Codes are packed four to a byte (a transport sends those); the
local store quantises and dequantises in place of a send.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from nnsym.kvstore.errors import ValueMismatchError

_ZERO, _POS, _NEG = 0, 1, 2


class TwoBitCompression:
    """2bit compression state: the threshold and one residual per (key, source) pair."""

    type = "2bit"

    def __init__(self, threshold: float = 0.5):
        if not threshold > 0:
            raise ValueMismatchError(
                f"gradient compression: threshold must be greater than 0, got {threshold}")
        self.threshold = float(threshold)
        self._residual: dict[tuple[Any, int], np.ndarray] = {}

    def quantize(self, key: Any, source: int, grad: np.ndarray) -> np.ndarray:
        """Packed 2-bit codes (uint8, four per byte) for ``grad``; updates the residual."""
        r = self._residual.get((key, source))
        if r is None or r.shape != grad.shape or r.dtype != grad.dtype:
            r = np.zeros(grad.shape, grad.dtype)
            self._residual[(key, source)] = r
        r += grad
        t = r.dtype.type(self.threshold)
        pos, neg = r >= t, r <= -t
        r[pos] -= t
        r[neg] += t
        flat = np.where(pos, _POS, np.where(neg, _NEG, _ZERO)).astype(np.uint8).ravel()
        codes = np.concatenate([flat, np.zeros((-flat.size) % 4, np.uint8)]).reshape(-1, 4)
        packed: np.ndarray = (codes[:, 0] | codes[:, 1] << 2 | codes[:, 2] << 4
                              | codes[:, 3] << 6).astype(np.uint8)
        return packed

    def dequantize(self, packed: np.ndarray, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """The values that ``packed`` codes stand for, as an array of ``shape``."""
        n = int(np.prod(shape, dtype=np.int64))
        codes = np.stack([(packed >> s) & 3 for s in (0, 2, 4, 6)], axis=1).ravel()[:n]
        t = np.dtype(dtype).type(self.threshold)
        out = np.zeros(n, dtype)
        out[codes == _POS] = t
        out[codes == _NEG] = -t
        return out.reshape(shape)

    def residual(self, key: Any, source: int = 0) -> np.ndarray | None:
        """The residual kept for ``key``'s ``source``-th pushed value (None before a push)."""
        r = self._residual.get((key, source))
        return None if r is None else r.copy()


def make_compression(params: Mapping[str, Any]) -> TwoBitCompression:
    """The compression that ``{'type': '2bit', 'threshold': t}`` asks for (t defaults to 0.5)."""
    if not isinstance(params, Mapping):
        raise ValueMismatchError(
            f"gradient compression parameters must be a dict, not {type(params).__name__}")
    if "type" not in params:
        raise ValueMismatchError("gradient compression: the required parameter 'type' is missing")
    kind = str(params["type"])
    if kind != "2bit":
        raise ValueMismatchError(
            f"gradient compression: unknown type {kind!r}; only '2bit' is supported")
    unknown = sorted(set(params) - {"type", "threshold"})
    if unknown:
        raise ValueMismatchError(f"gradient compression '2bit': unknown parameters {unknown}")
    try:
        threshold = float(params.get("threshold", 0.5))
    except (TypeError, ValueError):
        raise ValueMismatchError(
            f"gradient compression: threshold must be a number, got {params['threshold']!r}"
        ) from None
    return TwoBitCompression(threshold)
