"""The sparse operators cast_storage, _sparse_retain (nd.sparse.retain) and _square_sum
(nd.sparse.square_sum): values against numpy/scipy over random patterns (nnz = 0, empty rows,
full density), both implementations of the storage-specialised paths (C kernels and numpy),
storage types and dispatch modes against MXNet 1.9.1's table, the symbol and executor paths,
gradients, and the errors."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym import nd, sym
from nnsym.codegen import compiler
from nnsym.errors import DTypeError, OperatorParamError, ShapeError, StorageTypeError
from nnsym.ndarray.sparse_ops import invoke_sparse
from nnsym.ops import get_op
from nnsym.ops.common.stype import StorageFallbackWarning, infer_storage
from nnsym.runtime.imperative import run_op
from nnsym.testing import as_nd, infer_node
from nnsym.types import SType

STYPES = ("default", "row_sparse", "csr")
FLOATS = ("float32", "float64")
SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
FIXTURE = Path(__file__).resolve().parent.parent / "golden" / "mxnet-stype-cases.txt"



def _dense(rng, shape, density, dtype, row_density=1.0):
    """Random values, zero with probability 1 - density, and whole rows zero with probability
    1 - row_density (empty rows)."""
    a = rng.standard_normal(shape).astype(dtype)
    a[rng.random(shape) >= density] = 0
    if len(shape) and shape[0]:
        a[rng.random(shape[0]) >= row_density] = 0
    return a


def _rsp_of(a, rng, extra_zero_rows=True):
    """A row_sparse array holding ``a``'s non-zero rows and (sometimes) a few stored zero rows,
    which the operators must treat as stored rows."""
    flat = a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))
    rows = set(np.flatnonzero(flat.any(axis=1)).tolist())
    if extra_zero_rows and a.shape[0]:
        rows |= set(rng.choice(a.shape[0], size=min(2, a.shape[0]), replace=False).tolist())
    ids = np.array(sorted(rows), dtype=np.int64)
    return nd.sparse.row_sparse_array((a[ids], ids), shape=a.shape, dtype=a.dtype), ids


# ---------------------------------------------------------------------------------------------
# cast_storage


@SETTINGS
@given(src=st.sampled_from(STYPES), dst=st.sampled_from(STYPES),
       density=st.sampled_from([0.0, 0.3, 1.0]), row_density=st.sampled_from([0.5, 1.0]),
       dtype=st.sampled_from(FLOATS), rows=st.integers(0, 7), cols=st.integers(1, 6),
       seed=st.integers(0, 2**31), positional=st.booleans())
def test_cast_storage_matches_numpy_and_scipy(backend, src, dst, density, row_density, dtype,
                                              rows, cols, seed, positional):
    rng = np.random.default_rng(seed)
    a = _dense(rng, (rows, cols), density, dtype, row_density)
    x = nd.array(a, dtype=dtype).tostype(src)
    y = nd.cast_storage(x, dst) if positional else nd.cast_storage(x, stype=dst)
    assert y.stype == dst and y.dtype == np.dtype(dtype) and y.shape == a.shape
    np.testing.assert_array_equal(y.asnumpy(), a)
    assert y is not x
    if dst == "csr":
        y.check_format()
        want = sp.csr_matrix(a)  # scipy drops the zeros of a dense matrix, as cast_storage must
        np.testing.assert_array_equal(y.indptr.asnumpy(), want.indptr)
        np.testing.assert_array_equal(y.indices.asnumpy(), want.indices)
        np.testing.assert_array_equal(y.data.asnumpy(), want.data)
    elif dst == "row_sparse":
        y.check_format()
        if src != "row_sparse":  # built from values: exactly the non-zero rows
            np.testing.assert_array_equal(y.indices.asnumpy(), np.flatnonzero(a.any(axis=1)))


def test_cast_storage_keeps_stored_zero_rows_of_row_sparse_and_copies():
    x = nd.sparse.row_sparse_array((np.zeros((2, 3), np.float32), [1, 4]), shape=(5, 3))
    y = nd.cast_storage(x, "row_sparse")
    np.testing.assert_array_equal(y.indices.asnumpy(), [1, 4])
    y.data[:] = 7  # a copy: x is untouched
    assert x.asnumpy().sum() == 0


@pytest.mark.parametrize("dst", STYPES)
def test_cast_storage_row_sparse_of_more_dimensions(dst):
    rng = np.random.default_rng(3)
    a = _dense(rng, (6, 2, 3), 0.4, np.float64, 0.5)
    if dst == "csr":
        with pytest.raises(ShapeError, match="2-D"):
            nd.cast_storage(as_nd(a), "csr")
        return
    y = nd.cast_storage(as_nd(a).tostype("row_sparse"), dst)
    assert y.stype == dst
    np.testing.assert_array_equal(y.asnumpy(), a)


def test_cast_storage_out_argument_and_sparse_namespace():
    a = np.array([[0, 1.5, 0], [0, 0, 0], [2, 0, -3]], np.float32)
    out = nd.zeros((3, 3))
    res = nd.cast_storage(as_nd(a).tostype("csr"), stype="default", out=out)
    assert res is out
    np.testing.assert_array_equal(out.asnumpy(), a)
    assert nd.sparse.cast_storage is nd.cast_storage
    assert nd.sparse.cast_storage(as_nd(a), "row_sparse").stype == "row_sparse"


# ---------------------------------------------------------------------------------------------
# _sparse_retain / nd.sparse.retain


def _retain_want(a, keep):
    """numpy: the rows listed in keep (in range, truncated toward zero) of a; others zero."""
    v = np.asarray(keep, dtype=np.float64).ravel()
    ok = (v > -1) & (v < a.shape[0])
    rows = sorted({int(t) for t in v[ok]})
    want = np.zeros_like(a)
    want[rows] = a[rows]
    return want, rows


@SETTINGS
@given(density=st.sampled_from([0.0, 0.3, 1.0]), row_density=st.sampled_from([0.0, 0.5, 1.0]),
       dtype=st.sampled_from(FLOATS), idx_dtype=st.sampled_from(["int64", "int32", "float32",
                                                                  "float64"]),
       rows=st.integers(0, 8), tail=st.sampled_from([(3,), (2, 2), ()]),
       keep=st.lists(st.integers(-3, 11), max_size=10), seed=st.integers(0, 2**31))
def test_retain_matches_numpy(backend, density, row_density, dtype, idx_dtype, rows, tail, keep,
                              seed):
    rng = np.random.default_rng(seed)
    a = _dense(rng, (rows, *tail), density, dtype, row_density)
    x, stored = _rsp_of(a, rng)
    idx = nd.array(np.array(keep, dtype=idx_dtype), dtype=idx_dtype)
    want, rows_kept = _retain_want(a, keep)
    y = nd.sparse.retain(x, idx)
    assert y.stype == "row_sparse" and y.dtype == np.dtype(dtype) and y.shape == a.shape
    y.check_format()
    # canonical: the listed ids the data stores (stored zero rows included), sorted and unique
    np.testing.assert_array_equal(y.indices.asnumpy(),
                                  [r for r in rows_kept if r in set(stored.tolist())])
    np.testing.assert_array_equal(y.asnumpy(), want)
    # the operator by its MXNet name, and dense data: a dense result with the same values
    np.testing.assert_array_equal(nd._sparse_retain(x, idx).asnumpy(), want)
    d = nd.sparse.retain(nd.array(a, dtype=dtype), idx)
    assert d.stype == "default"
    np.testing.assert_array_equal(d.asnumpy(), want)


def test_retain_float_ids_truncate_and_index_shape_is_free():
    a = np.arange(1, 13, dtype=np.float32).reshape(6, 2)
    x = as_nd(a).tostype("row_sparse")
    y = nd.sparse.retain(x, nd.array([[2.7, -0.5], [np.nan, 5.99]]))
    np.testing.assert_array_equal(y.indices.asnumpy(), [0, 2, 5])
    np.testing.assert_array_equal(y.data.asnumpy(), a[[0, 2, 5]])
    d = nd.sparse.retain(as_nd(a), nd.array([[2.7, -0.5], [np.nan, 5.99]]))
    np.testing.assert_array_equal(d.asnumpy()[[0, 2, 5]], a[[0, 2, 5]])
    assert d.asnumpy()[[1, 3, 4]].sum() == 0


def test_retain_of_integer_data_and_out_argument(backend):
    a = np.array([[1, 2], [0, 0], [3, -4], [5, 6]], np.int32)
    x = nd.array(a, dtype="int32").tostype("row_sparse")
    out = nd.sparse.zeros("row_sparse", (4, 2), dtype="int32")
    res = nd.sparse.retain(x, nd.array([3, 0, 1], dtype="int64"), out=out)
    assert res is out and out.dtype == np.int32
    np.testing.assert_array_equal(out.indices.asnumpy(), [0, 3])
    np.testing.assert_array_equal(out.asnumpy(), [[1, 2], [0, 0], [0, 0], [5, 6]])


# ---------------------------------------------------------------------------------------------
# _square_sum / nd.sparse.square_sum


def _square_sum_want(a, axis, keepdims, exclude):
    ax = (1 - axis % 2) if exclude else axis % 2
    return np.sum(a.astype(np.float64) ** 2, axis=ax, keepdims=keepdims).astype(a.dtype), ax


@SETTINGS
@given(density=st.sampled_from([0.0, 0.3, 1.0]), row_density=st.sampled_from([0.0, 0.5, 1.0]),
       dtype=st.sampled_from(FLOATS), rows=st.integers(0, 7), cols=st.integers(0, 6),
       axis=st.sampled_from([0, 1, -1, -2]), keepdims=st.booleans(), exclude=st.booleans(),
       seed=st.integers(0, 2**31))
def test_square_sum_matches_numpy(backend, density, row_density, dtype, rows, cols, axis,
                                  keepdims, exclude, seed):
    rng = np.random.default_rng(seed)
    a = _dense(rng, (rows, cols), density, dtype, row_density)
    x, stored = _rsp_of(a, rng)
    want, ax = _square_sum_want(a, axis, keepdims, exclude)
    params = {"axis": axis, "keepdims": keepdims, "exclude": exclude}
    y = nd.sparse.square_sum(x, **params)
    rtol = 1e-6 if dtype == "float32" else 1e-13
    if ax == 1 and keepdims:
        assert y.stype == "row_sparse"
        y.check_format()
        np.testing.assert_array_equal(y.indices.asnumpy(), stored)  # every stored row
    else:
        assert y.stype == "default"
    assert y.shape == want.shape and y.dtype == np.dtype(dtype)
    np.testing.assert_allclose(y.asnumpy(), want, rtol=rtol)
    d = nd._square_sum(nd.array(a, dtype=dtype), **params)  # dense: the dense kernel
    assert d.stype == "default"
    np.testing.assert_allclose(d.asnumpy(), want, rtol=rtol)


def test_square_sum_sums_in_double_and_integer_data():
    # float32 squares summed in double then rounded once: 1 + 3 * 2**-13 squared terms
    a = np.array([[1.0, 2.0**-12, 2.0**-12, 2.0**-12]], np.float32)
    want = np.float32(1.0 + 3 * 2.0**-24)
    assert nd._square_sum(as_nd(a), axis=1).asnumpy()[0] == want
    assert nd.sparse.square_sum(as_nd(a).tostype("row_sparse"), axis=1).asnumpy()[0] == want
    b = np.array([[1, -2, 3], [0, 0, 0], [4, 5, -6]], np.int32)
    for x in (nd.array(b, dtype="int32"), nd.array(b, dtype="int32").tostype("row_sparse")):
        np.testing.assert_array_equal(nd._square_sum(x, axis=0).asnumpy(), [17, 29, 45])
        np.testing.assert_array_equal(nd._square_sum(x, axis=1).asnumpy(), [14, 0, 77])


# ---------------------------------------------------------------------------------------------
# Dense kernels of every operator here (the backward ones too), write and add modes


def _values(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -5, 6, size=shape).astype(dt)
    return rng.uniform(-3, 3, size=shape).astype(dt)


def _dense_cases(dtype, idx_dtype):
    """(operator, params, inputs, numpy result) for each operator's dense kernel."""
    rng = np.random.default_rng(11)
    x = _values(rng, (7, 3), dtype)
    g_rows = _values(rng, (7, 3), dtype)
    ids = np.array([5, 9, -1, 2.7, 6.5, -0.5, 6.5]).astype(idx_dtype)  # unsigned: -1 wraps
    kept, _ = _retain_want(x, ids)
    kept_g, _ = _retain_want(g_rows, ids)
    cases = [
        ("cast_storage", {"stype": "csr"}, [x], x),
        ("_sparse_retain", {}, [x, ids], kept),
        ("_backward_sparse_retain", {}, [g_rows, ids], kept_g),
    ]
    wide = np.float64 if x.dtype.kind == "f" else np.int64
    for axis, keepdims in ((0, False), (1, False), (1, True), (0, True)):
        want = np.sum(x.astype(wide) ** 2, axis=axis, keepdims=keepdims).astype(dtype)
        cases.append(("_square_sum", {"axis": axis, "keepdims": keepdims}, [x], want))
        g = _values(rng, want.shape, dtype)
        spread = g.reshape(-1, 1) if axis == 1 else g.reshape(1, -1)
        comp = np.float32 if dtype == "float16" else dtype
        grad = (2 * x.astype(comp) * spread.astype(comp)).astype(dtype)
        cases.append(("_backward_square_sum", {"axis": axis, "keepdims": keepdims}, [g, x],
                      grad))
    return cases


