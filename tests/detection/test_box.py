"""The detection box operators beyond the registry tables: values MXNet 1.9.1 gave in the
reference venv for hand-made boxes (suppression by class, topk, formats, ties), its gradient
rule for box_nms, bounds on hostile input (NaN scores, huge topk, matches out of range) and
bad input."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError

F = np.float32
ROWS = np.array([[0, 0.9, 0, 0, 1, 1], [0, 0.8, 0.1, 0.1, 1, 1], [1, 0.7, 0, 0, 1, 1],
                 [0, 0.3, 2, 2, 3, 3], [-1, 0.95, 0, 0, 1, 1], [0, 0.005, 5, 5, 6, 6],
                 [0, np.nan, 5, 5, 6, 6]], F)
FILL = [-1.0] * 6


def _grad(s, x, head, **rest):
    """The gradient of s with respect to its input x under the head gradient."""
    args = {"x": nd.array(x), **{k: nd.array(v) for k, v in rest.items()}}
    gx = nd.array(np.full(x.shape, 7, F))
    exe = s.bind(None, args, args_grad={"x": gx},
                 grad_req={k: ("write" if k == "x" else "null") for k in args})
    exe.forward(is_train=True)
    exe.backward([nd.array(head)])
    return gx.asnumpy()


def _nms(data, **kw):
    return nd.contrib.box_nms(nd.array(data), **kw).asnumpy()


def test_namespaces_and_names():
    for n in ("box_iou", "box_nms", "box_non_maximum_suppression", "box_encode", "box_decode",
              "bipartite_matching"):
        assert callable(getattr(nd.contrib, n)) and callable(getattr(sym.contrib, n))
    s = sym.contrib.box_nms(sym.var("data"), name="nms")
    assert s.list_outputs() == ["nms_output0"]
    assert s.infer_shape(data=(2, 5, 6))[1] == [(2, 5, 6)]
    e = sym.contrib.box_encode(*(sym.var(c) for c in "abcdef"), name="x")
    assert e.list_arguments() == list("abcdef") and e.list_outputs() == ["x_output0",
                                                                         "x_output1"]
    b = sym.contrib.bipartite_matching(sym.var("d"), threshold=0.5)
    assert b.infer_shape(d=(2, 3, 4))[1] == [(2, 3), (2, 4)]
    assert sym.contrib.box_iou(sym.var("a"), sym.var("b")).infer_shape(
        a=(2, 3, 4), b=(5, 4))[1] == [(2, 3, 5)]


def test_box_nms_mxnet_values():
    got = _nms(ROWS, overlap_thresh=0.5, valid_thresh=0.01, id_index=0)
    np.testing.assert_array_equal(got, [ROWS[0], ROWS[2], ROWS[3], *[FILL] * 4])
    got = _nms(ROWS, topk=2)  # 0.95 and 0.9 take part; 0.9 is suppressed
    np.testing.assert_array_equal(got, [ROWS[4], *[FILL] * 6])
    got = _nms(ROWS, id_index=0, background_id=0, out_format="center")
    np.testing.assert_allclose(got, [[-1, 0.95, 0.5, 0.5, 1, 1], [1, 0.7, 0.5, 0.5, 1, 1],
                                     *[FILL] * 5])
    got = _nms(ROWS, id_index=0, force_suppress=True, in_format="center")
    np.testing.assert_allclose(got, [[0, 0.9, -0.5, -0.5, 0.5, 0.5], [0, 0.3, 0.5, 0.5, 3.5, 3.5],
                                     [0, 0.005, 2, 2, 8, 8], *[FILL] * 4])
    # topk=0: MXNet passes the input through
    np.testing.assert_array_equal(_nms(ROWS[:4], topk=0), ROWS[:4])


def test_box_nms_thresholds_are_strict_and_ties_keep_input_order():
    same = np.array([[0, 0.9, 0, 0, 1, 1], [0, 0.8, 0, 0, 1, 1]], F)
    np.testing.assert_array_equal(_nms(same, overlap_thresh=1.0), same)  # IoU 1 is not > 1
    half = np.array([[0, 0.9, 0, 0, 2, 1], [0, 0.8, 0, 0, 1, 1]], F)  # IoU exactly 0.5
    np.testing.assert_array_equal(_nms(half), half)
    got = _nms(np.array([[0, 0.5, 0, 0, 2, 1], [0, 0.8, 5, 5, 6, 6]], F), valid_thresh=0.5)
    np.testing.assert_array_equal(got, np.array([[0, 0.8, 5, 5, 6, 6], FILL], F))
    ties = np.array([[1, 0.5, 0, 0, 1, 1], [2, 0.5, 3, 3, 4, 4], [3, 0.5, 0, 0, 1, 1]], F)
    np.testing.assert_array_equal(_nms(ties, overlap_thresh=0.1), [ties[0], ties[1], FILL])


def test_box_nms_gradient_goes_back_unconverted():
    # MXNet 1.9.1: each kept row's output gradient lands on its input row as it is, even when
    # the output coordinates were converted to another format; suppressed rows get 0.
    got = _grad(sym.contrib.box_nms(sym.var("x"), out_format="center", id_index=0),
                ROWS[:4], np.arange(24, dtype=F).reshape(4, 6))
    want = np.zeros((4, 6), F)
    want[0], want[2], want[3] = np.arange(6), np.arange(6, 12), np.arange(12, 18)
    np.testing.assert_array_equal(got, want)


def test_box_nms_bounds_on_hostile_input():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (3, 50, 6)).astype(F)
    x[0, ::3, 1] = np.nan
    x[1, :, 2:] = np.nan
    x[2, ::2, 4] = -np.inf
    for topk in (-1, 0, 7, 10**9):
        got = nd.contrib.box_nms(nd.array(x), topk=topk, valid_thresh=-2, id_index=0).asnumpy()
        assert got.shape == x.shape
        kept = got[..., 1] != -1
        if topk == 0:  # the input passes through
            np.testing.assert_array_equal(got, x)
            continue
        assert not np.isnan(got[0][kept[0], 1]).any()  # NaN scores never pass valid_thresh
        assert kept[0].sum() <= 50 - 17 and kept.sum(axis=1).max() <= {-1: 50, 7: 7}.get(topk, 50)
    empty = nd.contrib.box_nms(nd.zeros((0, 4, 6))).asnumpy()
    assert empty.shape == (0, 4, 6)


def test_box_iou_mxnet_values_and_zero_gradient():
    a = nd.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 2, 2]])
    b = nd.array([[0, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0]])
    np.testing.assert_allclose(nd.contrib.box_iou(a, b).asnumpy(),
                               [[0, 0, 0], [1, 0, 0], [0.25, 0, 0]])
    c = nd.contrib.box_iou(nd.array([[0.5, 0.5, 1, 1]]), nd.array([[0.5, 0.5, 2, 2]]),
                           format="center")
    np.testing.assert_allclose(c.asnumpy(), [[0.25]])
    nan = nd.contrib.box_iou(nd.array([[0, 0, 1, 1]]), nd.array([[0, 0, 1, np.nan]]))
    np.testing.assert_array_equal(nan.asnumpy(), [[0]])
    s = sym.contrib.box_iou(sym.var("x"), sym.var("b"))
    got = _grad(s, a.asnumpy(), np.ones((3, 3), F), b=b.asnumpy())
    np.testing.assert_array_equal(got, np.zeros((3, 4)))


def test_box_encode_and_decode_mxnet_values():
    s, m = nd.array([[1, -1, 0, 1]]), nd.array([[1, 0, 1, 5]])
    an = nd.array([[[0, 0, 1, 1], [0, 0, 2, 2], [1, 1, 3, 4], [0, 0, 1, 1]]])
    refs = nd.array([[[0, 0, 2, 2], [1, 1, 2, 3]]])
    t, k = nd.contrib.box_encode(s, m, an, refs, nd.array([0.1, 0.2, 0.3, 0.4]),
                                 nd.array([1, 2, 3, 4]))
    np.testing.assert_allclose(t.asnumpy()[0, 0], [0.9, 0.65, -0.1, 0.07328679], rtol=1e-6)
    # match 5 is outside refs' 2 rows: MXNet reads past the array; nnsym gives 0, mask 0
    np.testing.assert_array_equal(t.asnumpy()[0, 1:], 0)
    np.testing.assert_array_equal(k.asnumpy()[0], [[1] * 4, [0] * 4, [0] * 4, [0] * 4])
    d = nd.array([[[0.1, 0.2, 0.3, 0.4], [1, 1, 5, 5]]])
    a2 = nd.array([[[1, 1, 2, 2], [0, 0, 4, 2]]])
    got = nd.contrib.box_decode(d, a2, std0=0.5, std1=2, std2=1, std3=0.2, clip=1.5)
    np.testing.assert_allclose(got.asnumpy(), [[[-0.24985886, 0.71671283, 2.449859, 2.883287],
                                                [-6.963378, 1.2817183, 10.963378, 6.7182817]]],
                               rtol=1e-6)
    got = nd.contrib.box_decode(d, a2, format="corner")
    np.testing.assert_allclose(got.asnumpy()[0, 0], [0.9250706, 0.9540877, 2.2749295, 2.4459124],
                               rtol=1e-6)


def test_bipartite_matching_mxnet_values():
    x = nd.array([[0.5, 0.6], [0.1, 0.2], [0.3, 0.4]])

    def match(data, **kw):
        return [o.asnumpy().tolist() for o in nd.contrib.bipartite_matching(data, **kw)]

    assert match(x, threshold=1e-12) == [[1, -1, 0], [2, 0]]
    assert match(x, threshold=0.35) == [[1, -1, -1], [-1, 0]]
    assert match(x, threshold=0.45, is_ascend=True) == [[-1, 0, 1], [1, 2]]
    assert match(nd.array([[0.5]]), threshold=0.5) == [[-1], [-1]]  # strictly above
    assert match(nd.array([[0.5, 0.5], [0.5, 0.5]]), threshold=0.1) == [[0, 1], [0, 1]]
    assert match(nd.array([[0.5, 0.2], [0.1, 0.3]]), threshold=0.1, topk=0) == [[0, 1], [0, 1]]
    # NaN scores never match (MXNet's order with NaN is unspecified)
    assert match(nd.array([[np.nan, 0.7], [0.6, np.nan]]), threshold=0.1) == [[1, 0], [1, 0]]
    assert match(x, threshold=1e-12, topk=1) == [[1, -1, -1], [-1, 0]]


@pytest.mark.parametrize(("call", "what"), [
    (lambda: nd.contrib.box_nms(nd.zeros((3, 4))), "values per box"),
    (lambda: nd.contrib.box_nms(nd.zeros((3, 6)), coord_start=1, score_index=2), "score_index"),
    (lambda: nd.contrib.box_nms(nd.zeros((3, 6)), in_format="xyxy"), "in_format"),
    (lambda: nd.contrib.box_iou(nd.zeros((3, 3)), nd.zeros((2, 4))), "4 coordinates"),
    (lambda: nd.contrib.box_decode(nd.zeros((2, 3, 4)), nd.zeros((2, 3, 4))), "(1, N, 4)"),
    (lambda: nd.contrib.bipartite_matching(nd.zeros((3, 3))), "threshold"),
])
def test_bad_input_raises_a_clear_error(call, what):
    with pytest.raises(NNSymError, match=f".*{__import__('re').escape(what)}"):
        call()


DETECTION_OPS = ("_contrib_box_iou", "_contrib_box_nms", "_contrib_box_encode",
                 "_contrib_box_decode", "_contrib_bipartite_matching",
                 "_contrib_MultiBoxDetection", "_contrib_MultiBoxTarget", "_contrib_Proposal",
                 "_contrib_MultiProposal")


@pytest.mark.parametrize("name", DETECTION_OPS)
def test_float16_kernels_match_their_references(name):
    """The registry tables run float32/float64; float16 computes in float32 here too."""
    from dataclasses import replace

    from nnsym.ndarray.ndarray import invoke
    from nnsym.ops import get_op
    from nnsym.testing import make_inputs

    op = get_op(name)
    ex = replace(op.examples[0], dtype="float16")
    ins = make_inputs(op, ex)
    params = op.params(**dict(ex.params))
    got = invoke(op, [nd.array(a, dtype="float16") for a in ins], dict(ex.params))
    want = op.reference(params, *ins)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.asnumpy().astype(F), w.astype(F), rtol=2e-3, atol=2e-3)
