"""Auto-names of nodes made through the operator sub-namespaces (``sym.contrib.box_nms`` is
``box_nms0``, not ``_contrib_box_nms0``) against MXNet 1.9.1 (tests/golden/naming, made by its
make.py, whose case list is repeated here by id)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nnsym as mx
from nnsym import sym

GOLD = json.loads(
    (Path(__file__).resolve().parent.parent / "golden" / "naming" / "naming.json").read_text()
)


def cases(m, d, e):  # the same list as tests/golden/naming/make.py
    s = m.sym
    return {
        "contrib.box_nms": lambda: s.contrib.box_nms(d),
        "contrib.quadratic": lambda: s.contrib.quadratic(d, a=1.0),
        "contrib.MultiBoxPrior": lambda: s.contrib.MultiBoxPrior(d),
        "contrib.ROIAlign": lambda: s.contrib.ROIAlign(d, e, pooled_size=(2, 2),
                                                       spatial_scale=1.0),
        "contrib.box_iou": lambda: s.contrib.box_iou(d, e),
        "contrib.arange_like": lambda: s.contrib.arange_like(d),
        "contrib.DeformableConvolution": lambda: s.contrib.DeformableConvolution(
            d, kernel=(1, 1), num_filter=2),
        "linalg.gemm2": lambda: s.linalg.gemm2(d, e),
        "linalg.potrf": lambda: s.linalg.potrf(d),
        "linalg_gemm2": lambda: s.linalg_gemm2(d, e),
        "image.to_tensor": lambda: s.image.to_tensor(d),
        "image.resize": lambda: s.image.resize(d, size=2),
        "sparse.retain": lambda: s.sparse.retain(d, e),
        "sparse.dot": lambda: s.sparse.dot(d, e),
        "random.uniform": lambda: s.random.uniform(),
        "random.randint": lambda: s.random.randint(0, 3),
        "random.normal_like": lambda: s.random.normal_like(d),
        "sample_normal": lambda: s.sample_normal(d, e),
        "random_uniform": lambda: s.random_uniform(),
        "twice": lambda: s.contrib.box_iou(s.contrib.box_iou(d, e), e),
    }


def _build(cid: str):
    with mx.name.NameManager():
        return cases(mx, sym.var("d"), sym.var("e"))[cid]()


def test_the_case_lists_agree():
    assert set(cases(mx, sym.var("d"), sym.var("e"))) == set(GOLD)


@pytest.mark.parametrize("cid", sorted(GOLD))
def test_names_match_mxnet(cid):
    s, want = _build(cid), GOLD[cid]
    nodes = json.loads(s.tojson())["nodes"]
    assert s.name == want["name"]
    assert s.list_outputs() == want["list_outputs"]
    assert s.list_arguments() == want["list_arguments"]
    assert [[n["op"], n["name"]] for n in nodes if n["op"] != "null"] == want["nodes"]
    back = sym.load_json(s.tojson())  # the names survive a JSON round trip
    assert back.list_outputs() == want["list_outputs"]
    assert back.tojson() == s.tojson()


def test_implicit_parameters_bind_by_their_mxnet_names():
    s = _build("contrib.DeformableConvolution")
    exe = s.simple_bind(None, d=(1, 2, 3, 3))
    assert set(exe.arg_dict) == set(GOLD["contrib.DeformableConvolution"]["list_arguments"])
    assert exe.arg_dict["deformableconvolution0_weight"].shape == (2, 2, 1, 1)
    assert exe.arg_dict["deformableconvolution0_offset"].shape == (1, 2, 3, 3)


def test_full_names_keep_the_full_hint():
    """The top-level and _internal functions keep the operator's own name as the hint."""
    with mx.name.NameManager():
        assert sym._internal._contrib_box_nms(sym.var("d")).name == "_contrib_box_nms0"
    assert sym.contrib.box_nms.__name__ == "box_nms"
