"""MXNet's miscellaneous contrib operators: values MXNet 1.9.1 gives (hand-checked) and the
gradients that are not derivatives (straight-through, scaled), which the finite-difference
table leaves out."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd, sym


def _grad(s, x, og):
    ex = s.simple_bind(mx.cpu(), data=x.shape)
    ex.forward(is_train=True, data=x)
    ex.backward(nd.array(og))
    return ex.outputs[0].asnumpy(), ex.grad_dict["data"].asnumpy()


@pytest.mark.parametrize(("name", "want"), [
    ("round_ste", [[-3, -2, -1], [1, 2, 3]]),  # halves away from zero, as MXNet
    ("sign_ste", [[-1, -1, -1], [1, 1, 1]]),
])
def test_straight_through_ops_pass_the_gradient(name, want):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    og = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1
    y, dx = _grad(getattr(sym.contrib, name)(sym.Variable("data")), x, og)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(dx, og)
    np.testing.assert_array_equal(getattr(nd.contrib, name)(nd.array(x)).asnumpy(), want)


def test_gradientmultiplier_is_identity_with_a_scaled_gradient():
    x = np.array([[1.5, -2.0, 0.25]], np.float32)
    og = np.array([[1.0, 2.0, -4.0]], np.float32)
    s = sym.contrib.gradientmultiplier(sym.Variable("data"), scalar=-0.5)
    y, dx = _grad(s, x, og)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(dx, og * -0.5)


def test_div_sqrt_dim_divides_by_the_root_of_the_last_axis():
    x = np.arange(18, dtype=np.float32).reshape(2, 9)
    y, dx = _grad(sym.contrib.div_sqrt_dim(sym.Variable("data")), x, np.ones_like(x))
    np.testing.assert_allclose(y, x / 3, rtol=1e-6)
    np.testing.assert_allclose(dx, np.full_like(x, 1 / 3), rtol=1e-6)


def test_allclose_values_and_nans():
    a = nd.array([[1, 2], [3, 4]])
    b = nd.array([[1, 2], [3, 4.00001]])
    r = nd.contrib.allclose(a, b)
    assert r.shape == () and r.dtype == np.uint8 and int(r.asnumpy()) == 1  # MXNet: 1
    assert int(nd.contrib.allclose(a, b, rtol=0, atol=0).asnumpy()) == 0   # MXNet: 0
    n = nd.array([np.nan, 1.0])
    assert int(nd.contrib.allclose(n, n).asnumpy()) == 1
    assert int(nd.contrib.allclose(n, n, equal_nan=False).asnumpy()) == 0
    with pytest.raises(mx.NNSymError, match="must be equal"):
        nd.contrib.allclose(nd.ones((2, 3)), nd.ones((3,)))


def test_arange_like_and_index_array_match_mxnet():
    got = nd.contrib.arange_like(nd.ones((2, 3)), start=1, step=2, repeat=2).asnumpy()
    np.testing.assert_array_equal(got, [[1, 1, 3], [3, 5, 5]])
    # start and step are cast to the data's type first: 0.5 -> 0, 1.5 -> 1 for int32
    got = nd.contrib.arange_like(nd.ones((2, 3), dtype="int32"), start=0.5, step=1.5)
    np.testing.assert_array_equal(got.asnumpy(), [[0, 1, 2], [3, 4, 5]])
    got = nd.contrib.arange_like(nd.ones((2, 3)), axis=-1, start=1, step=0.5).asnumpy()
    np.testing.assert_array_equal(got, [1, 1.5, 2])
    ia = nd.contrib.index_array(nd.ones((2, 3)))
    assert ia.dtype == np.int64 and ia.shape == (2, 3, 2)
    np.testing.assert_array_equal(ia.asnumpy()[1, 2], [1, 2])
    np.testing.assert_array_equal(
        nd.contrib.index_array(nd.ones((2, 3)), axes=(-1,)).asnumpy().ravel(), [0, 1, 2] * 2)


def test_index_copy_forward_and_gradient_match_mxnet():
    old = np.zeros((4, 3), np.float32)
    new = np.ones((3, 3), np.float32)
    new[2] = 5
    idx = np.array([2, 0, 2], np.float32)  # a repeated row: the last one wins
    got = nd.contrib.index_copy(nd.array(old), nd.array(idx), nd.array(new)).asnumpy()
    np.testing.assert_array_equal(got, [[1, 1, 1], [0, 0, 0], [5, 5, 5], [0, 0, 0]])
    out_of_range = nd.contrib.index_copy(nd.array(old), nd.array([7]), nd.ones((1, 3)))
    np.testing.assert_array_equal(out_of_range.asnumpy(), old)
    s = sym.contrib.index_copy(sym.Variable("a"), sym.Variable("b"), sym.Variable("c"))
    ex = s.simple_bind(mx.cpu(), a=(4, 3), b=(3,), c=(3, 3))
    ex.forward(is_train=True, a=old, b=idx, c=new)
    ex.backward(nd.array(np.arange(12, dtype=np.float32).reshape(4, 3)))
    np.testing.assert_array_equal(ex.grad_dict["a"].asnumpy(),
                                  [[0, 0, 0], [3, 4, 5], [0, 0, 0], [9, 10, 11]])
    np.testing.assert_array_equal(ex.grad_dict["c"].asnumpy(),
                                  [[6, 7, 8], [0, 1, 2], [6, 7, 8]])
    np.testing.assert_array_equal(ex.grad_dict["b"].asnumpy(), [0, 0, 0])
    with pytest.raises(mx.NNSymError, match="rows must have the shape"):
        s.infer_shape(a=(4, 3), b=(2,), c=(2, 4))


def test_getnnz_counts_the_stored_values():
    dense = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    a = nd.array(dense).tostype("csr")
    for kw, want in (({}, [3]), ({"axis": 1}, [1, 2]), ({"axis": 0}, [1, 1, 1])):
        r = nd.contrib.getnnz(a, **kw)  # MXNet: [3] and [1 2]; it refuses axis=0
        assert r.dtype == np.int64
        np.testing.assert_array_equal(r.asnumpy(), want)
        np.testing.assert_array_equal(nd.contrib.getnnz(nd.array(dense), **kw).asnumpy(), want)


def test_count_sketch_matches_mxnets_documented_example():
    x = nd.array([[1.2, 2.5, 3.4], [3.2, 5.7, 6.6]])
    got = nd.contrib.count_sketch(x, nd.array([[0, 3, 4]]), nd.array([[1, -1, 1]]), out_dim=5)
    np.testing.assert_allclose(got.asnumpy(), [[1.2, 0, 0, -2.5, 3.4], [3.2, 0, 0, -5.7, 6.6]],
                               rtol=1e-6)


def test_fft_layout_and_unnormalized_round_trip():
    d = np.random.default_rng(0).normal(size=(3, 5))
    f = nd.contrib.fft(nd.array(d, dtype="float64")).asnumpy()
    assert f.shape == (3, 10)
    np.testing.assert_allclose(f[:, 0::2] + 1j * f[:, 1::2], np.fft.fft(d), atol=1e-12)
    back = nd.contrib.ifft(nd.array(f, dtype="float64")).asnumpy()
    np.testing.assert_allclose(back, 5 * d, atol=1e-12)  # cuFFT's inverse: no 1/d
    with pytest.raises(mx.NNSymError, match="must be even"):
        nd.contrib.ifft(nd.ones((2, 3)))
    with pytest.raises(mx.NNSymError, match=r"\(N, d\)"):
        nd.contrib.fft(nd.ones((2, 3, 4)))


def test_allclose_has_no_gradient_as_in_mxnet():
    s = sym.contrib.allclose(sym.Variable("data"), sym.Variable("b"))
    with pytest.raises(mx.NNSymError, match="has no gradient"):
        s.simple_bind(mx.cpu(), data=(2, 3), b=(2, 3))


def test_interleaved_self_attention_matches_per_head_products():
    rng = np.random.default_rng(1)
    seq, batch, heads, d = 4, 2, 2, 3
    qkv = rng.standard_normal((seq, batch, heads * 3 * d))
    per = qkv.reshape(seq, batch, heads, 3, d)
    q, k, v = (per[:, :, :, i].transpose(1, 2, 0, 3) for i in range(3))  # (B, H, L, D)
    want = (q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)).reshape(batch * heads, seq, seq)
    x = nd.array(qkv, dtype="float64")
    got = nd.contrib.interleaved_matmul_selfatt_qk(x, heads=heads).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    att = rng.standard_normal((batch * heads, seq, seq))
    out = nd.contrib.interleaved_matmul_selfatt_valatt(x, nd.array(att, dtype="float64"),
                                                       heads=heads).asnumpy()
    ref = (att.reshape(batch, heads, seq, seq) @ v).transpose(2, 0, 1, 3)
    np.testing.assert_allclose(out, ref.reshape(seq, batch, heads * d), rtol=1e-12)


def _bn_run(s, x, og):
    ex = s.simple_bind(mx.cpu(), x=x.shape)
    ex.arg_dict["bn_gamma"][:] = 1.5
    ex.arg_dict["bn_beta"][:] = 0.1
    ex.forward(is_train=True, x=x)
    ex.backward(nd.array(og))
    return (ex.outputs[0].asnumpy(), ex.grad_dict["x"].asnumpy(),
            ex.grad_dict["bn_gamma"].asnumpy(), ex.aux_dict["bn_moving_var"].asnumpy())


@pytest.mark.parametrize("contrib", ["BatchNormWithReLU", "SyncBatchNorm"])
def test_contrib_batch_norms_equal_their_composite(contrib):
    rng = np.random.default_rng(0)
    x, og = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    v = sym.Variable("x")
    if contrib == "BatchNormWithReLU":
        fused = sym.contrib.BatchNormWithReLU(v, name="bn", fix_gamma=False)
        plain = sym.Activation(sym.BatchNorm(v, name="bn", fix_gamma=False), act_type="relu")
    else:
        fused = sym.contrib.SyncBatchNorm(v, name="bn", fix_gamma=False, key="k", ndev=1)
        plain = sym.BatchNorm(v, name="bn", fix_gamma=False)
    assert fused.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    for a, b in zip(_bn_run(fused, x, og), _bn_run(plain, x, og)):
        # SyncBatchNorm keeps the variance (not 1/std) between its passes: last-bit rounding
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_sparse_embedding_weight_gradient_is_row_sparse():
    s = sym.contrib.SparseEmbedding(sym.Variable("d"), sym.Variable("w"), input_dim=10,
                                    output_dim=4)
    ex = s.simple_bind(mx.cpu(), d=(3,), w=(10, 4), grad_req={"d": "null", "w": "write"})
    ex.forward(is_train=True, d=np.array([1, 3, 1.0]), w=np.ones((10, 4)))
    ex.backward(nd.ones((3, 4)))
    g = ex.grad_dict["w"]
    assert g.stype == "row_sparse"
    np.testing.assert_array_equal(g.indices.asnumpy(), [1, 3])
    np.testing.assert_array_equal(g.asnumpy().sum(axis=1), [0, 8, 0, 4, 0, 0, 0, 0, 0, 0])


def test_edge_id_matches_mxnet():
    d = nd.array([[1, 0, 0], [0, 2, 0], [0, 0, 3]])
    u, v = nd.array([0, 0, 1, 1, 2, 2]), nd.array([0, 1, 1, 2, 0, 2])
    want = [1, -1, 2, -1, -1, 3]  # MXNet 1.9.1's values
    np.testing.assert_array_equal(nd.contrib.edge_id(d.tostype("csr"), u, v).asnumpy(), want)
    np.testing.assert_array_equal(nd.contrib.edge_id(d, u, v).asnumpy(), want)
    out = nd.contrib.edge_id(d.tostype("csr"), nd.array([5]), nd.array([0]))
    np.testing.assert_array_equal(out.asnumpy(), [-1])  # a row outside the matrix


def test_sample_unique_zipfian_rows_are_distinct_reproducible_and_log_uniform():
    mx.random.seed(7)
    s, t = nd._internal._sample_unique_zipfian(range_max=50, shape=(6, 20))
    mx.random.seed(7)
    s2, t2 = nd._internal._sample_unique_zipfian(range_max=50, shape=(6, 20))
    s, t = s.asnumpy(), t.asnumpy()
    np.testing.assert_array_equal(s, s2.asnumpy())
    np.testing.assert_array_equal(t, t2.asnumpy())
    assert s.dtype == t.dtype == np.int64
    assert all(len(set(row)) == 20 for row in s) and s.min() >= 0 and s.max() < 50
    assert (t >= 20).all()
    first, _ = nd._internal._sample_unique_zipfian(range_max=1000, shape=(20000, 1))
    freq = np.bincount(first.asnumpy().ravel(), minlength=3)[:3] / 20000
    want = np.log(np.arange(2, 5) / np.arange(1, 4)) / np.log(1001)
    np.testing.assert_allclose(freq, want, atol=5 * np.sqrt(want[0] / 20000))
    with pytest.raises(mx.NNSymError, match="cannot be drawn"):
        nd._internal._sample_unique_zipfian(range_max=3, shape=(2, 4))


def test_dgl_adjacency_keeps_the_pattern_with_ones():
    x = nd.array([[1, 0, 0], [0, 2, 0], [0, 0, 3]], dtype="int64").tostype("csr")
    r = nd.contrib.dgl_adjacency(x)
    assert r.stype == "csr" and r.dtype == np.float32  # as MXNet
    np.testing.assert_array_equal(r.asnumpy(), np.eye(3))


def test_hawkesll_forward_and_gradient_match_mxnet():
    n, k = 4, 3
    names = ["lda", "alpha", "beta", "state", "lags", "marks", "valid_length", "max_time"]
    vals = {
        "lda": np.tile([1.5, 2.0, 3.0], (n, 1)), "alpha": np.array([0.2, 0.3, 0.4]),
        "beta": np.array([1.0, 2.0, 3.0]), "state": np.full((n, k), 0.5),
        "lags": np.array([[0.5, 0.7, 0.8, 0.9], [0.1, 0.2, 0.3, 0.4], [0.3, 0.4, 0.5, 0.6],
                          [0.8, 0.9, 1.0, 1.1]]),
        "marks": np.array([[0, 1, 2, 0], [1, 1, 0, 2], [2, 0, 1, 1], [0, 0, 0, 1]]),
        "valid_length": np.array([1, 2, 3, 4.0]), "max_time": np.full(n, 5.0)}
    s = sym.contrib.hawkesll(*[sym.Variable(v) for v in names])
    req = {v: ("write" if v in ("lda", "alpha", "beta") else "null") for v in names}
    ex = s.simple_bind(mx.cpu(), grad_req=req, type_dict={"marks": np.int32},
                       **{key: v.shape for key, v in vals.items()})
    ex.forward(is_train=True, **vals)
    ex.backward([nd.array([1.0, 0.5, 2.0, -1.0]), nd.zeros((n, k))])
    # MXNet 1.9.1's values for the same call (autograd, head gradient [1, 0.5, 2, -1])
    np.testing.assert_allclose(ex.outputs[0].asnumpy(),
                               [-32.701992, -31.797623, -31.52497, -31.717365], rtol=1e-6)
    np.testing.assert_allclose(ex.grad_dict["lda"].asnumpy(),
                               [[-4.3592424, -5, -5], [-2.5, -2.0825517, -2.5],
                                [-8.7093935, -9.013425, -9.383466], [3.1065226, 4.5000377, 5]],
                               rtol=1e-6)
    np.testing.assert_allclose(ex.grad_dict["alpha"].asnumpy(),
                               [-1.6396203, -2.699996, -2.8740022], rtol=1e-6)
    np.testing.assert_allclose(ex.grad_dict["beta"].asnumpy(),
                               [0.10086794, 0.06457879, 0.00500968], rtol=1e-5)
