"""Lazy row_sparse updates (issue 15, items 3 and 6) against numpy: a row_sparse weight storing
every row and states created empty (as MXNet's optimizers create them), gradients of no rows,
some rows and every row, through ``nd.*_update`` and through ``nnsym.optimizer`` with an
updater. Row counts above the kernel's prefetch distance and its split threshold (65,536
elements) run the prefetching, split kernel."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, optimizer
from nnsym.ndarray.sparse import RowSparseNDArray, zeros
from nnsym.runtime import threads

F = np.float32
LR, MOM, WD = 0.05, 0.9, 1e-3


@pytest.fixture
def restore() -> object:
    before = threads.get_num_threads()
    yield None
    threads.set_num_threads(before)


def _rows(n: int, k: int, seed: int) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).choice(n, k, replace=False)).astype(np.int64)


def _weight(shape: tuple[int, int]) -> tuple[np.ndarray, RowSparseNDArray]:
    w0 = np.random.default_rng(1).standard_normal(shape).astype(F)
    return w0, RowSparseNDArray(w0.copy(), np.arange(shape[0], dtype=np.int64), shape)


def _grad(shape: tuple[int, int], rows: np.ndarray, seed: int) -> tuple[np.ndarray,
                                                                         RowSparseNDArray]:
    g = np.random.default_rng(seed).standard_normal((rows.size, shape[1])).astype(F)
    return g, RowSparseNDArray(g, rows, shape)


def _sgd_mom_ref(w: np.ndarray, m: np.ndarray, rows: np.ndarray, g: np.ndarray) -> None:
    """In place, float32 in the kernel's order: only ``rows`` change."""
    lr, mom, lrwd = F(LR), F(MOM), F(LR) * F(WD)
    mr = mom * m[rows] - lrwd * w[rows] - lr * g
    m[rows] = mr
    w[rows] = w[rows] + mr


# rows stored by the gradient: none, some (fewer than the prefetch distance, then many), all
CASES = [("no rows", 0), ("3 rows", 3), ("some rows", 700), ("all rows", 1500)]


@pytest.mark.parametrize(("label", "k"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_nd_sgd_mom_lazy_matches_numpy(restore: object, label: str, k: int,
                                       nthreads: int) -> None:
    threads.set_num_threads(nthreads)
    shape = (1500, 64)
    w0, w = _weight(shape)
    mom = zeros("row_sparse", shape)
    assert mom.indices.shape == (0,)
    want_w, want_m = w0.copy(), np.zeros(shape, F)
    for step in range(2):
        rows = _rows(shape[0], k, seed=10 + step)
        g, grad = _grad(shape, rows, seed=20 + step)
        nd.sgd_mom_update(w, grad, mom, lr=LR, momentum=MOM, wd=WD, out=w)
        _sgd_mom_ref(want_w, want_m, rows, g)
        np.testing.assert_allclose(w.asnumpy(), want_w, rtol=1e-6, atol=1e-7, err_msg=label)
        np.testing.assert_allclose(mom.asnumpy(), want_m, rtol=1e-6, atol=1e-7, err_msg=label)
        assert w.stype == mom.stype == "row_sparse"
    if k == 0:  # nothing changes, not even by weight decay
        np.testing.assert_array_equal(w.asnumpy(), w0)


@pytest.mark.parametrize(("label", "k"), CASES, ids=[c[0] for c in CASES])
def test_nd_sgd_and_adam_lazy_match_numpy(label: str, k: int) -> None:
    shape = (1500, 64)
    rows = _rows(shape[0], k, seed=3)
    g, grad = _grad(shape, rows, seed=4)
    w0, w = _weight(shape)
    nd.sgd_update(w, grad, lr=LR, wd=WD, out=w)
    want = w0.copy()
    want[rows] = (F(1) - F(LR) * F(WD)) * w0[rows] - F(LR) * g
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-6, atol=1e-7, err_msg=label)

    w0, w = _weight(shape)
    mean, var = zeros("row_sparse", shape), zeros("row_sparse", shape)
    nd.adam_update(w, grad, mean, var, lr=LR, wd=WD, out=w)
    b1, b2, eps = F(0.9), F(0.999), F(1e-8)
    gr = g + F(WD) * w0[rows]
    mr, vr = (F(1) - b1) * gr, (F(1) - b2) * (gr * gr)
    want = w0.copy()
    want[rows] = w0[rows] - F(LR) * mr / (np.sqrt(vr) + eps)
    want_mean = np.zeros(shape, F)
    want_mean[rows] = mr
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-5, atol=1e-6, err_msg=label)
    np.testing.assert_allclose(mean.asnumpy(), want_mean, rtol=1e-6, atol=1e-7, err_msg=label)


@pytest.mark.parametrize(("label", "k"), CASES, ids=[c[0] for c in CASES])
def test_sgd_optimizer_through_updater_matches_numpy(label: str, k: int) -> None:
    shape = (1500, 64)
    w0, w = _weight(shape)
    opt = optimizer.SGD(learning_rate=LR, momentum=MOM, wd=WD, rescale_grad=1.0)
    upd = optimizer.get_updater(opt)
    want_w, want_m = w0.copy(), np.zeros(shape, F)
    for step in range(2):
        rows = _rows(shape[0], k, seed=30 + step)
        g, grad = _grad(shape, rows, seed=40 + step)
        upd(0, grad, w)
        _sgd_mom_ref(want_w, want_m, rows, g)
        np.testing.assert_allclose(w.asnumpy(), want_w, rtol=1e-6, atol=1e-7, err_msg=label)
    state = upd.states[0]
    assert state.stype == "row_sparse"
    np.testing.assert_allclose(state.asnumpy(), want_m, rtol=1e-6, atol=1e-7, err_msg=label)
