"""Convolution, Pooling and BatchNorm against MXNet 1.9.1.

The first part replays every case of tests/golden/ops-shapes.json for these operators through the
registry (parse the params, infer one node) and compares output, argument and aux shapes and
dtypes with what MXNet recorded. The rest are targeted checks; the expected values in them were
taken from MXNet 1.9.1 (``infer_shape_partial`` in the reference venv) unless marked otherwise.

Max Pooling: the reference build uses MKLDNN, whose max Pooling carries a hidden workspace output,
so the golden ``tojson`` text has ``node_row_ptr`` ``[0, 1, 3]`` for those cases. It is a build
artefact (not part of MXNet's operator semantics, never listed by ``list_outputs``); nnsym models
the non-MKLDNN operator, which has exactly one output, and the golden out_shapes (visible outputs
only) agree with that.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nnsym.errors import NNSymError, OperatorParamError, ShapeError
from nnsym.ir.graph import Graph, GraphAttrs
from nnsym.ops import get_op
from nnsym.passes.infer import infer_shape
from nnsym.testing import infer_node, single_node_graph
from nnsym.types import to_mx_shape

OPS = ("Convolution", "Pooling", "BatchNorm")
GOLDEN = json.loads((Path(__file__).parent.parent / "golden" / "ops-shapes.json").read_text())
CASES = [c for c in GOLDEN if c["op"] in OPS]


def _params(p: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in p.items()}


def _var_names(case, op, params) -> list[str]:
    """The variable feeding each input: the case's own variables first, then ``n_<input>``."""
    order = case["input_order"]
    names = op.input_names(params)
    return [order[i] if i < len(order) else f"n_{n}" for i, n in enumerate(names)]


def _mx(shapes) -> list[list[int]]:
    return [list(to_mx_shape(s)) for s in shapes]


def _dt(ts) -> list[str | None]:
    return [None if t is None else np.dtype(t).name for t in ts]


def _float64_reaches_unknown_entries() -> bool:
    # NOTE: np.dtype("float64") == None is True (numpy reads None as the default dtype), which
    # an engine check of the form ``new != old`` mistakes for "nothing new"; see the report.
    op = get_op("Pooling")
    p, _ = op.parse_params({"kernel": (1,)})
    return infer_node(op, p, [None], ["float64"])[3][0] is not None


FLOAT64_LOST = not _float64_reaches_unknown_entries()
float64_xfail = pytest.mark.xfail(
    FLOAT64_LOST, reason="inference engine drops float64 on unknown entries", strict=True
)


def test_golden_has_cases_for_every_op():
    assert {c["op"] for c in CASES} == set(OPS)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_shapes_match_mxnet(case):
    op = get_op(case["op"])
    if "error" in case:
        with pytest.raises(NNSymError):
            params, _ = op.parse_params(_params(case["params"]))
            names = _var_names(case, op, params)
            infer_node(op, params, [case["inputs"].get(n) for n in names])
        return
    params, _ = op.parse_params(_params(case["params"]))
    names = _var_names(case, op, params)
    in_s, out_s, _, _ = infer_node(op, params, [case["inputs"].get(n) for n in names])
    nvis = op.num_visible(params)
    assert _mx(out_s[:nvis]) == case["out_shapes"]
    aux = set(op.aux_indices(params))
    args = {n: s for i, (n, s) in enumerate(zip(names, _mx(in_s))) if i not in aux}
    auxs = {n: s for i, (n, s) in enumerate(zip(names, _mx(in_s))) if i in aux}
    assert args == case["arg_shapes"]
    assert auxs == case["aux_shapes"]
    assert [names[i] for i in sorted(set(range(len(names))) - aux)] == case["list_arguments"]
    assert [names[i] for i in sorted(aux)] == case["list_auxiliary_states"]
    assert [f"n_{o}" for o in op.output_names(params)[:nvis]] == case["list_outputs"]


TYPE_CASES = [
    pytest.param(
        c,
        dt,
        id=f"{c['id']}-{dt}",
        marks=[float64_xfail] if dt == "float64" and "error" not in c["types"][dt] else [],
    )
    for c in CASES
    for dt in c.get("types", {})
]


