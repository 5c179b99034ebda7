"""nnsym.test_utils against MXNet 1.9.1's numbers (tests/golden/test_utils, made by make.py
there), scipy.sparse and hand-computed cases."""
# ruff: noqa: NPY002  (the helpers draw from numpy's global generator, as MXNet's do)

import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sps
import scipy.stats as ss

import nnsym as mx
from nnsym import test_utils as tu
from nnsym.errors import NNSymError

GOLDEN = json.loads(
    (Path(__file__).parent / "golden" / "test_utils" / "mxnet_test_utils.json").read_text())


# ------------------------------------------------------------------ tolerances (MXNet's values)


@pytest.mark.parametrize(("fn", "key"), [(tu.default_rtols, "rtols"),
                                         (tu.default_atols, "atols"),
                                         (tu.default_numeric_eps, "numeric_eps")])
def test_tolerance_tables_are_mxnets(fn, key):
    assert {k.name: float(v) for k, v in fn().items()} == GOLDEN[key]


def test_get_tols_takes_the_looser_dtype_like_mxnet():
    for x, y, rtol, atol in GOLDEN["get_tols"]:
        assert tu.get_tols(np.zeros(1, x), np.zeros(1, y), None, None) == (rtol, atol), (x, y)
    assert list(tu.get_tols(np.zeros(1, "float16"), np.zeros(1, "float32"),
                            {np.dtype("float16"): 0.5}, 0.25)) == GOLDEN["get_tols_dict"]
    # NDArrays and python numbers count by their dtype
    assert tu.get_tols(mx.nd.zeros((2,), dtype="float16"), 1.0, None, None) == (1e-2, 1e-1)


def test_get_rtol_atol_etol_defaults():
    assert [tu.get_rtol(), tu.get_rtol(0.3), tu.get_rtol(dtype=np.dtype("float16"))] == \
        GOLDEN["get_rtol"]
    assert [tu.get_atol(), tu.get_atol(0.3), tu.get_atol(dtype=np.dtype("float32"))] == \
        GOLDEN["get_atol"]
    assert [tu.get_etol(), tu.get_etol(0.1)] == GOLDEN["get_etol"]
    assert np.dtype(tu.default_dtype()).name == GOLDEN["default_dtype"]
    assert tu.get_tolerance(np.zeros(1, np.float32), {np.dtype(np.float32): 7.0},
                            tu.default_rtols()) == 7.0


def test_default_comparisons_pass_and_fail_where_mxnets_do():
    for dtype, delta, asserted, almost in GOLDEN["default_compare"]:
        x = np.array([1.0, 2.0, 3.0]).astype(dtype)
        y = (np.array([1.0, 2.0, 3.0]) + delta).astype(dtype)
        try:
            tu.assert_almost_equal(x, y)
            ok = True
        except AssertionError:
            ok = False
        assert ok == asserted, (dtype, delta)
        assert tu.almost_equal(x, y) == almost, (dtype, delta)


# ------------------------------------------------------------------ comparisons and messages


def test_find_max_violation_matches_mxnet():
    v = GOLDEN["violation"]
    idx, val = tu.find_max_violation(np.array(v["a"]), np.array(v["b"]), v["rtol"], v["atol"])
    assert list(idx) == v["index"]
    assert val == pytest.approx(v["value"])


def test_assert_almost_equal_message_names_the_worst_violation_like_mxnet():
    v = GOLDEN["violation"]
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(np.array(v["a"]), np.array(v["b"]), rtol=1e-3, atol=1e-3,
                               names=("got", "want"))
    mine, theirs = str(e.value).splitlines(), GOLDEN["assert_message"].splitlines()
    assert mine[:4] == theirs[:4]  # blank, "Items are not equal:", Error ..., Location ...
    assert "Location of maximum error: (1, 2), got=6.50000000, want=6.00000000" in mine
    # the listing: both mismatches, worst first
    assert mine[4].startswith("  1: Error 71.428571  Location of error: (1, 2)")
    assert mine[5].startswith("  2: Error 32.258065  Location of error: (0, 1)")


