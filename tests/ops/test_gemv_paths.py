"""Matrix products with a single row or column run BLAS GEMV instead of GEMM (see the
prologue): every transpose combination, both float types, write and add, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd
from nnsym.ops import REGISTRY
from nnsym.runtime.imperative import run_op
from nnsym.testing import as_nd


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
    got = nd.dot(as_nd(a), as_nd(b), transpose_a=ta, transpose_b=tb).asnumpy()
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
    got = nd.FullyConnected(as_nd(x), as_nd(w), as_nd(b), num_hidden=20).asnumpy()
    np.testing.assert_allclose(got, x @ w.T + b, rtol=1e-5, atol=1e-5)


@pytest.fixture
def threads():
    """Restores the kernels' thread count after a test changes it."""
    from nnsym.codegen import compiler

    before = compiler.get_num_threads()
    yield compiler
    compiler.set_num_threads(before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("m", "k", "n"), [(1, 787, 515), (517, 301, 1), (1, 4096, 17)])
def test_large_products_split_over_threads(threads, dtype, m, k, n):
    """Products over at least 65536 elements split their rows over the worker pool: the same
    values with one thread and with several, bit for bit, and numpy's within rounding; write
    mode never reads the (NaN-filled) output, add mode accumulates into it."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype)  # rows dotted with a's rows: transpose_b
    want = a.astype(np.float64) @ b.astype(np.float64).T
    rtol = 1e-4 if dtype == "float32" else 1e-11
    got = {}
    for t in (1, 2, 3):
        threads.set_num_threads(t)
        out = nd.array(np.full(want.shape, np.nan, dtype), dtype=dtype)
        nd.dot(as_nd(a), as_nd(b), transpose_b=True, out=out)
        got[t] = out.asnumpy()
        np.testing.assert_allclose(got[t], want, rtol=rtol, atol=rtol * np.sqrt(k))
    assert np.array_equal(got[1], got[2]) and np.array_equal(got[1], got[3])
    start = rng.standard_normal(want.shape).astype(dtype)
    acc = run_op(REGISTRY["dot"], {"transpose_b": True}, [a, b], req="add",
                 outputs=[start.copy()])[0]
    np.testing.assert_allclose(acc, start + want, rtol=rtol, atol=rtol * np.sqrt(k))


def test_thread_count_is_validated(threads):
    from nnsym.errors import NNSymError

    with pytest.raises(NNSymError, match="positive"):
        threads.set_num_threads(0)
    assert threads.set_num_threads(2) == 2 and threads.get_num_threads() == 2
