"""The linalg family beyond the registry tables: MXNet 1.9.1's documented examples (values from
its docs and from runs of MXNet in the reference venv), the nd.linalg / sym.linalg namespaces,
batch semantics and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError


def test_namespaces_hold_every_linalg_operator_under_mxnet_names():
    names = ("gemm gemm2 potrf potri trmm trsm sumlogdiag extractdiag makediag extracttrian "
             "maketrian syrk gelqf syevd inverse det slogdet").split()
    for n in names:
        assert callable(getattr(nd.linalg, n)) and callable(getattr(sym.linalg, n))
        assert callable(getattr(nd, f"_linalg_{n}"))
        assert hasattr(nd, f"linalg_{n}") == (n != "syevd")  # MXNet's aliases
    s = sym.linalg.gemm2(sym.var("a"), sym.var("b"), transpose_a=True)
    assert s.list_arguments() == ["a", "b"]
    assert '"op": "_linalg_gemm2"' in s.tojson()


def test_mxnet_documented_values():
    a = nd.array([[4.0, 1.0], [1.0, 4.25]])
    np.testing.assert_allclose(nd.linalg.potrf(a).asnumpy(), [[2.0, 0], [0.5, 2.0]], rtol=1e-6)
    q, low = nd.linalg.gelqf(nd.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    np.testing.assert_allclose(q.asnumpy(), [[-0.26726124, -0.53452248, -0.80178373],
                                             [0.87287156, 0.21821789, -0.43643578]], rtol=1e-5)
    np.testing.assert_allclose(low.asnumpy(), [[-3.74165739, 0.0], [-8.55235974, 1.96396101]],
                               rtol=1e-5)
    u, lam = nd.linalg.syevd(nd.array([[1.0, 2.0], [2.0, 4.0]]))
    np.testing.assert_allclose(u.asnumpy(), [[0.89442719, -0.4472136], [0.4472136, 0.89442719]],
                               rtol=1e-5)
    np.testing.assert_allclose(lam.asnumpy(), [0.0, 5.0], atol=1e-6)
    # MXNet 1.9.1, run in the reference venv
    x = nd.array(np.arange(16.0).reshape(4, 4))
    assert nd.linalg.extracttrian(x, lower=False).asnumpy().tolist() == [
        0, 1, 5, 2, 6, 10, 3, 7, 11, 15]
    assert nd.linalg.extracttrian(x, offset=1).asnumpy().tolist() == [1, 2, 6, 3, 7, 11]
    assert nd.linalg.extracttrian(x, offset=-1).asnumpy().tolist() == [4, 8, 9, 12, 13, 14]
    v = nd.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert nd.linalg.maketrian(v, offset=1, lower=False).asnumpy().tolist() == [
        [0, 1, 2, 4], [0, 0, 3, 5], [0, 0, 0, 6], [0, 0, 0, 0]]
    assert nd.linalg.makediag(nd.array([1.0, 2.0, 3.0]), offset=-1).asnumpy().tolist() == [
        [0, 0, 0, 0], [1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 3, 0]]
    np.testing.assert_allclose(nd.linalg.potri(nd.array([[2.0, 0], [1, 3]])).asnumpy(),
                               [[0.2777778, -0.05555556], [-0.05555556, 0.11111112]], rtol=1e-6)


def test_gemm_batches_over_the_axes_around_the_row_axis():
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 5, 4)), rng.random((4, 5, 2))
    c = rng.random((3, 5, 2))
    out = nd.linalg.gemm(nd.array(a, dtype="float64"), nd.array(b, dtype="float64"),
                         nd.array(c, dtype="float64"), axis=-3, alpha=2.0, beta=-1.0)
    np.testing.assert_allclose(out.asnumpy(), 2 * np.einsum("ibk,kbj->ibj", a, b) - c,
                               rtol=1e-12)


def test_determinants_and_inverse_of_a_batch():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 4, 4))
    x = nd.array(a, dtype="float64")
    np.testing.assert_allclose(nd.linalg.det(x).asnumpy(), np.linalg.det(a), rtol=1e-10)
    sign, logabs = nd.linalg.slogdet(x)
    want_s, want_l = np.linalg.slogdet(a)
    assert sign.shape == (2, 3)
    np.testing.assert_array_equal(sign.asnumpy(), want_s)
    np.testing.assert_allclose(logabs.asnumpy(), want_l, rtol=1e-10)
    np.testing.assert_allclose(nd.linalg.inverse(x).asnumpy(), np.linalg.inv(a), rtol=1e-8)


@pytest.mark.parametrize(("fn", "shapes"), [
    ("potrf", [(2, 3)]),
    ("gemm2", [(2, 3), (4, 5)]),
    ("gelqf", [(3, 2)]),
    ("trsm", [(3, 3), (2, 4)]),
    ("maketrian", [(5,)]),
])
def test_bad_shapes_raise_an_error_naming_the_problem(fn, shapes):
    args = [nd.array(np.ones(s)) for s in shapes]
    with pytest.raises(NNSymError):
        getattr(nd.linalg, fn)(*args)


# ---------------------------------------------------------------------------------------------
# The batch of other operators (values from MXNet 1.9.1 in the reference venv)


def test_khatri_rao_orders_rows_with_the_first_input_major():
    out = nd.khatri_rao(nd.array([[1, -1], [2, -3]]), nd.array([[1, 4], [2, 5], [3, 6]]))
    assert out.asnumpy().tolist() == [[1, -4], [2, -5], [3, -6], [2, -12], [4, -15], [6, -18]]


def test_ravel_and_unravel_as_mxnet():
    r = nd.ravel_multi_index(nd.array([[3, 6, 6, 9], [4, 5, 1, 5]]), shape=(7, 6))
    assert r.asnumpy().tolist() == [22, 41, 37, 59]
    u = nd.unravel_index(nd.array([22, 41, 37, 50]), shape=(7, 6))
    assert u.asnumpy().tolist() == [[3, 6, 6, 8], [4, 5, 1, 2]]  # the first index not wrapped


def test_amp_multicast_casts_floats_only_to_the_widest_or_narrowest():
    h = nd.array(np.array([1.5], np.float16), dtype="float16")
    f = nd.array([2.5])
    i = nd.array(np.array([1, 2], np.int32), dtype="int32")
    assert [o.dtype for o in nd.amp_multicast(h, f, num_outputs=2)] == [np.float32] * 2
    narrow = nd.amp_multicast(h, f, num_outputs=2, cast_narrow=True)
    assert [o.dtype for o in narrow] == [np.float16] * 2
    assert [o.dtype for o in nd.amp_multicast(h, i, num_outputs=2)] == [np.float16, np.int32]
    assert nd.amp_cast(i, dtype="float16").dtype == np.int32


def test_finite_checks_and_sums_of_squares():
    assert nd.all_finite(nd.array([1.0, np.inf])).asnumpy().tolist() == [0.0]
    assert nd.all_finite(nd.array([1.0, 2.0])).asnumpy().tolist() == [1.0]
    bad = nd.multi_all_finite(nd.array([1.0]), nd.array([np.nan]), num_arrays=2)
    assert bad.asnumpy().tolist() == [0.0]
    sq = nd.multi_sum_sq(nd.array([1.0, 2.0]), nd.array([3.0]), num_arrays=2)
    assert sq.asnumpy().tolist() == [5.0, 9.0]


def test_cumsum_flattens_without_an_axis_and_keeps_int_dtypes():
    x = nd.array(np.arange(6).reshape(2, 3), dtype="int32")
    out = nd.cumsum(x)
    assert out.dtype == np.int32 and out.asnumpy().tolist() == [0, 1, 3, 6, 10, 15]
    assert nd.cumsum(x, axis=1, dtype="float32").asnumpy().tolist() == [[0, 1, 3], [3, 7, 12]]


def test_fill_element_0index_sets_one_element_per_row():
    out = nd.fill_element_0index(nd.array([[1, 2], [3, 4.0]]), nd.array([9, 8.0]),
                                 nd.array([1, 0.0]))
    assert out.asnumpy().tolist() == [[1, 9], [8, 4]]


def test_random_pdf_values_as_mxnet():
    s = nd.array([[1, 2, 3], [0.5, 1, 2]])
    out = nd.random_pdf_normal(s, nd.array([0, 1]), nd.array([1, 2]))
    np.testing.assert_allclose(out.asnumpy(), [[0.24197072, 0.05399097, 0.00443185],
                                               [0.19333406, 0.19947115, 0.17603266]], rtol=1e-5)
    g = nd.random_pdf_gamma(nd.array([[1.0, 2]]), nd.array([2.0]), nd.array([2.0]))
    np.testing.assert_allclose(g.asnumpy(), [[0.54134, 0.14653]], rtol=1e-4)  # beta: a rate
    d = nd.random_pdf_dirichlet(nd.array([[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]]),
                                nd.array([[1.5, 2, 3]]), is_log=True)
    np.testing.assert_allclose(d.asnumpy(), [[1.69521, 1.19003]], rtol=1e-5)
    u = nd.random_pdf_uniform(nd.array([[5.0, 0.5]]), nd.array([0.0]), nd.array([1.0]))
    assert u.asnumpy().tolist() == [[0.0, 1.0]]  # MXNet: [[1, 1]] (see differences doc)


def test_im2col_and_col2im_as_mxnet():
    x = nd.array(np.arange(2 * 2 * 3 * 4).reshape(2, 2, 3, 4))
    y = nd.im2col(x, kernel=(2, 2), stride=(1, 2), pad=(1, 0))
    assert y.shape == (2, 8, 8)
    assert y.asnumpy()[0, :3].tolist() == [[0, 0, 0, 2, 4, 6, 8, 10], [0, 0, 1, 3, 5, 7, 9, 11],
                                           [0, 2, 4, 6, 8, 10, 0, 0]]
    z = nd.col2im(y, output_size=(3, 4), kernel=(2, 2), stride=(1, 2), pad=(1, 0))
    assert z.asnumpy()[0, 0].tolist() == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18, 20, 22]]


FLAGS = np.load(Path(__file__).resolve().parent / "golden" / "flags.npz")


def _flag_cases():
    ops = {"trmm": ("transpose", "rightside", "lower"), "trsm": ("transpose", "rightside", "lower"),
           "potrf": ("lower",), "potri": ("lower",), "gemm": ("transpose_a", "transpose_b")}
    for key in sorted({k.rsplit("_", 1)[0] for k in FLAGS.files}):
        op, bits = key.split("_")
        params = {n: bool(int(b)) for n, b in zip(ops[op], bits, strict=True)}
        params.update({"trmm": {"alpha": 1.5}, "trsm": {"alpha": 1.5},
                       "gemm": {"axis": -3, "alpha": 0.7, "beta": 1.3}}.get(op, {}))
        yield pytest.param(key, op, params, id=key)


@pytest.mark.parametrize(("key", "op", "params"), list(_flag_cases()))
def test_every_flag_combination_matches_mxnet(key, op, params):
    """MXNet 1.9.1's outputs and gradients (golden/flags.npz, made by golden/make.py)."""
    n = sum(1 for k in FLAGS.files if k.startswith(f"{key}_in"))
    ins = [FLAGS[f"{key}_in{i}"] for i in range(n)]
    names = [f"x{i}" for i in range(n)]
    s = getattr(sym.linalg, op)(*[sym.var(v) for v in names], **params)
    grads = {v: nd.array(np.zeros_like(a), dtype="float64") for v, a in zip(names, ins)}
    exe = s.bind(None, {v: nd.array(a, dtype="float64") for v, a in zip(names, ins)},
                 args_grad=grads)
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward([nd.array(FLAGS[f"{key}_head"], dtype="float64")])
    np.testing.assert_allclose(out, FLAGS[f"{key}_out"], rtol=1e-9, atol=1e-10)
    for i, v in enumerate(names):
        np.testing.assert_allclose(grads[v].asnumpy(), FLAGS[f"{key}_grad{i}"], rtol=1e-9,
                                   atol=1e-10, err_msg=f"gradient of input {i}")