@pytest.mark.parametrize(("key", "a", "b", "lines"), [
    ("assert_message_0d", np.array(1.0), np.array(2.0), 3),
    ("assert_message_nan", np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, 30.0]), 4),
])
def test_assert_almost_equal_message_for_scalars_and_nan_like_mxnet(key, a, b, lines):
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(a, b, names=("got", "want"))
    assert str(e.value).splitlines()[:lines] == GOLDEN[key].splitlines()[:lines]


def test_assert_almost_equal_mismatches_bounds_the_listing_and_nan_handling():
    a = np.arange(20.0)
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(a, a + 1, rtol=0, atol=0.5, mismatches=(3, 10))
    msg = str(e.value)
    assert "(mismatch 100.000000%)" in msg
    assert "  3: Error" in msg and "  4: Error" not in msg
    nan = np.array([1.0, np.nan])
    tu.assert_almost_equal(nan, nan.copy(), equal_nan=True)
    with pytest.raises(AssertionError, match=r"Location of maximum error: \(1,\), a=nan"):
        tu.assert_almost_equal(nan, nan.copy())


def test_assert_almost_equal_shapes_broadcast_and_arrays():
    tu.assert_almost_equal(np.ones((2, 3)), np.ones(3))  # broadcasts, as MXNet
    with pytest.raises(AssertionError, match=r"a.shape = \(2, 3\) and b.shape = \(3,\)"):
        tu.assert_almost_equal(np.ones((2, 3)), np.ones(3), use_broadcast=False)
    tu.assert_almost_equal(mx.nd.array([1.0, 2.0]), np.array([1.0, 2.00001]))
    csr = sps.random(4, 5, density=0.4, format="csr", random_state=0)
    tu.assert_almost_equal(mx.nd.sparse.csr_matrix(csr), csr.toarray())
    tu.assert_almost_equal(np.array([True, False]), np.array([True, False]))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([True, False]), np.array([True, True]))


def test_assert_allclose_and_ignore_nan_and_with_err():
    tu.assert_allclose(np.array([1.0, np.nan]), np.array([1.0, np.nan]))
    with pytest.raises(AssertionError):
        tu.assert_allclose(np.array([1.0]), np.array([1.0 + 1e-6]))
    a = np.array([1.0, np.nan, 3.0])
    b = np.array([1.0, 2.0, np.nan])
    tu.assert_almost_equal_ignore_nan(a, b)
    assert tu.almost_equal_ignore_nan(a, b)
    with pytest.raises(AssertionError, match=r"x=1\.00000000, y=5\.00000000"):
        tu.assert_almost_equal_ignore_nan(a, np.array([5.0, 2.0, 3.0]), names=("x", "y"))
    x = np.zeros(10)
    y = x.copy()
    y[0] = 1
    tu.assert_almost_equal_with_err(x, y, etol=0.2)  # 10% mismatching is tolerated
    with pytest.raises(AssertionError, match=r"mismatch 10\.000000%"):
        tu.assert_almost_equal_with_err(x, y, etol=0.05)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal_with_err(x, y)  # etol 0: plain assert_almost_equal


def test_same_and_symbol_structure():
    assert tu.same(np.array([1, 2]), np.array([1, 2]))
    assert not tu.same(np.array([1, 2]), np.array([1, 3]))
    assert not tu.same(np.ones(2), np.ones(3))
    x = mx.sym.Variable("x")
    assert tu.same_symbol_structure(mx.sym.exp(x), mx.sym.exp(mx.sym.Variable("y")))
    assert not tu.same_symbol_structure(mx.sym.exp(x), mx.sym.tanh(x))
    a = mx.nd.array([1.0, 2.0])
    assert tu.same_array(a, a)
    assert not tu.same_array(a, a.copy())
    assert a.asnumpy().tolist() == [1.0, 2.0]  # restored


def test_compare_ndarray_tuple():
    t = (mx.nd.array([1.0]), (mx.nd.array([2.0]), None))
    tu.compare_ndarray_tuple(t, (np.array([1.0]), (np.array([2.0]), np.array([9.0]))))
    tu.compare_ndarray_tuple(None, t)
    with pytest.raises(AssertionError):
        tu.compare_ndarray_tuple(t, (np.array([1.0]), (np.array([2.5]), None)))


