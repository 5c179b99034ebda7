"""Convolution (forward and gradients) with several images per GEMM, for small outputs.

``convolution_lowering`` runs im2col and one GEMM per image: for a layer whose per-image output
``P = OD * OH * OW`` is small (late ResNet stages: 2x2 or 4x4 outputs of 256 or 512 filters)
each of those GEMMs has ``P`` columns and re-reads the whole weight, a memory-bound product
repeated once per image. These lowerings build the column matrix of a block of ``nb`` images
(``K x nb*P``), run one GEMM per group and block, and scatter the ``F x nb*P`` result into the
images' outputs (the backward gathers the output gradient the other way, then one GEMM for the
weight gradient and one for the column gradient per block, and col2im).

They take the same ``KernelCall`` and pointers as ``convolution_lowering`` /
``convolution_backward_lowering`` and return None where they do not apply (channel-last
layouts, float16, depthwise, one image, empty outputs) or do not pay (``FORWARD_MAX_P``,
``BACKWARD_MAX_P``, fewer than two images per block), so a caller can try them first and fall
back to the per-image kernels.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.conv.geometry import COL_CHUNK, _channel_last, _ncx, _pad3

if TYPE_CHECKING:
    from nnsym.ops.conv.conv import ConvolutionParams

# Largest per-image output (OD * OH * OW) batched. Measured with
# benchmarks/bench_conv_batched.py (float32, 8 images, 2 cores): the forward gains 2-2.6x at
# P = 4 (ResNet stage 4), 10-25% at P = 16..64 and 2-30% at P = 256, where a per-image GEMM
# already has enough columns; past it the scatter pass and a block's column matrix falling out
# of cache can cost more than the weight reads saved (3 -> 64 channels 3x3: 10% slower at
# P = 1024, 18% at 2304). The backward gained at every size up to P = 2304 (2-3x at P = 4,
# 5-70% beyond: one im2col and two GEMMs per block rather than per image) and lost 10% at
# P = 4096 with 3 -> 64 channels, where gathering the output gradient costs more than im2col.
FORWARD_MAX_P = 256
BACKWARD_MAX_P = 2304
# Elements of the block's buffers (column matrix plus the group's output / output-gradient
# block): the same bound as conv.py's im2col chunks.
BATCH_CHUNK = COL_CHUNK


def _geometry(p: ConvolutionParams, data: tuple[int, ...], out: tuple[int, ...], max_p: int
              ) -> tuple[list[int], int, int, int, int] | None:
    """(ia without NB, N, K, Fg, P), or None when the batched kernels do not apply."""
    layout = p.data_layout
    if _channel_last(layout):
        return None
    n, c, *xs = _ncx(data, layout)
    _, f, *osz = _ncx(out, layout)
    g = p.num_group
    if c == g == f:  # depthwise: a direct kernel of its own
        return None
    k = (c // g) * math.prod(p.kernel)
    pp = size(osz)
    if n < 2 or pp == 0 or k == 0 or pp > max_p:
        return None
    ia = [
        n, c, f, g, *_pad3(xs, 1), *_pad3(osz, 1), *_pad3(p.kernel, 1), *_pad3(p.strides, 1),
        *_pad3(p.pads, 0), *_pad3(p.dilates, 1),
    ]
    return ia, n, k, f // g, pp


def _block(n: int, k: int, fg: int, pp: int, chunk: int) -> int:
    """Images per block: as many as keep (K + Fg) * nb * P within ``chunk``, split evenly."""
    most = max(1, min(n, chunk // max(1, (k + fg) * pp)))
    blocks = -(-n // most)
    return -(-n // blocks)


def _workspace(k: int, fg: int, nb: int, pp: int, itemsize: int) -> int:
    return (((k * nb * pp + 15) // 16) * 16 + fg * nb * pp) * itemsize


def batched_forward_lowering(call: KernelCall, chunk: int = BATCH_CHUNK) -> Lowered | None:
    """Convolution's forward with ``nb`` images per GEMM; None where it does not apply or pay.
    Pointers as ``convolution_lowering``: [data, weight, (bias,) out, workspace]."""
    p: ConvolutionParams = call.params
    dt = call.in_dtypes[0].name
    if dt not in ("float32", "float64") or size(call.out_shapes[0]) == 0:
        return None
    geo = _geometry(p, call.in_shapes[0], call.out_shapes[0], FORWARD_MAX_P)
    if geo is None:
        return None
    ia, n, k, fg, pp = geo
    nb = _block(n, k, fg, pp, chunk)
    if nb < 2:
        return None
    spec = KernelSpec.make(
        "conv/conv_batched_fwd.c.j2", dtype=dt, req=call.req, bias=not p.no_bias
    )
    ws = _workspace(k, fg, nb, pp, np.dtype(dt).itemsize)
    return Lowered((Launch(spec, (*ia, nb), workspace=ws),))


def batched_backward_lowering(call: KernelCall, chunk: int = BATCH_CHUNK) -> Lowered | None:
    """Convolution's gradients with ``nb`` images per GEMM; None where it does not apply or pay.
    Pointers as ``convolution_backward_lowering``: [ograd, data, weight, data grad, weight grad,
    (bias grad), workspace]; each gradient's write mode from ``call.out_req`` ("null": not
    computed)."""
    p: ConvolutionParams = call.params
    dt = call.out_dtypes[0].name
    if dt not in ("float32", "float64"):
        return None
    g, data, _ = call.in_shapes
    geo = _geometry(p, data, g, BACKWARD_MAX_P)
    if geo is None:
        return None
    ia, n, k, fg, pp = geo
    nb = _block(n, k, fg, pp, chunk)
    if nb < 2:
        return None
    bias = not p.no_bias
    spec = KernelSpec.make(
        "conv/conv_batched_bwd.c.j2", dtype=dt, req_x=call.out_req(0), req_w=call.out_req(1),
        req_b=call.out_req(2) if bias else "null", bias=bias,
    )
    ws = _workspace(k, fg, nb, pp, np.dtype(dt).itemsize)
    return Lowered((Launch(spec, (*ia, nb), workspace=max(ws, 16)),))
