"""The optimizer update kernels (nnsym.ops.optim.kernels) against independent numpy versions of
MXNet 1.9.1's formulas (computed in the array's dtype), dense and row_sparse gradients, lazy
and standard updates (which rows change), clipping, nnz = 0, and the RowSparseNDArray tutorial's
sgd_mom example."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnsym.codegen import compiler
from nnsym.ops.optim import kernels as optim

DTYPES = ("float32", "float64")
OPS = ("sgd", "sgd_mom", "adam", "adagrad")
SETTINGS = settings(max_examples=30, deadline=None)
NSTATES = {"sgd": 0, "sgd_mom": 1, "adam": 2, "adagrad": 1}


def clip(x: np.ndarray, c: Any) -> np.ndarray:
    return x if c < 0 else np.maximum(np.minimum(x, c), -c)


def ref_update(op: str, w: np.ndarray, g: np.ndarray, states: list[np.ndarray],
               p: dict[str, float]) -> None:
    """In place on w and states (rows given by the caller), every scalar in w's dtype."""
    t = w.dtype.type
    lr, wd, rs, c = t(p["lr"]), t(p["wd"]), t(p["rescale_grad"]), t(p["clip_gradient"])
    if op == "sgd":
        w[...] = (t(1) - lr * wd) * w - lr * clip(rs * g, c)
    elif op == "sgd_mom":
        (m,) = states
        m[...] = t(p["momentum"]) * m - (lr * wd) * w - lr * clip(rs * g, c)
        w[...] = w + m
    elif op == "adam":
        m, v = states
        b1, b2, eps = t(p["beta1"]), t(p["beta2"]), t(p["epsilon"])
        gg = clip(rs * g + wd * w, c)
        m[...] = b1 * m + (t(1) - b1) * gg
        v[...] = b2 * v + (t(1) - b2) * (gg * gg)
        w[...] = w - lr * m / (np.sqrt(v) + eps)
    else:
        (h,) = states
        gg = clip(rs * g, c)
        h[...] = h + gg * gg
        w[...] = w + (gg / np.sqrt(h + t(p["epsilon"])) + w * wd) * (-lr)


def params(op: str, wd: float, clip_gradient: float) -> dict[str, float]:
    p = {"lr": 0.05, "wd": wd, "rescale_grad": 0.7, "clip_gradient": clip_gradient}
    if op == "sgd_mom":
        p["momentum"] = 0.9
    if op == "adam":
        p.update(beta1=0.9, beta2=0.99, epsilon=1e-6)
    if op == "adagrad":
        p["epsilon"] = 1e-6
    return p


def call(op: str, sparse: bool, w: np.ndarray, g: np.ndarray, idx: np.ndarray | None,
         states: list[np.ndarray], p: dict[str, float], lazy: bool = True) -> None:
    fn = getattr(optim, f"{op}_update_rsp" if sparse else f"{op}_update")
    args: list[Any] = [w, g] + ([idx] if sparse else []) + states
    kw = dict(p)
    if sparse and op != "adagrad":
        kw["lazy_update"] = lazy
    fn(*args, **kw)


def tol(dtype: str) -> dict[str, float]:
    return {"rtol": 4e-6, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-13, "atol": 1e-14}


def make(rng: np.random.Generator, op: str, shape: tuple[int, ...], dtype: str,
         ) -> tuple[np.ndarray, list[np.ndarray]]:
    w = rng.standard_normal(shape).astype(dtype)
    states = [rng.standard_normal(shape).astype(dtype) for _ in range(NSTATES[op])]
    if op in ("adam", "adagrad"):
        states[-1] = np.abs(states[-1])  # variance / history are non-negative
    return w, states


shapes = st.tuples(st.integers(0, 12), st.sampled_from([(), (1,), (5,), (2, 3), (70,)]))


@SETTINGS
@given(st.sampled_from(OPS), st.sampled_from(DTYPES), shapes,
       st.sampled_from([0.0, 0.01]), st.sampled_from([-1.0, 0.0, 0.5]), st.integers(0, 2**31))
def test_dense_update(op, dtype, shape, wd, clip_gradient, seed):
    rng = np.random.default_rng(seed)
    full = (shape[0], *shape[1])
    w, states = make(rng, op, full, dtype)
    g = (rng.standard_normal(full) * 3).astype(dtype)
    p = params(op, wd, clip_gradient)
    w_ref, s_ref = w.copy(), [s.copy() for s in states]
    ref_update(op, w_ref, g, s_ref, p)
    call(op, False, w, g, None, states, p)
    np.testing.assert_allclose(w, w_ref, **tol(dtype))
    for s, r in zip(states, s_ref):
        np.testing.assert_allclose(s, r, **tol(dtype))


@SETTINGS
@given(st.sampled_from(OPS), st.sampled_from(DTYPES), shapes, st.booleans(),
       st.sampled_from([0.0, 0.3, 1.0]), st.sampled_from([0.0, 0.01]),
       st.sampled_from([-1.0, 0.5]), st.integers(0, 2**31))
