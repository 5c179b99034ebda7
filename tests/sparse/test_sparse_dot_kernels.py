"""The csr dot kernels (nnsym.ops.dot.csr) against independent numpy references (per-entry
accumulation with np.add.at in float64, never a dense csr), over random sparsity patterns
(nnz = 0, empty rows and columns, full density, explicit zeros), both float dtypes, block widths
around the kernels' vector blocks, 1 to 3 threads, and a 10**6 x 10**6 csr."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnsym.codegen import compiler
from nnsym.ops.dot import csr as dot

DTYPES = ("float32", "float64")
SETTINGS = settings(max_examples=30, deadline=None)
# widths: scalar path, short rows, one vector block (float32: 64, float64: 32) and tails
WIDTHS = (1, 3, 32, 64, 70, 131)

Csr = tuple[np.ndarray, np.ndarray, np.ndarray]


@contextmanager
def threads(n: int) -> Iterator[None]:
    old = compiler.get_num_threads()
    compiler.set_num_threads(n)
    try:
        yield
    finally:
        compiler.set_num_threads(old)


def rand_csr(rng: np.random.Generator, rows: int, cols: int, density: float,
             dtype: str) -> Csr:
    """A canonical csr with about density * cols entries per row (one explicit zero)."""
    mask = rng.random((rows, cols)) < density
    r, c = np.nonzero(mask)
    data = rng.standard_normal(r.size).astype(dtype)
    if data.size:
        data[0] = 0
    indptr = np.zeros(rows + 1, np.int64)
    np.cumsum(np.bincount(r, minlength=rows), out=indptr[1:])
    return data, c.astype(np.int64), indptr


def entry_rows(indptr: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))


def ref_dot(csr: Csr, rows: int, rhs: np.ndarray) -> np.ndarray:
    """csr @ rhs in float64, entry by entry."""
    data, indices, indptr = csr
    r2 = rhs.reshape(rhs.shape[0], int(np.prod(rhs.shape[1:]))).astype(np.float64)
    out = np.zeros((rows, r2.shape[1]))
    np.add.at(out, entry_rows(indptr), data[:, None].astype(np.float64) * r2[indices])
    return out.reshape((rows, *rhs.shape[1:]))


def ref_t_dot(csr: Csr, cols: int, rhs: np.ndarray) -> np.ndarray:
    """csr.T @ rhs in float64, entry by entry (dense (cols, ...))."""
    data, indices, indptr = csr
    r2 = rhs.reshape(rhs.shape[0], int(np.prod(rhs.shape[1:]))).astype(np.float64)
    out = np.zeros((cols, r2.shape[1]))
    np.add.at(out, indices, data[:, None].astype(np.float64) * r2[entry_rows(indptr)])
    return out.reshape((cols, *rhs.shape[1:]))


def tol(dtype: str, ref: np.ndarray, terms: int) -> dict[str, float]:
    eps = float(np.finfo(dtype).eps)
    scale = float(np.abs(ref).max()) if ref.size else 1.0
    return {"rtol": 8 * eps * max(terms, 1), "atol": 8 * eps * max(terms, 1) * max(scale, 1.0)}


def check_rsp(values: np.ndarray, ids: np.ndarray, csr: Csr, dense_ref: np.ndarray,
              dtype: str) -> None:
    """The row_sparse holds exactly the columns with a stored entry, with their values."""
    np.testing.assert_array_equal(ids, np.unique(csr[1]))
    assert ids.dtype == np.int64 and values.dtype == np.dtype(dtype)
    assert values.shape == (ids.shape[0], *dense_ref.shape[1:])
    np.testing.assert_allclose(values, dense_ref[ids], **tol(dtype, dense_ref, 64))
    rest = np.ones(dense_ref.shape[0], bool)
    rest[ids] = False
    assert not dense_ref[rest].any()


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.random.Generator, int, int, float, str, int]:
    rows, cols = draw(st.integers(0, 40)), draw(st.integers(0, 40))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    return (np.random.default_rng(draw(st.integers(0, 2**31 - 1))), rows, cols, density,
            draw(st.sampled_from(DTYPES)), draw(st.sampled_from(WIDTHS)))


# ---- csr . dense ----

@SETTINGS
@given(problems(), st.sampled_from(["write", "add"]), st.integers(1, 3))
def test_csr_dot_dense_random(p, req, nthreads):
    rng, rows, cols, density, dtype, n = p
    csr = rand_csr(rng, rows, cols, density, dtype)
    rhs = rng.standard_normal((cols, n)).astype(dtype)
    out = rng.standard_normal((rows, n)).astype(dtype)
    want = ref_dot(csr, rows, rhs) + (out if req == "add" else 0)
    with threads(nthreads):
        got = dot.csr_dot_dense(*csr, (rows, cols), rhs, out=out, req=req)
    assert got is out
    np.testing.assert_allclose(out, want, **tol(dtype, want, cols + 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_csr_dot_dense_vector_and_alloc(dtype):
    rng = np.random.default_rng(1)
    csr = rand_csr(rng, 30, 20, 0.3, dtype)
    x = rng.standard_normal(20).astype(dtype)
    got = dot.csr_dot_dense(*csr, (30, 20), x)
    assert got.shape == (30,) and got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, ref_dot(csr, 30, x), **tol(dtype, got, 20))
    rhs3 = rng.standard_normal((20, 2, 3)).astype(dtype)
    got3 = dot.csr_dot_dense(*csr, (30, 20), rhs3)
    np.testing.assert_allclose(got3, ref_dot(csr, 30, rhs3), **tol(dtype, got3, 20))


@pytest.mark.parametrize("dtype", DTYPES)
def test_csr_dot_dense_thread_count_independent(dtype):
    rng = np.random.default_rng(2)
    rows, cols, n = 3000, 500, 70
    csr = rand_csr(rng, rows, cols, 0.02, dtype)
    rhs = rng.standard_normal((cols, n)).astype(dtype)
    results = []
    for t in (1, 2, 3):
        with threads(t):
            results.append(dot.csr_dot_dense(*csr, (rows, cols), rhs))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    np.testing.assert_allclose(results[0], ref_dot(csr, rows, rhs), **tol(dtype, results[0], 30))


@pytest.mark.parametrize("dtype", DTYPES)
def test_csr_dot_dense_edges(dtype):
    empty: Csr = (np.zeros(0, dtype), np.zeros(0, np.int64), np.zeros(6, np.int64))
    rhs = np.ones((4, 3), dtype)
    np.testing.assert_array_equal(dot.csr_dot_dense(*empty, (5, 4), rhs), np.zeros((5, 3)))
    out = np.full((5, 3), 7, dtype)
    dot.csr_dot_dense(*empty, (5, 4), rhs, out=out, req="add")
    np.testing.assert_array_equal(out, 7)
    no_rows: Csr = (np.zeros(0, dtype), np.zeros(0, np.int64), np.zeros(1, np.int64))
    assert dot.csr_dot_dense(*no_rows, (0, 4), rhs).shape == (0, 3)
    # full density equals the dense product
    rng = np.random.default_rng(3)
    full = rand_csr(rng, 6, 4, 1.0, dtype)
    dense = np.zeros((6, 4))
    dense[entry_rows(full[2]), full[1]] = full[0]
    np.testing.assert_allclose(dot.csr_dot_dense(*full, (6, 4), rhs), dense @ rhs, rtol=1e-6)


def test_csr_dot_dense_errors():
    csr: Csr = (np.ones(1, np.float32), np.zeros(1, np.int64), np.array([0, 1], np.int64))
    with pytest.raises(TypeError):
        dot.csr_dot_dense(*csr, (1, 2), np.ones((2, 3), np.float64))
    with pytest.raises(TypeError):
        dot.csr_dot_dense(csr[0].astype(np.int32), *csr[1:], (1, 2), np.ones((2, 3), np.int32))
    with pytest.raises(ValueError):
        dot.csr_dot_dense(*csr, (1, 2), np.ones((3, 3), np.float32))
    with pytest.raises(ValueError):
        dot.csr_dot_dense(*csr, (1, 2), np.ones((2, 3), np.float32), req="add")
    with pytest.raises(ValueError):
        dot.csr_dot_dense(*csr, (1, 2), np.ones((2, 3), np.float32),
                          out=np.zeros((1, 3), np.float32), req="inplace")
    with pytest.raises(ValueError):
        dot.csr_dot_dense(*csr, (1, 2), np.ones((2, 3), np.float32),
                          out=np.zeros((1, 4), np.float32))


# ---- csr.T . dense -> row_sparse ----

@SETTINGS
@given(problems(), st.integers(1, 3))
def test_csr_t_dot_dense_random(p, nthreads):
    rng, rows, cols, density, dtype, n = p
    csr = rand_csr(rng, rows, cols, density, dtype)
    rhs = rng.standard_normal((rows, n)).astype(dtype)
    with threads(nthreads):
        values, ids = dot.csr_t_dot_dense(*csr, (rows, cols), rhs)
    check_rsp(values, ids, csr, ref_t_dot(csr, cols, rhs), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_csr_t_dot_dense_parallel_parts(dtype):
    """Large enough to split into per-thread buffers: reproducible per thread count."""
    rng = np.random.default_rng(4)
    rows, cols, n = 3000, 500, 64
    csr = rand_csr(rng, rows, cols, 0.02, dtype)
    rhs = rng.standard_normal((rows, n)).astype(dtype)
    want = ref_t_dot(csr, cols, rhs)
    for t in (1, 2, 3):
        with threads(t):
            v1, i1 = dot.csr_t_dot_dense(*csr, (rows, cols), rhs)
            v2, i2 = dot.csr_t_dot_dense(*csr, (rows, cols), rhs)
        np.testing.assert_array_equal(v1, v2)
        np.testing.assert_array_equal(i1, i2)
        check_rsp(v1, i1, csr, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_csr_t_dot_dense_edges(dtype):
    empty: Csr = (np.zeros(0, dtype), np.zeros(0, np.int64), np.zeros(4, np.int64))
    values, ids = dot.csr_t_dot_dense(*empty, (3, 5), np.ones((3, 2), dtype))
    assert values.shape == (0, 2) and ids.shape == (0,)
    # 1-D rhs gives 1-D row values; explicit zeros keep their column
    csr: Csr = (np.array([0.0, 2.0], dtype), np.array([1, 3], np.int64),
                np.array([0, 1, 1, 2], np.int64))
    values, ids = dot.csr_t_dot_dense(*csr, (3, 5), np.array([1.0, 5.0, 3.0], dtype))
    np.testing.assert_array_equal(ids, [1, 3])
    np.testing.assert_array_equal(values, np.array([0.0, 6.0], dtype))
    with pytest.raises(ValueError):
        dot.csr_t_dot_dense(*csr, (3, 5), np.ones((5, 2), dtype))


@pytest.mark.parametrize("req", ["write", "add"])
def test_csr_t_dot_dense_into(req):
    rng = np.random.default_rng(5)
    rows, cols, n = 200, 50, 6
    csr = rand_csr(rng, rows, cols, 0.05, "float32")
    rhs = rng.standard_normal((rows, n)).astype(np.float32)
    out = rng.standard_normal((cols, n)).astype(np.float32)
    want = ref_t_dot(csr, cols, rhs) + (out if req == "add" else 0)
    assert dot.csr_t_dot_dense_into(*csr, (rows, cols), rhs, out, req=req) is out
    np.testing.assert_allclose(out, want, **tol("float32", want, 20))
    with pytest.raises(ValueError):
        dot.csr_t_dot_dense_into(*csr, (rows, cols), rhs, np.zeros((cols, n + 1), np.float32))


# ---- csr . row_sparse ----

@SETTINGS
@given(problems(), st.booleans(), st.sampled_from([0.0, 0.4, 1.0]))
def test_csr_dot_rsp_random(p, transpose_a, rsp_density):
    rng, rows, cols, density, dtype, n = p
    csr = rand_csr(rng, rows, cols, density, dtype)
    inner = rows if transpose_a else cols
    rsp_ids = np.nonzero(rng.random(inner) < rsp_density)[0].astype(np.int64)
    rsp_vals = rng.standard_normal((rsp_ids.size, n)).astype(dtype)
    dense_rhs = np.zeros((inner, n), dtype)
    dense_rhs[rsp_ids] = rsp_vals
    got = dot.csr_dot_rsp(*csr, (rows, cols), rsp_vals, rsp_ids, (inner, n), transpose_a)
    if not transpose_a:
        assert isinstance(got, np.ndarray)
        want = ref_dot(csr, rows, dense_rhs)
        np.testing.assert_allclose(got, want, **tol(dtype, want, cols + 1))
        return
    assert isinstance(got, tuple)
    values, ids = got
    # rows: the columns with an entry in a csr row that the row_sparse stores
    present = np.zeros(rows, bool)
    present[rsp_ids] = True
    kept = present[entry_rows(csr[2])]
    np.testing.assert_array_equal(ids, np.unique(csr[1][kept]))
    want = ref_t_dot(csr, cols, dense_rhs)
    np.testing.assert_allclose(values, want[ids], **tol(dtype, want, rows + 1))


@pytest.mark.parametrize("transpose_a", [False, True])
def test_csr_dot_rsp_parallel(transpose_a):
    rng = np.random.default_rng(10)
    rows, cols, n = 3000, 500, 64
    csr = rand_csr(rng, rows, cols, 0.02, "float32")
    inner = rows if transpose_a else cols
    rsp_ids = np.nonzero(rng.random(inner) < 0.5)[0].astype(np.int64)
    rsp_vals = rng.standard_normal((rsp_ids.size, n)).astype(np.float32)
    dense_rhs = np.zeros((inner, n), np.float32)
    dense_rhs[rsp_ids] = rsp_vals
    with threads(2):
        got = dot.csr_dot_rsp(*csr, (rows, cols), rsp_vals, rsp_ids, (inner, n), transpose_a)
    if transpose_a:
        assert isinstance(got, tuple)
        want = ref_t_dot(csr, cols, dense_rhs)
        np.testing.assert_allclose(got[0], want[got[1]], **tol("float32", want, 100))
    else:
        want = ref_dot(csr, rows, dense_rhs)
        np.testing.assert_allclose(got, want, **tol("float32", want, 20))


def test_csr_dot_rsp_errors():
    csr: Csr = (np.ones(1, np.float32), np.zeros(1, np.int64), np.array([0, 1], np.int64))
    vals, ids = np.ones((1, 2), np.float32), np.zeros(1, np.int64)
    with pytest.raises(ValueError):
        dot.csr_dot_rsp(*csr, (1, 3), vals, ids, (4, 2))
    with pytest.raises(ValueError):
        dot.csr_dot_rsp(*csr, (1, 3), vals, ids, (3, 3))
    with pytest.raises(TypeError):
        dot.csr_dot_rsp(*csr, (1, 3), vals.astype(np.float64), ids, (3, 2))


# ---- dense . csr -> csr ----

@SETTINGS
@given(problems(), st.integers(0, 5))
def test_dense_dot_csr_random(p, m):
    rng, rows, cols, density, dtype, _ = p
    csr = rand_csr(rng, rows, cols, density, dtype)
    lhs = rng.standard_normal((m, rows)).astype(dtype)
    data, indices, indptr = dot.dense_dot_csr(lhs, *csr, (rows, cols))
    assert indptr.shape == (m + 1,) and indptr[0] == 0 and indptr[-1] == data.shape[0]
    assert data.dtype == np.dtype(dtype) and indices.dtype == indptr.dtype == np.int64
    got = np.zeros((m, cols), np.float64)
    for i in range(m):
        seg = indices[indptr[i]:indptr[i + 1]]
        assert np.all(np.diff(seg) > 0) and (seg.size == 0 or (seg[0] >= 0 and seg[-1] < cols))
        got[i, seg] = data[indptr[i]:indptr[i + 1]]
    # the reference: rows of lhs times the csr's transpose-accumulated columns
    want = ref_t_dot(csr, cols, lhs.T.copy()).T
    np.testing.assert_allclose(got, want, **tol(dtype, want, rows + 1))


# ---- 10**6 x 10**6: int64 offsets, no dense allocation ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_million_square_csr(dtype):
    rng = np.random.default_rng(6)
    big = 1_000_000
    nnz = 2000
    r = np.sort(rng.choice(big, nnz, replace=False))
    c = rng.integers(0, big, nnz)
    indptr = np.zeros(big + 1, np.int64)
    np.cumsum(np.bincount(r, minlength=big), out=indptr[1:])
    csr: Csr = (rng.standard_normal(nnz).astype(dtype), c.astype(np.int64), indptr)
    rhs = rng.standard_normal((big, 2)).astype(dtype)
    out = dot.csr_dot_dense(*csr, (big, big), rhs)
    want = np.zeros((big, 2))
    want[r] = csr[0][:, None].astype(np.float64) * rhs[c]
    np.testing.assert_allclose(out, want, **tol(dtype, want, 2))
    values, ids = dot.csr_t_dot_dense(*csr, (big, big), rhs)
    np.testing.assert_array_equal(ids, np.unique(c))
    want_t = np.zeros((ids.size, 2))
    np.add.at(want_t, np.searchsorted(ids, c),
              csr[0][:, None].astype(np.float64) * rhs[r])
    np.testing.assert_allclose(values, want_t, **tol(dtype, want_t, 4))
