"""Update operators and optimizers: MXNet's formulas against independent numpy versions, the
RowSparseNDArray tutorial's numbers, and which rows change (MXNet 1.9.1's
optimizer-stype-cases: lazy updates touch only the gradient's rows)."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, optimizer
from nnsym.errors import StorageTypeError
from nnsym.testing import as_nd


def rsp_grad():
    return nd.sparse.row_sparse_array((np.array([[1.0, 2.0], [4.0, 5.0]], np.float32), [1, 2]),
                                      shape=(4, 2))


def test_tutorial_row_sparse_sgd_momentum():
    w, m = nd.ones((4, 2)), nd.zeros((4, 2))
    nd.sgd_mom_update(w, rsp_grad(), m, lr=0.01, momentum=0.01, out=w)
    np.testing.assert_allclose(w.asnumpy(), [[1, 1], [0.99, 0.98], [0.96, 0.95], [1, 1]],
                               rtol=1e-6)
    np.testing.assert_allclose(m.asnumpy(), [[0, 0], [-0.01, -0.02], [-0.04, -0.05], [0, 0]],
                               rtol=1e-6)


def _changed(before, after):
    return sorted(np.flatnonzero((before != after).any(axis=1)).tolist())


@pytest.mark.parametrize(("name", "lazy", "rows"), [
    ("sgd", True, [1, 2]), ("sgd", False, [0, 1, 2, 3]),
    ("sgd_mom", True, [1, 2]), ("sgd_mom", False, [0, 1, 2, 3]),
    ("adam", True, [1, 2]), ("adam", False, [0, 1, 2, 3]),
])
@pytest.mark.parametrize("wstype", ["default", "row_sparse"])
def test_lazy_updates_touch_only_gradient_rows(name, lazy, rows, wstype):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 2)).astype(np.float32)
    w = as_nd(w0).tostype(wstype)
    states = [nd.array(rng.random((4, 2)).astype(np.float32)).tostype(wstype)
              for _ in range({"sgd": 0, "sgd_mom": 1, "adam": 2}[name])]
    kw = {"lr": 0.1, "wd": 0.1, "lazy_update": lazy}
    if name == "sgd":
        nd.sgd_update(w, rsp_grad(), **kw)
    elif name == "sgd_mom":
        nd.sgd_mom_update(w, rsp_grad(), *states, momentum=0.9, **kw)
    else:
        nd.adam_update(w, rsp_grad(), *states, **kw)
    assert w.stype == wstype
    assert _changed(w0, w.asnumpy()) == rows


def test_dense_formulas_match_numpy():
    rng = np.random.default_rng(1)
    w0, g0, m0 = (rng.standard_normal((5, 3)) for _ in range(3))
    v0 = rng.random((5, 3))
    lr, wd, mom, rs, clip = 0.1, 0.01, 0.9, 0.5, 0.3
    w, m = as_nd(w0), as_nd(m0)
    nd.sgd_mom_update(w, as_nd(g0), m, lr=lr, momentum=mom, wd=wd, rescale_grad=rs,
                      clip_gradient=clip)
    gc = np.clip(rs * g0, -clip, clip)
    m_want = mom * m0 - lr * wd * w0 - lr * gc
    np.testing.assert_allclose(m.asnumpy(), m_want, rtol=1e-12)
    np.testing.assert_allclose(w.asnumpy(), w0 + m_want, rtol=1e-12)
    w, m, v = as_nd(w0), as_nd(m0), as_nd(v0)
    nd.adam_update(w, as_nd(g0), m, v, lr=lr, wd=wd, rescale_grad=rs)
    g = rs * g0 + wd * w0
    mw, vw = 0.9 * m0 + 0.1 * g, 0.999 * v0 + 0.001 * g * g
    np.testing.assert_allclose(w.asnumpy(), w0 - lr * mw / (np.sqrt(vw) + 1e-8), rtol=1e-10)


def test_optimizer_classes_and_adagrad():
    w = nd.ones((4, 2))
    opt = optimizer.create("sgd", learning_rate=0.01, momentum=0.01)
    st = opt.create_state(0, w)
    opt.update(0, w, rsp_grad(), st)
    np.testing.assert_allclose(w.asnumpy()[1:3], [[0.99, 0.98], [0.96, 0.95]], rtol=1e-6)
    w, h = nd.ones((4, 2)), nd.zeros((4, 2))
    nd.sparse.adagrad_update(w, rsp_grad(), h, lr=0.1, epsilon=1e-7)
    g = np.array([[1.0, 2.0], [4.0, 5.0]])
    np.testing.assert_allclose(w.asnumpy()[1:3], 1 - 0.1 * g / (np.abs(g) + 1e-7), rtol=1e-6)
    assert _changed(np.ones((4, 2)), w.asnumpy()) == [1, 2]
    with pytest.raises(StorageTypeError, match="wd must be 0"):
        nd.sparse.adagrad_update(w, rsp_grad(), h, lr=0.1, wd=0.1)
    a = optimizer.create("adam", learning_rate=0.1)
    st = a.create_state(0, w)
    a.update(0, w, rsp_grad(), st)


# MXNet 1.9.1 (reference venv): w = ones((4, 2)); h = zeros((4, 2)); g = the row_sparse
# rows [1, 2] = [[1, 2], [4, 5]] (float32); mx.nd.sparse.adagrad_update(w, g, h, lr=0.1,
# epsilon=0.5, out=w) -> rows 1 and 2 below (the epsilon goes inside the square root).
MX_ADAGRAD_EPS05 = [[0.91835034, 0.9057191], [0.9015268, 0.90098524]]



def test_sparse_adagrad_matches_mxnet(backend):
    w, h = nd.ones((4, 2)), nd.zeros((4, 2))
    nd.sparse.adagrad_update(w, rsp_grad(), h, lr=0.1, epsilon=0.5, out=w)
    np.testing.assert_allclose(w.asnumpy()[1:3], MX_ADAGRAD_EPS05, rtol=1e-6)
    np.testing.assert_array_equal(w.asnumpy()[[0, 3]], 1.0)


def _run_update(name, w, g, states, lazy):
    kw = {"lr": 0.05, "wd": 0.01, "rescale_grad": 0.5, "clip_gradient": 0.8}
    if name == "sgd":
        nd.sgd_update(w, g, lazy_update=lazy, **kw)
    elif name == "sgd_mom":
        nd.sgd_mom_update(w, g, *states, momentum=0.9, lazy_update=lazy, **kw)
    elif name == "adam":
        nd.adam_update(w, g, *states, lazy_update=lazy, **kw)
    else:
        kw["wd"] = 0.0
        nd.sparse.adagrad_update(w, g, *states, **kw)


@pytest.mark.parametrize("name", ["sgd", "sgd_mom", "adam", "adagrad"])
@pytest.mark.parametrize("gstype", ["default", "row_sparse"])
@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernel_updates_equal_numpy_formulas(switch_backend, name, gstype, lazy, dtype):
    """The C kernels of nnsym.ops.optim.kernels (C backend) and the numpy formulas (numpy backend)
    give the same weights and states, two steps in a row."""
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((9, 3)).astype(dtype)
    n_states = {"sgd": 0, "sgd_mom": 1, "adam": 2, "adagrad": 1}[name]
    s0 = [rng.random((9, 3)).astype(dtype) for _ in range(n_states)]
    g0 = 3 * rng.standard_normal((9, 3)).astype(dtype)
    g0[[0, 4, 5]] = 0
    results = []
    for be in ("c", "numpy"):
        switch_backend(be)
        w = nd.array(w0, dtype=dtype)
        states = [nd.array(s, dtype=dtype) for s in s0]
        for _ in range(2):
            g = nd.array(g0, dtype=dtype)
            _run_update(name, w, g.tostype(gstype) if gstype != "default" else g, states, lazy)
        results.append([w.asnumpy(), *(s.asnumpy() for s in states)])
    switch_backend("c")
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if gstype == "row_sparse" and (lazy or name == "adagrad"):
        assert _changed(w0, results[0][0]) == [1, 2, 3, 6, 7, 8]


def test_adagrad_optimizer_dense_weight_decay():
    """MXNet's Python AdaGrad with a dense gradient: weight decay inside the step."""
    rng = np.random.default_rng(2)
    w0, g0 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    opt = optimizer.create("adagrad", learning_rate=0.1, wd=0.05, eps=1e-7, rescale_grad=2.0)
    w = nd.array(w0, dtype="float64")
    st = opt.create_state(0, w)
    opt.update(0, w, nd.array(g0, dtype="float64"), st)
    g = 2.0 * g0
    h = g * g
    np.testing.assert_allclose(st.asnumpy(), h, rtol=1e-12)
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.1 * (g / np.sqrt(h + 1e-7) + 0.05 * w0),
                               rtol=1e-12)
    with pytest.raises(StorageTypeError, match="wd must be 0"):
        opt.update(0, w, nd.array(g0, dtype="float64").tostype("row_sparse"), st)