def test_row_sparse_update(op, dtype, shape, lazy, density, wd, clip_gradient, seed):
    if op == "adagrad":
        lazy, wd = True, 0.0
    rng = np.random.default_rng(seed)
    rows, row_shape = shape
    full = (rows, *row_shape)
    w, states = make(rng, op, full, dtype)
    idx = np.nonzero(rng.random(rows) < density)[0].astype(np.int64)
    g = (rng.standard_normal((idx.size, *row_shape)) * 3).astype(dtype)
    p = params(op, wd, clip_gradient)
    w_ref, s_ref = w.copy(), [s.copy() for s in states]
    if lazy:
        wr, sr = w_ref[idx], [s[idx] for s in s_ref]
        ref_update(op, wr, g, sr, p)
        w_ref[idx] = wr
        for s, r in zip(s_ref, sr):
            s[idx] = r
    else:
        dense_g = np.zeros(full, dtype)
        dense_g[idx] = g
        ref_update(op, w_ref, dense_g, s_ref, p)
    call(op, True, w, g, idx, states, p, lazy)
    np.testing.assert_allclose(w, w_ref, **tol(dtype))
    for s, r in zip(states, s_ref):
        np.testing.assert_allclose(s, r, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rsp_sgd_mom_tutorial(dtype):
    """RowSparseNDArray tutorial: lazy sgd_mom, lr 0.01, momentum 0.01, rows 1 and 2."""
    w = np.ones((4, 2), dtype)
    mom = np.zeros((4, 2), dtype)
    grad = np.array([[1, 2], [4, 5]], dtype)
    optim.sgd_mom_update_rsp(w, grad, np.array([1, 2]), mom, lr=0.01, momentum=0.01)
    np.testing.assert_allclose(w, [[1, 1], [0.99, 0.98], [0.96, 0.95], [1, 1]], rtol=1e-6)
    np.testing.assert_allclose(mom, [[0, 0], [-0.01, -0.02], [-0.04, -0.05], [0, 0]],
                               rtol=1e-6)
    assert (w[[0, 3]] == 1).all() and (mom[[0, 3]] == 0).all()


@pytest.mark.parametrize("op", ["sgd", "sgd_mom", "adam"])
@pytest.mark.parametrize("lazy", [True, False])
def test_rows_changed(op, lazy):
    """MXNet's optimizer-stype-cases: 4x5 weight, gradient rows {1, 3}; lazy changes only
    those rows; standard (with wd for sgd) changes every row."""
    rng = np.random.default_rng(7)
    w, states = make(rng, op, (4, 5), "float32")
    if op == "sgd_mom":
        states[0][:] = 0.1
    before = w.copy()
    g = rng.standard_normal((2, 5)).astype(np.float32) + 5
    call(op, True, w, g, np.array([1, 3]), states, params(op, 0.1, -1.0), lazy)
    changed = sorted(set(np.nonzero((w != before).any(axis=1))[0].tolist()))
    assert changed == ([1, 3] if lazy else [0, 1, 2, 3])


@pytest.mark.parametrize("op", OPS)
def test_empty_gradient(op):
    rng = np.random.default_rng(8)
    w, states = make(rng, op, (6, 3), "float64")
    before = w.copy()
    empty = np.zeros((0, 3))
    call(op, True, w, empty, np.zeros(0, np.int64), states, params(op, 0.0, -1.0), True)
    np.testing.assert_array_equal(w, before)
    if op != "adagrad":
        # standard sgd with wd scales every row even without gradient rows
        call(op, True, w, empty, np.zeros(0, np.int64), states, params(op, 0.1, -1.0), False)
        assert (w != before).all()


def test_clip_passes_nan_and_bounds():
    w = np.zeros(4, np.float32)
    g = np.array([10, -10, 0.25, np.nan], np.float32)
    optim.sgd_update(w, g, lr=1.0, clip_gradient=0.5)
    np.testing.assert_array_equal(w[:3], [-0.5, 0.5, -0.25])
    assert np.isnan(w[3])


def test_large_parallel_matches_serial():
    rng = np.random.default_rng(9)
    w0 = rng.standard_normal((40_000, 16)).astype(np.float32)
    idx = np.sort(rng.choice(40_000, 9_000, replace=False)).astype(np.int64)
    g = rng.standard_normal((9_000, 16)).astype(np.float32)
    results = []
    old = compiler.get_num_threads()
    try:
        for t in (1, 2):
            compiler.set_num_threads(t)
            for lazy in (True, False):
                w, m, v = w0.copy(), np.zeros_like(w0), np.ones_like(w0)
                optim.adam_update_rsp(w, g, idx, m, v, lr=0.01, wd=0.01, lazy_update=lazy)
                results.append(w)
    finally:
        compiler.set_num_threads(old)
    np.testing.assert_array_equal(results[0], results[2])
    np.testing.assert_array_equal(results[1], results[3])


def test_errors():
    w = np.zeros((3, 2), np.float32)
    g = np.ones((1, 2), np.float32)
    with pytest.raises(ValueError):
        optim.adagrad_update_rsp(w, g, np.array([0]), np.zeros_like(w), lr=0.1, wd=0.1)
    with pytest.raises(ValueError):
        optim.sgd_update_rsp(w, g, np.array([3]), lr=0.1)
    with pytest.raises(ValueError):
        optim.sgd_update_rsp(w, np.ones((2, 2), np.float32), np.array([0]), lr=0.1)
    with pytest.raises(ValueError):
        optim.sgd_mom_update(w, np.ones((3, 2), np.float32), np.zeros((3, 3), np.float32), lr=1)
    with pytest.raises(ValueError):
        optim.sgd_update(w.T, np.ones((2, 3), np.float32), lr=0.1)
    with pytest.raises(TypeError):
        optim.sgd_update(w.astype(np.int32), np.ones((3, 2), np.int32), lr=0.1)
    with pytest.raises(ValueError):
        optim.sgd_update(w, np.ones((3, 2), np.float64), lr=0.1)
