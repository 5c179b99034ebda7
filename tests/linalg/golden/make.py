"""MXNet 1.9.1 forward outputs and gradients of the linalg operators over their flag
combinations (trmm/trsm: transpose x rightside x lower; potrf/potri: lower; gemm: transposes
with axis=-3), float64. Run in the reference venv:
``~/mxref/bin/python tests/linalg/golden/make.py tests/linalg/golden/flags.npz``."""

import itertools
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd


def record(res, key, fn, inputs, head, **params):
    """Inputs, head, output and gradients of fn(*inputs, **params) under key."""
    arrs = [mx.nd.array(v, dtype="float64") for v in inputs]
    for a in arrs:
        a.attach_grad()
    with autograd.record():
        y = fn(*arrs, **params)
    y.backward(mx.nd.array(head, dtype="float64"))
    for i, (v, a) in enumerate(zip(inputs, arrs)):
        res[f"{key}_in{i}"] = v
        res[f"{key}_grad{i}"] = a.grad.asnumpy()
    res[f"{key}_head"] = head
    res[f"{key}_out"] = y.asnumpy()


def main():
    rng = np.random.default_rng(0)
    res = {}
    tri = rng.uniform(-2, 2, (2, 3, 3))
    i = np.arange(3)
    tri[..., i, i] = 1 + np.abs(tri).sum(-1)
    for op in ("trmm", "trsm"):
        for t, r, low in itertools.product((0, 1), repeat=3):
            b = rng.uniform(-2, 2, (2, 4, 3) if r else (2, 3, 4))
            record(res, f"{op}_{t}{r}{low}", getattr(mx.nd.linalg, op), [tri, b],
                   rng.standard_normal(b.shape), transpose=bool(t), rightside=bool(r),
                   lower=bool(low), alpha=1.5)
    x = rng.uniform(-2, 2, (2, 3, 3))
    spd = x @ np.swapaxes(x, -1, -2) + 3 * np.eye(3)
    for op, a in (("potrf", spd), ("potri", tri)):
        for low in (0, 1):
            record(res, f"{op}_{low}", getattr(mx.nd.linalg, op), [a],
                   rng.standard_normal(a.shape), lower=bool(low))
    for ta, tb in itertools.product((0, 1), repeat=2):
        a = rng.uniform(-1, 1, (4, 2, 3) if ta else (3, 2, 4))
        b = rng.uniform(-1, 1, (5, 2, 4) if tb else (4, 2, 5))
        c = rng.uniform(-1, 1, (3, 2, 5))
        record(res, f"gemm_{ta}{tb}", mx.nd.linalg.gemm, [a, b, c],
               rng.standard_normal((3, 2, 5)), transpose_a=bool(ta), transpose_b=bool(tb),
               axis=-3, alpha=0.7, beta=1.3)
    np.savez_compressed(sys.argv[1], **res)


if __name__ == "__main__":
    main()