@pytest.mark.parametrize("req", ["write", "add"])
@pytest.mark.parametrize(("dtype", "idx_dtype"), [
    ("float32", "int64"), ("float64", "float32"), ("float16", "float16"), ("int32", "int32"),
    ("int8", "uint8"), ("uint8", "float64"), ("int64", "int8"),
])
def test_dense_kernels_write_and_add(req, dtype, idx_dtype):
    if compiler.backend() != "c":
        pytest.skip("needs the C backend")
    rng = np.random.default_rng(12)
    for name, params, inputs, want in _dense_cases(dtype, idx_dtype):
        op = get_op(name)
        if req == "add":
            pre = _values(rng, want.shape, dtype)
            got = run_op(op, params, inputs, req="add", outputs=[pre.copy()])[0]
            want = (pre.astype(np.float32) + want.astype(np.float32)).astype(dtype) \
                if dtype == "float16" else pre + want
        else:
            got = run_op(op, params, inputs)[0]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if dtype == "float16":
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=1e-3, atol=1e-3, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


# ---------------------------------------------------------------------------------------------
# Storage types and dispatch modes


def _decide(name, params, ins):
    op = get_op(name)
    p, _ = op.parse_params(params)
    dec = infer_storage(op, p, tuple(SType.parse(s) for s in ins))
    return [s.label for s in dec.outs], dec.dispatch.value


