"""nnsym.random and nd.random / sym.random: seeding, out=, dispatch between the random_* and
sample_* operators, symbols that bind and round-trip."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import nnsym as mx
import nnsym.random as mxrandom
from nnsym import nd, sym
from nnsym.errors import NNSymError, OperatorParamError, RandomArgumentError


def test_seed_reproduces_samples_and_dropout_masks():
    x = nd.ones((40, 30))
    mxrandom.seed(11)
    a = nd.random.uniform(shape=(5, 7)).asnumpy()
    b = nd.random.normal(2, 3, shape=(9,)).asnumpy()
    d1 = nd.Dropout(x, p=0.5, mode="always").asnumpy()
    mxrandom.seed(11)
    np.testing.assert_array_equal(nd.random.uniform(shape=(5, 7)).asnumpy(), a)
    np.testing.assert_array_equal(nd.random.normal(2, 3, shape=(9,)).asnumpy(), b)
    np.testing.assert_array_equal(nd.Dropout(x, p=0.5, mode="always").asnumpy(), d1)
    # the next call draws a new run seed
    assert (nd.random.uniform(shape=(5, 7)).asnumpy() != a).any()


def test_seed_rejects_non_integers():
    with pytest.raises(RandomArgumentError, match="seed_state must be an int"):
        mxrandom.seed(1.5)  # type: ignore[arg-type]
    with pytest.raises(RandomArgumentError, match="ctx"):
        mxrandom.seed(1, ctx="gpu")
    mxrandom.seed(3, ctx=mx.cpu())


def test_uniform_and_normal_defaults_shape_dtype():
    u = nd.random.uniform()
    assert u.shape == (1,) and u.dtype == np.float32
    v = nd.random.normal(shape=(2, 3), dtype="float64")
    assert v.shape == (2, 3) and v.dtype == np.float64
    w = mxrandom.uniform(-1, 1, (3,), "float16")
    assert w.shape == (3,) and w.dtype == np.float16
    assert ((w.asnumpy() >= -1) & (w.asnumpy() <= 1)).all()


def test_out_writes_into_the_given_array():
    out = nd.zeros((200, 5), dtype="float64")
    res = mxrandom.uniform(2.0, 3.0, out=out)
    assert res is out
    vals = out.asnumpy()
    assert vals.dtype == np.float64 and ((vals >= 2) & (vals < 3)).all()
    assert len(np.unique(vals)) > 900
    low, high = nd.array([0.0, 10.0]), nd.array([1.0, 20.0])
    out2 = nd.zeros((2, 50))
    nd.random.uniform(low, high, shape=50, out=out2)
    o = out2.asnumpy()
    assert (o[0] < 1).all() and (o[1] >= 10).all()


def test_array_parameters_dispatch_to_sample_ops():
    mu = nd.array([[0.0, 100.0], [-100.0, 5.0]])
    sigma = nd.array([[1.0, 1.0], [1.0, 0.1]])
    s = nd.random.normal(mu, sigma, shape=(400,))
    assert s.shape == (2, 2, 400) and s.dtype == np.float32
    np.testing.assert_allclose(s.asnumpy().mean(axis=-1), mu.asnumpy(), atol=0.3)
    e = nd.random.exponential(nd.array([0.5, 4.0]), shape=4000)  # scale, as MXNet's wrapper
    np.testing.assert_allclose(e.asnumpy().mean(axis=-1), [0.5, 4.0], rtol=0.1)


def test_mixed_parameter_kinds_are_refused():
    with pytest.raises(RandomArgumentError, match="all numbers or all NDArrays"):
        nd.random.uniform(0, nd.array([1.0]))
    with pytest.raises(RandomArgumentError, match="all numbers or all Symbols"):
        sym.random.normal(sym.var("a"), 1.0)
    with pytest.raises(RandomArgumentError, match="scale must be positive"):
        nd.random.exponential(0.0)


@pytest.mark.parametrize(
    ("fn", "kwargs", "what"),
    [
        (nd.random.uniform, {"low": 2.0, "high": 1.0}, "low"),
        (nd.random.normal, {"scale": -1.0}, "scale"),
        (nd.random.gamma, {"alpha": 0.0}, "alpha"),
        (nd.random.poisson, {"lam": -1.0}, "lam"),
        (nd.random.negative_binomial, {"k": 2, "p": 0.0}, "p"),
        (nd.random.generalized_negative_binomial, {"mu": -1.0}, "mu"),
        (nd.random.randint, {"low": 5, "high": 5}, "low"),
        (nd.random.uniform, {"dtype": "int32"}, "dtype"),
    ],
)
def test_bad_parameters_raise_operator_param_errors(fn, kwargs, what):
    with pytest.raises(OperatorParamError, match=what) as e:
        fn(shape=(2,), **kwargs)
    assert isinstance(e.value, NNSymError) and isinstance(e.value, ValueError)


def test_symbols_bind_run_and_round_trip_json():
    a = sym.random.uniform(1.0, 2.0, shape=(3, 4), name="u")
    b = sym.random.normal(shape=(3, 4), dtype="float64", name="n")
    g = sym.Group([a, b])
    assert g.infer_shape() == ([], [(3, 4), (3, 4)], [])
    assert g.infer_type()[1] == [np.float32, np.float64]
    text = g.tojson()
    assert sym.load_json(text).tojson() == text
    ex = sym.load_json(text).bind(mx.cpu(), {})
    u1, n1 = (o.asnumpy() for o in ex.forward())
    assert ((u1 >= 1) & (u1 < 2)).all() and n1.dtype == np.float64
    u2 = ex.forward()[0].asnumpy()
    assert (u1 != u2).any()  # a fresh run seed per forward
    mxrandom.seed(5)
    first = ex.forward()[0].asnumpy()
    mxrandom.seed(5)
    np.testing.assert_array_equal(ex.forward()[0].asnumpy(), first)


def test_symbol_sample_forms_take_symbols():
    mu, sigma = sym.var("mu"), sym.var("sigma")
    s = sym.random.normal(mu, sigma, shape=(2,))
    assert s.list_arguments() == ["mu", "sigma"]
    _, outs, _ = s.infer_shape(mu=(3,), sigma=(3,))
    assert outs == [(3, 2)]
    ex = s.bind(mx.cpu(), {"mu": nd.array([0.0, 10.0, 20.0]), "sigma": nd.array([1.0] * 3)})
    v = ex.forward()[0].asnumpy()
    assert v.shape == (3, 2) and (np.abs(v - [[0], [10], [20]]) < 8).all()


def test_like_multinomial_shuffle_and_randint():
    x = nd.zeros((3, 5), dtype="float64")
    u = nd.random.uniform_like(x, low=4.0, high=5.0)
    assert u.shape == (3, 5) and u.dtype == np.float64 and (u.asnumpy() >= 4).all()
    assert set(nd.random.__all__) >= {"uniform_like", "normal_like", "gamma_like", "poisson_like",
                                      "exponential_like", "negative_binomial_like",
                                      "generalized_negative_binomial_like", "randn"}
    r = nd.random.randint(-3, 3, shape=(1000,))
    assert r.dtype == np.int32 and set(np.unique(r.asnumpy())) == set(range(-3, 3))
    assert nd.random.randint(0, 2**40, shape=(4,), dtype="int64").dtype == np.int64
    m, lp = nd.random.multinomial(nd.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]]), shape=(6,),
                                  get_prob=True)
    assert m.shape == (2, 6) and m.dtype == np.int32
    assert (m.asnumpy()[0] == 1).all() and set(m.asnumpy()[1]) <= {0, 2}
    np.testing.assert_allclose(lp.asnumpy()[0], 0.0)
    np.testing.assert_allclose(lp.asnumpy()[1], np.log(0.5), rtol=1e-6)
    data = nd.array(np.arange(30).reshape(10, 3))
    sh = nd.random.shuffle(data).asnumpy()
    assert sorted(map(tuple, sh)) == sorted(map(tuple, data.asnumpy()))
    assert nd.random.randn(2, 3).shape == (2, 3)


def test_namespaces_have_mxnet_names():
    for name in ("uniform", "normal", "randn", "poisson", "exponential", "gamma", "multinomial",
                 "negative_binomial", "generalized_negative_binomial", "shuffle", "randint"):
        assert callable(getattr(nd.random, name)) and callable(getattr(sym.random, name))
    for name in ("random_uniform", "random_normal", "random_randint", "uniform", "normal",
                 "sample_multinomial", "shuffle", "_random_uniform_like", "sample_gamma"):
        assert callable(getattr(nd, name)) and callable(getattr(sym, name))
    assert callable(mxrandom.seed) and mxrandom.uniform is nd.random.uniform


def test_no_gradient_flows_through_samples():
    """MXNet's sampling operators pass zero gradients to their parameter arrays."""
    mu, sigma = sym.var("mu"), sym.var("sigma")
    y = sym.MakeLoss(sym.sum(sym.random.normal(mu, sigma, shape=(3,))) + sym.sum(mu * 2))
    ex = y.simple_bind(mx.cpu(), mu=(2,), sigma=(2,))
    ex.arg_dict["mu"][:] = 1
    ex.arg_dict["sigma"][:] = 1
    ex.forward(is_train=True)
    ex.backward()
    np.testing.assert_array_equal(ex.grad_dict["mu"].asnumpy(), [2.0, 2.0])
    np.testing.assert_array_equal(ex.grad_dict["sigma"].asnumpy(), [0.0, 0.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_multinomial_log_probability_gradient(dtype):
    """d/dp of the get_prob output: ograd / p[t] summed at each sampled category t (MXNet's
    _backward_sample_multinomial); the samples output carries no gradient."""
    probs = np.array([[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]], dtype)
    ograd = np.arange(1, 9, dtype=dtype).reshape(2, 4)
    net = sym.random.multinomial(sym.var("p"), shape=(4,), get_prob=True)
    ex = net.bind(mx.cpu(), {"p": nd.array(probs, dtype=dtype)},
                  args_grad={"p": nd.full((2, 3), 7.0, dtype=dtype)}, grad_req="write")
    samples, _ = ex.forward(is_train=True)
    s = samples.asnumpy()
    ex.backward([nd.zeros((2, 4), dtype=dtype), nd.array(ograd, dtype=dtype)])
    want = np.zeros_like(probs)
    for r in range(2):
        for j in range(4):
            want[r, s[r, j]] += ograd[r, j] / probs[r, s[r, j]]
    np.testing.assert_allclose(ex.grad_dict["p"].asnumpy(), want, rtol=1e-6)


def test_sampler_signatures_are_mxnets():
    assert str(inspect.signature(nd.random.uniform)) == (
        "(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs)")
    assert str(inspect.signature(sym.random.gamma)) == (
        "(alpha=1, beta=1, shape=None, dtype=None, **kwargs)")
    assert list(inspect.signature(nd.random.randint).parameters)[:2] == ["low", "high"]
    with pytest.raises(RandomArgumentError, match="needs \\['high'\\]"):
        nd.random.randint(3)
    # positional shape and dtype, as MXNet's
    v = nd.random.normal(0, 1, (2, 2), "float64")
    assert v.shape == (2, 2) and v.dtype == np.float64


def test_seed_reproduces_rrelu_slopes():
    """RReLU's training slopes come from the same seed source."""
    net = sym.LeakyReLU(sym.var("x"), act_type="rrelu")
    ex = net.bind(mx.cpu(), {"x": nd.full((8, 16), -1.0)})
    mxrandom.seed(31)
    a = ex.forward(is_train=True)[0].asnumpy().copy()
    b = ex.forward(is_train=True)[0].asnumpy().copy()
    mxrandom.seed(31)
    np.testing.assert_array_equal(ex.forward(is_train=True)[0].asnumpy(), a)
    assert (a != b).any() and ((-a >= 0.125) & (-a <= 0.334)).all()
