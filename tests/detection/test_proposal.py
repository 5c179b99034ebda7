"""Proposal and MultiProposal beyond the registry tables: MXNet 1.9.1's outputs on seeded
random inputs (golden/, made by golden/make_proposal.py: min-size filtering, the image's
feature rows, pre/post top-n with repeated rows, iou_loss, a batch), bounds on hostile input
and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError

GOLDEN = Path(__file__).resolve().parent / "golden"
META = json.loads((GOLDEN / "proposal_mxnet.json").read_text())
ARR = np.load(GOLDEN / "proposal_mxnet.npz")


@pytest.mark.parametrize("name", sorted(META))
def test_matches_mxnet(name):
    m = META[name]
    f = nd.contrib.MultiProposal if m["multi"] else nd.contrib.Proposal
    out, score = f(*(nd.array(ARR[f"{name}/{k}"]) for k in ("cls", "bbox", "info")),
                   output_score=True, **m["params"])
    np.testing.assert_allclose(out.asnumpy(), ARR[f"{name}/out"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(score.asnumpy(), ARR[f"{name}/score"], rtol=1e-5, atol=1e-6)


def test_outputs_and_shapes():
    s = sym.contrib.Proposal(sym.var("c"), sym.var("b"), sym.var("i"), output_score=True,
                             name="p")
    assert s.list_outputs() == ["p_output", "p_score"]
    assert s.infer_shape(c=(1, 24, 4, 5))[1] == [(300, 5), (300, 1)]
    m = sym.contrib.MultiProposal(sym.var("c"), sym.var("b"), sym.var("i"),
                                  rpn_post_nms_top_n=7, name="m")
    assert m.list_outputs() == ["m_output"]
    assert m.infer_shape(c=(2, 24, 4, 5))[1] == [(14, 5)]


def test_bounds_on_hostile_input():
    rng = np.random.default_rng(0)
    cls = rng.uniform(0, 1, (2, 6, 4, 4)).astype(np.float32)
    cls[0, 3:, ::2] = np.nan
    bbox = rng.uniform(-30, 30, (2, 12, 4, 4)).astype(np.float32)
    for info in ([[64, 64, 1], [np.nan, 64, 1]], [[1e30, -5, 1], [0, 0, 0]]):
        for pre in (-1, 3, 10**9):
            out, score = nd.contrib.MultiProposal(
                nd.array(cls), nd.array(bbox), nd.array(np.array(info, np.float32)),
                scales=(1, 2, 4), ratios=(1,), rpn_pre_nms_top_n=pre, rpn_post_nms_top_n=50,
                output_score=True)
            assert out.shape == (100, 5) and score.shape == (100, 1)
            np.testing.assert_array_equal(out.asnumpy()[:, 0], np.repeat([0, 1], 50))


@pytest.mark.parametrize(("call", "what"), [
    (lambda: nd.contrib.Proposal(nd.zeros((2, 24, 3, 3)), nd.zeros((2, 48, 3, 3)),
                                 nd.zeros((2, 3))), "one image"),
    (lambda: nd.contrib.Proposal(nd.zeros((1, 10, 3, 3)), nd.zeros((1, 20, 3, 3)),
                                 nd.zeros((1, 3))), "anchors"),
    (lambda: nd.contrib.MultiProposal(nd.zeros((2, 24, 3, 3)), nd.zeros((2, 48, 3, 3)),
                                      nd.zeros((2, 2))), "im_info"),
    (lambda: nd.contrib.Proposal(nd.zeros((1, 24, 3, 3)), nd.zeros((1, 48, 3, 3)),
                                 nd.zeros((1, 3)), scales=()), "scales"),
])
def test_bad_input_raises_a_clear_error(call, what):
    with pytest.raises(NNSymError, match=f".*{__import__('re').escape(what)}"):
        call()
