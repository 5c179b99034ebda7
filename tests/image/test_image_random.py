"""The random image operators: values with a fixed factor (min_factor == max_factor) against the
values MXNet 1.9.1 printed, the distributions of the drawn factors (fixed seeds, so the
statistics are deterministic), reproducibility under ``random.seed`` and errors."""

from __future__ import annotations

import colorsys

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd, sym
from nnsym.errors import OperatorParamError, ShapeError
from nnsym.ops.image.image import EIGVAL, EIGVEC

U8 = np.array([[[200, 100, 101]]], np.uint8)
# the image MXNet 1.9.1 was given: numpy's legacy seed 0, randint(0, 256, (2, 3, 4, 3))[0]
IMG = np.random.RandomState(0).randint(0, 256, (2, 3, 4, 3)).astype(np.float32)[0]


@pytest.mark.parametrize(("fn", "factor", "u8", "f32"), [
    ("random_brightness", 2.0, [255, 200, 202], [344.0, 94.0, 234.0]),
    ("random_contrast", 1.5, [234, 84, 86], [201.10612, 13.606125, 118.606125]),
    ("random_hue", 0.2, [180, 199, 100], [172.0, 127.000046, 46.999996]),
])
def test_fixed_factor_matches_mxnet(fn, factor, u8, f32):
    kw = {"min_factor": factor, "max_factor": factor}
    got = getattr(nd.image, fn)(nd.array(U8, dtype="uint8"), **kw).asnumpy()
    assert got.ravel().tolist() == u8
    got = getattr(nd.image, fn)(nd.array(IMG), **kw).asnumpy()
    np.testing.assert_allclose(got[0, 0], f32, rtol=1e-6)


def test_saturation_blends_with_the_pixel_grey():
    """v * a + grey * (1 - a), grey = 0.299 R + 0.587 G + 0.114 B (MXNet 1.9.1 uses 0.114 B
    alone: docs/differences-from-mxnet.md)."""
    got = nd.image.random_saturation(nd.array(IMG), min_factor=1.5, max_factor=1.5).asnumpy()
    grey = IMG @ np.array([0.299, 0.587, 0.114], np.float32)
    np.testing.assert_allclose(got, IMG * 1.5 - 0.5 * grey[..., None], rtol=1e-5)
    grey_img = np.full((2, 2, 1), 7.0, np.float32)  # one channel: grey is the value
    out = nd.image.random_saturation(nd.array(grey_img), min_factor=0.2, max_factor=0.2)
    np.testing.assert_allclose(out.asnumpy(), grey_img, rtol=1e-6)


def _draws(fn, n, x, **kw):
    mx.random.seed(11)
    return np.stack([getattr(nd.image, fn)(nd.array(x), **kw).asnumpy() for _ in range(n)])


def test_brightness_factor_is_uniform_in_range():
    x = np.full((2, 2, 3), 100.0, np.float32)
    f = _draws("random_brightness", 300, x, min_factor=0.5, max_factor=1.5)[:, 0, 0, 0] / 100
    assert f.min() >= 0.5 and f.max() < 1.5
    ks = np.max(np.abs(np.sort(f) - (np.arange(1, 301) - 0.5) / 300 - 0.5))
    assert ks < 0.08  # Kolmogorov-Smirnov at n=300: 1% level 0.094
    assert abs(f.mean() - 1.0) < 0.05


def test_color_jitter_brightness_only_and_identity():
    x = np.full((2, 2, 3), 100.0, np.float32)
    f = _draws("random_color_jitter", 200, x, brightness=0.4, contrast=0.0, saturation=0.0,
               hue=0.0)[:, 0, 0, 0] / 100
    assert f.min() >= 0.6 and f.max() <= 1.4 and abs(f.mean() - 1) < 0.05 and f.std() > 0.15
    same = nd.image.random_color_jitter(nd.array(IMG), brightness=0, contrast=0, saturation=0,
                                        hue=0)
    np.testing.assert_array_equal(same.asnumpy(), IMG)  # MXNet 1.9.1 returns zeros here


def test_lighting_alphas_are_normal():
    x = np.zeros((1, 1, 3), np.float32)
    shifts = _draws("random_lighting", 400, x, alpha_std=0.2).reshape(400, 3)
    # shift = eigvec @ (alpha * eigval): solve for alpha
    alpha = np.linalg.solve(np.asarray(EIGVEC), shifts.T).T / np.asarray(EIGVAL)
    assert np.all(np.abs(alpha.mean(axis=0)) < 0.04)
    np.testing.assert_allclose(alpha.std(axis=0), 0.2, rtol=0.15)


def test_flips_happen_half_the_time_and_reproduce():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    for fn, flipped in (("random_flip_left_right", x[:, ::-1]),
                        ("random_flip_top_bottom", x[::-1])):
        outs = _draws(fn, 300, x)
        hit = np.array([np.array_equal(o, flipped) for o in outs])
        assert all(h or np.array_equal(o, x) for h, o in zip(hit, outs))
        assert 0.4 < hit.mean() < 0.6
        np.testing.assert_array_equal(outs, _draws(fn, 300, x))  # the same seed, the same run