def test_assert_exception_and_retry():
    tu.assert_exception(int, ValueError, "x")
    with pytest.raises(AssertionError, match="did not raise ValueError"):
        tu.assert_exception(int, ValueError, "1")
    with pytest.raises(AssertionError, match="did not raise AssertionError"):
        tu.assert_exception(int, AssertionError, "1")  # MXNet's version passes here
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) >= 2

    flaky()
    assert len(calls) == 2

    @tu.retry(2)
    def broken():
        calls.append(1)
        raise AssertionError("always")

    calls.clear()
    with pytest.raises(AssertionError, match="always"):
        broken()
    assert len(calls) == 2


# ------------------------------------------------------------------ numpy-level helpers


def test_np_reduce_assign_each_collapse_sum_like():
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(tu.np_reduce(x, (0, 2), True, np.sum),
                                  x.sum(axis=(0, 2), keepdims=True))
    np.testing.assert_array_equal(tu.np_reduce(x, 1, False, np.max), x.max(axis=1))
    assert tu.np_reduce(x, None, False, np.sum) == x.sum()
    np.testing.assert_array_equal(tu.assign_each(np.array([[1, 2], [3, 4]]), lambda v: v * 10),
                                  [[10, 20], [30, 40]])
    np.testing.assert_array_equal(tu.assign_each2(np.array([1, 2]), np.array([3, 5]),
                                                  lambda a, b: a * b), [3, 10])
    np.testing.assert_array_equal(tu.collapse_sum_like(np.ones((2, 3, 4)), (3, 1)),
                                  np.full((3, 1), 8.0))
    np.testing.assert_array_equal(tu.collapse_sum_like(np.ones((2, 0)), (1, 0)),
                                  np.zeros((1, 0)))


def test_seeded_random_helpers_reproduce_mxnets_draws():
    g = GOLDEN["seeded"]
    np.random.seed(7)
    assert list(tu.rand_shape_2d()) == g["rand_shape_2d"]
    assert list(tu.rand_shape_3d(5, 6, 7)) == g["rand_shape_3d"]
    assert list(tu.rand_shape_nd(4, 6)) == g["rand_shape_nd"]
    assert list(tu.rand_coord_2d(0, 10, 5, 9)) == g["rand_coord_2d"]
    arr = tu.random_arrays((2, 3))
    assert arr.dtype == np.float32
    np.testing.assert_array_equal(arr, np.array(g["random_arrays"], np.float32))
    (u,) = tu.random_uniform_arrays((2, 2), low=-1.0, high=2.0)
    np.testing.assert_array_equal(u, np.array(g["random_uniform_arrays"][0], np.float32))
    assert tu.random_sample(list(range(10)), 4) == g["random_sample"]
    np.random.seed(5)
    d = tu.rand_ndarray((3, 4))
    assert d.stype == "default" and np.dtype(d.dtype).name == GOLDEN["rand_ndarray_dense"]["dtype"]
    np.testing.assert_array_equal(d.asnumpy(), GOLDEN["rand_ndarray_dense"]["values"])


def test_random_helper_arguments():
    with pytest.raises(TypeError, match="unexpected") as e:
        tu.random_uniform_arrays((2,), lo=1)
    assert isinstance(e.value, NNSymError)
    assert tu.random_arrays((), (2,))[0].shape == ()
    np.random.seed(0)
    shapes = [tu.rand_shape_nd(3, 2, allow_zero_size=True) for _ in range(50)]
    assert min(min(s) for s in shapes) == 0 and max(max(s) for s in shapes) == 2
    with pytest.raises(AssertionError):
        tu.random_sample([1, 2], 3)


# ------------------------------------------------------------------ sparse creators


def test_rand_sparse_row_sparse_reproduces_mxnet():
    np.random.seed(3)
    arr, (val, ids) = tu.rand_sparse_ndarray((6, 3), "row_sparse", density=0.5)
    assert arr.stype == "row_sparse" and np.dtype(arr.dtype).name == GOLDEN["rsp"]["dtype"]
    np.testing.assert_array_equal(arr.asnumpy(), GOLDEN["rsp"]["dense"])
    assert ids.tolist() == GOLDEN["rsp"]["indices"]
    np.testing.assert_array_equal(arr.indices.asnumpy(), ids)
    np.testing.assert_array_equal(arr.data.asnumpy(), val)


