"""The sparse elementwise / cast / reduce kernels (nnsym.ops.common.sparse) against numpy and
scipy.sparse dense computation, over random sparsity patterns (empty rows and columns, nnz = 0,
full density, 0-row shapes, explicit zeros) and a 10**6 x 10**6 csr that must never be made
dense."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nnsym.codegen import compiler
from nnsym.ops.common import sparse as E
from nnsym.ops.elemwise import sparse as EW

FLOATS = ("float32", "float64", "float16")
ALL = (*FLOATS, "int32", "int64")
OPS: dict[str, Any] = {"a + b": np.add, "a - b": np.subtract, "a * b": np.multiply}
KIND = {"a + b": "union", "a - b": "union", "a * b": "intersection"}
SETTINGS = settings(max_examples=30, deadline=None)

dims = st.integers(0, 9)
densities = st.sampled_from([0.0, 0.15, 0.5, 1.0])
seeds = st.integers(0, 2**31 - 1)


# ---- generators and canonical-form checks ----

def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 4).astype(dtype)
    return rng.integers(-9, 10, size=shape).astype(dtype)


def rand_csr(rng: np.random.Generator, shape: tuple[int, int], density: float, dtype: str,
             explicit_zeros: bool = True) -> tuple[E.Csr, np.ndarray, np.ndarray]:
    """A canonical csr, its dense value and its pattern (explicit zeros stay in the pattern)."""
    mask = rng.random(shape) < density
    dense = np.where(mask, _values(rng, shape, dtype), 0).astype(dtype)
    if explicit_zeros and mask.any():
        r, c = np.nonzero(mask)
        dense[r[0], c[0]] = 0
    data = dense[mask]
    indices = np.nonzero(mask)[1].astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(np.int64)
    return (data, indices, indptr), dense, mask


def rand_rsp(rng: np.random.Generator, shape: tuple[int, ...], density: float,
             dtype: str) -> tuple[E.Rsp, np.ndarray, np.ndarray]:
    """A canonical row_sparse (stored rows may hold zeros), its dense value and row mask."""
    rowmask = rng.random(shape[0]) < density
    dense = np.zeros(shape, dtype=dtype)
    dense[rowmask] = _values(rng, (int(rowmask.sum()), *shape[1:]), dtype)
    if rowmask.any() and dense[rowmask].size:
        dense[np.nonzero(rowmask)[0][0]] = 0  # a stored all-zero row
    indices = np.nonzero(rowmask)[0].astype(np.int64)
    return (np.ascontiguousarray(dense[rowmask]), indices), dense, rowmask


def check_csr(c: Any, shape: tuple[int, int], dtype: Any) -> None:
    data, indices, indptr = c
    rows, cols = shape
    assert data.dtype == np.dtype(dtype)
    assert indices.dtype == np.int64 and indptr.dtype == np.int64
    assert indptr.shape == (rows + 1,) and indptr[0] == 0
    assert indptr[-1] == len(data) == len(indices)
    assert np.all(np.diff(indptr) >= 0)
    if len(indices):
        assert indices.min() >= 0 and indices.max() < cols
        d = np.diff(indices)
        starts = np.zeros(len(indices), dtype=bool)
        starts[indptr[:-1][indptr[:-1] < len(indices)]] = True
        assert np.all((d > 0) | starts[1:])


def check_rsp(r: Any, shape: tuple[int, ...], dtype: Any) -> None:
    data, indices = r
    assert data.dtype == np.dtype(dtype) and indices.dtype == np.int64
    assert data.shape == (len(indices), *shape[1:]) and data.flags.c_contiguous
    assert np.all(np.diff(indices) > 0)
    if len(indices):
        assert indices[0] >= 0 and indices[-1] < shape[0]


def csr_dense(c: E.Csr, shape: tuple[int, int]) -> np.ndarray:
    """Reference densify (numpy only)."""
    data, indices, indptr = c
    out = np.zeros(shape, dtype=data.dtype)
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    out[rows, indices] = data
    return out


def csr_mask(c: E.Csr, shape: tuple[int, int]) -> np.ndarray:
    m = np.zeros(shape, dtype=bool)
    m[np.repeat(np.arange(shape[0]), np.diff(c[2])), c[1]] = True
    return m


def ref(op: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(op(a, b)).astype(a.dtype)


# ---- casts ----

@SETTINGS
@given(dims, dims, densities, seeds, st.sampled_from(ALL))
def test_cast_dense_csr_round_trip(rows, cols, density, seed, dtype):
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((rows, cols)) < density, _values(rng, (rows, cols), dtype),
                     0).astype(dtype)
    if dtype in FLOATS and dense.size:
        dense.flat[rng.integers(dense.size)] = np.nan
    c = E.cast_dense_to_csr(dense)
    check_csr(c, (rows, cols), dtype)
    np.testing.assert_array_equal(csr_mask(c, (rows, cols)), dense != 0)
    np.testing.assert_array_equal(E.csr_to_dense(*c, (rows, cols)), dense)
    out = np.full((rows, cols), 7, dtype=dtype)
    assert E.csr_to_dense(*c, (rows, cols), out=out) is out
    np.testing.assert_array_equal(out, dense)
    if dtype != "float16":
        s = sp.csr_matrix(dense)
        np.testing.assert_array_equal(c[1], s.indices)
        np.testing.assert_array_equal(c[2], s.indptr)
        np.testing.assert_array_equal(c[0], s.data)


@SETTINGS
@given(dims, st.sampled_from([(), (3,), (2, 3), (0,)]), densities, seeds, st.sampled_from(ALL))
def test_cast_dense_rsp_round_trip(rows, row_shape, density, seed, dtype):
    rng = np.random.default_rng(seed)
    shape = (rows, *row_shape)
    r, dense, rowmask = rand_rsp(rng, shape, density, dtype)
    if dtype in FLOATS and dense.size:
        dense.flat[rng.integers(dense.size)] = np.nan
    got = E.cast_dense_to_rsp(dense)
    check_rsp(got, shape, dtype)
    nz = (dense != 0).reshape(rows, int(np.prod(row_shape))).any(axis=1)
    np.testing.assert_array_equal(got[1], np.nonzero(nz)[0])
    np.testing.assert_array_equal(got[0], dense[nz])
    np.testing.assert_array_equal(E.rsp_to_dense(*got, shape), dense)
    # the stored rows (some all-zero) densify too, into a given out
    out = np.full(shape, 5, dtype=dtype)
    E.rsp_to_dense(*r, shape, out=out)
    expect = np.zeros(shape, dtype=dtype)
    expect[rowmask] = r[0]
    np.testing.assert_array_equal(out, expect)


def test_cast_explicit_cases():
    for shape in [(0, 0), (0, 5), (5, 0), (1, 1), (4, 6)]:
        z = np.zeros(shape, np.float32)
        c = E.cast_dense_to_csr(z)
        check_csr(c, shape, np.float32)
        assert len(c[0]) == 0
        np.testing.assert_array_equal(E.csr_to_dense(*c, shape), z)
        r = E.cast_dense_to_rsp(z)
        check_rsp(r, shape, np.float32)
        assert len(r[1]) == 0
        full = np.arange(1, z.size + 1, dtype=np.float64).reshape(shape)
        c = E.cast_dense_to_csr(full)
        assert len(c[0]) == full.size
        np.testing.assert_array_equal(E.csr_to_dense(*c, shape), full)
    # -0.0 is zero; NaN and inf are not
    d = np.array([[-0.0, np.nan, np.inf, 0.0]], np.float64)
    data, indices, _ = E.cast_dense_to_csr(d)
    np.testing.assert_array_equal(indices, [1, 2])
    # 1-D dense: each element is a row
    v = np.array([0, 3, 0, 4], np.int32)
    data, idx = E.cast_dense_to_rsp(v)
    np.testing.assert_array_equal(idx, [1, 3])
    np.testing.assert_array_equal(data, [3, 4])
    with pytest.raises(ValueError, match="out must be"):
        E.csr_to_dense(*E.cast_dense_to_csr(d), (1, 4), out=np.zeros((4, 1)))
    with pytest.raises(TypeError, match="support"):
        E.cast_dense_to_csr(np.zeros((2, 2), np.uint8))


# ---- binary elementwise ----

@SETTINGS
@given(dims, dims, densities, densities, seeds, st.sampled_from(ALL), st.sampled_from(list(OPS)))
def test_csr_binary(rows, cols, da, db, seed, dtype, expr):
    rng = np.random.default_rng(seed)
    shape = (rows, cols)
    a, dense_a, mask_a = rand_csr(rng, shape, da, dtype)
    b, dense_b, mask_b = rand_csr(rng, shape, db, dtype)
    kind = KIND[expr]
    got = EW.csr_binary(expr, kind, a, b, shape)
    check_csr(got, shape, dtype)
    mask = mask_a | mask_b if kind == "union" else mask_a & mask_b
    np.testing.assert_array_equal(csr_mask(got, shape), mask)
    expect = ref(OPS[expr], dense_a, dense_b)
    np.testing.assert_array_equal(got[0], expect[mask])


def test_csr_binary_explicit():
    # sub where only b has the entry gives 0 - b; a computed 0 stays stored
    a = (np.array([1.0, 2.0]), np.array([0, 2]), np.array([0, 1, 2]))
    b = (np.array([1.0, 5.0]), np.array([0, 1]), np.array([0, 1, 2]))
    data, indices, indptr = EW.csr_binary("a - b", "union", a, b, (2, 3))
    np.testing.assert_array_equal(data, [0.0, -5.0, 2.0])
    np.testing.assert_array_equal(indices, [0, 1, 2])
    np.testing.assert_array_equal(indptr, [0, 1, 3])
    data, indices, indptr = EW.csr_binary("a * b", "intersection", a, b, (2, 3))
    np.testing.assert_array_equal(data, [1.0])
    np.testing.assert_array_equal(indptr, [0, 1, 1])
    with pytest.raises(ValueError, match="kind"):
        EW.csr_binary("a + b", "outer", a, b, (2, 3))
    with pytest.raises(TypeError, match="different dtypes"):
        EW.csr_binary("a + b", "union", a, (b[0].astype(np.float32), b[1], b[2]), (2, 3))
    with pytest.raises(ValueError, match="expression"):
        EW.csr_binary("a; b", "union", a, b, (2, 3))


def test_rsp_binary_intersection_skips_one_sided_rows():
    # b holds row 2 that a lacks, ahead of the shared row 5: the fill must step over it
    a = (np.array([[0.0], [2.0], [1.0]]), np.array([1, 5, 6]))
    b = (np.array([[3.0], [-2.0], [6.0]]), np.array([1, 2, 5]))
    data, indices = EW.rsp_binary("a * b", "intersection", a, b, (7, 1))
    np.testing.assert_array_equal(indices, [1, 5])
    np.testing.assert_array_equal(data, [[0.0], [12.0]])
    data, indices = EW.rsp_binary("a * b", "intersection", b, a, (7, 1))
    np.testing.assert_array_equal(indices, [1, 5])
    np.testing.assert_array_equal(data, [[0.0], [12.0]])


@SETTINGS
@given(dims, st.sampled_from([(), (4,), (2, 3), (0,)]), densities, densities, seeds,
       st.sampled_from(ALL), st.sampled_from(list(OPS)))
def test_rsp_binary(rows, row_shape, da, db, seed, dtype, expr):
    rng = np.random.default_rng(seed)
    shape = (rows, *row_shape)
    a, dense_a, rows_a = rand_rsp(rng, shape, da, dtype)
    b, dense_b, rows_b = rand_rsp(rng, shape, db, dtype)
    kind = KIND[expr]
    got = EW.rsp_binary(expr, kind, a, b, shape)
    check_rsp(got, shape, dtype)
    keep = rows_a | rows_b if kind == "union" else rows_a & rows_b
    np.testing.assert_array_equal(got[1], np.nonzero(keep)[0])
    np.testing.assert_array_equal(got[0], ref(OPS[expr], dense_a, dense_b)[keep])


@SETTINGS
@given(dims, dims, densities, seeds, st.sampled_from(ALL), st.sampled_from(list(OPS)),
       st.booleans())
def test_csr_dense_binary(rows, cols, density, seed, dtype, expr, csr_is_lhs):
    rng = np.random.default_rng(seed)
    shape = (rows, cols)
    c, dense_c, mask = rand_csr(rng, shape, density, dtype)
    dense = _values(rng, shape, dtype)
    lhs, rhs = (dense_c, dense) if csr_is_lhs else (dense, dense_c)
    expect = ref(OPS[expr], lhs, rhs)
    got = EW.csr_dense_binary(expr, c, dense, csr_is_lhs, shape, "dense")
    assert isinstance(got, np.ndarray) and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expect)
    got_csr = EW.csr_dense_binary(expr, c, dense, csr_is_lhs, shape, "csr")
    assert isinstance(got_csr, tuple)
    check_csr(got_csr, shape, dtype)
    np.testing.assert_array_equal(csr_mask(got_csr, shape), mask)
    np.testing.assert_array_equal(got_csr[0], expect[mask])


@SETTINGS
@given(dims, st.sampled_from([(), (4,), (2, 3)]), densities, seeds, st.sampled_from(ALL),
       st.sampled_from(list(OPS)), st.booleans())
def test_rsp_dense_binary(rows, row_shape, density, seed, dtype, expr, rsp_is_lhs):
    rng = np.random.default_rng(seed)
    shape = (rows, *row_shape)
    r, dense_r, rowmask = rand_rsp(rng, shape, density, dtype)
    dense = _values(rng, shape, dtype)
    lhs, rhs = (dense_r, dense) if rsp_is_lhs else (dense, dense_r)
    expect = ref(OPS[expr], lhs, rhs)
    got = EW.rsp_dense_binary(expr, r, dense, rsp_is_lhs, shape, "dense")
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, expect)
    got_rsp = EW.rsp_dense_binary(expr, r, dense, rsp_is_lhs, shape, "row_sparse")
    assert isinstance(got_rsp, tuple)
    check_rsp(got_rsp, shape, dtype)
    np.testing.assert_array_equal(got_rsp[1], r[1])
    np.testing.assert_array_equal(got_rsp[0], expect[rowmask])


@SETTINGS
@given(dims, st.sampled_from([(), (3,), (2, 2)]), densities, densities, seeds,
       st.sampled_from(FLOATS))
def test_rsp_dense_result_div(rows, row_shape, da, db, seed, dtype):
    rng = np.random.default_rng(seed)
    shape = (rows, *row_shape)
    a, dense_a, _ = rand_rsp(rng, shape, da, dtype)
    b, dense_b, _ = rand_rsp(rng, shape, db, dtype)
    got = EW.rsp_dense_result("a / b", a, b, shape)
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    np.testing.assert_array_equal(got, ref(np.divide, dense_a, dense_b))


def test_rsp_dense_result_explicit():
    a = (np.array([[2.0, 0.0]], np.float32), np.array([0]))
    b = (np.array([[4.0, 0.0]], np.float32), np.array([1]))
    got = EW.rsp_dense_result("a / b", a, b, (3, 2))
    np.testing.assert_array_equal(got, [[np.inf, np.nan], [0, np.nan], [np.nan, np.nan]])
    with pytest.raises(TypeError, match="floating"):
        EW.rsp_dense_result("a / b", (a[0].astype(np.int32), a[1]),
                           (b[0].astype(np.int32), b[1]), (3, 2))


# ---- retain, reductions, add_n ----

@SETTINGS
@given(dims, densities, seeds, st.sampled_from(ALL), st.lists(st.integers(0, 12), max_size=12))
def test_rsp_retain(rows, density, seed, dtype, keep):
    rng = np.random.default_rng(seed)
    shape = (rows, 3)
    r, _, _ = rand_rsp(rng, shape, density, dtype)
    keep_arr = np.array(keep, dtype=np.int64)
    before = keep_arr.copy()
    got = E.rsp_retain(*r, keep_arr, shape)
    np.testing.assert_array_equal(keep_arr, before)  # keep is not modified
    check_rsp(got, shape, dtype)
    sel = np.isin(r[1], keep_arr)
    np.testing.assert_array_equal(got[1], r[1][sel])
    np.testing.assert_array_equal(got[0], r[0][sel])


@SETTINGS
@given(dims, dims, densities, seeds, st.sampled_from(ALL), st.sampled_from([0, 1, -1]),
       st.booleans())
def test_rsp_square_sum(rows, cols, density, seed, dtype, axis, keepdims):
    rng = np.random.default_rng(seed)
    shape = (rows, cols)
    r, dense, _ = rand_rsp(rng, shape, density, dtype)
    acc = np.float64 if dtype in FLOATS else np.int64
    expect = np.sum(dense.astype(acc) ** 2, axis=axis, keepdims=keepdims).astype(dtype)
    stype, got = E.rsp_square_sum(*r, shape, axis, keepdims)
    if axis % 2 == 1 and keepdims:
        assert stype == "row_sparse"
        check_rsp(got, (rows, 1), dtype)
        np.testing.assert_array_equal(got[1], r[1])
        got = E.rsp_to_dense(*got, (rows, 1))
    else:
        assert stype == "default"
    assert got.dtype == np.dtype(dtype) and got.shape == expect.shape
    np.testing.assert_allclose(got, expect, rtol=2e-3 if dtype == "float16" else 1e-6)


@SETTINGS
@given(dims, dims, densities, seeds, st.sampled_from(ALL), st.sampled_from([0, 1, -2]),
       st.booleans())
def test_csr_sum(rows, cols, density, seed, dtype, axis, keepdims):
    rng = np.random.default_rng(seed)
    shape = (rows, cols)
    c, dense, _ = rand_csr(rng, shape, density, dtype)
    acc = np.float64 if dtype in FLOATS else np.int64
    expect = dense.astype(acc).sum(axis=axis, keepdims=keepdims).astype(dtype)
    got = E.csr_sum(*c, shape, axis, keepdims)
    assert got.dtype == np.dtype(dtype) and got.shape == expect.shape
    np.testing.assert_allclose(got, expect, rtol=2e-3 if dtype == "float16" else 1e-6)
    if dtype in ("float32", "float64"):
        s = sp.csr_matrix((c[0], c[1], c[2]), shape=shape)
        np.testing.assert_allclose(got, np.asarray(s.sum(axis=axis)).reshape(expect.shape),
                                   rtol=1e-5, atol=1e-5)


@SETTINGS
@given(st.integers(1, 4), dims, st.sampled_from([(), (3,), (2, 2)]), densities, seeds,
       st.sampled_from(ALL))
def test_add_n_rsp(n, rows, row_shape, density, seed, dtype):
    rng = np.random.default_rng(seed)
    shape = (rows, *row_shape)
    ins = [rand_rsp(rng, shape, density, dtype) for _ in range(n)]
    got = E.add_n_rsp([r for r, _, _ in ins], shape)
    check_rsp(got, shape, dtype)
    rowmask = np.logical_or.reduce([m for _, _, m in ins])
    expect = ins[0][1]
    for _, d, _ in ins[1:]:
        expect = ref(np.add, expect, d)
    np.testing.assert_array_equal(got[1], np.nonzero(rowmask)[0])
    np.testing.assert_array_equal(got[0], expect[rowmask])


# ---- parallel paths: large inputs, results independent of the thread count ----

def _all_results(rng_seed: int) -> list[Any]:
    rng = np.random.default_rng(rng_seed)
    shape = (600, 400)
    a, dense_a, _ = rand_csr(rng, shape, 0.4, "float32")
    b, _, _ = rand_csr(rng, shape, 0.3, "float32")
    ra, rdense_a, _ = rand_rsp(rng, shape, 0.5, "float32")
    rb, _, _ = rand_rsp(rng, shape, 0.5, "float32")
    dense = _values(rng, shape, "float32")
    out: list[Any] = [
        E.cast_dense_to_csr(dense_a), E.cast_dense_to_rsp(rdense_a),
        E.csr_to_dense(*a, shape), E.rsp_to_dense(*ra, shape),
        EW.csr_binary("a - b", "union", a, b, shape),
        EW.csr_binary("a * b", "intersection", a, b, shape),
        EW.rsp_binary("a - b", "union", ra, rb, shape),
        EW.csr_dense_binary("a - b", a, dense, False, shape, "dense"),
        EW.csr_dense_binary("a * b", a, dense, True, shape, "csr"),
        EW.rsp_dense_binary("a - b", ra, dense, False, shape, "dense"),
        EW.rsp_dense_binary("a * b", ra, dense, True, shape, "row_sparse"),
        EW.rsp_dense_result("a / b", ra, rb, shape),
        E.rsp_retain(*ra, np.arange(0, 600, 2), shape),
        E.rsp_square_sum(*ra, shape, 0, False)[1], E.rsp_square_sum(*ra, shape, 1, True)[1],
        E.csr_sum(*a, shape, 0, False), E.csr_sum(*a, shape, 1, False),
        E.add_n_rsp([ra, rb, ra], shape),
    ]
    return out


def _flat(x: Any) -> list[np.ndarray]:
    return [a for y in x for a in _flat(y)] if isinstance(x, tuple) else [x]


def test_large_inputs_thread_count_independent():
    before = compiler.get_num_threads()
    try:
        compiler.set_num_threads(1)
        serial = _all_results(7)
        compiler.set_num_threads(max(3, before))
        parallel = _all_results(7)
    finally:
        compiler.set_num_threads(before)
    for s, p in zip(serial, parallel, strict=True):
        for x, y in zip(_flat(s), _flat(p), strict=True):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
    # and against the dense reference
    rng = np.random.default_rng(7)
    shape = (600, 400)
    _, dense_a, _ = rand_csr(rng, shape, 0.4, "float32")
    _, dense_b, _ = rand_csr(rng, shape, 0.3, "float32")
    np.testing.assert_array_equal(E.csr_to_dense(*parallel[4], shape), dense_a - dense_b)
    np.testing.assert_array_equal(parallel[2], dense_a)


# ---- a 10**6 x 10**6 csr (10**12 logical elements) never made dense ----

def test_huge_csr_stays_sparse():
    n = 10**6
    shape = (n, n)
    rng = np.random.default_rng(3)

    def rand(nnz: int) -> sp.csr_matrix:
        r, c = rng.integers(0, n, nnz), rng.integers(0, n, nnz)
        m = sp.coo_matrix((rng.standard_normal(nnz), (r, c)), shape=shape).tocsr()
        m.sum_duplicates()
        m.sort_indices()
        return m

    sa = rand(1000)
    sb = rand(1000)
    sb = (sb + sp.csr_matrix((sa.data[:300], sa.indices[:300],
                              np.minimum(sa.indptr, 300)), shape=shape)).tocsr()
    sb.sort_indices()
    a = (sa.data, sa.indices.astype(np.int64), sa.indptr.astype(np.int64))
    b = (sb.data, sb.indices.astype(np.int64), sb.indptr.astype(np.int64))
    assert 500 < sa.nnz < 2000
    tracemalloc.start()
    try:
        add = EW.csr_binary("a + b", "union", a, b, shape)
        sub = EW.csr_binary("a - b", "union", a, b, shape)
        mul = EW.csr_binary("a * b", "intersection", a, b, shape)
        s0 = E.csr_sum(*a, shape, 0, False)
        s1 = E.csr_sum(*a, shape, 1, True)
        # row_sparse views of the same rows: retain, add_n, square sums, rsp binaries
        rows_a = np.unique(np.repeat(np.arange(n), np.diff(a[2])))
        rsp_a = (np.ones((len(rows_a), 1), np.float64), rows_a)
        kept = E.rsp_retain(*rsp_a, rows_a[::2], (n, 1))
        summed = E.add_n_rsp([rsp_a, kept], (n, 1))
        sq = E.rsp_square_sum(np.ones((len(rows_a), 3)), rows_a, (n, 3), 1, True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20  # the indptrs (8 MB each) and the dense sums, nothing n * n
    for got, ref_m in ((add, sa + sb), (sub, sa - sb), (mul, sa.multiply(sb).tocsr())):
        check_csr(got, shape, np.float64)
        ref_m = sp.csr_matrix(ref_m)
        ref_m.sort_indices()
        # scipy drops computed zeros; ours keeps the union / intersection pattern
        mine = sp.csr_matrix(got, shape=shape)
        assert abs(mine - ref_m).max() == 0
    union = ((sa != 0).astype(np.int8) + (sb != 0).astype(np.int8)).tocsr()
    assert add[2][-1] == union.nnz
    np.testing.assert_allclose(s0, np.asarray(sa.sum(axis=0)).ravel())
    np.testing.assert_allclose(s1, np.asarray(sa.sum(axis=1)))
    np.testing.assert_array_equal(kept[1], rows_a[::2])
    np.testing.assert_array_equal(summed[1], rows_a)
    np.testing.assert_array_equal(summed[0][:, 0], np.where(np.isin(rows_a, rows_a[::2]), 2, 1))
    assert sq[0] == "row_sparse" and np.all(sq[1][0] == 3)
    # cast round trip of the non-empty band: csr -> dense -> csr of the rows that hold entries
    r0, r1 = int(rows_a[0]), int(rows_a[0]) + 1
    band = (a[0][a[2][r0]:a[2][r1]], a[1][a[2][r0]:a[2][r1]],
            a[2][r0:r1 + 1] - a[2][r0])
    dense_band = E.csr_to_dense(*band, (1, n))
    back = E.cast_dense_to_csr(dense_band)
    for x, y in zip(back, band, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(E.cast_dense_to_rsp(dense_band)[1], [0])


@pytest.mark.slow
def test_dense_cast_beyond_int32_elements():
    """Dense casts whose offsets pass 2**31 elements (about 9 GB of memory)."""
    rows, cols = 2**16 + 4, 2**15
    dense = np.zeros((rows, cols), np.float16)
    spots = [(0, 0), (2**16 + 1, 5), (2**16 + 3, cols - 1), (70000 - 4537, 17)]
    for i, (r, c) in enumerate(spots):
        dense[r, c] = i + 1
    c = E.cast_dense_to_csr(dense)
    check_csr(c, (rows, cols), np.float16)
    assert len(c[0]) == len(spots)
    rs = E.cast_dense_to_rsp(dense)
    np.testing.assert_array_equal(rs[1], sorted(r for r, _ in spots))
    del dense
    back = E.csr_to_dense(*c, (rows, cols))
    for i, (r, col) in enumerate(spots):
        assert back[r, col] == i + 1
    assert np.count_nonzero(back) == len(spots)
    del back
    back = E.rsp_to_dense(*rs, (rows, cols))
    assert np.count_nonzero(back) == len(spots) and back[2**16 + 3, cols - 1] == 3