@pytest.mark.parametrize(("case", "dt"), TYPE_CASES)
def test_dtypes_match_mxnet(case, dt):
    op = get_op(case["op"])
    params, _ = op.parse_params(_params(case["params"]))
    names = _var_names(case, op, params)
    want = case["types"][dt]
    n = len(names)
    dtypes = [dt] + [None] * (n - 1)
    if "error" in want:
        with pytest.raises(NNSymError):
            infer_node(op, params, [None] * n, dtypes)
        return
    _, _, in_t, out_t = infer_node(op, params, [None] * n, dtypes)
    aux = set(op.aux_indices(params))
    assert _dt(out_t[: op.num_visible(params)]) == want["out_types"]
    ts = _dt(in_t)
    assert {names[i]: ts[i] for i in range(n) if i not in aux} == want["arg_types"]
    assert {names[i]: ts[i] for i in range(n) if i in aux} == want["aux_types"]


MIXED = [c for c in CASES if "types_mixed" in c]


@pytest.mark.parametrize("case", MIXED, ids=lambda c: c["id"])
def test_mixed_dtypes_match_mxnet(case):
    op = get_op(case["op"])
    params, _ = op.parse_params(_params(case["params"]))
    names = _var_names(case, op, params)
    mixed = case["types_mixed"]
    dtypes = [mixed["given"].get(n) for n in names]
    assert "error" in mixed  # every recorded mixed case for these ops is an error in MXNet
    with pytest.raises(NNSymError):
        infer_node(op, params, [None] * len(names), dtypes)


# ---------------------------------------------------------------------------------------------
# Targeted checks


def _infer(name: str, params: dict, shapes: list, out_shapes: list | None = None):
    """Shapes of one node's inputs and outputs, seeding inputs and (optionally) outputs."""
    op = get_op(name)
    p, _ = op.parse_params(params)
    g = single_node_graph(op, p, len(shapes))
    idx = g.index
    nid = idx.num_nodes - 1
    ins = [idx.entry_id(e) for e in idx.nodes[-1].inputs]
    outs = list(idx.output_entries(nid))
    seeds: list = [None] * idx.num_entries
    for e, s in zip(ins, shapes):
        seeds[e] = s
    for e, s in zip(outs, out_shapes or []):
        seeds[e] = s
    got = infer_shape(Graph(g.outputs, GraphAttrs(shape=tuple(seeds)))).attrs.shape
    return [got[e] for e in ins], [got[e] for e in outs]


@pytest.mark.parametrize(
    ("params", "data", "weight", "out"),
    [
        ({"kernel": (3,), "num_filter": 4}, (2, 3, 10), (4, 3, 3), (2, 4, 8)),
        ({"kernel": (3, 3), "num_filter": 8}, (2, 3, 32, 32), (8, 3, 3, 3), (2, 8, 30, 30)),
        ({"kernel": (3, 3, 3), "num_filter": 4}, (1, 2, 8, 8, 8), (4, 2, 3, 3, 3), (1, 4, 6, 6, 6)),
        # groups and depthwise
        (
            {"kernel": (3, 3), "num_filter": 9, "num_group": 3},
            (2, 6, 16, 16),
            (9, 2, 3, 3),
            (2, 9, 14, 14),
        ),
        (
            {"kernel": (3, 3), "num_filter": 6, "num_group": 6, "pad": (1, 1)},
            (2, 6, 8, 8),
            (6, 1, 3, 3),
            (2, 6, 8, 8),
        ),
        (
            {"kernel": (3, 3), "num_filter": 12, "num_group": 6},
            (2, 6, 8, 8),
            (12, 1, 3, 3),
            (2, 12, 6, 6),
        ),
        # dilation, in 1-D, 2-D and 3-D (MXNet 1.9.1 dilates 3-D kernels too)
        ({"kernel": (3,), "num_filter": 2, "dilate": (3,)}, (1, 1, 10), (2, 1, 3), (1, 2, 4)),
        (
            {"kernel": (3, 3), "num_filter": 8, "dilate": (2, 2)},
            (2, 3, 32, 32),
            (8, 3, 3, 3),
            (2, 8, 28, 28),
        ),
        (
            {"kernel": (5, 3), "num_filter": 8, "stride": (2, 1), "pad": (2, 0), "dilate": (1, 2)},
            (2, 3, 32, 32),
            (8, 3, 5, 3),
            (2, 8, 16, 28),
        ),
        (
            {"kernel": (3, 3, 3), "num_filter": 8, "dilate": (2, 2, 2)},
            (2, 3, 8, 8, 8),
            (8, 3, 3, 3, 3),
            (2, 8, 4, 4, 4),
        ),
        # channel-last layouts: weight is (F, *kernel, C / groups)
        (
            {"kernel": (3, 3), "num_filter": 8, "layout": "NHWC"},
            (2, 5, 5, 3),
            (8, 3, 3, 3),
            (2, 3, 3, 8),
        ),
        (
            {"kernel": (3, 2), "num_filter": 8, "layout": "NHWC", "num_group": 2},
            (2, 5, 5, 6),
            (8, 3, 2, 3),
            (2, 3, 4, 8),
        ),
        (
            {"kernel": (3, 2, 1), "num_filter": 8, "layout": "NDHWC", "num_group": 2},
            (2, 5, 6, 7, 6),
            (8, 3, 2, 1, 3),
            (2, 3, 5, 7, 8),
        ),
    ],
)
def test_convolution_weight_and_output_from_data(params, data, weight, out):
    ins, outs = _infer("Convolution", params, [data, None, None][: 2 + (not params.get("no_bias"))])
    assert ins == [data, weight, (params["num_filter"],)]
    assert outs == [out]


