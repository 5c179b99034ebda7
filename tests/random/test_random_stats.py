"""The random operators' samples against scipy's distributions: KS tests for the continuous
ones, the probability mass function for the discrete ones, on large samples drawn under fixed
seeds (deterministic: a fixed seed gives the same sample every run), and the values'
independence from the worker pool's thread count."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import nnsym.random as mxrandom
from nnsym import nd
from nnsym.codegen import compiler

N = 20000
P_MIN = 1e-3  # KS p-value floor: a wrong distribution at N = 20000 gives p far below this


def _draw(fn, *args, seed=0, **kwargs):
    mxrandom.seed(seed)
    return fn(*args, **kwargs).asnumpy().astype(np.float64)


@pytest.mark.parametrize(
    ("name", "fn", "kwargs", "dist"),
    [
        ("uniform", nd.random.uniform, {"low": -2.0, "high": 5.0}, stats.uniform(-2, 7)),
        ("normal", nd.random.normal, {"loc": 1.5, "scale": 0.5}, stats.norm(1.5, 0.5)),
        ("gamma<1", nd.random.gamma, {"alpha": 0.4, "beta": 2.0}, stats.gamma(0.4, scale=2.0)),
        ("gamma>1", nd.random.gamma, {"alpha": 7.5, "beta": 0.5}, stats.gamma(7.5, scale=0.5)),
        ("exponential", nd.random.exponential, {"scale": 3.0}, stats.expon(scale=3.0)),
    ],
)
def test_continuous_samples_pass_ks(name, fn, kwargs, dist):
    x = _draw(fn, shape=(N,), dtype="float64", seed=1, **kwargs)
    assert np.isfinite(x).all()
    assert stats.kstest(x, dist.cdf).pvalue > P_MIN
    np.testing.assert_allclose(x.mean(), dist.mean(), atol=5 * dist.std() / np.sqrt(N))
    np.testing.assert_allclose(x.var(), dist.var(), rtol=0.05)


def _check_pmf(x: np.ndarray, dist, var_rtol: float = 0.06) -> None:
    assert (x == np.round(x)).all() and (x >= 0).all()
    ks = np.arange(int(x.max()) + 1)
    freq = np.bincount(x.astype(np.int64), minlength=len(ks)) / len(x)
    pmf = dist.pmf(ks)
    # a binomial count's standard error is below 0.5 / sqrt(N) = 0.0035: 0.015 is ~4 of them
    assert np.abs(freq - pmf).max() < 0.015
    np.testing.assert_allclose(x.mean(), dist.mean(), atol=5 * dist.std() / np.sqrt(len(x)))
    np.testing.assert_allclose(x.var(), dist.var(), rtol=var_rtol)


@pytest.mark.parametrize(
    ("name", "fn", "kwargs", "dist"),
    [
        ("poisson small", nd.random.poisson, {"lam": 3.5}, stats.poisson(3.5)),
        ("poisson PTRS", nd.random.poisson, {"lam": 45.0}, stats.poisson(45.0)),
        ("negative binomial", nd.random.negative_binomial, {"k": 4, "p": 0.3},
         stats.nbinom(4, 0.3)),
        # mean mu, dispersion alpha: scipy's nbinom(n = 1 / alpha, p = 1 / (1 + alpha * mu))
        ("generalized negative binomial", nd.random.generalized_negative_binomial,
         {"mu": 3.0, "alpha": 0.5}, stats.nbinom(2.0, 1 / (1 + 0.5 * 3.0))),
        ("gnb alpha 0 is poisson", nd.random.generalized_negative_binomial,
         {"mu": 2.0, "alpha": 0.0}, stats.poisson(2.0)),
    ],
)
def test_discrete_samples_follow_the_pmf(name, fn, kwargs, dist):
    _check_pmf(_draw(fn, shape=(N,), seed=2, **kwargs), dist)


def test_degenerate_parameters():
    assert (_draw(nd.random.poisson, lam=0.0, shape=(50,)) == 0).all()
    assert (_draw(nd.random.negative_binomial, k=0, p=0.5, shape=(50,)) == 0).all()
    assert (_draw(nd.random.negative_binomial, k=3, p=1.0, shape=(50,)) == 0).all()
    assert (_draw(nd.random.uniform, 2.5, 2.5, shape=(50,)) == 2.5).all()


def test_randint_is_uniform_over_its_range():
    x = _draw(nd.random.randint, -5, 15, shape=(N,), seed=3)
    counts = np.bincount((x + 5).astype(np.int64), minlength=20)
    assert len(counts) == 20 and x.min() == -5 and x.max() == 14
    assert stats.chisquare(counts).pvalue > P_MIN
    big = nd.random.randint(0, 2**40, shape=(1000,), dtype="int64").asnumpy()
    assert big.max() > 2**39 and (big < 2**40).all()


def test_sample_forms_draw_per_parameter_element():
    lam = nd.array([[0.5, 4.0], [20.0, 60.0]], dtype="float64")
    x = _draw(nd.random.poisson, lam, shape=(5000,), seed=4)
    assert x.shape == (2, 2, 5000)
    for idx in np.ndindex(2, 2):
        _check_pmf(x[idx], stats.poisson(float(lam.asnumpy()[idx])))
    alpha, beta = nd.array([0.5, 3.0]), nd.array([1.0, 2.0])
    g = _draw(nd.random.gamma, alpha, beta, shape=(5000,), seed=5)
    for i, (a, b) in enumerate([(0.5, 1.0), (3.0, 2.0)]):
        assert stats.kstest(g[i], stats.gamma(a, scale=b).cdf).pvalue > P_MIN
    k, p = nd.array([2.0, 6.0]), nd.array([0.5, 0.25])
    nb = _draw(nd.random.negative_binomial, k, p, shape=(8000,), seed=6)
    for i, (kk, pp) in enumerate([(2, 0.5), (6, 0.25)]):
        _check_pmf(nb[i], stats.nbinom(kk, pp))
    mu, a2 = nd.array([1.0]), nd.array([2.0])
    gnb = _draw(nd.random.generalized_negative_binomial, mu, a2, shape=(8000,), seed=7)
    # heavy-tailed (n = 0.5): the sample variance's standard error is about 4 %
    _check_pmf(gnb[0], stats.nbinom(0.5, 1 / (1 + 2.0)), var_rtol=0.2)
    u = _draw(nd.random.uniform, nd.array([0.0, -3.0]), nd.array([1.0, -2.0]), shape=(4000,))
    assert stats.kstest(u[1], stats.uniform(-3, 1).cdf).pvalue > P_MIN
    n = _draw(nd.random.normal, nd.array([5.0]), nd.array([0.1]), shape=(4000,))
    assert stats.kstest(n[0], stats.norm(5, 0.1).cdf).pvalue > P_MIN


def test_multinomial_frequencies_match_the_probabilities():
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.0, 0.3]])
    mxrandom.seed(8)
    s, lp = nd.random.multinomial(nd.array(probs), shape=(N,), get_prob=True)
    s = s.asnumpy()
    for row in range(2):
        freq = np.bincount(s[row], minlength=4) / N
        np.testing.assert_allclose(freq, probs[row], atol=0.015)
        np.testing.assert_allclose(lp.asnumpy()[row], np.log(probs[row][s[row]]), rtol=1e-6)


def test_shuffle_positions_are_uniform():
    mxrandom.seed(9)
    data = nd.array(np.arange(5 * 2).reshape(5, 2), dtype="float64")
    where0 = []
    for _ in range(500):
        sh = nd.random.shuffle(data).asnumpy()
        assert sorted(sh[:, 0]) == [0, 2, 4, 6, 8] and (sh[:, 1] == sh[:, 0] + 1).all()
        where0.append(int(np.flatnonzero(sh[:, 0] == 0)[0]))
    assert stats.chisquare(np.bincount(where0, minlength=5)).pvalue > P_MIN


def test_float16_and_float32_outputs():
    for dt in ("float16", "float32"):
        x = nd.random.normal(10.0, 2.0, shape=(N,), dtype=dt).asnumpy()
        assert x.dtype == np.dtype(dt)
        np.testing.assert_allclose(x.astype(np.float64).mean(), 10.0, atol=0.1)


def test_values_do_not_depend_on_the_thread_count():
    before = compiler.get_num_threads()
    outs = []
    try:
        for threads in (1, 3):
            compiler.set_num_threads(threads)
            assert compiler.get_num_threads() == threads
            mxrandom.seed(10)
            outs.append([nd.random.gamma(0.7, 1.0, shape=(50000,)).asnumpy(),
                         nd.random.poisson(nd.array([3.0, 30.0]), shape=(20000,)).asnumpy()])
    finally:
        compiler.set_num_threads(before)
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def test_out_of_domain_array_parameters_give_nan_not_a_hang():
    inf, nan = float("inf"), float("nan")
    g = nd.random.gamma(nd.array([inf, nan, -1.0, 0.0]), nd.array([1.0] * 4), shape=2).asnumpy()
    np.testing.assert_array_equal(g, [[inf, inf], [nan, nan], [nan, nan], [0, 0]])
    p = nd.random.poisson(nd.array([inf, nan, -1.0, 0.0]), shape=2).asnumpy()
    np.testing.assert_array_equal(p, [[inf, inf], [nan, nan], [nan, nan], [0, 0]])
    nb = nd.random.negative_binomial(nd.array([2.0, 2.0]), nd.array([0.0, 1.0]), shape=2)
    np.testing.assert_array_equal(nb.asnumpy(), [[inf, inf], [0, 0]])
