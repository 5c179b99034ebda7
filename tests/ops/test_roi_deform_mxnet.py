"""The ROI and deformable contrib operators against numbers MXNet 1.9.1 wrote
(tests/golden/roi_deform: aligned ROIAlign, rotated rois at large angles, real-valued rois and
offsets, which the registry's integer-valued examples cannot show), their numeric gradients
there, and their shape errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym.errors import NNSymError
from nnsym.test_utils import check_numeric_gradient
from nnsym.testing import as_nd

HERE = Path(__file__).parents[1] / "golden" / "roi_deform"
GOLD = np.load(HERE / "roi_deform.npz")
CASES = {c["name"]: c for c in json.loads((HERE / "cases.json").read_text())["cases"]}


def _symbol(case: dict) -> mx.sym.Symbol:
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in case["params"].items()}
    return getattr(mx.sym, case["op"])(*[mx.sym.var(n) for n in case["inputs"]], **params)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradients_match_mxnet(name: str) -> None:
    case = CASES[name]
    s = _symbol(case)
    args = {n: as_nd(GOLD[f"{name}/in_{n}"]) for n in case["inputs"]}
    grads = {n: as_nd(np.zeros_like(GOLD[f"{name}/in_{n}"])) for n in case["grads"]}
    reqs = {n: ("write" if n in grads else "null") for n in args}
    exe = s.bind(None, args, args_grad=grads or None, grad_req=reqs)
    out = exe.forward(is_train=True)[0].asnumpy()
    np.testing.assert_allclose(out, GOLD[f"{name}/out"], rtol=1e-4, atol=1e-5)
    if grads:
        exe.backward([as_nd(GOLD[f"{name}/head"])])
        for n in grads:
            np.testing.assert_allclose(
                grads[n].asnumpy(), GOLD[f"{name}/grad_{n}"], rtol=1e-4, atol=1e-5, err_msg=n
            )


def _numeric(case: dict) -> list[str]:
    """The inputs differentiated numerically: MXNet's, or every input but the rois where
    MXNet has no gradient (ModulatedDeformableConvolution on the CPU)."""
    if case["grads"] or "Modulated" not in case["op"]:
        return list(case["grads"])
    return list(case["inputs"])


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if _numeric(c)))
def test_gradients_match_finite_differences(name: str) -> None:
    case = CASES[name]
    loc = {n: GOLD[f"{name}/in_{n}"].astype(np.float64) for n in case["inputs"]}
    check_numeric_gradient(
        _symbol(case), loc, grad_nodes=_numeric(case), rtol=1e-5, use_forward_train=False
    )


def test_roi_align_reference_is_mxnets_on_a_hand_computed_bin() -> None:
    """One 1x1 bin, one sample at the roi centre (2.5, 1.5): the bilinear mean of its cells."""
    data = np.arange(20, dtype=np.float32).reshape(1, 1, 4, 5)
    rois = np.array([[0, 1, 2, 2, 3]], np.float32)
    out = mx.nd.contrib.ROIAlign(
        as_nd(data), as_nd(rois), pooled_size=(1, 1), spatial_scale=1.0, sample_ratio=1
    ).asnumpy()
    assert out.shape == (1, 1, 1, 1)
    assert out[0, 0, 0, 0] == pytest.approx(2.5 * 5 + 1.5)


@pytest.mark.parametrize(
    ("op", "data", "rois", "params", "what"),
    [
        ("ROIAlign", (2, 3, 5, 5), (4, 4), {}, "rois"),
        ("ROIAlign", (2, 3, 5), (4, 5), {}, "4-D"),
        ("ROIAlign", (2, 6, 5, 5), (4, 5), {"position_sensitive": True}, "multiple"),
        ("RROIAlign", (2, 3, 5, 5), (4, 5), {}, "rois"),
    ],
)
def test_bad_shapes_raise_naming_the_input(op, data, rois, params, what) -> None:
    s = getattr(mx.sym.contrib, op)(
        mx.sym.var("d"), mx.sym.var("r"), pooled_size=(2, 2), spatial_scale=1.0, **params
    )
    with pytest.raises(NNSymError, match=what):
        s.infer_shape(d=data, r=rois)


def test_rroi_align_has_no_gradient_as_in_mxnet() -> None:
    s = mx.sym.contrib.RROIAlign(
        mx.sym.var("d"), mx.sym.var("r"), pooled_size=(2, 2), spatial_scale=1.0
    )
    args = {"d": mx.nd.ones((1, 1, 4, 4)), "r": mx.nd.array([[0, 2, 2, 2, 2, 30]])}
    with pytest.raises(NNSymError, match="RROIAlign"):
        s.bind(
            None,
            args,
            args_grad={"d": mx.nd.zeros((1, 1, 4, 4))},
            grad_req={"d": "write", "r": "null"},
        )


@pytest.mark.parametrize(
    ("op", "shapes", "params", "what"),
    [
        ("PSROIPooling", {"d": (1, 7, 5, 5), "r": (3, 5)}, {}, "channels"),
        ("PSROIPooling", {"d": (1, 8, 5, 5), "r": (3, 6)}, {}, "rois"),
        (
            "DeformablePSROIPooling",
            {"d": (1, 8, 5, 5), "r": (3, 5), "t": (3, 3, 2, 2)},
            {},
            "trans",
        ),
        ("DeformablePSROIPooling", {"d": (1, 8, 5, 5), "r": (3, 5), "t": (3, 2, 2)}, {}, "trans"),
        (
            "DeformablePSROIPooling",
            {"d": (1, 6, 5, 5), "r": (3, 5)},
            {"no_trans": True},
            "channels",
        ),
    ],
)
def test_psroi_bad_shapes_raise_naming_the_input(op, shapes, params, what) -> None:
    """MXNet reads past the data for too few channels; nnsym refuses them."""
    extra = {"group_size": 2} if op.startswith("Deformable") else {}
    ins = [mx.sym.var(n) for n in shapes]
    s = getattr(mx.sym.contrib, op)(
        *ins, spatial_scale=1.0, output_dim=2, pooled_size=2, **extra, **params
    )
    with pytest.raises(NNSymError, match=what):
        s.infer_shape(**shapes)


def test_deformable_psroi_infers_the_offsets_shape_from_the_rois() -> None:
    s = mx.sym.contrib.DeformablePSROIPooling(
        mx.sym.var("d"),
        mx.sym.var("r"),
        mx.sym.var("t"),
        spatial_scale=1.0,
        output_dim=2,
        pooled_size=3,
        group_size=2,
        part_size=2,
    )
    args, outs, _ = s.infer_shape_partial(d=(1, 8, 5, 5), r=(4, 5))
    assert outs == [(4, 2, 3, 3)]
    assert args[2] == (4, 0, 2, 2)  # the class count is unknown until trans is given


@pytest.mark.parametrize(
    ("shapes", "params", "what"),
    [
        ({"d": (1, 4, 5, 5), "o": (1, 9, 5, 5)}, {}, "offset"),
        ({"d": (1, 4, 5, 5), "o": (1, 18, 4, 5)}, {}, "offset"),
        ({"d": (1, 3, 5, 5), "o": (1, 36, 5, 5)}, {"num_deformable_group": 2}, "divisible"),
        ({"d": (1, 4, 5), "o": (1, 18, 5, 5)}, {}, "4-D"),
        ({"d": (1, 4, 2, 2), "o": (1, 18, 5, 5)}, {"pad": (0, 0)}, "exceeds"),
    ],
)
def test_deformable_bad_shapes_raise_naming_the_input(shapes, params, what) -> None:
    kw = {"kernel": (3, 3), "pad": (1, 1), "num_filter": 2, **params}
    s = mx.sym.contrib.DeformableConvolution(mx.sym.var("d"), mx.sym.var("o"), **kw)
    with pytest.raises(NNSymError, match=what):
        s.infer_shape(**shapes)


def test_deformable_convolution_has_no_float16_kernel_as_mxnet_cpu() -> None:
    args = [mx.nd.ones(s, dtype="float16") for s in ((1, 1, 3, 3), (1, 18, 3, 3), (1, 1, 3, 3))]
    with pytest.raises(NNSymError, match="float16"):
        mx.nd.contrib.DeformableConvolution(
            *args, kernel=(3, 3), pad=(1, 1), num_filter=1, no_bias=True
        ).asnumpy()


def test_modulated_deformable_convolution_with_zero_offsets_and_unit_mask_is_convolution() -> None:
    rng = np.random.default_rng(5)
    x, w = rng.uniform(-1, 1, (2, 4, 5, 6)), rng.uniform(-1, 1, (6, 2, 3, 3))
    kw = {
        "kernel": (3, 3),
        "pad": (1, 1),
        "stride": (2, 1),
        "num_filter": 6,
        "num_group": 2,
        "no_bias": True,
    }
    want = mx.nd.Convolution(as_nd(x), as_nd(w), **kw).asnumpy()
    oh, ow = want.shape[2:]
    got = mx.nd.contrib.ModulatedDeformableConvolution(
        as_nd(x), as_nd(np.zeros((2, 18, oh, ow))), as_nd(np.ones((2, 9, oh, ow))), as_nd(w), **kw
    ).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