def test_convolution_no_bias_has_two_inputs():
    op = get_op("Convolution")
    p, _ = op.parse_params({"kernel": (1, 1), "num_filter": 4, "no_bias": True})
    assert op.input_names(p) == ("data", "weight")
    ins, outs = _infer(
        "Convolution", {"kernel": (1, 1), "num_filter": 4, "no_bias": True}, [(2, 3, 16, 16), None]
    )
    assert ins == [(2, 3, 16, 16), (4, 3, 1, 1)] and outs == [(2, 4, 16, 16)]


@pytest.mark.parametrize(
    ("params", "data", "want_data", "want_weight"),
    [
        # stride 1: batch and spatial sizes come back from the output
        ({"kernel": (3, 3), "num_filter": 8}, (None, 3, None, None), (2, 3, 32, 32), (8, 3, 3, 3)),
        ({"kernel": (3, 3), "num_filter": 8}, (None,) * 4, (2, None, 32, 32), (8, None, 3, 3)),
        # stride 2 on H: only W (stride 1) and the batch come back
        (
            {"kernel": (3, 3), "num_filter": 8, "stride": (2, 1), "pad": (1, 2), "dilate": (1, 2)},
            (None, 3, None, None),
            (2, 3, None, 30),
            (8, 3, 3, 3),
        ),
        (
            {"kernel": (3, 3), "num_filter": 30, "layout": "NHWC"},
            (None,) * 4,
            (2, 32, 32, None),
            (30, 3, 3, None),
        ),
    ],
)
def test_convolution_fills_data_back_from_output(params, data, want_data, want_weight):
    out = (2, 30, 30, 30) if params.get("layout") == "NHWC" else (2, 8, 30, 30)
    ins, outs = _infer("Convolution", params, [data, None, None], [out])
    assert ins == [want_data, want_weight, (params["num_filter"],)]
    assert outs == [out]


def test_convolution_unknown_data_infers_nothing():
    # MXNet needs the data's ndim; a known weight does not give data channels (golden 347).
    ins, outs = _infer(
        "Convolution", {"kernel": (3, 3), "num_filter": 8}, [None, (8, 3, 3, 3), None]
    )
    assert ins == [None, (8, 3, 3, 3), None] and outs == [None]


def test_convolution_unknown_dims_stay_unknown():
    ins, outs = _infer(
        "Convolution",
        {"kernel": (3, 3), "num_filter": 8, "num_group": 2},
        [(None, None, None, 8), None, None],
    )
    assert ins == [(None, None, None, 8), (8, None, 3, 3), (8,)]
    assert outs == [(None, 8, None, 6)]


@pytest.mark.parametrize(
    ("shapes", "names"),
    [
        ([(2, 3, 8, 8), (8, 4, 3, 3), None], ("weight", "(8, 4, 3, 3)", "(8, 3, 3, 3)")),
        ([(2, 3, 8, 8), (8, 3, 3), None], ("weight", "(8, 3, 3)", "(8, 3, 3, 3)")),
        ([(2, 3, 8, 8), (8, 3, 3, 3), (7,)], ("bias", "(7,)", "(8,)")),
    ],
)
def test_convolution_conflicting_weight_or_bias_raises(shapes, names):
    with pytest.raises(ShapeError) as info:
        _infer("Convolution", {"kernel": (3, 3), "num_filter": 8}, shapes)
    msg = str(info.value)
    for text in (*names, "(2, 3, 8, 8)", "Convolution"):
        assert text in msg


