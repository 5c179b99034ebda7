"""Convolution with several images per GEMM (nnsym/ops/conv/conv.py's batched lowerings)
against the per-image kernels, forward and backward (data and weight gradients written), on the
ResNet-18 (8x3x64x64) layers of stages 1-4, a sweep of output sizes and larger outputs with few
channels, which set conv.FORWARD_MAX_P / BACKWARD_MAX_P. Each kernel is called
directly on prebound pointers (no runtime overhead); the batched lowerings are timed past their
thresholds too (the bounds lifted while lowering). Old and new alternate sample by sample, so
a burst of load on the shared machine hits both.

Usage: ``python benchmarks/bench_conv.py [--quick] [--no-resnet] [--sweep] [--large]
[--float64]``."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row

from nnsym.codegen import compiler
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops import REGISTRY
from nnsym.ops.conv import conv
from nnsym.ops.conv.conv import per_image_backward_lowering, per_image_lowering

FFI = compiler.FFI
CONV = REGISTRY["Convolution"]

# (name, N, C, H=W, F, kernel, stride, pad)
RESNET = [
    ("stage1 64x16x16 3x3", 8, 64, 16, 64, 3, 1, 1),
    ("stage2 128x8x8 3x3", 8, 128, 8, 128, 3, 1, 1),
    ("stage2 down 64x16x16 s2", 8, 64, 16, 128, 3, 2, 1),
    ("stage3 256x4x4 3x3", 8, 256, 4, 256, 3, 1, 1),
    ("stage3 down 128x8x8 s2", 8, 128, 8, 256, 3, 2, 1),
    ("stage4 512x2x2 3x3", 8, 512, 2, 512, 3, 1, 1),
    ("stage4 down 256x4x4 s2", 8, 256, 4, 512, 3, 2, 1),
    ("stage4 down 256x8x8 s2", 8, 256, 8, 512, 3, 2, 1),
    ("stage4 1x1 down 256x4x4 s2", 8, 256, 4, 512, 1, 2, 0),
]
# Output sizes around the threshold: the same layer at growing spatial size.
SWEEP = [(f"sweep C=F={c} {h}x{h}", 8, c, h, c, 3, 1, 1)
         for c in (64, 128, 256) for h in (4, 6, 8, 10, 12, 16)]
# Larger outputs (past the threshold): few channels, where several images still fit a block.
LARGE = [
    ("conv0 3x64x64 7x7 s2", 8, 3, 64, 64, 7, 2, 3),
    ("large C=3 F=64 64x64", 8, 3, 64, 64, 3, 1, 1),
    ("large C=8 F=16 64x64", 8, 8, 64, 16, 3, 1, 1),
    *[(f"large C=F={c} {h}x{h}", 8, c, h, c, 3, 1, 1)
      for c, hs in ((16, (16, 24, 32, 48)), (32, (20, 24, 32))) for h in hs],
]


def bind(lowered: Lowered, arrays: list[np.ndarray]) -> Callable[[], None]:
    """One call running every launch of ``lowered`` on ``arrays`` (inputs then outputs)."""
    funcs = compiler.functions([ln.spec for ln in lowered.launches])
    keep: list[Any] = []
    calls = []
    for ln, fn in zip(lowered.launches, funcs):
        mine = arrays if ln.args is None else [arrays[i] for i in ln.args]
        bufs = [FFI.from_buffer("char[]", a, require_writable=True) for a in mine]
        if ln.workspace:
            ws = np.empty(ln.workspace, np.uint8)
            keep.append(ws)
            bufs.append(FFI.from_buffer("char[]", ws, require_writable=True))
        p = FFI.new("void *[]", bufs)
        ia = FFI.new("int64_t[]", list(ln.ia) or [0])
        fa = FFI.new("double[]", list(ln.fa) or [0.0])
        keep += [bufs, p, ia, fa]
        calls.append((fn, p, ia, fa))

    def run() -> None:
        for fn, p, ia, fa in calls:
            fn(p, ia, fa)

    run.keep = keep  # type: ignore[attr-defined]
    return run


def layer(name: str, n: int, c: int, h: int, f: int, k: int, s: int, pd: int,
          samples: int) -> list[dict[str, Any]]:
    p, _ = CONV.parse_params({"kernel": (k, k), "num_filter": f, "stride": (s, s),
                              "pad": (pd, pd), "no_bias": True})
    oh = (h + 2 * pd - k) // s + 1
    dt = np.dtype("float64" if "--float64" in sys.argv else "float32")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, h)).astype(dt)
    w = rng.standard_normal((f, c, k, k)).astype(dt)
    g = rng.standard_normal((n, f, oh, oh)).astype(dt)
    fcall = KernelCall(p, (x.shape, w.shape), (dt, dt), ((n, f, oh, oh),), (dt,))
    bcall = KernelCall(p, (g.shape, x.shape, w.shape), (dt,) * 3, (x.shape, w.shape), (dt,) * 2)
    saved = conv.FORWARD_MAX_P, conv.FORWARD_WIDE_MAX_P, conv.BACKWARD_MAX_P
    conv.FORWARD_MAX_P = conv.FORWARD_WIDE_MAX_P = conv.BACKWARD_MAX_P = 1 << 30  # past them
    try:
        fnew, bnew = conv.batched_forward_lowering(fcall), \
            conv.batched_backward_lowering(bcall)
        nb = fnew.launches[0].ia[-1] if fnew is not None else 1
    finally:
        conv.FORWARD_MAX_P, conv.FORWARD_WIDE_MAX_P, conv.BACKWARD_MAX_P = saved
    if fnew is None or bnew is None:  # one image per block: nothing to batch
        print(f"# {name}: one image per block within the block bound, not batched")
        return []
    y_old, y_new = np.empty((n, f, oh, oh), dt), np.empty((n, f, oh, oh), dt)
    grads_old = [np.empty(x.shape, dt), np.empty(w.shape, dt)]
    grads_new = [np.empty(x.shape, dt), np.empty(w.shape, dt)]
    runs = {
        ("forward", "per-image"): bind(per_image_lowering(fcall), [x, w, y_old]),
        ("forward", "batched"): bind(fnew, [x, w, y_new]),
        ("backward", "per-image"): bind(per_image_backward_lowering(bcall),
                                        [g, x, w, *grads_old]),
        ("backward", "batched"): bind(bnew, [g, x, w, *grads_new]),
    }
    for fn in runs.values():
        fn()
    np.testing.assert_allclose(y_new, y_old, rtol=1e-4, atol=1e-4 * np.abs(y_old).max())
    for a, b in zip(grads_new, grads_old):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())
    extra = {"P": oh * oh, "K": c * k * k, "F": f, "nb": nb, "dtype": dt.name,
             "batched_by_default": [oh * oh <= saved[0], oh * oh <= saved[1]]}
    # Rounds alternating the peers, one ~20 ms sample each.
    times: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for _ in range(samples):
        for key, fn in runs.items():
            times[key].append(measure(fn, samples=1, min_sample=0.02, warmup=0.0)[0])
    return [row(f"{name} {what}", peer, (statistics.median(ts), min(ts)), **extra)
            for (what, peer), ts in times.items()]


def main() -> None:
    samples = 7 if "--quick" in sys.argv else 21
    print("#", environment(), "threads", compiler.get_num_threads())
    layers = ([] if "--no-resnet" in sys.argv else RESNET) \
        + (SWEEP if "--sweep" in sys.argv else []) + (LARGE if "--large" in sys.argv else [])
    results: list[dict[str, Any]] = []
    for spec in layers:
        results += layer(*spec, samples=samples)
    report(results)


if __name__ == "__main__":
    main()
