"""MultiBoxPrior and MultiBoxDetection beyond the registry tables: values MXNet 1.9.1 gave in
the reference venv (anchor layout, steps/offsets/clip; detection with thresholds, nms_topk and
force_suppress, including the rows MXNet leaves unsorted past nms_topk), float tuple
parameters, bounds on hostile input and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError

F = np.float32


def test_prior_layout_and_parameters():
    x = nd.zeros((1, 1, 2, 3))
    got = nd.contrib.MultiBoxPrior(x, sizes=(0.5, 0.25), ratios=(1, 2, 0.5)).asnumpy()
    assert got.shape == (1, 24, 4) and got.dtype == F
    np.testing.assert_allclose(got[0, :4], [[0, 0, 0.33333334, 0.5],
                                            [0.08333334, 0.125, 0.25, 0.375],
                                            [-0.06903559, 0.07322331, 0.40236893, 0.4267767],
                                            [0.04881554, -0.10355338, 0.2845178, 0.6035534]],
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[0, 9], [0.75000006, 0.125, 0.9166667, 0.375], rtol=1e-7)
    got = nd.contrib.MultiBoxPrior(x, sizes="(0.7,)", clip=True, steps="(0.3, 0.2)",
                                   offsets=[0.1, 0.4]).asnumpy()
    np.testing.assert_allclose(got[0, :3], [[0, 0, 0.31333333, 0.38],
                                            [0.04666667, 0, 0.5133333, 0.38],
                                            [0.24666668, 0, 0.71333337, 0.38]], rtol=1e-6)
    s = sym.contrib.MultiBoxPrior(sym.var("d"), sizes=(0.5, 0.25), ratios=(1, 2, 0.5))
    assert s.infer_shape(d=(2, 3, 4, 5))[1] == [(1, 80, 4)]
    assert '"sizes": "(0.5, 0.25)"' in s.tojson()


def _detection_inputs():
    rng = np.random.RandomState(0)
    anc = nd.contrib.MultiBoxPrior(nd.zeros((1, 1, 2, 3)), sizes=(0.5,), clip=True)
    cls = rng.rand(2, 3, 6).astype(F)
    cls[:, 0, :] = 0.3
    cls[0, 1, 0], cls[0, 1, 1], cls[0, 2, 1] = 0.9, 0.85, 0.86
    loc = (rng.rand(2, 24).astype(F) - 0.5) * 0.2
    return nd.array(cls), nd.array(loc), anc


def test_detection_mxnet_values():
    cls, loc, anc = _detection_inputs()
    got = nd.contrib.MultiBoxDetection(cls, loc, anc).asnumpy()
    np.testing.assert_allclose(got[0, :3], [[0, 0.96366274, 0.6696982, 0.00538972, 0.9991922,
                                             0.49802306],
                                            [0, 0.9, 0, 0, 0.33706537, 0.5029942],
                                            [1, 0.86, 0.33107394, 0.00372961, 0.6670528,
                                             0.49501103]], rtol=1e-6, atol=1e-7)
    got = nd.contrib.MultiBoxDetection(cls, loc, anc, nms_threshold=0.3, threshold=0.5,
                                       nms_topk=3, force_suppress=True).asnumpy()
    # past nms_topk, MXNet leaves the unsorted detections in place with class -1
    np.testing.assert_allclose(got[0, 3:, :2], [[-1, 0.79172504], [-1, 0.83261985], [-1, -1]],
                               rtol=1e-6)
    np.testing.assert_allclose(got[1, 3], [-1, 0.6176355, 0.66833377, 0.4972105, 0.9959061, 1],
                               rtol=1e-6)
    # background_id is accepted and, as in MXNet's CPU kernel, class 0 stays the background
    same = nd.contrib.MultiBoxDetection(cls, loc, anc, background_id=1).asnumpy()
    np.testing.assert_array_equal(same, nd.contrib.MultiBoxDetection(cls, loc, anc).asnumpy())


def test_detection_suppresses_overlaps_of_one_class():
    anc = nd.array([[[0, 0, 1, 1], [0, 0, 0.9, 1], [0, 0, 1, 1]]])
    cls = nd.array([[[0.1, 0.1, 0.1], [0.8, 0.9, 0.1], [0.1, 0.0, 0.7]]])
    loc = nd.zeros((1, 12))
    got = nd.contrib.MultiBoxDetection(cls, loc, anc).asnumpy()[0]
    np.testing.assert_allclose(got[:, :2], [[0, 0.9], [-1, 0.8], [1, 0.7]])
    got = nd.contrib.MultiBoxDetection(cls, loc, anc, force_suppress=True).asnumpy()[0]
    np.testing.assert_allclose(got[:, 0], [0, -1, -1])
    got = nd.contrib.MultiBoxDetection(cls, loc, anc, nms_threshold=0).asnumpy()[0]
    np.testing.assert_allclose(got[:, :2], [[0, 0.8], [0, 0.9], [1, 0.7]])  # unsorted


def test_detection_bounds_on_hostile_input():
    rng = np.random.default_rng(0)
    cls = rng.uniform(0, 1, (2, 4, 30)).astype(F)
    cls[0, :, ::2] = np.nan
    loc = rng.uniform(-50, 50, (2, 120)).astype(F)
    anc = rng.uniform(0, 1, (1, 30, 4)).astype(F)
    for topk in (-1, 5, 10**9):
        got = nd.contrib.MultiBoxDetection(nd.array(cls), nd.array(loc), nd.array(anc),
                                           nms_topk=topk).asnumpy()
        assert got.shape == (2, 30, 6)
        assert (got[..., 0] >= -1).all() and (got[..., 0] <= 2).all()
        assert (got[0, 15:] == -1).all()  # the NaN anchors never become detections


@pytest.mark.parametrize(("call", "what"), [
    (lambda: nd.contrib.MultiBoxPrior(nd.zeros((2, 3))), "(N, C, H, W)"),
    (lambda: nd.contrib.MultiBoxPrior(nd.zeros((1, 1, 2, 2)), sizes=()), "sizes"),
    (lambda: nd.contrib.MultiBoxPrior(nd.zeros((1, 1, 2, 2)), steps="(a, b)"), "steps"),
    (lambda: nd.contrib.MultiBoxDetection(nd.zeros((1, 3, 4)), nd.zeros((1, 12)),
                                          nd.zeros((1, 4, 4))), "disagree"),
    (lambda: nd.contrib.MultiBoxDetection(nd.zeros((1, 3, 4)), nd.zeros((1, 16)),
                                          nd.zeros((1, 4, 4)), variances=(1, 2)), "variances"),
])
def test_bad_input_raises_a_clear_error(call, what):
    with pytest.raises(NNSymError, match=f".*{__import__('re').escape(what)}"):
        call()


ANC = np.array([[[0, 0, .5, .5], [.5, 0, 1, .5], [0, .5, .5, 1], [.5, .5, 1, 1],
                 [.1, .1, .6, .6], [.2, .2, .7, .7], [0, 0, .45, .5], [.3, .3, .4, .4]]], F)
LAB = np.array([[[1, 0, 0, .5, .5], [0, .5, .5, 1, 1], [-1, -1, -1, -1, -1]],
                [[2, .1, .1, .62, .6], [-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1]]], F)


def _target(anc=ANC, lab=LAB, **kw):
    cls = np.random.RandomState(0).randn(lab.shape[0], 3, anc.shape[1]).astype(F)
    return [o.asnumpy() for o in nd.contrib.MultiBoxTarget(nd.array(anc), nd.array(lab),
                                                           nd.array(cls), **kw)]


def test_target_mxnet_values():
    loc, mask, cls = _target()
    np.testing.assert_array_equal(cls, [[2, 0, 0, 1, 0, 0, 2, 0], [0, 0, 0, 0, 3, 0, 0, 0]])
    np.testing.assert_allclose(loc[0, 24:28], [0.55556, 0, 0.5268, 0], atol=1e-5)
    np.testing.assert_allclose(loc[1, 16:20], [0.2, 0, 0.1961, 0], atol=1e-4)
    np.testing.assert_array_equal(mask[0].reshape(8, 4)[:, 0], [1, 0, 0, 1, 0, 0, 1, 0])
    # hard negatives: lowest background probability first, among best IoU < 0.3
    _, _, cls = _target(negative_mining_ratio=1, negative_mining_thresh=0.3)
    np.testing.assert_array_equal(cls, [[2, 0, -1, 1, -1, 0, 2, 0],
                                        [-1, -1, -1, 0, 3, -1, -1, -1]])
    loc, _, cls = _target(negative_mining_ratio=1, minimum_negative_samples=4,
                          overlap_threshold=0.3)
    np.testing.assert_array_equal(cls, [[2, 0, 0, 1, 2, 0, 2, 0], [3, 0, 0, 0, 3, 3, 3, 0]])
    np.testing.assert_allclose(loc[1, :4], [2.2, 2, 0.1961, 0], atol=1e-4)
    _, _, cls = _target(ignore_label=-2, overlap_threshold=0.9, variances=(1, 1, 1, 1))
    np.testing.assert_array_equal(cls, [[2, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 3, 0, 0, 0]])


def test_target_edge_cases_as_mxnet():
    anc = np.array([[[0, 0, .5, .5], [.5, 0, 1, .5], [0, 0, .25, .5], [.5, .5, 1, 1]]], F)
    pad = np.full((1, 2, 5), -1, F)
    assert _target(anc, pad)[2].tolist() == [[-1] * 4]  # no ground truth: all ignored
    assert _target(anc, pad, negative_mining_ratio=2, minimum_negative_samples=2)[2].tolist() \
        == [[-1] * 4]
    one = np.array([[[0, 0, 0, .5, .5]]], F)
    assert _target(anc, one)[2].tolist() == [[1, 0, 0, 0]]  # IoU 0.5 is not above 0.5
    assert _target(anc, one, overlap_threshold=0.49)[2].tolist() == [[1, 0, 1, 0]]
    assert _target(anc, one, negative_mining_ratio=2)[2].tolist() == [[1, 0, -1, 0]]
    assert _target(anc, one, negative_mining_ratio=1.6)[2].tolist() == [[1, 0, -1, -1]]
    far = np.array([[[0, 2, 2, 3, 3]]], F)
    assert _target(anc, far)[2].tolist() == [[0] * 4]
    assert _target(anc, far, negative_mining_ratio=1, minimum_negative_samples=1)[2].tolist() \
        == [[-1] * 4]  # no positive: MXNet mines no negative
    tie = np.array([[[0, 0, 0, .5, .5], [1, 0, 0, .5, .5]]], F)
    assert _target(anc, tie)[2].tolist() == [[1, 0, 2, 0]]
    # MXNet fails a CHECK when fewer candidates than wanted negatives; nnsym takes them all
    assert _target(anc, one, negative_mining_ratio=3)[2].tolist() == [[1, 0, -1, 0]]
    nan = np.array([[[np.nan, 0, 0, .5, .5], [0, np.nan, 0, 1, 1]]], F)
    _, mask, cls = _target(anc, nan, negative_mining_ratio=1e9)
    assert cls.shape == (1, 4) and np.isfinite(mask).all()


def test_float_tuple_parameters_parse_like_mxnet():
    from nnsym.errors import OperatorParamError
    from nnsym.ops import get_op

    op = get_op("_contrib_MultiBoxPrior")
    for text, want in (("0.5", (0.5,)), ("[0.1,0.2]", (0.1, 0.2)), ("(1, 2.5)", (1.0, 2.5)),
                       ("(3,)", (3.0,))):
        assert nd.contrib.MultiBoxPrior(nd.zeros((1, 1, 1, 1)), sizes=text).shape == (
            1, len(want), 4)
        assert op.parse_params({"sizes": text})[0].sizes == want
    for bad in ("(a, b)", "(0.1", "[0.1)", True, "x"):
        with pytest.raises(OperatorParamError, match="sizes"):
            op.parse_params({"sizes": bad})
    s = sym.contrib.MultiBoxPrior(sym.var("d"), sizes=(0.5, 0.25), ratios=[1, 2])
    back = sym.load_json(s.tojson())
    assert back.tojson() == s.tojson()
    assert back.infer_shape(d=(1, 3, 2, 2))[1] == [(1, 12, 4)]
