"""_contrib_BilinearResize2D (every mode) and _contrib_AdaptiveAvgPooling2D against MXNet 1.9.1:
forward and gradient (``contrib_mxnet.npz``, written by ``make_fixtures.py``), shapes and
errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import OperatorParamError, ShapeError

FIX = np.load(Path(__file__).resolve().parent / "contrib_mxnet.npz")
N = len({k.split("/")[0] for k in FIX.files})


@pytest.mark.parametrize("k", range(N))
def test_forward_and_gradient_match_mxnet(k):
    op, params = json.loads(str(FIX[f"{k}/case"]))
    x = FIX[f"{k}/in"]
    names = ["data", "like"] if f"{k}/like" in FIX.files else ["data"]
    s = getattr(sym.contrib, op)(*[sym.var(n) for n in names], **params)
    args = {"data": nd.array(x)}
    if len(names) == 2:
        args["like"] = nd.array(FIX[f"{k}/like"])
    g = nd.zeros(x.shape)
    exe = s.bind(None, args, args_grad={"data": g},
                 grad_req={"data": "write", "like": "null"} if len(names) == 2 else "write")
    out = exe.forward(is_train=True)[0].asnumpy()
    np.testing.assert_allclose(out, FIX[f"{k}/out"], rtol=1e-5, atol=1e-6)
    if f"{k}/head" in FIX.files:
        exe.backward([nd.array(FIX[f"{k}/head"])])
        np.testing.assert_allclose(g.asnumpy(), FIX[f"{k}/grad"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("params", "shape", "want"), [
    ({"height": 5, "width": 7}, (2, 1, 4, 7), (2, 1, 5, 7)),
    ({"scale_height": 2.0, "scale_width": 0.5}, (2, 1, 4, 7), (2, 1, 8, 3)),
    ({"mode": "odd_scale", "scale_height": 0.4, "scale_width": 0.3}, (1, 2, 5, 6),
     (1, 2, 2, 1)),
    ({"mode": "to_even_down"}, (1, 2, 5, 6), (1, 2, 4, 6)),
    ({"mode": "to_even_up"}, (2, 1, 4, 7), (2, 1, 4, 8)),
    ({"mode": "to_odd_down"}, (2, 1, 4, 7), (2, 1, 3, 7)),
    ({"mode": "to_odd_up"}, (1, 2, 5, 6), (1, 2, 5, 7)),
])
def test_bilinear_shapes_as_mxnet(params, shape, want):
    s = sym.contrib.BilinearResize2D(sym.var("data"), **params)
    assert s.infer_shape(data=shape)[1] == [want]


def test_like_mode_takes_a_second_input():
    s = sym.contrib.BilinearResize2D(sym.var("data"), sym.var("like"), mode="like")
    assert s.list_arguments() == ["data", "like"]
    assert s.infer_shape(data=(1, 2, 5, 6), like=(3, 4, 7, 8))[1] == [(1, 2, 7, 8)]
    assert sym.contrib.BilinearResize2D(sym.var("data")).list_arguments() == ["data"]


def test_adaptive_pooling_shapes_and_bins():
    s = sym.contrib.AdaptiveAvgPooling2D(sym.var("data"))
    assert s.infer_shape(data=(1, 2, 5, 7))[1] == [(1, 2, 1, 1)]
    x = np.arange(35, dtype=np.float32).reshape(1, 1, 5, 7)
    got = nd.contrib.AdaptiveAvgPooling2D(nd.array(x), output_size=(2, 3)).asnumpy()
    np.testing.assert_array_equal(got, [[[[8, 10, 12], [22, 24, 26]]]])  # MXNet 1.9.1


@pytest.mark.parametrize(("fn", "kw", "shape", "err"), [
    ("BilinearResize2D", {"height": 2, "width": 2}, (2, 3, 4), ShapeError),
    ("BilinearResize2D", {"scale_height": 1.5}, (1, 1, 2, 2), OperatorParamError),
    ("BilinearResize2D", {"mode": "odd_scale"}, (1, 1, 2, 2), OperatorParamError),
    ("AdaptiveAvgPooling2D", {"output_size": (2, 3)}, (2, 5, 7), ShapeError),
    ("AdaptiveAvgPooling2D", {"output_size": (1, 2, 3)}, (1, 1, 5, 7), OperatorParamError),
])
def test_bad_calls(fn, kw, shape, err):
    with pytest.raises(err):
        getattr(nd.contrib, fn)(nd.ones(shape), **kw).asnumpy()