@pytest.mark.parametrize(
    ("params", "data", "words"),
    [
        ({"kernel": (5, 5), "num_filter": 8}, (2, 3, 4, 4), ("exceeds", "(2, 3, 4, 4)")),
        ({"kernel": (3, 3), "num_filter": 8, "dilate": (2, 2)}, (2, 3, 4, 4), ("dilated size 5",)),
        ({"kernel": (3, 3), "num_filter": 6, "num_group": 3}, (2, 4, 8, 8), ("num_group=3",)),
        ({"kernel": (3,), "num_filter": 4}, (2, 3, 8, 8), ("3-D data",)),
        ({"kernel": (3, 3), "num_filter": 4}, (2, 3, 8), ("4-D data",)),
    ],
)
def test_convolution_impossible_data_raises(params, data, words):
    with pytest.raises(ShapeError) as info:
        _infer("Convolution", params, [data, None, None])
    for w in words:
        assert w in str(info.value)


def test_convolution_output_conflicting_with_data_raises():
    with pytest.raises(ShapeError, match=r"output has shape \(2, 8, 31, 31\)"):
        _infer(
            "Convolution",
            {"kernel": (3, 3), "num_filter": 8},
            [(2, 3, 32, 32), None, None],
            [(2, 8, 31, 31)],
        )


def test_convolution_params_round_trip_mxnet_strings():
    op = get_op("Convolution")
    text = {
        "kernel": "(3, 3)",
        "num_filter": "8",
        "stride": "(2, 2)",
        "workspace": "512",
        "cudnn_tune": "limited_workspace",
        "cudnn_off": "True",
        "layout": "NCHW",
        "no_bias": "False",
        "num_group": "1",
        "dilate": "(1, 1)",
        "pad": "(0, 0)",
    }
    p, strings = op.parse_params(text)
    assert strings == text
    assert p.kernel == (3, 3) and p.stride == (2, 2) and p.cudnn_tune == "limited_workspace"
    assert p.workspace == 512 and p.cudnn_off is True
    p2, _ = op.parse_params({"kernel": "(3,3)", "num_filter": "8", "cudnn_tune": "None"})
    assert p2.cudnn_tune is None and p2.layout is None and p2.strides == (1, 1)


@pytest.mark.parametrize(
    "bad",
    [
        {"kernel": (3, 3), "num_filter": 4, "stride": (1,)},
        {"kernel": (3, 3, 3, 3), "num_filter": 4},
        {"kernel": (3, 3), "num_filter": 4, "layout": "NWC"},
        {"kernel": (3, 3), "num_filter": 4, "foo": 1},
    ],
)
def test_convolution_bad_params_name_the_operator(bad):
    with pytest.raises(OperatorParamError, match="Convolution"):
        get_op("Convolution").parse_params(bad)


# Pooling


