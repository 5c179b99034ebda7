"""Layout and geometry helpers shared by the convolution family's lowerings."""

from __future__ import annotations


def _channel_last(layout: str) -> bool:
    return layout[1] != "C"


# Elements of one im2col chunk (the column matrix of some output rows): bounds the workspace
# of large images; measured as fast as whole images (3x3, 64 channels, 56x56), while chunks
# of 256K elements were 30% slower (more, smaller GEMM calls).
COL_CHUNK = 1 << 20


def _pad3(t: tuple[int, ...] | list[int], fill: int) -> list[int]:
    return [fill] * (3 - len(t)) + [int(v) for v in t]


def _ncx(shape: tuple[int, ...], layout: str) -> list[int]:
    """A known shape in ``layout`` -> canonical ``[N, C, *spatial]``."""
    s = [int(d) for d in shape]
    return [s[0], s[-1], *s[1:-1]] if _channel_last(layout) else s
