"""Optimizers MXNet cannot serve as a reference for (random noise, a crash, gradient
accumulation), against numpy versions of their formulas."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

from nnsym import nd, optimizer


def _data(seed: int = 3) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((4, 3)).astype(np.float32),
            [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(4)])


def test_sgld_uses_the_seeded_generator() -> None:
    w0, gs = _data()
    opt = optimizer.create("sgld", learning_rate=0.01, wd=0.1, rescale_grad=0.5,
                           clip_gradient=0.4, seed=11)
    upd = optimizer.get_updater(opt)
    w = nd.array(w0)
    for g in gs:
        upd(0, nd.array(g), w)
    rng = np.random.default_rng(11)
    ref = w0.astype(np.float64)
    for g in gs:
        gr = np.clip(0.5 * g, -0.4, 0.4)
        ref = ref - 0.01 / 2 * (gr + 0.1 * ref)
        ref = ref + rng.normal(0.0, math.sqrt(0.01), size=ref.shape).astype(np.float32)
    np.testing.assert_allclose(w.asnumpy(), ref, rtol=1e-5, atol=1e-6)
    # reseeding replays the noise; a different seed does not
    a, b, c = (nd.array(w0) for _ in range(3))
    for arr, seed in ((a, 5), (b, 5), (c, 6)):
        o = optimizer.SGLD(learning_rate=0.5)
        o.seed(seed)
        o.update(0, arr, nd.array(np.zeros_like(w0)), None)
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert not np.allclose(a.asnumpy(), c.asnumpy())
    noise = (a.asnumpy() - w0).ravel()
    assert 0.2 < noise.std() < 1.5  # N(0, lr): std sqrt(0.5)


def test_dcasgd_with_momentum_follows_its_formula() -> None:
    """MXNet 1.9.1 raises here (it tests an NDArray's truth value); nnsym runs the formula."""
    w0, gs = _data()
    opt = optimizer.create("dcasgd", learning_rate=0.1, momentum=0.9, lamda=0.04, wd=0.01,
                           clip_gradient=1.0)
    upd = optimizer.get_updater(opt)
    w = nd.array(w0)
    for g in gs:
        upd(0, nd.array(g), w)
    ref, prev, mom = w0.astype(np.float64), w0.astype(np.float64), np.zeros((4, 3))
    for g in gs:
        gr = np.clip(g, -1, 1)
        mom = 0.9 * mom - 0.1 * (gr + 0.01 * ref + 0.04 * gr * gr * (ref - prev))
        prev = ref.copy()
        ref = ref + mom
    np.testing.assert_allclose(w.asnumpy(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(upd.states[0][1].asnumpy(), prev, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy", ["linear", "lars"])
def test_lbsgd_accumulates_then_steps(strategy: str) -> None:
    w0, gs = _data()
    opt = optimizer.create("lbsgd", learning_rate=0.1, momentum=0.5, batch_scale=2,
                           warmup_strategy=strategy, warmup_epochs=1, updates_per_epoch=4)
    upd = optimizer.get_updater(opt)
    w = nd.array(w0)
    seen = []
    for g in gs:
        upd(0, nd.array(g), w)
        seen.append(w.asnumpy().copy())
    ref, mom = w0.astype(np.float64), np.zeros((4, 3))
    for k in (1, 3):  # steps at the 2nd and 4th call, with the mean of the two gradients
        np.testing.assert_array_equal(seen[k - 1], ref.astype(np.float32))
        g = (gs[k - 1] + gs[k]) / 2
        num = k + 1
        if strategy == "lars":
            w2, g2 = float(np.sum(ref ** 2)), float(np.sum(g.astype(np.float64) ** 2))
            mult = min(max(math.sqrt(w2 / g2), 0.01), 100)
        else:
            mult = 1 + (2 - 1) * num / 4 if num < 4 else 2.0
        mom = 0.5 * mom - 0.1 * mult * g
        ref = ref + mom
        np.testing.assert_allclose(seen[k], ref, rtol=1e-4, atol=1e-5)


def test_every_mxnet_optimizer_is_registered() -> None:
    names = {"sgd", "signum", "ftml", "lars", "lbsgd", "lamb", "dcasgd", "nag", "sgld", "ccsgd",
             "adam", "adagrad", "rmsprop", "adadelta", "ftrl", "adamax", "nadam", "test"}
    assert names <= set(optimizer.Optimizer.opt_registry)
    for n in names:
        assert type(optimizer.create(n.upper())).__name__.lower() == n


def test_test_optimizer() -> None:
    w = nd.array(np.ones(3))
    upd = optimizer.get_updater(optimizer.create("test", rescale_grad=2.0))
    upd(0, nd.array(np.full(3, 0.5)), w)
    np.testing.assert_array_equal(w.asnumpy(), np.full(3, 2.0))
    np.testing.assert_array_equal(upd.states[0].asnumpy(), np.full(3, 2.0))


@pytest.mark.parametrize("name", ["sgd", "nag", "signum", "ftml", "lars", "lamb", "dcasgd",
                                  "adam", "adagrad", "rmsprop", "adadelta", "ftrl", "adamax",
                                  "nadam"])
def test_float16_weights_without_multi_precision(name: str) -> None:
    """float16 weights (no master copy) take the float32 step rounded to float16."""
    w0, gs = _data(5)
    ws = {}
    for dt in (np.float32, np.float16):
        kw = {"momentum": 0.9} if name in ("sgd", "nag", "lars") else {}
        upd = optimizer.get_updater(optimizer.create(name, wd=0.01, **kw))
        w = nd.array(w0, dtype=dt)
        half = dt == np.float16
        with pytest.warns(UserWarning, match="float16") if half else contextlib.nullcontext():
            for g in gs[:2]:
                upd(0, nd.array(g, dtype=dt), w)
        assert w.dtype == dt
        ws[dt] = w.asnumpy().astype(np.float64)
    np.testing.assert_allclose(ws[np.float16], ws[np.float32], rtol=1e-2, atol=1e-2)