def test_rand_sparse_powerlaw_reproduces_mxnet():
    np.random.seed(4)
    csr, (indptr, indices, data) = tu.rand_sparse_ndarray((5, 16), "csr", density=0.5,
                                                          distribution="powerlaw")
    np.testing.assert_array_equal(csr.asnumpy(), np.array(GOLDEN["powerlaw"]["dense"],
                                                           np.float32))
    assert indptr.asnumpy().tolist() == GOLDEN["powerlaw"]["indptr"]
    dense = csr.asnumpy()
    np.testing.assert_array_equal(indices.asnumpy(), np.nonzero(dense)[1])
    np.testing.assert_array_equal(data.asnumpy(), dense[np.nonzero(dense)])
    nnz = np.diff(indptr.asnumpy())
    assert nnz[2] == 2 * nnz[1] and nnz[3] == 2 * nnz[2]  # MXNet's docstring example
    with pytest.raises(ValueError, match="density"):
        tu.rand_sparse_ndarray((5, 16), "csr", density=0.05, distribution="powerlaw")


def test_rand_csr_is_scipy_sparse_random_on_the_same_draws():
    np.random.seed(11)
    csr, (indptr, indices, data) = tu.rand_sparse_ndarray((7, 9), "csr", density=0.3,
                                                          dtype=np.float64)
    np.random.seed(11)
    want = sps.random(7, 9, density=0.3, format="csr", dtype=np.float64)
    want.sort_indices()
    assert csr.stype == "csr" and csr.shape == (7, 9) and csr.dtype == np.float64
    np.testing.assert_array_equal(indptr.asnumpy(), want.indptr)
    np.testing.assert_array_equal(indices.asnumpy(), want.indices)
    np.testing.assert_array_equal(data.asnumpy(), want.data)
    assert want.nnz == round(0.3 * 63)
    np.random.seed(11)
    half, _ = tu.rand_sparse_ndarray((7, 9), "csr", density=0.3, dtype=np.float16)
    np.random.seed(11)
    want = sps.random(7, 9, density=0.3, format="csr", dtype=np.float32)
    assert half.dtype == np.float16  # scipy has no float16: float32 draws, rounded
    np.testing.assert_array_equal(half.asnumpy(), want.toarray().astype(np.float16))


@pytest.mark.parametrize("density", [0.0, 0.25, 1.0])
def test_rand_ndarray_stype_shape_density(density):
    np.random.seed(1)
    c = tu.rand_ndarray((20, 10), "csr", density=density)
    assert c.stype == "csr" and c.shape == (20, 10) and c.dtype == np.float32
    assert c.data.shape[0] == round(density * 200)
    r = tu.rand_ndarray((200, 3), "row_sparse", density=density, dtype=np.float64)
    assert r.stype == "row_sparse" and r.shape == (200, 3) and r.dtype == np.float64
    rows = r.indices.asnumpy()
    assert np.all(np.diff(rows) > 0)
    if density in (0.0, 1.0):
        assert len(rows) == 200 * density
    else:
        assert 20 < len(rows) < 80  # Binomial(200, 0.25): mean 50, sd 6
    assert np.all(r.asnumpy()[rows] != 0)


def test_row_sparse_options_and_create_sparse_array():
    arr, (val, ids) = tu.rand_sparse_ndarray((5, 2), "row_sparse", rsp_indices=np.array([1, 3]),
                                             data_init=2.0, modifier_func=lambda v: v + 1)
    want = np.zeros((5, 2))
    want[[1, 3]] = 3.0
    np.testing.assert_array_equal(arr.asnumpy(), want)
    assert ids.tolist() == [1, 3] and val.tolist() == [[3.0, 3.0]] * 2
    z = tu.create_sparse_array((4, 3), "row_sparse", rsp_indices=[3, 0], data_init=1.0)
    assert z.indices.asnumpy().tolist() == [0, 3]  # sorted first
    zd = tu.create_sparse_array_zd((4, 3), "row_sparse", density=1.0)
    assert zd.indices.asnumpy().size == 0 and not zd.asnumpy().any()  # density ignored
    zd = tu.create_sparse_array_zd((4, 3), "row_sparse", density=1.0, rsp_indices=[2])
    assert zd.indices.asnumpy().tolist() == [2]
    c = tu.create_sparse_array((6, 6), "csr", density=0.5, data_init=4.0)
    assert c.stype == "csr" and set(c.data.asnumpy().tolist()) == {4.0}
    assert c.data.shape[0] == 18
    with pytest.raises(AssertionError, match="Unknown storage type"):
        tu.create_sparse_array((2, 2), "dense")
    with pytest.raises(AssertionError, match="not supported for row_sparse"):
        tu.rand_sparse_ndarray((2, 2), "row_sparse", distribution="powerlaw")
    with pytest.raises(ValueError, match="density has to be between 0 and 1"):
        tu.rand_sparse_ndarray((2, 2), "csr", density=1.5)


