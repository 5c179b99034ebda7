"""Storage-specialised computations (merges, products, reductions) equal the dense
computation, over random patterns with empty rows/columns, nnz = 0 and full density."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym import nd
from nnsym.ops.common.stype import StorageFallbackWarning
from nnsym.testing import as_nd

SPARSE = ("csr", "row_sparse", "default")



def _dense(rng, shape, density, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    a[rng.random(shape) >= density] = 0
    return a


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div"]),
       st.sampled_from(SPARSE), st.sampled_from(SPARSE), st.sampled_from([0.0, 0.3, 1.0]),
       st.sampled_from([0.0, 0.5, 1.0]),
       st.sampled_from(["float32", "float64", "float16", "int32", "int64"]),
       st.integers(0, 2**31), st.booleans())
def test_binary_elementwise_matches_dense(backend, op, sa, sb, da, db, dtype, seed, rows3d):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(0, 6)), int(rng.integers(1, 5)))
    if rows3d and "csr" not in (sa, sb):
        shape = (*shape, 2)  # row_sparse rows of more than one dimension
    a, b = _dense(rng, shape, da, dtype), _dense(rng, shape, db, dtype)
    with np.errstate(all="ignore"):
        want = getattr(nd, op)(nd.array(a, dtype=dtype), nd.array(b, dtype=dtype)).asnumpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StorageFallbackWarning)
        got = getattr(nd, op)(nd.array(a, dtype=dtype).tostype(sa),
                              nd.array(b, dtype=dtype).tostype(sb))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, equal_nan=True)
    if got.stype != "default":
        got.check_format()


def test_binary_output_storage_types(backend):
    a = nd.array(np.eye(3, dtype=np.float32))
    c, r = a.tostype("csr"), a.tostype("row_sparse")
    assert nd.elemwise_add(c, c).stype == "csr"
    assert nd.elemwise_add(r, r).stype == "row_sparse"
    assert nd.elemwise_add(c, a).stype == "default"
    assert nd.elemwise_mul(c, a).stype == "csr"
    assert nd.elemwise_mul(a, r).stype == "row_sparse"
    # division where zeros meet zeros: IEEE 0/0 = NaN, as numpy
    q = nd.elemwise_div(r, r)
    assert q.stype == "default" and np.isnan(q.asnumpy()[0, 1])


@pytest.mark.parametrize("density", [0.0, 0.2, 1.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sparse_dot_products(backend, density, dtype):
    rng = np.random.default_rng(3)
    x = _dense(rng, (7, 5), density, dtype)
    x[2] = 0
    x[:, 1] = 0
    w = rng.standard_normal((5, 3)).astype(dtype)
    v = rng.standard_normal((7, 3)).astype(dtype)
    u = rng.standard_normal((4, 7)).astype(dtype)
    c = as_nd(x).tostype("csr")
    tol = 1e-5 if dtype == "float32" else 1e-12
    y = nd.dot(c, as_nd(w))
    assert y.stype == "default"
    np.testing.assert_allclose(y.asnumpy(), x @ w, rtol=tol, atol=tol)
    o = nd.zeros((7, 3), dtype=dtype)
    buf = o._data
    assert nd.dot(c, as_nd(w), out=o) is o and o._data is buf
    np.testing.assert_allclose(o.asnumpy(), x @ w, rtol=tol, atol=tol)
    g = nd.dot(c, as_nd(v), transpose_a=True)
    assert g.stype == "row_sparse"
    np.testing.assert_allclose(g.asnumpy(), x.T @ v, rtol=tol, atol=tol)
    assert set(g.indices.asnumpy()) == set(np.flatnonzero((x != 0).any(axis=0)))
    z = nd.dot(as_nd(u), c)
    assert z.stype == "csr"
    np.testing.assert_allclose(z.asnumpy(), u @ x, rtol=tol, atol=tol)
    wr = as_nd(w).tostype("row_sparse")
    np.testing.assert_allclose(nd.dot(c, wr).asnumpy(), x @ w, rtol=tol, atol=tol)


def test_csr_sums_and_add_n(backend):
    rng = np.random.default_rng(4)
    x = _dense(rng, (6, 5), 0.3, "float64")
    c = as_nd(x).tostype("csr")
    for axis in (0, 1):
        s = nd.sum(c, axis=axis)
        assert s.stype == "default"
        np.testing.assert_allclose(s.asnumpy(), x.sum(axis=axis), rtol=1e-12)
    np.testing.assert_allclose(nd.sum(c, axis=1, keepdims=True).asnumpy(),
                               x.sum(axis=1, keepdims=True), rtol=1e-12)
    parts = [_dense(rng, (6, 2), d, "float32") for d in (0.0, 0.4, 1.0)]
    tot = nd.add_n(*[as_nd(p).tostype("row_sparse") for p in parts])
    assert tot.stype == "row_sparse"
    np.testing.assert_allclose(tot.asnumpy(), sum(parts), rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["csr", "row_sparse"]), st.sampled_from([0.0, 0.4, 1.0]),
       st.sampled_from([0.0, 0.6, 1.0]), st.sampled_from(["float32", "float64"]),
       st.integers(0, 2**31))
def test_quadratic_backward_on_sparse_gradients(stype, dg, dx, dtype, seed):
    """quadratic's backward with sparse output gradient and data: the output gradient's
    pattern, g * (2 a x + b) there (MXNet's sparse quadratic tutorial), equal to dense.
    (Backward operators have generated kernels only: the C backend.)"""
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(0, 6)), int(rng.integers(1, 5)))
    g, x = _dense(rng, shape, dg, dtype), _dense(rng, shape, dx, dtype)
    got = nd._contrib_backward_quadratic(as_nd(g).tostype(stype), as_nd(x).tostype(stype),
                                          a=1.5, b=-2.0)
    assert got.stype == stype
    got.check_format()
    np.testing.assert_allclose(got.asnumpy(), g * (3.0 * x - 2.0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got.indices.asnumpy(),
                                  as_nd(g).tostype(stype).indices.asnumpy())


def test_backward_with_dense_gradient_where_zero_is_not_kept():
    # _backward_reciprocal's gradient is -g / x^2: at x = 0 with g = 0 it is NaN, not 0, so the
    # sparse rule does not apply and the dense kernel runs (fallback)
    g = nd.array(np.array([[0.0, 1.0]], np.float32)).tostype("csr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StorageFallbackWarning)
        r = nd._backward_reciprocal(g, nd.array(np.array([[0.0, 2.0]], np.float32)).tostype("csr"))
    assert r.stype == "default"
    assert np.isnan(r.asnumpy()[0, 0]) and r.asnumpy()[0, 1] == -0.25


def test_sparse_result_from_dense_inputs_every_call():
    """Embedding's row_sparse weight gradient from dense inputs: the imperative fast path
    (the dense kernel, cached after a first call) must not take over on later calls."""
    g = nd.array(np.arange(12, dtype=np.float32).reshape(2, 3, 2))
    data = nd.array(np.array([[1, 5, 1], [0, 9, 3]], np.float32))
    want = np.zeros((6, 2), np.float32)
    np.add.at(want, np.clip(data.asnumpy().astype(int), 0, 5).ravel(),
              g.asnumpy().reshape(-1, 2))
    for _ in range(3):
        r = nd._backward_Embedding(g, data, input_dim=6, output_dim=2, sparse_grad=True)
        assert r.stype == "row_sparse"
        np.testing.assert_array_equal(r.indices.asnumpy(), [0, 1, 3, 5])
        np.testing.assert_array_equal(r.asnumpy(), want)