EX, FC, FB = "fcompute_ex", "fcompute", "fcompute_fallback"


@pytest.mark.parametrize(("name", "params", "ins", "outs", "mode"), [
    ("cast_storage", {"stype": "default"}, ["default"], ["default"], FC),
    ("cast_storage", {"stype": "row_sparse"}, ["default"], ["row_sparse"], EX),
    ("cast_storage", {"stype": "csr"}, ["default"], ["csr"], EX),
    ("cast_storage", {"stype": "default"}, ["row_sparse"], ["default"], EX),
    ("cast_storage", {"stype": "row_sparse"}, ["row_sparse"], ["row_sparse"], EX),
    ("cast_storage", {"stype": "csr"}, ["row_sparse"], ["csr"], EX),  # MXNet: refused
    ("cast_storage", {"stype": "default"}, ["csr"], ["default"], EX),
    ("cast_storage", {"stype": "row_sparse"}, ["csr"], ["row_sparse"], EX),  # MXNet: refused
    ("cast_storage", {"stype": "csr"}, ["csr"], ["csr"], EX),
    ("_sparse_retain", {}, ["row_sparse", "default"], ["row_sparse"], EX),
    ("_sparse_retain", {}, ["row_sparse", "row_sparse"], ["row_sparse"], EX),
    ("_sparse_retain", {}, ["default", "default"], ["default"], FC),  # MXNet: refused
    ("_sparse_retain", {}, ["csr", "default"], ["default"], FB),  # MXNet: refused
    ("_backward_sparse_retain", {}, ["default", "default"], ["row_sparse"], EX),
    ("_backward_sparse_retain", {}, ["row_sparse", "default"], ["row_sparse"], EX),
    ("_square_sum", {"axis": 1, "keepdims": True}, ["row_sparse"], ["row_sparse"], EX),
    ("_square_sum", {"axis": -1, "keepdims": True}, ["row_sparse"], ["row_sparse"], EX),
    ("_square_sum", {"axis": 0, "keepdims": True, "exclude": True}, ["row_sparse"],
     ["row_sparse"], EX),
    ("_square_sum", {"axis": 1}, ["row_sparse"], ["default"], EX),
    ("_square_sum", {"axis": 0}, ["row_sparse"], ["default"], EX),
    ("_square_sum", {"axis": 0, "keepdims": True}, ["row_sparse"], ["default"], EX),
    ("_square_sum", {"axis": 1}, ["default"], ["default"], FC),  # MXNet: refused
    ("_square_sum", {"axis": 1}, ["csr"], ["default"], FB),  # MXNet: refused
    ("_backward_square_sum", {"axis": 1}, ["default", "row_sparse"], ["row_sparse"], EX),
    ("_backward_square_sum", {"axis": 0}, ["row_sparse", "row_sparse"], ["row_sparse"], EX),
    ("_backward_square_sum", {"axis": 0}, ["default", "default"], ["default"], FC),
])
def test_storage_types_and_dispatch(name, params, ins, outs, mode):
    assert _decide(name, params, ins) == (outs, mode)