@pytest.mark.parametrize(("fn", "kw"), [
    ("random_brightness", {"min_factor": 0.5, "max_factor": 1.5}),
    ("random_contrast", {"min_factor": 0.5, "max_factor": 1.5}),
    ("random_saturation", {"min_factor": 0.5, "max_factor": 1.5}),
    ("random_hue", {"min_factor": 0.0, "max_factor": 0.5}),
    ("random_color_jitter", {"brightness": 0.3, "contrast": 0.3, "saturation": 0.3,
                             "hue": 0.2}),
    ("random_lighting", {"alpha_std": 0.1}),
])
def test_reproducible_under_seed_and_fresh_each_run(fn, kw):
    a, b = _draws(fn, 2, IMG, **kw), _draws(fn, 2, IMG, **kw)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[0], a[1])
    # a bound graph draws anew every forward
    s = getattr(sym.image, fn)(sym.var("d"), **kw)
    exe = s.bind(None, {"d": nd.array(IMG)})
    assert not np.array_equal(exe.forward()[0].asnumpy(), exe.forward()[0].asnumpy())


def test_hue_turns_preserve_lightness_and_a_full_turn_is_identity():
    out = nd.image.random_hue(nd.array(IMG), min_factor=1.0, max_factor=1.0).asnumpy()
    np.testing.assert_allclose(out, IMG, atol=1e-3)
    out = nd.image.random_hue(nd.array(IMG), min_factor=0.3, max_factor=0.3).asnumpy()
    np.testing.assert_allclose(out.max(-1) + out.min(-1), IMG.max(-1) + IMG.min(-1), atol=1e-3)


@pytest.mark.parametrize(("fn", "kw", "shape", "err"), [
    ("random_brightness", {"min_factor": 0.5, "max_factor": 1.5}, (2, 2, 2, 3), ShapeError),
    ("random_contrast", {"min_factor": 0.5, "max_factor": 1.5}, (2, 2, 4), ShapeError),
    ("random_flip_left_right", {}, (2, 2), ShapeError),
    ("random_hue", {"min_factor": -0.5, "max_factor": 0.5}, (2, 2, 3), OperatorParamError),
    ("random_color_jitter", {"brightness": 0.1}, (2, 2, 3), OperatorParamError),
])
def test_bad_calls(fn, kw, shape, err):
    with pytest.raises(err):
        getattr(nd.image, fn)(nd.ones(shape), **kw).asnumpy()


def _ks_uniform(f: np.ndarray, lo: float, hi: float) -> float:
    u = np.sort((f - lo) / (hi - lo))
    n = len(u)
    return float(np.max(np.maximum(np.arange(1, n + 1) / n - u, u - np.arange(n) / n)))


def _hue(px: np.ndarray) -> float:
    return colorsys.rgb_to_hls(*(px / 255.0))[0]


@pytest.mark.parametrize(("fn", "lo", "hi"), [
    ("random_contrast", 0.3, 1.7), ("random_saturation", 0.2, 1.2), ("random_hue", 0.1, 0.4),
])
def test_factors_are_uniform_in_range(fn, lo, hi):
    """The factor each run drew, recovered from the output: contrast and saturation scale
    differences between pixels (channels) by it; hue turns every pixel's hue by it * 360."""
    x = np.array([[[200.0, 50.0, 90.0], [30.0, 120.0, 60.0]]], np.float32)
    outs = _draws(fn, 250, x, min_factor=lo, max_factor=hi)
    if fn == "random_contrast":
        f = (outs[:, 0, 0, 0] - outs[:, 0, 1, 0]) / (x[0, 0, 0] - x[0, 1, 0])
    elif fn == "random_saturation":
        f = (outs[:, 0, 0, 0] - outs[:, 0, 0, 1]) / (x[0, 0, 0] - x[0, 0, 1])
    else:
        f = np.array([(_hue(o[0, 0]) - _hue(x[0, 0])) % 1.0 for o in outs])
        g = np.array([(_hue(o[0, 1]) - _hue(x[0, 1])) % 1.0 for o in outs])
        np.testing.assert_allclose(f, g, atol=1e-4)  # one turn for the whole image
    assert f.min() >= lo - 1e-4 and f.max() <= hi + 1e-4
    assert _ks_uniform(f, lo, hi) < 0.1  # KS at n=250: 1% level 0.103


def test_color_jitter_hue_turns_both_ways():
    x = np.array([[[200.0, 50.0, 90.0]]], np.float32)
    outs = _draws("random_color_jitter", 250, x, brightness=0, contrast=0, saturation=0,
                  hue=0.2)
    f = np.array([(_hue(o[0, 0]) - _hue(x[0, 0]) + 0.5) % 1.0 - 0.5 for o in outs])
    assert f.min() >= -0.2 - 1e-4 and f.max() <= 0.2 + 1e-4
    assert _ks_uniform(f, -0.2, 0.2) < 0.1
