"""Memory safety of sparse arrays whose index arrays were broken through their writable views
(``.indices`` / ``.indptr``) or handed to the public constructors: every path that reaches a
kernel, a copy or a slice raises StorageTypeError naming the array, the position and the value;
valid content written through the views keeps working (checked against scipy.sparse). Also the
sparse regressions of the hardening issue: float64 kept with no stored values, huge csr shapes,
csr.T . dense sized by the entries rather than the column count."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnsym as mx
from nnsym import nd
from nnsym.errors import ShapeError, StorageTypeError
from nnsym.ops.common import sparse as common_sparse
from nnsym.ops.dot import csr as dot_csr
from nnsym.testing import as_nd

BROKEN = "changed through .indices/.indptr"


CSR_PARTS = (np.arange(1, 5, dtype=np.float32), [0, 2, 1, 3], [0, 2, 3, 4])


def _csr() -> nd.sparse.CSRNDArray:
    return nd.sparse.csr_matrix(CSR_PARTS, shape=(3, 4))


def _rsp() -> nd.sparse.RowSparseNDArray:
    return nd.sparse.row_sparse_array((np.ones((2, 4), np.float32), [0, 2]), shape=(3, 4))


USES = {
    "asnumpy": lambda x: x.asnumpy(),
    "copy": lambda x: x.copy(),
    "copyto": lambda x: x.copyto(nd.zeros(x.shape)),
    "copyto_same_stype": lambda x: x.copyto(nd.sparse.zeros(x.stype, x.shape)),
    "tostype_default": lambda x: x.tostype("default"),
    "tostype_other": lambda x: x.tostype("row_sparse" if x.stype == "csr" else "csr"),
    "astype": lambda x: x.astype("float64"),
    "elemwise_add": lambda x: nd.elemwise_add(x, x),
    "plus_dense": lambda x: x + nd.ones(x.shape),
    "sqrt": lambda x: nd.sqrt(x),
    "mul_scalar": lambda x: x * 2,
    "sum_axis0": lambda x: nd.sum(x, axis=0),
    "sum_axis1": lambda x: nd.sum(x, axis=1),
    "dot": lambda x: nd.dot(x, nd.ones((4, 2))),
    "dot_t": lambda x: nd.dot(x, nd.ones((3, 2)), transpose_a=True),
    "dense_dot": lambda x: nd.dot(nd.ones((2, 3)), x),
    "asscipy": lambda x: x.asscipy(),
    "setitem_into_dense": lambda x: nd.zeros(x.shape).__setitem__(slice(None), x),
    "retain": lambda x: nd.sparse.retain(x, nd.array([0, 1], dtype="int64")),
    "square_sum": lambda x: nd._internal._square_sum(x, axis=1),
}


def _applies(name: str, x) -> bool:
    if x.stype == "row_sparse":
        return name not in {"dense_dot"}
    return name not in {"retain", "square_sum"}


CORRUPTIONS = {
    "csr": [
        ("indices", 2, 4, "column index 4 at position 2"),
        ("indices", 0, -1, "column index -1 at position 0"),
        ("indices", 1, 10**9, "column index 1000000000 at position 1"),
        ("indptr", 1, 10**9, "indptr decreases at position 2"),
        ("indptr", 0, 1, "indptr[0] is 1"),
        ("indptr", 3, 3, "expected nnz = 4"),
        ("indices", 1, 0, "column indices are not strictly increasing within a row at "
                          "position 1 (0 then 0)"),
    ],
    "row_sparse": [
        ("indices", 1, 5, "row id 5 at position 1"),
        ("indices", 0, -7, "row id -7 at position 0"),
        ("indices", 1, 0, "row ids are not strictly increasing at position 1"),
    ],
}
CASES = [(stype, c, use) for stype, cs in CORRUPTIONS.items() for c in cs for use in USES]


@pytest.mark.parametrize(("stype", "corruption", "use"), CASES,
                         ids=[f"{s}-{c[0]}{c[1]}={c[2]}-{u}" for s, c, u in CASES])
def test_broken_index_arrays_raise_naming_position_and_value(stype, corruption, use):
    x = _csr() if stype == "csr" else _rsp()
    if not _applies(use, x):
        pytest.skip("not an operation of this storage type")
    which, pos, value, message = corruption
    getattr(x, which)[pos] = value
    with pytest.raises(StorageTypeError, match=BROKEN) as e:
        USES[use](x)
    assert message in str(e.value)


def test_the_operator_and_input_are_named():
    x = _csr()
    x.indices[2] = 4
    with pytest.raises(StorageTypeError, match="elemwise_add input 'rhs'"):
        nd.elemwise_add(nd.sparse.zeros("csr", (3, 4)), x)


def test_a_bound_graph_checks_its_sparse_inputs():
    data = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("w")
    exe = mx.sym.dot(data, w).bind(mx.cpu(), {"data": _csr(), "w": nd.ones((4, 2))})
    x = _csr()
    x.indices[1] = 9
    with pytest.raises(StorageTypeError, match="column index 9 at position 1"):
        exe.forward(data=x)
    exe = mx.sym.dot(data, w, name="d").bind(mx.cpu(), {"data": x, "w": nd.ones((4, 2))})
    with pytest.raises(StorageTypeError, match="node 'd' \\(dot\\) input 'lhs'"):
        exe.forward()
    bound = exe.arg_dict["data"]
    bound.indptr[1] = 10**9
    with pytest.raises(StorageTypeError, match="indptr decreases"):
        exe.forward()


def test_valid_writes_through_the_views_still_compute():
    x = _csr()
    x.indices[2] = 3  # still in range and increasing: row 1 moves its entry to column 3
    ref = sp.csr_matrix((CSR_PARTS[0], [0, 2, 3, 3], CSR_PARTS[2]), shape=(3, 4))
    np.testing.assert_array_equal(x.asnumpy(), ref.toarray())
    np.testing.assert_array_equal(nd.dot(x, nd.ones((4, 2))).asnumpy(),
                                  ref @ np.ones((4, 2), np.float32))
    r = _rsp()
    r.indices[1] = 1
    want = np.zeros((3, 4), np.float32)
    want[[0, 1]] = 1
    np.testing.assert_array_equal((r * 3).asnumpy(), want * 3)


def test_optimizer_updates_check_a_row_sparse_gradient():
    g = _rsp()
    g.indices[1] = 5
    for update in (lambda w: nd.sgd_update(w, g, lr=0.1),
                   lambda w: nd.sgd_mom_update(w, g, nd.zeros((3, 4)), lr=0.1, momentum=0.9),
                   lambda w: nd.adam_update(w, g, nd.zeros((3, 4)), nd.zeros((3, 4)), lr=0.1)):
        w = nd.ones((3, 4))
        with pytest.raises(StorageTypeError, match="row id 5 at position 1"):
            update(w)
        np.testing.assert_array_equal(w.asnumpy(), np.ones((3, 4)))  # nothing written


def test_public_constructors_validate_and_canonicalise():
    with pytest.raises(StorageTypeError, match="column index 7 at position 2"):
        nd.sparse.CSRNDArray(np.ones(3), [0, 1, 7], [0, 1, 2, 3], (3, 4))
    with pytest.raises(StorageTypeError, match="row id 7 at position 1"):
        nd.sparse.RowSparseNDArray(np.ones((2, 4)), [0, 7], (3, 4))
    with pytest.raises(StorageTypeError, match="indptr"):
        nd.sparse.CSRNDArray(np.ones(3), [0, 1, 2], [0, 2, 1, 3], (3, 4))
    a = nd.sparse.CSRNDArray(np.array([1.0, 2.0, 3.0]), [2, 0, 2], [0, 3, 3, 3], (3, 4))
    ref = sp.coo_matrix(([1.0, 2.0, 3.0], ([0, 0, 0], [2, 0, 2])), shape=(3, 4)).toarray()
    np.testing.assert_array_equal(a.asnumpy(), ref)  # sorted, duplicates summed
    assert a.indices.asnumpy().tolist() == [0, 2]
    src = np.array([0, 1], np.int64)
    r = nd.sparse.RowSparseNDArray(np.ones((2, 4), np.float32), src, (3, 4))
    src[1] = 99  # the constructor copied: the caller's array is not the array's storage
    assert r.indices.asnumpy().tolist() == [0, 1]


def test_check_format_reports_the_first_problem():
    x = _csr()
    x.indices[1] = 0
    with pytest.raises(StorageTypeError, match="not strictly increasing"):
        x.check_format()
    x.check_format(full_check=False)  # lengths and ends are still right


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(1, 7), cols=st.integers(1, 9), density=st.floats(0, 1),
       seed=st.integers(0, 2**31), position=st.integers(0, 100),
       value=st.one_of(st.integers(-3, 12), st.sampled_from([-(2**63), 2**63 - 1, 2**31])),
       which=st.sampled_from(["indices", "indptr"]))
def test_the_c_check_agrees_with_a_reference(rows, cols, density, seed, position, value, which):
    """The C structure check finds a problem exactly when scipy's canonical-form check (plus
    ranges) does, at any written position and value."""
    rng = np.random.default_rng(seed)
    m = sp.random(rows, cols, density=density, format="csr", random_state=rng, dtype=np.float32)
    ix, ip = m.indices.astype(np.int64), m.indptr.astype(np.int64)
    target = ix if which == "indices" else ip
    if target.size:
        target[position % target.size] = value
    ok = (ip[0] == 0 and ip[-1] == ix.size and bool(np.all(np.diff(ip) >= 0))
          and bool(np.all((ix >= 0) & (ix < cols))))
    if ok:
        for r in range(rows):
            seg = ix[ip[r]:ip[r + 1]]
            ok = ok and bool(np.all(np.diff(seg) > 0))
    assert (common_sparse.csr_problem(ip, ix, (rows, cols)) is None) == ok


def test_sparse_dtype_is_kept_with_no_stored_values():
    c = nd.sparse.csr_matrix((np.zeros(0, np.float64), np.zeros(0, np.int64),
                              np.zeros(4, np.int64)), shape=(3, 4))
    r = nd.sparse.row_sparse_array((np.zeros((0, 4), np.float64), np.zeros(0, np.int64)),
                                   shape=(3, 4))
    assert c.dtype == np.float64 and r.dtype == np.float64
    assert nd.sparse.csr_matrix(sp.csr_matrix((3, 4), dtype=np.float64)).dtype == np.float64
    assert nd.sparse.csr_matrix((np.zeros(0, np.float64), ([], [])), shape=(3, 4)).dtype \
        == np.float64
    # a Python list has no dtype: float32, as MXNet
    assert nd.sparse.csr_matrix(([1, 2], [1, 2], [0, 1, 2, 2]), shape=(3, 4)).dtype == np.float32


def test_huge_sparse_shapes_raise_shape_errors():
    with pytest.raises(ShapeError, match="8,796,093,022,216 bytes"):
        nd.sparse.zeros("csr", (2**40, 3))
    with pytest.raises(ShapeError, match="beyond int64"):
        nd.sparse.zeros("row_sparse", (1, 2**64))
    with pytest.raises(ShapeError, match="beyond int64"):
        nd.sparse.zeros("row_sparse", (2**62, 8))
    big = nd.sparse.zeros("row_sparse", (2**40, 3))  # stores no rows: an ordinary array
    assert big.shape == (2**40, 3) and big.data.shape == (0, 3)


def test_csr_t_dot_with_far_more_columns_than_entries():
    cols = 2**40
    x = nd.sparse.csr_matrix((np.array([2.0, 5.0], np.float32),
                              (np.array([1, 2]), np.array([cols - 5, 7]))), shape=(3, cols))
    rhs = np.arange(6, dtype=np.float32).reshape(3, 2)
    r = nd.dot(x, as_nd(rhs), transpose_a=True)
    assert r.stype == "row_sparse" and r.shape == (cols, 2)
    assert r.indices.asnumpy().tolist() == [7, cols - 5]
    np.testing.assert_array_equal(r.data.asnumpy(), [5 * rhs[2], 2 * rhs[1]])
    d = nd.dot(nd.array(rhs.T), x)  # dense . csr keeps the columns holding entries
    assert d.stype == "csr" and d.shape == (2, cols)
    np.testing.assert_array_equal(d.data.asnumpy(), (rhs.T[:, [2, 1]] * [5, 2]).reshape(-1))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_compressed_columns_match_scipy(monkeypatch, dtype):
    """The compressed-column path (forced on with a low threshold) against scipy."""
    monkeypatch.setattr(dot_csr, "COMPRESS_COLS_MIN", 0)
    rng = np.random.default_rng(3)
    m = sp.random(40, 500, density=0.01, format="csr", random_state=rng, dtype=np.float64)
    x = nd.sparse.csr_matrix(m, dtype=dtype)
    rhs = rng.standard_normal((40, 3)).astype(dtype)
    r = nd.dot(x, as_nd(rhs), transpose_a=True)
    tol = 1e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(r.asnumpy(), m.T @ rhs.astype(np.float64), rtol=tol, atol=tol)
    want_rows = np.unique(m.indices)
    assert r.indices.asnumpy().tolist() == want_rows.tolist()
    lhs = rng.standard_normal((4, 40)).astype(dtype)
    d = nd.dot(as_nd(lhs), x)
    np.testing.assert_allclose(d.asnumpy(), lhs.astype(np.float64) @ m.toarray(), rtol=tol,
                               atol=tol)