# MXNet 1.9.1's recorded rows (tests/golden/mxnet-stype-cases.txt) where nnsym differs on
# purpose: MXNet refuses these; nnsym computes them (see nnsym/ops/sparse_defs.py).
DIFFERENT = {
    "cast:csr:rsp": (["row_sparse"], EX),
    "cast:rsp:csr": (["csr"], EX),
    "retain:dns": (["default"], FC),
    "square_sum:dns:1:0": (["default"], FC),
}
ABBR = {"dns": "default", "rsp": "row_sparse", "csr": "csr"}


def _golden_rows():
    rows = []
    for line in FIXTURE.read_text().splitlines():
        case = line.split("|")[0].strip()
        if case.startswith(("cast:", "retain:", "square_sum:")):
            rows.append(line)
    return rows


@pytest.mark.parametrize("line", _golden_rows(), ids=lambda s: s.split("|")[0].strip())
def test_storage_rules_match_mxnet_table(line):
    case, res, modes = (part.strip() for part in line.split("|")[:3])
    parts = case.split(":")
    if parts[0] == "cast":
        got = _decide("cast_storage", {"stype": ABBR[parts[2]]}, [ABBR[parts[1]]])
    elif parts[0] == "retain":
        got = _decide("_sparse_retain", {}, [ABBR[parts[1]], "default"])
    else:
        got = _decide("_square_sum", {"axis": int(parts[2]), "keepdims": parts[3] == "1"},
                      [ABBR[parts[1]]])
    if case in DIFFERENT:
        assert "Operator not implemented" in line  # MXNet refused it
        assert got == DIFFERENT[case]
        return
    want_out = res.split('"out": ["')[1].split('"')[0]
    want_mode = modes.split(":")[2].strip().rstrip(";")
    assert got == ([want_out], want_mode)