@pytest.mark.parametrize(
    ("params", "data", "out"),
    [
        # valid (floor) vs full (ceil)
        (
            {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "valid"},
            (1, 1, 7, 7),
            (1, 1, 3, 3),
        ),
        (
            {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "full"},
            (1, 1, 7, 7),
            (1, 1, 4, 4),
        ),
        (
            {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pooling_convention": "full"},
            (2, 3, 6, 6),
            (2, 3, 4, 4),
        ),
        (
            {"kernel": (3, 3), "stride": (2, 2), "pad": (2, 2), "pooling_convention": "full"},
            (2, 3, 3, 3),
            (2, 3, 3, 3),
        ),
        ({"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}, (2, 3, 7, 7), (2, 3, 4, 4)),
        ({"kernel": (2, 2)}, (2, 3, 8, 8), (2, 3, 7, 7)),
        # 'same' (1-D only): ceil(x / stride); values from MXNet with pad=(0, 0, 0)
        ({"kernel": (3,), "stride": (2,), "pooling_convention": "same"}, (2, 3, 8), (2, 3, 4)),
        ({"kernel": (3,), "stride": (2,), "pooling_convention": "same"}, (2, 3, 9), (2, 3, 5)),
        # global pooling: every spatial size becomes 1, kernel/stride/pad are ignored
        ({"global_pool": True}, (2, 3, 8, 8), (2, 3, 1, 1)),
        ({"global_pool": True, "pool_type": "avg"}, (2, 3, 10), (2, 3, 1)),
        ({"global_pool": True, "kernel": (3, 3)}, (2, 3, 8, 8, 8), (2, 3, 1, 1, 1)),
        ({"global_pool": True, "stride": (2,)}, (2, 3, 9, 9), (2, 3, 1, 1)),
        ({"global_pool": True}, (2, 3, None, 8), (2, 3, 1, 1)),
        ({"global_pool": True, "layout": "NHWC"}, (2, 8, 8, 3), (2, 1, 1, 3)),
        ({"global_pool": True, "layout": "NCW"}, (2, 8, 8, 3), (2, 8, 1, 1)),
        # channel-last layouts
        ({"kernel": (3,), "stride": (2,), "layout": "NWC"}, (2, 8, 3), (2, 3, 3)),
        ({"kernel": (3, 3), "stride": (2, 2), "layout": "NHWC"}, (2, 8, 8, 3), (2, 3, 3, 3)),
        # 3-D, lp, unknown batch
        ({"kernel": (2, 2, 2), "stride": (2, 2, 2)}, (1, 2, 8, 8, 8), (1, 2, 4, 4, 4)),
        ({"kernel": (2, 2), "pool_type": "lp", "p_value": 3}, (2, 3, 8, 8), (2, 3, 7, 7)),
        ({"kernel": (2, 2), "stride": (2, 2)}, (None, 3, 8, 8), (None, 3, 4, 4)),
    ],
)
def test_pooling_output_shape(params, data, out):
    ins, outs = _infer("Pooling", params, [data])
    assert ins == [data] and outs == [out]


def test_pooling_unknown_spatial_size_stays_unknown():
    # MXNet 1.9.1 raises here ("kernel size (2) exceeds input (-1 padded to -1)"): its -1 for
    # "unknown" reaches the kernel check. nnsym leaves the output size unknown instead.
    _, outs = _infer("Pooling", {"kernel": (2, 2), "stride": (2, 2)}, [(2, 3, None, 8)])
    assert outs == [(2, 3, None, 4)]


def test_pooling_does_not_infer_data_from_output():
    ins, outs = _infer("Pooling", {"kernel": (2, 2)}, [None], [(2, 8, 30, 30)])
    assert ins == [None] and outs == [(2, 8, 30, 30)]


def test_max_pooling_has_one_output():
    op = get_op("Pooling")
    p, _ = op.parse_params({"kernel": (2, 2), "pool_type": "max"})
    assert op.output_names(p) == ("output",) and op.num_visible(p) == 1


@pytest.mark.parametrize(
    ("params", "data", "words"),
    [
        ({"kernel": (5, 5), "pool_type": "max"}, (2, 3, 4, 4), ("exceeds", "(2, 3, 4, 4)")),
        ({"kernel": (3, 3, 3)}, (2, 3, 8, 8), ("5-D data",)),
        ({"global_pool": True}, (2, 3), ("3-D",)),
        ({"global_pool": True}, (2, 3, 4, 4, 4, 4), ("3-D",)),
        ({"global_pool": True, "pooling_convention": "same"}, (2, 3, 9, 9), ("1-D",)),
    ],
)
def test_pooling_impossible_data_raises(params, data, words):
    with pytest.raises(ShapeError) as info:
        _infer("Pooling", params, [data])
    for w in words:
        assert w in str(info.value)


def test_pooling_dtype_is_forward_only():
    op = get_op("Pooling")
    p, _ = op.parse_params({"kernel": (2, 2)})
    _, _, in_t, out_t = infer_node(op, p, [None], ["float16"])
    assert _dt(in_t) == ["float16"] and _dt(out_t) == ["float16"]
    _, _, in_t, out_t = infer_node(op, p, [None], [None])
    assert in_t == [None] and out_t == [None]


# BatchNorm


def test_batch_norm_signature():
    op = get_op("BatchNorm")
    p, _ = op.parse_params({})
    assert op.input_names(p) == ("data", "gamma", "beta", "moving_mean", "moving_var")
    assert op.aux_indices(p) == (3, 4)
    assert op.output_names(p) == ("output", "mean", "var")
    assert op.num_visible(p) == 1
    assert op.num_visible(op.parse_params({"output_mean_var": True})[0]) == 3
    assert op.input_var_attrs["moving_mean"] == {"__init__": '["zero", {}]'}
    assert op.input_var_attrs["moving_var"] == {"__init__": '["one", {}]'}
    assert (p.eps, p.momentum, p.fix_gamma, p.axis) == (1e-3, 0.9, True, 1)


@pytest.mark.parametrize(
    ("params", "data", "c"),
    [
        ({}, (2, 3, 4, 4), 3),
        ({"axis": -1}, (2, 3, 4, 5), 5),
        ({"axis": -4}, (2, 3, 4, 4), 2),
        ({"axis": 0}, (6, 3), 6),
        ({}, (2, None, 4, 4), None),
    ],
)
def test_batch_norm_shapes(params, data, c):
    ins, outs = _infer("BatchNorm", params, [data, None, None, None, None])
    assert ins == [data] + [(c,)] * 4
    assert outs == [data, (c,), (c,)]


def test_batch_norm_does_not_infer_data_from_output():
    ins, outs = _infer("BatchNorm", {}, [None] * 5, [(2, 8, 30, 30)])
    assert ins == [None] * 5 and outs[0] == (2, 8, 30, 30)


def test_batch_norm_conflicting_gamma_raises():
    # MXNet overwrites gamma's shape silently (it then fails at bind); nnsym reports it here.
    with pytest.raises(ShapeError) as info:
        _infer("BatchNorm", {}, [(2, 3, 4, 4), (5,), None, None, None])
    msg = str(info.value)
    assert "gamma has shape (5,)" in msg and "(2, 3, 4, 4)" in msg and "3 channels" in msg


@pytest.mark.parametrize("axis", [4, -5])
def test_batch_norm_axis_out_of_range(axis):
    with pytest.raises(ShapeError, match="axis"):
        _infer("BatchNorm", {"axis": axis}, [(2, 3, 4, 4), None, None, None, None])


@pytest.mark.parametrize(
    ("data", "param", "out"),
    [
        ("float16", "float32", "float16"),
        ("float32", "float32", "float32"),
        pytest.param("float64", "float64", "float64", marks=float64_xfail),
    ],
)
def test_batch_norm_dtypes(data, param, out):
    op = get_op("BatchNorm")
    p, _ = op.parse_params({"output_mean_var": True})
    _, _, in_t, out_t = infer_node(op, p, [None] * 5, [data, None, None, None, None])
    assert _dt(in_t) == [data] + [param] * 4
    assert _dt(out_t) == [out, param, param]


@pytest.mark.parametrize("dt", ["int32", "uint8", "int64"])
def test_batch_norm_rejects_integer_data(dt):
    op = get_op("BatchNorm")
    p, _ = op.parse_params({})
    with pytest.raises(NNSymError, match="floating-point"):
        infer_node(op, p, [None] * 5, [dt, None, None, None, None])


def test_batch_norm_float16_gamma_with_float16_data_raises():
    op = get_op("BatchNorm")
    p, _ = op.parse_params({})
    with pytest.raises(NNSymError, match="gamma has dtype float16"):
        infer_node(op, p, [None] * 5, ["float16", "float16", None, None, None])


def test_batch_norm_reference_is_inference_mode():
    """Values checked against mx.nd.BatchNorm(..., output_mean_var=True) with is_train=False:
    output uses the moving statistics; mean = moving_mean, var = 1 / sqrt(moving_var + eps)."""
    op = get_op("BatchNorm")
    p, _ = op.parse_params({"fix_gamma": False, "eps": 1e-3})
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    g = np.array([1, 2, 3], np.float32)
    b = np.array([0.1, 0.2, 0.3], np.float32)
    mm = np.array([0.5, -0.5, 0], np.float32)
    mv = np.array([1, 2, 4], np.float32)
    out, mean, var = op.reference(p, x, g, b, mm, mv)
    np.testing.assert_allclose(mean, mm)
    np.testing.assert_allclose(var, [0.9995004, 0.7069301, 0.49993753], rtol=1e-6)
    want = (x - mm[:, None]) / np.sqrt(mv[:, None] + 1e-3) * g[:, None] + b[:, None]
    np.testing.assert_allclose(out, want, rtol=1e-6)
