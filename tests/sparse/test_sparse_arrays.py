"""CSRNDArray / RowSparseNDArray: construction and canonical form (against scipy.sparse),
validation errors, conversions between every pair of storage types, copies, and the
imperative storage dispatch (value maps, fallback warning, strict mode)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nnsym import nd
from nnsym.errors import StorageTypeError
from nnsym.ops.common.stype import StorageFallbackWarning

STYPES = ("default", "row_sparse", "csr")


def random_dense(rng, shape, density, dtype=np.float32):
    a = rng.standard_normal(shape).astype(dtype)
    a[rng.random(shape) >= density] = 0
    return a


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 6), st.integers(0, 6), st.integers(0, 40), st.integers(0, 2**31))
def test_coo_construction_sorts_and_sums_duplicates(rows, cols, n, seed):
    rng = np.random.default_rng(seed)
    if rows == 0 or cols == 0:
        n = 0
    r = rng.integers(0, max(rows, 1), n)
    c = rng.integers(0, max(cols, 1), n)
    v = rng.standard_normal(n)
    a = nd.sparse.csr_matrix((v, (r, c)), shape=(rows, cols))
    want = sp.coo_matrix((v, (r, c)), shape=(rows, cols)).tocsr()
    want.sum_duplicates()
    want.sort_indices()
    np.testing.assert_allclose(a.asnumpy(), want.toarray(), rtol=1e-12)
    assert a.indices.dtype == np.int64 and a.indptr.dtype == np.int64
    np.testing.assert_array_equal(a.indptr.asnumpy(), want.indptr)
    np.testing.assert_array_equal(a.indices.asnumpy(), want.indices)
    a.check_format()


def test_unsorted_triplet_is_canonicalised_stably():
    # row 0 holds columns 2, 0, 2 (duplicate): values summed in their original order
    a = nd.sparse.csr_matrix(([1.0, 2.0, 4.0, 8.0], [2, 0, 2, 1], [0, 3, 4]), shape=(2, 3))
    np.testing.assert_array_equal(a.indices.asnumpy(), [0, 2, 1])
    np.testing.assert_array_equal(a.indptr.asnumpy(), [0, 2, 3])
    np.testing.assert_array_equal(a.data.asnumpy(), [2.0, 5.0, 8.0])
    b = nd.sparse.row_sparse_array((np.arange(6.0).reshape(3, 2), [4, 1, 4]), shape=(5, 2))
    np.testing.assert_array_equal(b.indices.asnumpy(), [1, 4])
    np.testing.assert_array_equal(b.data.asnumpy(), [[2, 3], [4, 6]])


@pytest.mark.parametrize(("args", "shape", "match"), [
    (([1.0, 2.0], [0, 5], [0, 1, 2]), (2, 3), "column index 5 at position 1"),
    (([1.0, 2.0], [0, 1], [0, 2, 1]), (2, 3), "indptr decreases at position 2"),
    (([1.0, 2.0], [0, 1], [0, 1, 3]), (2, 3), r"indptr\[-1\] is 3"),
    (([1.0, 2.0], [0], [0, 1, 2]), (2, 3), "2 values but indices has 1"),
    (([1.0], [0.5], [0, 1]), (1, 3), "integer array"),
    (([1.0], [0], [1, 1]), (1, 3), r"indptr\[0\] is 1"),
    (([1.0], [0], [0, 1]), (2, 3), "expected rows\\+1 = 3"),
])
def test_malformed_csr_is_refused(args, shape, match):
    with pytest.raises(StorageTypeError, match=match):
        nd.sparse.csr_matrix(args, shape=shape)


def test_malformed_row_sparse_is_refused():
    with pytest.raises(StorageTypeError, match="row id 7 at position 1"):
        nd.sparse.row_sparse_array((np.ones((2, 3)), [0, 7]), shape=(4, 3))
    with pytest.raises(StorageTypeError, match="one row per index"):
        nd.sparse.row_sparse_array((np.ones((2, 3)), [0]), shape=(4, 3))
    with pytest.raises(StorageTypeError, match="integer"):
        nd.sparse.row_sparse_array((np.ones((1, 3)), [1.5]), shape=(4, 3))


def test_check_format_finds_later_damage():
    a = nd.sparse.csr_matrix(([1.0, 2.0, 3.0], [0, 1, 2], [0, 3]), shape=(1, 3))
    a.indices[:] = np.array([0, 2, 1])  # .indices shares memory
    with pytest.raises(StorageTypeError, match=r"not strictly increasing .* position 2"):
        a.check_format()
    b = nd.sparse.row_sparse_array((np.ones((2, 2)), [0, 1]), shape=(3, 2))
    b.indices[:] = np.array([1, 1])
    with pytest.raises(StorageTypeError, match="position 1"):
        b.check_format()


@pytest.mark.parametrize("src", STYPES)
@pytest.mark.parametrize("dst", STYPES)
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_cast_storage_every_pair(src, dst, density):
    rng = np.random.default_rng(7)
    dense = random_dense(rng, (6, 5), density)
    dense[2] = 0  # an empty row
    dense[:, 3] = 0  # an empty column
    a = nd.array(dense).tostype(src)
    b = nd.cast_storage(a, dst)
    assert b.stype == dst
    np.testing.assert_array_equal(b.asnumpy(), dense)
    if dst != "default":
        b.check_format()


def test_copyto_keeps_destination_storage_type():
    rng = np.random.default_rng(1)
    dense = random_dense(rng, (4, 3), 0.5)
    for s in STYPES:
        for d in STYPES:
            src = nd.array(dense).tostype(s)
            dst = nd.zeros((4, 3), stype=d)
            src.copyto(dst)
            assert dst.stype == d
            np.testing.assert_array_equal(dst.asnumpy(), dense)


def test_scipy_round_trip_and_zero_arrays():
    m = sp.random(20, 30, density=0.1, format="csr", random_state=3, dtype=np.float64)
    a = nd.sparse.array(m)
    assert a.stype == "csr" and a.dtype == np.float64
    assert (a.asscipy() != m).nnz == 0
    z = nd.sparse.zeros("row_sparse", (5, 2, 3))
    assert z.data.shape == (0, 2, 3) and z.asnumpy().sum() == 0
    big = nd.sparse.zeros("csr", (1_000_000, 1_000_000))
    assert big.nnz == 0 and big.size == 10**12
    with pytest.raises(StorageTypeError, match="refusing to densify"):
        big.asnumpy()


def test_huge_csr_beyond_int32_elements():
    rng = np.random.default_rng(0)
    n = 1_000_000
    r = rng.integers(0, n, 1000)
    c = rng.integers(0, n, 1000)
    a = nd.sparse.csr_matrix((np.ones(1000, np.float32), (r, c)), shape=(n, n))
    want = sp.coo_matrix((np.ones(1000, np.float32), (r, c)), shape=(n, n)).tocsr()
    assert a.nnz == want.nnz
    sq = nd.sqrt(a * 4.0)
    assert sq.stype == "csr" and sq.shape == (n, n)
    np.testing.assert_allclose(sq.data.asnumpy(), np.sqrt(4.0 * want.data), rtol=1e-6)
    q = nd._contrib_quadratic(a, a=1.0, b=2.0, c=0.0)
    assert q.stype == "csr"
    np.testing.assert_allclose(q.data.asnumpy(), want.data ** 2 + 2 * want.data)


@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
@pytest.mark.parametrize("op", ["relu", "sqrt", "square", "abs", "sign", "tanh", "negative",
                                "floor", "log1p", "expm1", "sin"])
def test_zero_preserving_unary_keeps_storage(stype, op):
    rng = np.random.default_rng(5)
    dense = np.abs(random_dense(rng, (6, 4), 0.4)) if op in ("sqrt", "log1p") else \
        random_dense(rng, (6, 4), 0.4)
    a = nd.array(dense).tostype(stype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StorageFallbackWarning)
        got = getattr(nd, op)(a)
    assert got.stype == stype
    want = getattr(nd, op)(nd.array(dense)).asnumpy()
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=1e-7)


def test_quadratic_tutorial_rule_and_fallback_warning(monkeypatch):
    from nnsym.ops.common import stype as storage

    dense = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]], np.float32)
    a = nd.array(dense).tostype("csr")
    q = nd._contrib_quadratic(a, a=1.0, b=2.0, c=0.0)
    assert q.stype == "csr"
    np.testing.assert_allclose(q.asnumpy(), dense ** 2 + 2 * dense)
    storage._SEEN.clear()
    with pytest.warns(StorageFallbackWarning) as rec:
        r = nd._contrib_quadratic(a, a=1.0, b=2.0, c=3.0)
        nd._contrib_quadratic(a, a=1.0, b=2.0, c=3.0)  # same combination: no second warning
    assert len(rec) == 1
    text = str(rec[0].message)
    for field in ("operator = _contrib_quadratic", "input storage types = [csr]",
                  "output storage types = [default]", '"c" : 3.0', "context.dev_mask = cpu"):
        assert field in text
    assert r.stype == "default"
    np.testing.assert_allclose(r.asnumpy(), dense ** 2 + 2 * dense + 3)
    storage._SEEN.clear()
    monkeypatch.setenv("NNSYM_STORAGE_FALLBACK_LOG_VERBOSE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StorageFallbackWarning)
        nd._contrib_quadratic(a, a=1.0, b=2.0, c=3.0)
    monkeypatch.setenv("NNSYM_STORAGE_FALLBACK", "raise")
    with pytest.raises(StorageTypeError, match="fallback refused"):
        nd._contrib_quadratic(a, a=1.0, b=2.0, c=3.0)


def test_scalar_arithmetic_storage_types():
    dense = np.array([[0.0, 1.5], [0.0, -2.0]], np.float32)
    for s in ("csr", "row_sparse"):
        a = nd.array(dense).tostype(s)
        assert (a * 3).stype == s and (a / 2).stype == s
        np.testing.assert_allclose((a * 3).asnumpy(), dense * 3)
        p = a + 1  # dense result computed directly (MXNet's rule), no fallback warning
        assert p.stype == "default"
        np.testing.assert_allclose(p.asnumpy(), dense + 1)
        z = nd.zeros_like(a)
        assert z.stype == s and z.nnz == 0


def test_index_arrays_shared_copy_on_write():
    """A value map's result and a copy share the index arrays until one of them hands its
    indices out: then that one takes a private copy, and writes through it change only it."""
    x = np.array([[0, 1.5, 0], [2.0, 0, -3.0]], np.float32)
    a = nd.array(x).tostype("csr")
    b = nd.sqrt(nd.abs(a))
    c = a.copy()
    assert b.stype == "csr" and b._indices is a._indices and c._indptr is a._indptr
    ind = b.indices  # b takes a private copy
    assert b._indices is not a._indices
    ind[:] = 0  # MXNet lets users write index arrays; only b sees it
    np.testing.assert_array_equal(a.indices.asnumpy(), [1, 0, 2])
    np.testing.assert_array_equal(c.asnumpy(), x)
    # a's indices are now exposed (a view is held): later results get copies
    d = nd.square(a)
    assert d._indices is not a._indices
    np.testing.assert_array_equal(d.asnumpy(), x * x)


def test_constructors_copy_caller_arrays():
    data = np.array([1.0, 2.0], np.float32)
    indices = np.array([0, 2], np.int64)
    indptr = np.array([0, 1, 2], np.int64)
    a = nd.sparse.csr_matrix((data, indices, indptr), shape=(2, 3))
    r = nd.sparse.row_sparse_array((np.ones((2, 3), np.float32), indices), shape=(3, 3))
    data[0], indices[0], indptr[1] = 9.0, 1, 0
    np.testing.assert_array_equal(a.asnumpy(), [[1, 0, 0], [0, 0, 2]])
    np.testing.assert_array_equal(r.asnumpy(), [[1, 1, 1], [0, 0, 0], [1, 1, 1]])
    assert indices.flags.writeable  # nothing of the caller's is frozen


def test_value_map_out_writes_into_the_target():
    x = np.array([[0, 1.0, 0], [2.0, 0, -3.0]], np.float64)
    a = nd.array(x).tostype("csr")
    out = nd.array(np.array([[5.0, 0, 0], [0, 6.0, 7.0]])).tostype("csr")
    buf = out._values
    res = nd._contrib_quadratic(a, a=1.0, b=2.0, c=0.0, out=out)
    assert res is out and out._values is buf  # same pattern size: written in place
    np.testing.assert_array_equal(out.asnumpy(), x * x + 2 * x)
    np.testing.assert_array_equal(out.indices.asnumpy(), [1, 0, 2])
    # in place on the input itself
    nd._contrib_quadratic(a, a=1.0, b=0.0, c=0.0, out=a)
    np.testing.assert_array_equal(a.asnumpy(), x * x)
    # a target whose nnz differs is reassigned
    small = nd.sparse.zeros("csr", (2, 3), dtype="float64")
    nd.sqrt(nd.abs(nd.array(x).tostype("csr")), out=small)
    np.testing.assert_allclose(small.asnumpy(), np.sqrt(np.abs(x)))