def test_golden_table_has_the_rows():
    assert len(_golden_rows()) == 12


def test_symbol_storage_inference():
    x, i = sym.var("x"), sym.var("i")
    assert sym.cast_storage(x, stype="csr").infer_storage_type(x="default") == (
        ["default"], ["csr"], [])
    assert sym.sparse.cast_storage(x, stype="default").infer_storage_type(x="csr") == (
        ["csr"], ["default"], [])
    assert sym._sparse_retain(x, i).infer_storage_type(x="row_sparse", i="default") == (
        ["row_sparse", "default"], ["row_sparse"], [])
    assert sym._internal._square_sum(x, axis=1, keepdims=True).infer_storage_type(
        x="row_sparse")[1] == ["row_sparse"]
    assert sym._square_sum(x, axis=0).infer_storage_type(x="row_sparse")[1] == ["default"]
    assert sym._square_sum(x, axis=0).infer_storage_type(x="default")[1] == ["default"]


def test_symbol_json_round_trip_keeps_parameters():
    s = sym._square_sum(sym.var("x"), axis=1, keepdims=True, name="sq")
    again = sym.load_json(s.tojson())
    assert again.tojson() == s.tojson()
    assert '"axis": "1"' in s.tojson() or '"axis": "(1,)"' in s.tojson()
    c = sym.load_json(sym.cast_storage(sym.var("x"), stype="csr", name="c").tojson())
    assert c.infer_storage_type(x="default")[1] == ["csr"]


# ---------------------------------------------------------------------------------------------
# Bound graphs: forward, backward


def test_executor_runs_cast_storage_to_csr():
    a = np.array([[0, 1.5, 0], [0, 0, 0], [2, 0, -3]], np.float32)
    net = sym.cast_storage(sym.var("x"), stype="csr")
    exe = net.simple_bind(x=(3, 3), grad_req="write")
    exe.arg_dict["x"][:] = a
    out = exe.forward(is_train=True)[0]
    assert out.stype == "csr"
    np.testing.assert_array_equal(out.asnumpy(), a)
    head = np.arange(9, dtype=np.float32).reshape(3, 3)
    exe.backward([as_nd(head)])
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), head)  # identity gradient


def test_executor_retain_gives_row_sparse_gradient():
    rng = np.random.default_rng(5)
    a = _dense(rng, (6, 3), 1.0, np.float32, 0.5)
    net = sym.sparse.cast_storage(sym._sparse_retain(sym.var("x"), sym.var("i")),
                                  stype="default")
    exe = net.simple_bind(x=(6, 3), i=(4,), stype_dict={"x": "row_sparse"},
                          type_dict={"i": "int64"}, grad_req={"x": "write", "i": "null"})
    ids = np.array([4, 1, 0, 4])
    out = exe.forward(is_train=True, x=as_nd(a).tostype("row_sparse"),
                      i=nd.array(ids, dtype="int64"))[0]
    want, rows = _retain_want(a, ids)
    np.testing.assert_array_equal(out.asnumpy(), want)
    head = rng.standard_normal((6, 3)).astype(np.float32)
    exe.backward([as_nd(head)])
    g = exe.grad_dict["x"]
    assert g.stype == "row_sparse"
    want_g = np.zeros_like(head)
    want_g[rows] = head[rows]  # every listed row, stored in x or not
    np.testing.assert_array_equal(g.asnumpy(), want_g)
    np.testing.assert_array_equal(g.indices.asnumpy(), rows)