def test_shuffle_csr_column_indices_keeps_each_rows_columns():
    m = sps.random(6, 40, density=0.5, format="csr", random_state=2)
    before = m.copy()
    np.random.seed(0)
    tu.shuffle_csr_column_indices(m)
    assert not np.array_equal(m.indices, before.indices)
    for i in range(6):
        lo, hi = m.indptr[i], m.indptr[i + 1]
        assert sorted(m.indices[lo:hi]) == sorted(before.indices[lo:hi])


# ------------------------------------------------------------------ symbolic checks


def test_check_numeric_gradient_accepts_right_and_catches_wrong_gradients():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    loc = {"x": np.array([1.0, 2.0, 3.0]), "y": np.array([0.5, -1.0, 2.0])}
    tu.check_numeric_gradient(x * y + mx.sym.exp(x), loc)
    tu.check_numeric_gradient(x * y, [loc["x"], loc["y"]], dtype=np.float32)
    tu.check_numeric_gradient(x * y, loc, grad_nodes={"x": "add", "y": "null"})
    # BlockGrad hides half of d(2 x^2)/dx from backward: the check must notice
    wrong = x * x + mx.sym.BlockGrad(x * x)
    with pytest.raises(AssertionError) as e:
        tu.check_numeric_gradient(wrong, {"x": loc["x"]})
    msg = str(e.value)
    assert "NUMERICAL_x" in msg and "BACKWARD_x" in msg and "exceeds tolerance" in msg
    with pytest.raises(ValueError, match="do not match"):
        tu.check_numeric_gradient(x * y, {"x": loc["x"]})
    with pytest.raises(ValueError, match=r"\['z'\]"):
        tu.check_numeric_gradient(x * y, loc, grad_nodes=["z"])


def test_check_numeric_gradient_with_aux_states_and_sparse_grad():
    data = mx.sym.Variable("data")
    bn = mx.sym.BatchNorm(data, fix_gamma=False, name="bn")
    rng = np.random.default_rng(0)
    loc = {"data": rng.standard_normal((4, 3)), "bn_gamma": rng.random(3) + 0.5,
           "bn_beta": rng.standard_normal(3)}
    aux = {"bn_moving_mean": np.zeros(3), "bn_moving_var": np.ones(3)}
    tu.check_numeric_gradient(bn, loc, aux_states=aux, use_forward_train=True)
    tu.check_numeric_gradient(bn, loc, aux_states=aux, use_forward_train=False)
    w = mx.sym.Variable("w")
    emb = mx.sym.Embedding(mx.sym.Variable("idx"), w, input_dim=5, output_dim=2,
                           sparse_grad=True)
    tu.check_numeric_gradient(emb, {"idx": np.array([0.0, 3.0]), "w": rng.random((5, 2))},
                              grad_nodes=["w"], grad_stype_dict={"w": "row_sparse"})


def test_numeric_grad_on_an_executor():
    x, i = mx.sym.Variable("x"), mx.sym.Variable("i")
    exe = (x * x).simple_bind(mx.cpu(), x=(3,), type_dict={"x": np.float64})
    g = tu.numeric_grad(exe, {"x": np.array([1.0, 2.0, 3.0])}, eps=1e-3, dtype=np.float64)
    np.testing.assert_allclose(g["x"], [2.0, 4.0, 6.0], rtol=1e-9)
    # sum(take(x, i)): x[1] is taken twice; the integer input gets zeros
    exe = mx.sym.take(x, i).simple_bind(mx.cpu(), x=(3,), i=(2,),
                                        type_dict={"x": np.float64, "i": np.int32})
    g = tu.numeric_grad(exe, {"x": np.array([1.0, 2.0, 3.0]), "i": np.array([1, 1], np.int32)},
                        eps=1e-3, dtype=np.float64)
    np.testing.assert_allclose(g["x"], [0.0, 2.0, 0.0], atol=1e-9)
    assert g["i"].tolist() == [0.0, 0.0]


