"""Generated kernels against numpy, side by side: W3 (unfused elementwise chain on 16M float32),
dense dot 1024^3, and the per-call overhead of a 10-element elementwise call.

Usage: ``python benchmarks/bench_kernels.py`` (add ``--quick`` for fewer samples)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row

from nnsym import nd


def main() -> None:
    samples = 5 if "--quick" in sys.argv else 10
    rng = np.random.default_rng(0)
    results = []
    print("#", environment())

    # W3: y = relu(a*x*x + b*x + c) * 0.5 + tanh(x), unfused
    x = rng.standard_normal(16_777_216).astype(np.float32)
    xa = nd.array(x)
    a, b, c = 1.5, -0.5, 0.25

    def w3_nnsym():
        q = nd.contrib.quadratic(xa, a=a, b=b, c=c)
        return nd.relu(q) * 0.5 + nd.tanh(xa)

    def w3_numpy():
        return np.maximum(a * x * x + b * x + c, 0) * 0.5 + np.tanh(x)

    np.testing.assert_allclose(w3_nnsym().asnumpy(), w3_numpy(), rtol=2e-5, atol=1e-5)
    results.append(row("W3 unfused (16M f32)", "nnsym nd", measure(w3_nnsym, samples=samples)))
    results.append(row("W3 unfused (16M f32)", "numpy", measure(w3_numpy, samples=samples)))

    # dense dot 1024^3
    for dt in ("float32", "float64"):
        p = rng.standard_normal((1024, 1024)).astype(dt)
        q = rng.standard_normal((1024, 1024)).astype(dt)
        pa, qa = nd.array(p), nd.array(q)
        out = np.empty((1024, 1024), dt)
        np.testing.assert_allclose(nd.dot(pa, qa).asnumpy(), p @ q, rtol=1e-3, atol=1e-3)
        t_nn = measure(lambda pa=pa, qa=qa: nd.dot(pa, qa), samples=samples)
        t_np = measure(lambda p=p, q=q, out=out: np.matmul(p, q, out=out), samples=samples)
        t_np2 = measure(lambda p=p, q=q: np.matmul(p, q), samples=samples)
        w = f"dot 1024^3 {dt}"
        flops = 2 * 1024**3
        results.append(row(w, "nnsym nd.dot", t_nn, gflops=flops / t_nn[0] / 1e9))
        results.append(row(w, "numpy matmul(out=)", t_np, gflops=flops / t_np[0] / 1e9))
        results.append(row(w, "numpy matmul", t_np2, gflops=flops / t_np2[0] / 1e9))

    # Convolution, a ResNet-like 3x3 layer: (8, 64, 32, 32) * (64, 64, 3, 3), pad 1
    xc = rng.standard_normal((8, 64, 32, 32)).astype(np.float32)
    wc = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    bc = rng.standard_normal(64).astype(np.float32)
    xca, wca, bca = nd.array(xc), nd.array(wc), nd.array(bc)

    def conv_nnsym():
        return nd.Convolution(xca, wca, bca, kernel=(3, 3), pad=(1, 1), num_filter=64)

    def conv_numpy():  # im2col by sliding windows, then one tensordot (BLAS)
        xp = np.pad(xc, ((0, 0), (0, 0), (1, 1), (1, 1)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
        y = np.tensordot(win, wc, axes=([1, 4, 5], [1, 2, 3]))
        return np.ascontiguousarray(y.transpose(0, 3, 1, 2)) + bc[:, None, None]

    np.testing.assert_allclose(conv_nnsym().asnumpy(), conv_numpy(), rtol=1e-3, atol=1e-3)
    flops = 2 * 8 * 64 * 64 * 9 * 32 * 32
    w = "conv3x3 (8,64,32,32) f32"
    t_c = measure(conv_nnsym, samples=samples)
    results.append(row(w, "nnsym nd.Convolution", t_c, gflops=flops / t_c[0] / 1e9))
    t_c = measure(conv_numpy, samples=samples)
    results.append(row(w, "numpy im2col+tensordot", t_c, gflops=flops / t_c[0] / 1e9))

    # per-call overhead, 10 elements
    s = rng.standard_normal(10).astype(np.float32)
    sa = nd.array(s)
    results.append(row("per-call tanh (10 f32)", "nnsym nd.tanh",
                        measure(lambda: nd.tanh(sa), samples=samples)))
    results.append(row("per-call tanh (10 f32)", "numpy np.tanh",
                        measure(lambda: np.tanh(s), samples=samples)))
    t = rng.standard_normal(10).astype(np.float32)
    ta = nd.array(t)
    results.append(row("per-call add (10 f32)", "nnsym nd.elemwise_add",
                        measure(lambda: nd.elemwise_add(sa, ta), samples=samples)))
    results.append(row("per-call add (10 f32)", "numpy np.add",
                        measure(lambda: np.add(s, t), samples=samples)))
    report(results)


if __name__ == "__main__":
    main()