@pytest.mark.parametrize(("axis", "keepdims"), [(1, True), (1, False), (0, False), (0, True)])
@pytest.mark.parametrize("stype", ["row_sparse", "default"])
def test_executor_square_sum_forward_and_gradient(axis, keepdims, stype):
    rng = np.random.default_rng(6)
    a = _dense(rng, (5, 4), 0.7, np.float64, 0.6)
    net = sym._square_sum(sym.var("x"), axis=axis, keepdims=keepdims)
    exe = net.simple_bind(x=(5, 4), stype_dict={"x": stype}, type_dict={"x": "float64"})
    out = exe.forward(is_train=True, x=nd.array(a, dtype="float64").tostype(stype))[0]
    want, _ = _square_sum_want(a, axis, keepdims, False)
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-13)
    assert out.stype == ("row_sparse" if stype == "row_sparse" and axis == 1 and keepdims
                         else "default")
    head = rng.standard_normal(want.shape)
    exe.backward([nd.array(head, dtype="float64")])
    g = exe.grad_dict["x"]
    assert g.stype == stype
    spread = head.reshape(-1, 1) if axis == 1 else head.reshape(1, -1)
    want_g = 2 * a * spread
    if stype == "row_sparse":  # over x's stored rows only (all others are zero in x anyway)
        np.testing.assert_array_equal(g.indices.asnumpy(), np.flatnonzero(a.any(axis=1)))
    np.testing.assert_allclose(g.asnumpy(), want_g, rtol=1e-13, atol=1e-15)


def test_backward_operators_imperatively():
    rng = np.random.default_rng(8)
    g = rng.standard_normal((6, 2)).astype(np.float32)
    op = get_op("_backward_sparse_retain")
    for ograd in (as_nd(g), as_nd(g).tostype("row_sparse")):
        res = invoke_sparse(op, [ograd, nd.array([5, 2, 2, 9])], {})[0]
        assert res.stype == "row_sparse"
        np.testing.assert_array_equal(res.indices.asnumpy(), [2, 5])
        np.testing.assert_array_equal(res.data.asnumpy(), g[[2, 5]])
    x = nd.sparse.row_sparse_array((np.array([[1.0, 2.0], [3.0, -4.0]], np.float32), [1, 4]),
                                   shape=(6, 2))
    op = get_op("_backward_square_sum")
    res = invoke_sparse(op, [nd.array(np.arange(6, dtype=np.float32)), x], {"axis": 1})[0]
    assert res.stype == "row_sparse"
    np.testing.assert_array_equal(res.indices.asnumpy(), [1, 4])
    np.testing.assert_array_equal(res.data.asnumpy(), [[2, 4], [24, -32]])


# ---------------------------------------------------------------------------------------------
# Values recorded from MXNet 1.9.1 (the reference venv: mx.nd.sparse.retain,
# mx.nd._internal._square_sum, mx.nd.cast_storage and mx.autograd on the same inputs)


def _mx_rsp():
    data = np.array([[1, 2], [3, -4], [5, 6]], np.float32)
    return nd.sparse.row_sparse_array((data, [0, 2, 4]), shape=(6, 2))