def test_check_symbolic_forward_and_backward():
    a, b = mx.sym.Variable("lhs"), mx.sym.Variable("rhs")
    m1, m2 = np.array([[1.0, 2], [3, 4]]), np.array([[5.0, 6], [7, 8]])
    d = mx.sym.dot(a, b, name="d")
    outs = tu.check_symbolic_forward(d, [m1, m2], [m1 @ m2])
    assert outs[0].dtype == np.float32  # MXNet's default dtype
    outs = tu.check_symbolic_forward(d, {"lhs": m1, "rhs": m2}, {"d_output": m1 @ m2},
                                     dtype="asnumpy")
    assert outs[0].dtype == np.float64
    with pytest.raises(AssertionError, match=r"EXPECTED_d_output(.|\n)*FORWARD_d_output"):
        tu.check_symbolic_forward(d, [m1, m2], [m1 @ m2 + 1])
    s = a * b
    og = np.array([[1.0, 1], [2, 2]])
    for req in ("write", "add", "null"):
        want = [og * m2, og * m1] if req != "null" else [np.zeros(2), np.zeros(2)]
        grads = tu.check_symbolic_backward(s, [m1, m2], [og], {"lhs": want[0]}
                                           if req != "null" else {"lhs": m1}, grad_req=req)
        assert set(grads) == {"lhs"}
    tu.check_symbolic_backward(s, [m1, m2], {s.list_outputs()[0]: og},
                               [og * m2, og * m1], grad_stypes={"rhs": "row_sparse"})
    with pytest.raises(AssertionError, match=r"EXPECTED_rhs(.|\n)*BACKWARD_rhs"):
        tu.check_symbolic_backward(s, [m1, m2], [og], [og * m2, og * m2])


def test_simple_forward_check_speed_and_consistency():
    x = mx.sym.Variable("x")
    np.testing.assert_array_equal(tu.simple_forward(x * 2, x=np.array([1.0, 2.0])), [2.0, 4.0])
    assert tu.check_speed(mx.sym.exp(x), x=(4, 4), N=2) > 0
    assert tu.check_speed(mx.sym.exp(x), location={"x": np.ones((2, 2))}, N=2,
                          typ="forward") > 0
    with pytest.raises(ValueError, match="typ"):
        tu.check_speed(x, x=(2,), typ="backward")
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    ctxs = [{"ctx": mx.cpu(), "data": (2, 4), "type_dict": {"data": np.float64}},
            {"ctx": mx.cpu(), "data": (2, 4), "type_dict": {"data": np.float32}}]
    np.random.seed(8)
    gt = tu.check_consistency(fc, ctxs)
    assert gt["fc_output"].dtype == np.float64  # the most precise run is the reference
    # same draws (sorted argument order) and so the same ground truth as MXNet 1.9.1
    assert sorted(gt) == sorted(GOLDEN["consistency"])
    for k, v in GOLDEN["consistency"].items():
        np.testing.assert_allclose(gt[k].asnumpy(), v, rtol=1e-12, atol=1e-12, err_msg=k)
    bad = {k: v.asnumpy() + 1 for k, v in gt.items()}
    with pytest.raises(AssertionError, match="ground_truth_fc_output"):
        tu.check_consistency(fc, ctxs, ground_truth=bad)
    tu.check_consistency(fc, ctxs, ground_truth=bad, raise_on_err=False, grad_req="null")


# ------------------------------------------------------------------ optimizers, samplers


def test_compare_optimizer():
    sgd = mx.optimizer.SGD
    tu.compare_optimizer(sgd(learning_rate=0.1, momentum=0.9), sgd(learning_rate=0.1,
                                                                   momentum=0.9),
                         (3, 4), np.float32)
    tu.compare_optimizer(sgd(learning_rate=0.1), sgd(learning_rate=0.1), (6, 4), np.float32,
                         g_stype="row_sparse")
    with pytest.raises(AssertionError, match="opt1_weight"):
        tu.compare_optimizer(sgd(learning_rate=0.1), sgd(learning_rate=0.2), (3, 4),
                             np.float32)


