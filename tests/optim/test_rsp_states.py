"""Lazy updates on row_sparse weights and states that store any rows (issue 15, item 6):
MXNet 1.9.1 fixtures (states created empty, as MXNet's optimizers do) and, for row sets MXNet
refuses (a weight storing some rows), the same update on dense arrays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import nd, optimizer
from nnsym.ndarray.sparse import RowSparseNDArray, zeros

HERE = Path(__file__).resolve().parent.parent / "golden" / "training" / "optim_rsp"
# atol 1e-6: the numpy backend (NNSYM_BACKEND=numpy) rounds adam differently by ~2e-7.
FIX = np.load(HERE / "fixtures.npz")
CASES = json.loads((HERE / "cases.json").read_text())
SHAPE = tuple(CASES["shape"])
STEPS = len(CASES["rows"])


def _grad(t: int) -> RowSparseNDArray:
    return RowSparseNDArray(FIX[f"grad_data_{t}"], FIX[f"grad_rows_{t}"], SHAPE)


def _call(op: str, w: Any, g: RowSparseNDArray, states: list[Any], kw: dict[str, Any]) -> None:
    getattr(nd, op)(w, g, *states, out=w, **kw)


@pytest.mark.parametrize("name", sorted(CASES["ops"]))
def test_operators_match_mxnet(name: str) -> None:
    op, nstates, kw = CASES["ops"][name]
    w = nd.array(FIX["w0"]).tostype("row_sparse")
    states = [zeros("row_sparse", SHAPE) for _ in range(nstates)]
    assert all(s.indices.shape == (0,) for s in states)
    for t in range(STEPS):
        _call(op, w, _grad(t), states, kw)
        np.testing.assert_allclose(w.asnumpy(), FIX[f"{name}/w{t}"], rtol=2e-6, atol=1e-6)
        assert w.stype == "row_sparse"
        for i, s in enumerate(states):
            assert s.stype == "row_sparse"
            np.testing.assert_allclose(s.asnumpy(), FIX[f"{name}/s{i}_{t}"], rtol=2e-6,
                                       atol=1e-6)
            np.testing.assert_array_equal(s.indices.asnumpy(), FIX[f"{name}/s{i}_{t}_rows"])


@pytest.mark.parametrize("name", sorted(CASES["optimizers"]))
def test_optimizers_match_mxnet(name: str) -> None:
    opt_name, kw = CASES["optimizers"][name]
    opt = optimizer.create(opt_name, **kw)
    w = nd.array(FIX["w0"]).tostype("row_sparse")
    state = opt.create_state(0, w)
    for s in state if isinstance(state, tuple) else (state,):
        if s is not None:  # created as MXNet does: row_sparse, no stored rows
            assert s.stype == "row_sparse" and s.indices.shape == (0,)
    for t in range(STEPS):
        opt.update(0, w, _grad(t), state)
        np.testing.assert_allclose(w.asnumpy(), FIX[f"{name}/w{t}"], rtol=2e-6, atol=1e-6)


def _rsp(dense: np.ndarray, rows: list[int]) -> RowSparseNDArray:
    return RowSparseNDArray(dense[rows], np.array(rows, np.int64), dense.shape)


PARTIAL = [  # (weight rows, state rows): any subsets, MXNet refuses a partial weight
    ([0, 4, 9], [1]),
    ([], [2, 4]),
    (list(range(12)), []),
    ([3, 5], [3, 5]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["sgd_update", "sgd_mom_update", "adam_update", "ftrl_update",
                                "adagrad_update"])
@pytest.mark.parametrize("wrows,srows", PARTIAL)
def test_any_stored_rows_equal_dense(op: str, wrows: list[int], srows: list[int],
                                     dtype: str) -> None:
    nstates = {"sgd_update": 0, "sgd_mom_update": 1, "adam_update": 2, "ftrl_update": 2,
               "adagrad_update": 1}[op]
    kw = {"sgd_mom_update": {"momentum": 0.9, "wd": 0.01}, "adam_update": {"wd": 0.01},
          "ftrl_update": {"wd": 0.01}, "sgd_update": {"wd": 0.1}}.get(op, {})
    rng = np.random.default_rng(len(wrows) * 7 + len(srows))
    shape = (12, 2)
    wd = np.zeros(shape, dtype)
    wd[wrows] = rng.uniform(-1, 1, (len(wrows), 2))
    sd = [np.zeros(shape, dtype) for _ in range(nstates)]
    for s in sd:  # states hold positive values (adagrad's history, ftrl's n must be >= 0)
        s[srows] = rng.uniform(0.1, 1, (len(srows), 2))
    w, states = _rsp(wd, wrows), [_rsp(s, srows) for s in sd]
    dw: Any = nd.array(wd, dtype=dtype)
    dstates: list[Any] = [nd.array(s, dtype=dtype) for s in sd]
    if op == "ftrl_update":  # lazy needs a row_sparse weight; the dense reference is lazy too
        dw = dw.tostype("row_sparse")
        dstates = [s.tostype("row_sparse") for s in dstates]
    stored = set(wrows)
    for rows in ([1, 4, 9], [], [0, 2, 11], [4]):
        g = RowSparseNDArray(rng.uniform(-1, 1, (len(rows), 2)).astype(dtype),
                             np.array(rows, np.int64), shape)
        getattr(nd, op)(w, g, *states, lr=0.1, out=w, **kw)
        getattr(nd, op)(dw, g, *dstates, lr=0.1, out=dw, **kw)
        np.testing.assert_allclose(w.asnumpy(), dw.asnumpy(), rtol=1e-6, atol=1e-12)
        for s, ds in zip(states, dstates):
            np.testing.assert_allclose(s.asnumpy(), ds.asnumpy(), rtol=1e-6, atol=1e-12)
        # the weight grows to store the gradient's rows (every row once it stored none)
        stored = set(range(12)) if not stored else stored | set(rows)
        assert set(w.indices.asnumpy().tolist()) == stored


def test_sgd_mom_partial_by_hand() -> None:
    """A weight storing rows 0 and 4, momentum storing row 1; gradient rows 1 and 4."""
    w = RowSparseNDArray(np.ones((2, 3), np.float32), np.array([0, 4]), (6, 3))
    m = RowSparseNDArray(np.ones((1, 3), np.float32), np.array([1]), (6, 3))
    g = RowSparseNDArray(np.ones((2, 3), np.float32), np.array([1, 4]), (6, 3))
    nd.sgd_mom_update(w, g, m, lr=0.1, momentum=0.9, out=w)
    # row 1: m = 0.9*1 - 0.1 = 0.8, w = 0 + 0.8; row 4: m = -0.1, w = 1 - 0.1
    np.testing.assert_allclose(w.asnumpy()[:, 0], [1, 0.8, 0, 0, 0.9, 0], rtol=1e-6)
    np.testing.assert_allclose(m.asnumpy()[:, 0], [0, 0.8, 0, 0, -0.1, 0], rtol=1e-6)
    assert w.indices.asnumpy().tolist() == [0, 1, 4]
    assert m.indices.asnumpy().tolist() == [1, 4]


def test_shape_mismatch_is_named() -> None:
    from nnsym.errors import ShapeError

    w = zeros("row_sparse", (6, 3))
    m = zeros("row_sparse", (5, 3))
    g = RowSparseNDArray(np.ones((1, 3), np.float32), np.array([1]), (6, 3))
    with pytest.raises(ShapeError, match="state 0"):
        nd.sgd_mom_update(w, g, m, lr=0.1, out=w)


def test_dense_weight_with_empty_row_sparse_state() -> None:
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((8, 2)).astype(np.float32)
    g = RowSparseNDArray(np.ones((2, 2), np.float32), np.array([1, 6]), (8, 2))
    w, m = nd.array(w0), zeros("row_sparse", (8, 2))
    dw, dm = nd.array(w0), nd.zeros((8, 2))
    for _ in range(2):
        nd.sgd_mom_update(w, g, m, lr=0.1, momentum=0.9, wd=0.1, out=w)
        nd.sgd_mom_update(dw, g, dm, lr=0.1, momentum=0.9, wd=0.1, out=dw)
    np.testing.assert_array_equal(w.asnumpy(), dw.asnumpy())
    np.testing.assert_array_equal(m.asnumpy(), dm.asnumpy())
    assert not np.array_equal(w.asnumpy(), w0)
