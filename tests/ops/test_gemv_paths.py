"""Matrix products with a single row or column run BLAS GEMV instead of GEMM (see the
prologue): every transpose combination, both float types, write and add, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd
from nnsym.ops import REGISTRY
from nnsym.runtime.imperative import run_op


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize(("m", "k", "n"), [(1, 7, 5), (6, 7, 1), (1, 9, 1), (1, 1, 4)])
def test_single_row_or_column_products(dtype, ta, tb, m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    want = (a.T if ta else a) @ (b.T if tb else b)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    got = nd.dot(nd.array(a), nd.array(b), transpose_a=ta, transpose_b=tb).asnumpy()
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    start = rng.standard_normal(want.shape).astype(dtype)
    acc = run_op(REGISTRY["dot"], {"transpose_a": ta, "transpose_b": tb}, [a, b], req="add",
                 outputs=[start.copy()])[0]
    np.testing.assert_allclose(acc, start + want, rtol=rtol, atol=rtol)


def test_fully_connected_at_batch_one():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 30)).astype(np.float32)
    w = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    got = nd.FullyConnected(nd.array(x), nd.array(w), nd.array(b), num_hidden=20).asnumpy()
    np.testing.assert_allclose(got, x @ w.T + b, rtol=1e-5, atol=1e-5)