def test_values_recorded_from_mxnet():
    # mx.nd.sparse.retain(x, [4, 1, 0, 4]): MXNet's result is indices [4, 1, 0, 4] with rows
    # [[5, 6], [0, 0], [1, 2], [5, 6]] (non-canonical); densified:
    y = nd.sparse.retain(_mx_rsp(), nd.array([4, 1, 0, 4], dtype="int64"))
    np.testing.assert_array_equal(
        y.asnumpy(), [[1, 2], [0, 0], [0, 0], [0, 0], [5, 6], [0, 0]])
    np.testing.assert_array_equal(y.indices.asnumpy(), [0, 4])  # nnsym: canonical
    # float ids [2.7, 0.2]: MXNet truncates them -> indices [2, 0], rows [[3, -4], [1, 2]]
    y = nd.sparse.retain(_mx_rsp(), nd.array([2.7, 0.2]))
    np.testing.assert_array_equal(y.indices.asnumpy(), [0, 2])
    np.testing.assert_array_equal(y.data.asnumpy(), [[1, 2], [3, -4]])
    # _square_sum on the same array
    x = _mx_rsp()
    np.testing.assert_array_equal(nd.sparse.square_sum(x, axis=0).asnumpy(), [35.0, 56.0])
    np.testing.assert_array_equal(nd.sparse.square_sum(x, axis=0, keepdims=True).asnumpy(),
                                  [[35.0, 56.0]])
    np.testing.assert_array_equal(nd.sparse.square_sum(x, axis=1).asnumpy(),
                                  [5.0, 0.0, 25.0, 0.0, 61.0, 0.0])
    r = nd.sparse.square_sum(x, axis=1, keepdims=True)
    assert r.stype == "row_sparse"
    np.testing.assert_array_equal(r.indices.asnumpy(), [0, 2, 4])
    np.testing.assert_array_equal(r.asnumpy().ravel(), [5.0, 0.0, 25.0, 0.0, 61.0, 0.0])
    # float64 data [[0.5, -1.25, 2.0], [3.0, 0.0, -0.75]] at rows [1, 3] of (5, 3)
    v = np.array([[0.5, -1.25, 2.0], [3.0, 0.0, -0.75]])
    x = nd.sparse.row_sparse_array((v, [1, 3]), shape=(5, 3), dtype="float64")
    np.testing.assert_array_equal(nd._square_sum(x, axis=0).asnumpy(), [9.25, 1.5625, 4.5625])
    np.testing.assert_array_equal(nd._square_sum(x, axis=1).asnumpy(),
                                  [0.0, 5.8125, 0.0, 9.5625, 0.0])
    y = nd.sparse.retain(x, nd.array([3, 0], dtype="int32"))
    # MXNet: indices [3, 0], rows [[3, 0, -0.75], [0, 0, 0]] (a zero row for unstored id 0)
    np.testing.assert_array_equal(y.indices.asnumpy(), [3])
    np.testing.assert_array_equal(y.data.asnumpy(), [[3.0, 0.0, -0.75]])
    assert y.dtype == np.float64
    # mx.nd.cast_storage(dense, stype='csr') / 'row_sparse'
    d = nd.array([[0, 1.5, 0], [0, 0, 0], [2, 0, -3]])
    c = nd.cast_storage(d, stype="csr")
    np.testing.assert_array_equal(c.data.asnumpy(), [1.5, 2.0, -3.0])
    np.testing.assert_array_equal(c.indices.asnumpy(), [1, 0, 2])
    np.testing.assert_array_equal(c.indptr.asnumpy(), [0, 1, 1, 3])
    r = nd.cast_storage(d, stype="row_sparse")
    np.testing.assert_array_equal(r.data.asnumpy(), [[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    np.testing.assert_array_equal(r.indices.asnumpy(), [0, 2])


def test_gradients_recorded_from_mxnet():
    # mx.autograd: retain(x, [4, 1, 0, 4]).backward(arange(12).reshape(6, 2) + 1) gives the
    # row_sparse gradient [[1, 2], [3, 4], 0, 0, [9, 10], 0] (row 1 included: it is listed)
    g = np.arange(12, dtype=np.float32).reshape(6, 2) + 1
    res = invoke_sparse(get_op("_backward_sparse_retain"),
                        [as_nd(g), nd.array([4, 1, 0, 4], dtype="int64")], {})[0]
    np.testing.assert_array_equal(res.asnumpy(),
                                  [[1, 2], [3, 4], [0, 0], [0, 0], [9, 10], [0, 0]])
    # _square_sum(axis=1, keepdims=True).backward(arange(6).reshape(6, 1) + 1) and
    # _square_sum(axis=0).backward([10, 100]) on x = rows [[1, 2], [3, -4], [5, 6]] at [0, 2, 4]
    for params, head, want in [
        ({"axis": 1, "keepdims": True}, np.arange(6, dtype=np.float32).reshape(6, 1) + 1,
         [[2, 4], [0, 0], [18, -24], [0, 0], [50, 60], [0, 0]]),
        ({"axis": 0}, np.array([10, 100], np.float32),
         [[20, 400], [0, 0], [60, -800], [0, 0], [100, 1200], [0, 0]]),
    ]:
        res = invoke_sparse(get_op("_backward_square_sum"), [as_nd(head), _mx_rsp()],
                            params)[0]
        assert res.stype == "row_sparse"
        np.testing.assert_array_equal(res.indices.asnumpy(), [0, 2, 4])
        np.testing.assert_array_equal(res.asnumpy(), want)


# ---------------------------------------------------------------------------------------------
# Errors


def test_parameter_errors_name_the_operator():
    x = nd.array(np.ones((3, 4), np.float32))
    with pytest.raises(OperatorParamError, match=r"cast_storage.*stype"):
        nd.cast_storage(x, "coo")
    with pytest.raises(OperatorParamError, match="required parameter 'stype'"):
        sym.cast_storage(sym.var("x"))
    for bad in ({}, {"axis": (0, 1)}, {"axis": 2}, {"axis": ()}):
        with pytest.raises(OperatorParamError, match=r"_square_sum.*axis must be 0, 1"):
            nd.sparse.square_sum(x, **bad)
    with pytest.raises(OperatorParamError, match="unknown parameter"):
        nd.sparse.retain(x, nd.array([0]), axis=0)


def test_shape_and_dtype_errors():
    with pytest.raises(ShapeError, match="2-D"):
        nd._square_sum(nd.array(np.ones((2, 3, 4))), axis=1)
    with pytest.raises(ShapeError, match="2-D"):
        sym._square_sum(sym.var("x"), axis=1).infer_shape(x=(2,))
    with pytest.raises(ShapeError, match="2-D"):
        nd.cast_storage(nd.array(np.ones(4)), "csr")
    op = get_op("_sparse_retain")
    with pytest.raises(ShapeError, match="at least one dimension"):
        infer_node(op, op.parse_params({})[0], [(), (2,)])
    with pytest.raises(DTypeError, match="bool"):
        nd._square_sum(nd.array(np.ones((2, 2)), dtype="bool"), axis=0)
    # infer_shape: the output has the data's shape whatever the indices' shape
    s = sym._sparse_retain(sym.var("x"), sym.var("i"))
    assert s.infer_shape(x=(7, 2), i=(2, 3)) == ([(7, 2), (2, 3)], [(7, 2)], [])


def test_storage_errors(monkeypatch):
    # csr data has no retain / square_sum kernel: the dense computation by fallback (MXNet
    # refuses), with the fallback warning, or an error in strict mode
    a = np.array([[1, 0], [0, 2], [3, 0]], np.float32)
    c = as_nd(a).tostype("csr")
    with pytest.warns(StorageFallbackWarning):
        y = nd.sparse.retain(c, nd.array([2, 1]))
    np.testing.assert_array_equal(y.asnumpy(), [[0, 0], [0, 2], [3, 0]])
    monkeypatch.setenv("NNSYM_STORAGE_FALLBACK", "raise")
    with pytest.raises(StorageTypeError, match="_square_sum"):
        nd.sparse.square_sum(c, axis=1)
    with pytest.raises(StorageTypeError, match="_sparse_retain"):
        nd.sparse.retain(c, nd.array([2, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback for the supported pairs
        nd.sparse.square_sum(as_nd(a).tostype("row_sparse"), axis=1)
        nd.cast_storage(c, "row_sparse")


def test_fresh_interpreter_registers_the_implementations():
    code = (
        "import numpy as np, nnsym\n"
        "x = nnsym.nd.array(np.eye(3, dtype=np.float32))\n"
        "c = nnsym.nd.cast_storage(x, stype='csr')\n"
        "r = nnsym.nd.sparse.retain(x.tostype('row_sparse'), nnsym.nd.array([2, 0]))\n"
        "s = nnsym.nd.sparse.square_sum(x.tostype('row_sparse'), axis=1, keepdims=True)\n"
        "print(c.stype, r.stype, r.indices.asnumpy().tolist(), s.stype)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.split() == ["csr", "row_sparse", "[0,", "2]", "row_sparse"]


def test_the_sparse_tutorials_quadratic_lines_run_as_written(monkeypatch):
    """MXNet's sparse-operator tutorial: ``nd.sparse.quadratic`` keeps csr where f(0) == 0,
    ``nd.quadratic`` with c != 0 falls back to a dense result (with the fallback warning)."""
    import warnings

    import nnsym as mx
    from nnsym.ops.common import stype

    # the warning comes once per signature per process; a doc block in this worker may have
    # shown it already
    monkeypatch.setattr(stype, "_SEEN", set())

    x = mx.nd.array([[0, 1], [2, 0]]).tostype("csr")
    y = mx.nd.sparse.quadratic(x, a=1, b=2, c=0)
    assert y.stype == "csr"
    np.testing.assert_array_equal(y.asnumpy(), [[0, 3], [8, 0]])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        z = mx.nd.quadratic(x, a=1, b=2, c=3)
    assert z.stype == "default" and any("fallback" in str(m.message) for m in w)
    np.testing.assert_array_equal(z.asnumpy(), [[3, 6], [11, 3]])
    assert mx.nd.contrib.quadratic is not None and mx.sym.quadratic is not None