def test_mean_and_var_checks_match_mxnet():
    np.random.seed(0)
    got_mean = [tu.mean_check(lambda n: np.random.normal(0.0, 1.0, n), 0.0, 1.0, nsamples=1000),
                tu.mean_check(lambda n: np.random.normal(0.3, 1.0, n), 0.0, 1.0, nsamples=1000)]
    got_var = [tu.var_check(lambda n: np.random.normal(0.0, 2.0, n), 2.0, nsamples=1000),
               tu.var_check(lambda n: np.random.normal(0.0, 3.0, n), 2.0, nsamples=1000)]
    assert got_mean == GOLDEN["mean_check"] == [True, False]
    assert got_var == GOLDEN["var_check"] == [True, False]


def test_chi_square_and_verify_generator():
    buckets, probs = tu.gen_buckets_probs_with_ppf(lambda q: 4 * q, 4)
    assert buckets == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)]
    assert probs == [0.25] * 4
    rng = np.random.default_rng(0)
    ps = tu.verify_generator(lambda n: rng.uniform(0, 4, n), buckets, probs, nsamples=20000)
    assert len(ps) == 5 and sum(p > 0.05 for p in ps) >= 1
    with pytest.raises(AssertionError, match="Generator test fails"):
        tu.verify_generator(lambda n: rng.uniform(0, 4, n) ** 1.1, buckets, probs,
                            nsamples=20000)
    # discrete buckets: counts per value, p from scipy on the same counts
    p, obs, exp = tu.chi_square_check(lambda n: np.repeat([0, 1, 2], [n // 2, n // 4, n // 4]),
                                      [0, 1, 2], [0.5, 0.25, 0.25], nsamples=1000)
    assert obs.tolist() == [500, 250, 250] and exp.tolist() == [500, 250, 250]
    assert p == pytest.approx(1.0)
    normal_buckets, nprobs = tu.gen_buckets_probs_with_ppf(lambda q: ss.norm.ppf(q), 5)
    p, obs, _ = tu.chi_square_check(lambda n: rng.standard_normal(n), normal_buckets, nprobs,
                                    nsamples=5000)
    assert obs.sum() == 5000 and p == pytest.approx(ss.chisquare(obs, [1000] * 5)[1])


# ------------------------------------------------------------------ environment, contexts


def test_environment_set_env_var_and_is_cd_run(monkeypatch):
    monkeypatch.delenv("NNSYM_TU_A", raising=False)
    monkeypatch.setenv("NNSYM_TU_B", "old")
    with tu.environment({"NNSYM_TU_A": "1", "NNSYM_TU_B": None}):
        assert os.environ["NNSYM_TU_A"] == "1" and "NNSYM_TU_B" not in os.environ
    assert "NNSYM_TU_A" not in os.environ and os.environ["NNSYM_TU_B"] == "old"
    with pytest.raises(KeyError), tu.environment("NNSYM_TU_B", "new"):
        assert os.environ["NNSYM_TU_B"] == "new"
        raise KeyError
    assert os.environ["NNSYM_TU_B"] == "old"
    assert tu.set_env_var("NNSYM_TU_B", "x") == "old" and os.environ["NNSYM_TU_B"] == "x"
    monkeypatch.setenv("CD_JOB", "1")
    assert tu.is_cd_run()
    monkeypatch.setenv("CD_JOB", "0")
    assert not tu.is_cd_run()


def test_discard_stderr(capfd):
    with tu.discard_stderr():
        os.write(2, b"hidden")
    os.write(2, b"shown")
    assert capfd.readouterr().err == "shown"


def test_default_context_can_be_set():
    assert tu.default_context() == mx.cpu()
    try:
        tu.set_default_context(mx.cpu(1))
        assert tu.default_context() == mx.cpu(1) == mx.current_context()
        assert mx.nd.zeros((2,)).context == mx.cpu(1)
        assert tu.rand_ndarray((2, 2), "row_sparse", density=1.0).context == mx.cpu(1)
        with mx.cpu(2):
            assert tu.default_context() == mx.cpu(2)
    finally:
        tu.set_default_context(None)
    assert tu.default_context() == mx.cpu()


def test_dummy_iter_and_matrix_helpers():
    it = mx.io.NDArrayIter(np.arange(12.0).reshape(6, 2), batch_size=2)
    d = tu.DummyIter(it)
    first = next(d)
    assert next(d) is first and d.next() is first and d.batch_size == 2
    np.testing.assert_array_equal(first.data[0].asnumpy(), [[0, 1], [2, 3]])
    np.random.seed(6)
    g = GOLDEN["matrices"]
    m = tu.new_matrix_with_real_eigvals_nd((2, 3, 3))
    np.testing.assert_allclose(m, g["real_eigvals_nd"], rtol=1e-10, atol=1e-12)
    q = tu.new_orthonormal_matrix_2d(3)
    np.testing.assert_allclose(q, g["orthonormal"], rtol=1e-10, atol=1e-12)
    s = tu.new_sym_matrix_with_real_eigvals_nd((2, 2, 2))
    np.testing.assert_allclose(s, g["sym_real_eigvals_nd"], rtol=1e-10, atol=1e-12)
    assert np.abs(np.linalg.eigvals(m).imag).max() < 1e-8
    assert np.abs(np.linalg.eigvals(m).real).max() < 10
    np.testing.assert_allclose(s, np.swapaxes(s, -1, -2), atol=1e-12)
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-12)
    np.testing.assert_array_equal(tu.create_2d_tensor(3, 2).asnumpy(), [[0, 0], [1, 1], [2, 2]])
    np.testing.assert_array_equal(tu.get_identity_mat_batch(2).asnumpy(), [np.eye(2)] * 2)


# MXNet's helpers that need a GPU, a download or Gluon; nnsym leaves them out on purpose
NOT_PROVIDED = {"check_gluon_hybridize_consistency", "download", "download_model",
                "get_bz2_data", "get_cifar10", "get_im2rec_path", "get_mnist",
                "get_mnist_iterator", "get_mnist_pkl", "get_mnist_ubyte", "get_zip_data",
                "list_gpus"}


def _signature(fn):
    import inspect

    return [[p.name, p.kind.name, None if p.default is p.empty else repr(p.default)]
            for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", sorted(GOLDEN["signatures"]))
def test_signature_is_mxnets(name):
    if name in NOT_PROVIDED:
        assert not hasattr(tu, name)
        assert name in tu.__doc__  # listed as not provided
        return
    mine, theirs = _signature(getattr(tu, name)), GOLDEN["signatures"][name]
    if name == "check_numeric_gradient":
        # documented deviation: dtype=None means float64 evaluation; seed is keyword-only
        assert theirs[-1] == ["dtype", "POSITIONAL_OR_KEYWORD", "<class 'numpy.float32'>"]
        assert mine[:-2] == theirs[:-1]
        assert mine[-2:] == [["dtype", "POSITIONAL_OR_KEYWORD", "None"],
                             ["seed", "KEYWORD_ONLY", "0"]]
        return
    assert mine == theirs


def test_small_helpers():
    np.testing.assert_array_equal(tu.create_vector(4).asnumpy(), [0, 1, 2, 3])
    assert tu.create_vector(4).dtype == np.int64
    np.testing.assert_array_equal(tu.get_identity_mat(3).asnumpy(), np.eye(3))
    a, b = np.array([[1.0, 2.0]]), np.array([[1.5, 2.0]])
    assert tu.locationError(a, b, (0, 0), ("p", "q")) == \
        "Location of error: (0, 0), p=1.00000000, q=1.50000000"
    assert tu.locationError(a, b, (0, 1), ("p", "q"), maxError=True).startswith(
        "Location of maximum error: (0, 1)")
    tu.checkShapes(a, b)
    with pytest.raises(AssertionError, match=r"a.shape = \(1, 2\) and b.shape = \(2,\)"):
        tu.checkShapes(a, np.ones(2))
    assert tu.effective_dtype(mx.nd.zeros((1,), dtype="float16")) == np.float16
    assert not tu.has_tvm_ops() and tu.is_op_runnable()
    assert tu.is_aarch64_run() == (os.uname().machine == "aarch64")
    np.random.seed(2)
    (u,) = tu.random_uniform_arrays((100,))
    assert u.dtype == np.float32 and 0 <= u.min() and u.max() < 1
