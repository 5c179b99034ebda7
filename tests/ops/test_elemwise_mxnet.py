"""Elementwise, broadcast and reduction operators against MXNet 1.9.1.

The golden cases (tests/golden/ops-shapes.json) are rebuilt one node at a time through the
registry; hypothesis then checks over random shapes that the shape rules agree with what the
numpy references actually produce, including on partially known shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nnsym.errors import NNSymError, OperatorParamError, ShapeError
from nnsym.ir.opdef import OpDef
from nnsym.ops import get_op
from nnsym.ops.elemwise.broadcast import BROADCAST, BROADCAST_OPS
from nnsym.ops.elemwise.elemwise import (
    BINARY,
    BINARY_GRAD_EXPR,
    BINARY_OPS,
    GRAD_EXPR,
    SCALAR_OP_DEFS,
    UNARY_OPS,
)
from nnsym.ops.reduce.broadcast_reduce import REDUCE_OPS
from nnsym.testing import infer_node, reference_outputs
from nnsym.types import from_mx_shape

GOLDEN = json.loads((Path(__file__).parent.parent / "golden" / "ops-shapes.json").read_text())

# The golden cases' "op" names -> nnsym's canonical operator names.
MINE = {
    **{n: n for n in UNARY_OPS},
    **{n: n for n in SCALAR_OP_DEFS},
    **{n: n for n in BINARY_OPS},
    **{n: n for n in BROADCAST_OPS},
    **{n: n for n in REDUCE_OPS},
    "clip": "clip",
    "add_n": "add_n",
    "contrib.quadratic": "_contrib_quadratic",
    "broadcast_to": "broadcast_to",
    "broadcast_axis": "broadcast_axis",
    "norm": "norm",
}
CASES = [c for c in GOLDEN if c["op"] in MINE]


def _params(case: dict[str, Any]) -> dict[str, Any]:
    p = {k: tuple(v) if isinstance(v, list) else v for k, v in case["params"].items()}
    op = get_op(MINE[case["op"]])
    if op.key_var_num_args and op.key_var_num_args not in p:
        p[op.key_var_num_args] = len(case["input_order"])  # what MXNet's front end adds
    return p


def _shape(v: Any) -> Any:
    return from_mx_shape(v)


def _dt(t: Any) -> str | None:
    return None if t is None else np.dtype(t).name


def test_the_golden_file_covers_every_family():
    ops = {c["op"] for c in CASES}
    assert {"relu", "clip", "add_n", "_plus_scalar", "broadcast_add", "sum", "norm"} <= ops
    assert len(CASES) >= 120


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_canonical_name_and_inputs_match_mxnet(case):
    op = get_op(MINE[case["op"]])
    if case.get("stage") == "construct":
        return
    saved = json.loads(case["tojson"])["nodes"][-1]
    assert op.name == saved["op"]
    params, _ = op.parse_params(_params(case))
    assert op.num_inputs(params) == len(case["input_order"])
    assert op.num_visible(params) == len(case["list_outputs"]) == 1


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_shapes_match_mxnet(case):
    op = get_op(MINE[case["op"]])
    if case.get("stage") == "construct":
        with pytest.raises(OperatorParamError):
            op.parse_params(_params(case))
        return
    params, _ = op.parse_params(_params(case))
    shapes = [_shape(case["inputs"][n]) for n in case["input_order"]]
    if case.get("stage") == "infer_shape":
        with pytest.raises(NNSymError):
            infer_node(op, params, shapes)
        return
    in_s, out_s, _, _ = infer_node(op, params, shapes)
    assert out_s == [_shape(s) for s in case["out_shapes"]]
    assert in_s == [_shape(case["arg_shapes"][n]) for n in case["input_order"]]


@pytest.mark.parametrize("case", [c for c in CASES if c.get("types")], ids=lambda c: c["id"])
def test_dtypes_match_mxnet(case):
    op = get_op(MINE[case["op"]])
    params, _ = op.parse_params(_params(case))
    n = len(case["input_order"])
    for dt, want in case["types"].items():
        dtypes = [np.dtype(dt)] + [None] * (n - 1)
        if "error" in want:
            with pytest.raises(NNSymError):
                infer_node(op, params, [None] * n, dtypes)
            continue
        _, _, in_t, out_t = infer_node(op, params, [None] * n, dtypes)
        assert [_dt(t) for t in out_t] == want["out_types"], dt
        assert [_dt(t) for t in in_t] == [want["arg_types"][k] for k in case["input_order"]], dt


@pytest.mark.parametrize("case", [c for c in CASES if c.get("types_mixed")], ids=lambda c: c["id"])
def test_mixed_dtypes_match_mxnet(case):
    op = get_op(MINE[case["op"]])
    params, _ = op.parse_params(_params(case))
    mixed = case["types_mixed"]
    dtypes = [mixed["given"].get(k) for k in case["input_order"]]
    n = len(dtypes)
    if "error" in mixed:
        with pytest.raises(NNSymError):
            infer_node(op, params, [None] * n, dtypes)
    else:
        _, out_t, _, _ = infer_node(op, params, [None] * n, dtypes)
        assert [_dt(t) for t in out_t] == mixed["out_types"]


# ---------------------------------------------------------------------------------------------
# Names, aliases and tables

# From MXNet 1.9.1's operator registry (MXListAllOpNames grouped by op), less the
# `_sparse_*` names (mx.sym.sparse is made from OpDef.sparse) and the `_npi_*` numpy ones.
MXNET_ALIASES = {
    "clip": set(),
    "elemwise_add": {"_Plus", "_add", "_plus"},
    "elemwise_sub": {"_Minus", "_minus", "_sub"},
    "elemwise_mul": {"_Mul", "_mul"},
    "elemwise_div": {"_Div", "_div"},
    "_maximum": {"_Maximum"},
    "_minimum": {"_Minimum"},
    "_power": {"_Power"},
    "add_n": {"ElementWiseSum"},
    "_plus_scalar": {"_PlusScalar"},
    "_rpower_scalar": {"_RPowerScalar"},
    "_maximum_scalar": {"_MaximumScalar"},
    "_contrib_quadratic": set(),
    "broadcast_add": {"broadcast_plus"},
    "broadcast_sub": {"broadcast_minus"},
    "broadcast_power": set(),
    "broadcast_axis": {"broadcast_axes"},
    "sum": {"sum_axis"},
    "max": {"max_axis"},
    "min": {"min_axis"},
    "prod": set(),
    "norm": set(),
    "reciprocal": set(),
}
# dir(mx.sym.sparse), restricted to these modules' operators.
MXNET_SPARSE = {
    "abs", "add_n", "broadcast_add", "broadcast_div", "broadcast_mul", "broadcast_sub", "ceil",
    "clip", "cos", "elemwise_add", "elemwise_div", "elemwise_mul", "elemwise_sub", "exp",
    "expm1", "floor", "log", "log1p", "mean", "negative", "norm", "relu", "round", "rsqrt",
    "sigmoid", "sign", "sin", "sqrt", "square", "sum", "tanh",
    "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "cbrt", "cosh", "degrees",
    "fix", "gamma", "gammaln", "log10", "radians", "rint", "sinh", "tan", "trunc",
}  # fmt: skip
# Deliberate additions (docs/differences-from-mxnet.md): MXNet's sparse-operator tutorial
# registers contrib.quadratic as ``quadratic`` with sparse kernels; nnsym ships that name.
TUTORIAL_ALIASES = {"_contrib_quadratic": {"quadratic"}}
TUTORIAL_SPARSE = {"_contrib_quadratic"}


@pytest.mark.parametrize("name", sorted(MXNET_ALIASES))
def test_aliases_match_mxnet(name):
    op = get_op(name)
    assert op.name == name
    assert set(op.aliases) == MXNET_ALIASES[name] | TUTORIAL_ALIASES.get(name, set())
    for alias in op.aliases:
        assert get_op(alias) is op


def test_sparse_namespace_matches_mxnet():
    ours = {n for n in set(MINE.values()) if get_op(n).sparse}
    assert ours == MXNET_SPARSE | TUTORIAL_SPARSE


def test_elementwise_ops_have_expressions_and_gradients():
    for op in [*UNARY_OPS.values(), *SCALAR_OP_DEFS.values(), get_op("clip")]:
        assert op.expr and op.name in GRAD_EXPR, op.name
        assert op.inplace == ((0, 0),)
    assert "_contrib_quadratic" in GRAD_EXPR
    for op in [*BINARY_OPS.values(), *BROADCAST_OPS.values()]:
        assert op.expr and op.inplace == ((0, 0), (1, 0))
    assert set(BINARY_GRAD_EXPR) == {row.name for row in BINARY}
    assert {row.elemwise for row in BROADCAST} <= set(BINARY_GRAD_EXPR)


def test_add_n_names_its_inputs_like_mxnet():
    op = get_op("ElementWiseSum")
    params, _ = op.parse_params({"num_args": "3"})
    assert op.input_names(params) == ("arg0", "arg1", "arg2")
    assert op.key_var_num_args == "num_args"


def test_scalar_params_are_mxnets():
    op = get_op("_plus_scalar")
    params, strings = op.parse_params({"scalar": "2.5"})
    assert params.scalar == 2.5 and params.is_int is True and strings == {"scalar": "2.5"}
    assert op.params.specs()["scalar"].default == 1.0


def test_norm_params_are_mxnets():
    op = get_op("norm")
    params, _ = op.parse_params({"ord": "1", "axis": "(1, 2)", "out_dtype": "float64"})
    assert (params.ord, params.axis, params.out_dtype) == (1, (1, 2), "float64")
    assert op.parse_params({"ord": 3})[0].ord == 3  # MXNet only fails when it runs
    with pytest.raises(OperatorParamError):
        op.parse_params({"out_dtype": "uint8"})


# ---------------------------------------------------------------------------------------------
# dtype rules beyond "same type" (values checked with MXNet 1.9.1)


@pytest.mark.parametrize(
    ("data", "is_int", "out"),
    [
        ("float32", True, "float32"),
        ("float16", False, "float16"),
        ("float64", False, "float64"),
        ("int32", True, "int32"),
        ("int32", False, "float64"),
        ("uint8", True, "uint8"),
        ("uint8", False, "float64"),
        ("int64", False, "float64"),
        ("int8", False, "float64"),
        ("bool", True, "int64"),
        ("bool", False, "float64"),
    ],
)
@pytest.mark.parametrize("name", ["_plus_scalar", "_div_scalar", "_maximum_scalar"])
def test_scalar_op_dtype_follows_is_int(name, data, is_int, out):
    op = get_op(name)
    params, _ = op.parse_params({"scalar": 2.5, "is_int": is_int})
    _, _, in_t, out_t = infer_node(op, params, [None], [data])
    assert (_dt(in_t[0]), _dt(out_t[0])) == (data, out)


def test_scalar_op_dtype_fills_the_input_from_the_output():
    # MXNet's NumpyBinaryScalarType: an unknown input takes the output's dtype.
    op = get_op("_mul_scalar")
    params, _ = op.parse_params({"scalar": 2, "is_int": False})
    f64 = np.dtype("float64")
    assert op.infer_type is not None
    assert op.infer_type(params, [None], [f64]) == ([f64], [f64])
    assert op.infer_type(params, [None], [None]) == ([None], [None])


def test_norm_out_dtype():
    op = get_op("norm")
    params, _ = op.parse_params({"out_dtype": "float64"})
    assert infer_node(op, params, [(2, 3)], ["float16"])[3] == [np.dtype("float64")]
    # MXNet raises while the input dtype is unknown; nnsym gives what it knows.
    assert list(infer_node(op, params, [(2, 3)], [None])[2:]) == [[None], [np.dtype("float64")]]


# ---------------------------------------------------------------------------------------------
# numeric semantics worth pinning (each checked against MXNet 1.9.1)


def _ref(name: str, params: dict[str, Any], *xs: np.ndarray) -> np.ndarray:
    op = get_op(name)
    p, _ = op.parse_params(params)
    return reference_outputs(op, p, list(xs))[0]


def test_round_goes_half_away_from_zero():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997], dtype=np.float32)
    np.testing.assert_array_equal(_ref("round", {}, x), [1, 2, 3, -1, -2, -3, 0])


def test_integer_data_truncates_like_mxnet():
    a = np.array([1, 2, -3], dtype=np.int32)
    np.testing.assert_array_equal(_ref("exp", {}, a), [2, 7, 0])
    np.testing.assert_array_equal(_ref("_plus_scalar", {"scalar": 2.5}, a), [3, 4, -1])
    np.testing.assert_array_equal(_ref("_mul_scalar", {"scalar": 2.7}, a), [2, 4, -6])
    np.testing.assert_array_equal(_ref("_rdiv_scalar", {"scalar": 7.0}, a), [7, 3, -2])
    np.testing.assert_array_equal(_ref("_rpower_scalar", {"scalar": 2.0}, a), [2, 4, 0])
    np.testing.assert_array_equal(_ref("_power_scalar", {"scalar": 0.5}, a), [1, 1, 1])
    np.testing.assert_array_equal(
        _ref("_plus_scalar", {"scalar": 2.5, "is_int": False}, a), [3.5, 4.5, -0.5]
    )
    np.testing.assert_array_equal(_ref("clip", {"a_min": -1.5, "a_max": 1.5}, a), [1, 1, -1])
    np.testing.assert_array_equal(
        _ref("_contrib_quadratic", {"a": 0.5, "b": 1.5, "c": 0.5}, a), [2, 5, 0]
    )
    b = np.array([-7, 7], dtype=np.int32)
    np.testing.assert_array_equal(
        _ref("elemwise_div", {}, b, np.array([2, -2], np.int32)), [-3, -3]
    )
    np.testing.assert_array_equal(_ref("mean", {}, np.array([-3, -4], np.int32)), [-3])
    np.testing.assert_array_equal(_ref("sum", {}, np.array([200, 100], np.uint8)), [44])


def test_nan_semantics_are_mxnets():
    n = np.array([np.nan, 1.0, -1.0], dtype=np.float32)
    o = np.array([0.0, np.nan, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(_ref("relu", {}, n), [np.nan, 1, 0])
    np.testing.assert_array_equal(_ref("sign", {}, n), [0, 1, -1])
    np.testing.assert_array_equal(_ref("_maximum", {}, n, o), [np.nan, np.nan, 2])
    np.testing.assert_array_equal(_ref("broadcast_minimum", {}, n, o), [np.nan, np.nan, -1])
    np.testing.assert_array_equal(_ref("_maximum_scalar", {"scalar": 0.5}, n), [np.nan, 1, 0.5])
    np.testing.assert_array_equal(
        _ref("clip", {"a_min": -0.5, "a_max": 0.5}, n), [np.nan, 0.5, -0.5]
    )


def test_clip_with_crossed_bounds_is_mxnets():
    x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(_ref("clip", {"a_min": 1.0, "a_max": 0.0}, x), [1, 0, 0])


# ---------------------------------------------------------------------------------------------
# Partial knowledge and deliberate differences


def _infer(name: str, params: dict[str, Any], *shapes: Any) -> Any:
    op = get_op(name)
    p, _ = op.parse_params(params)
    return infer_node(op, p, list(shapes))


def test_broadcast_partial_shapes_are_mxnets():
    assert _infer("broadcast_add", {}, (None, 3), (2, 1))[1] == [(None, 3)]
    assert _infer("broadcast_add", {}, (5, None), (5, 3))[1] == [(5, None)]
    assert _infer("broadcast_add", {}, (2, 3), None)[1] == [None]
    assert _infer("broadcast_add", {}, (2, 3), None)[0] == [(2, 3), None]  # nothing filled back


def test_elemwise_fills_every_input():
    assert list(_infer("elemwise_add", {}, (None, 3), (2, None))[:2]) == [[(2, 3)] * 2, [(2, 3)]]
    assert _infer("add_n", {"num_args": 3}, None, (4,), None)[0] == [(4,)] * 3
    with pytest.raises(ShapeError):
        _infer("elemwise_add", {}, (2, 3), (2, 3, 1))


def test_reduction_partial_shapes_are_mxnets():
    assert _infer("sum", {"axis": 1}, (None, 3, 4))[1] == [(None, 4)]
    assert _infer("sum", {}, None)[1] == [None]
    assert _infer("norm", {"axis": 1}, (None, 3, 4))[1] == [None]  # norm needs the whole shape
    assert _infer("broadcast_axis", {"axis": 0, "size": 3}, (None, 3))[1] == [None]


def test_reduction_axis_errors():
    for params in ({"axis": 3}, {"axis": -4}, {"axis": (1, 1)}, {"axis": (1, -2)}):
        with pytest.raises(ShapeError):
            _infer("sum", params, (2, 3, 4))
    with pytest.raises(ShapeError):
        _infer("broadcast_axis", {"axis": -1, "size": 3}, (2, 1))
    with pytest.raises(ShapeError):
        _infer("broadcast_axis", {"axis": (0, 1), "size": (3,)}, (1, 1))


def test_broadcast_to_waits_for_unknown_dims():
    # MXNet raises "cannot be broadcasted" here although the dim may well be 1.
    assert _infer("broadcast_to", {"shape": (4, 3)}, (None, 3))[1] == [(4, 3)]
    assert _infer("broadcast_to", {"shape": (0, 3)}, (None, 1))[1] == [(None, 3)]
    with pytest.raises(ShapeError):
        _infer("broadcast_to", {}, (2, 3))


# ---------------------------------------------------------------------------------------------
# Random shapes: inferred shape == the reference's real shape

SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)
UNARY_LIKE = sorted(
    [*UNARY_OPS, *SCALAR_OP_DEFS, "clip", "_contrib_quadratic"],
)
UNARY_PARAMS = {"clip": {"a_min": -1.0, "a_max": 1.0}, "_contrib_quadratic": {"a": 1.0}}


def _check(op: OpDef, params: dict[str, Any], arrays: list[np.ndarray]) -> list[Any]:
    p, _ = op.parse_params(params)
    outs = reference_outputs(op, p, arrays)
    in_s, out_s, _, out_t = infer_node(op, p, [a.shape for a in arrays], [a.dtype for a in arrays])
    assert out_s == [o.shape for o in outs]
    assert in_s == [a.shape for a in arrays]
    assert out_t == [o.dtype for o in outs]
    return out_s


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(UNARY_LIKE), shape=SHAPES, dtype=st.sampled_from(["float32", "int32"]))
def test_unary_shapes(name, shape, dtype):
    x = np.ones(shape, dtype=dtype)
    _check(get_op(name), UNARY_PARAMS.get(name, {}), [x])


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(BINARY_OPS)), shape=SHAPES, n=st.integers(1, 4))
def test_same_shape_binary_and_add_n_shapes(name, shape, n):
    x = np.ones(shape, dtype=np.float32)
    _check(get_op(name), {}, [x, x])
    _check(get_op("add_n"), {"num_args": n}, [x] * n)


@settings(max_examples=80, deadline=None)
@given(
    name=st.sampled_from(sorted(BROADCAST_OPS)),
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=5, max_side=4),
)
def test_broadcast_shapes(name, shapes):
    lhs, rhs = shapes.input_shapes
    assume(len(lhs) > 0 and len(rhs) > 0)
    assume(all(d > 0 for d in (*lhs, *rhs)))
    out = _check(get_op(name), {}, [np.ones(lhs), np.ones(rhs)])
    assert out == [np.broadcast_shapes(lhs, rhs)]


@settings(max_examples=80, deadline=None)
@given(lhs=SHAPES, rhs=SHAPES)
def test_broadcast_rejects_what_numpy_rejects(lhs, rhs):
    try:
        want = np.broadcast_shapes(lhs, rhs)
    except ValueError:
        with pytest.raises(ShapeError):
            _infer("broadcast_mul", {}, lhs, rhs)
    else:
        assert _infer("broadcast_mul", {}, lhs, rhs)[1] == [want]


@settings(max_examples=80, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=4, min_side=1),
    data=st.data(),
)
def test_broadcast_on_partial_shapes_never_contradicts_the_full_answer(shapes, data):
    lhs, rhs = shapes.input_shapes
    assume(len(lhs) > 0 and len(rhs) > 0)
    hide_l = data.draw(st.lists(st.booleans(), min_size=len(lhs), max_size=len(lhs)))
    hide_r = data.draw(st.lists(st.booleans(), min_size=len(rhs), max_size=len(rhs)))
    pl = tuple(None if h else d for d, h in zip(lhs, hide_l))
    pr = tuple(None if h else d for d, h in zip(rhs, hide_r))
    full = np.broadcast_shapes(lhs, rhs)
    (out,) = _infer("broadcast_add", {}, pl, pr)[1]
    n = len(full)
    padl = (1,) * (n - len(pl)) + pl
    padr = (1,) * (n - len(pr)) + pr
    for i, d in enumerate(out):
        if padl[i] is None or padr[i] is None:
            assert d is None  # MXNet leaves it unknown too
        else:
            assert d == full[i]


@settings(max_examples=60, deadline=None)
@given(shape=SHAPES, data=st.data())
def test_broadcast_to_and_axis_shapes(shape, data):
    small = tuple(data.draw(st.sampled_from([1, d])) for d in shape)
    x = np.ones(small, dtype=np.float32)
    target = tuple(
        data.draw(st.sampled_from([0, d])) if s == d else d for s, d in zip(small, shape)
    )
    _check(get_op("broadcast_to"), {"shape": target}, [x])
    axes = tuple(i for i, (s, d) in enumerate(zip(small, shape)) if s == 1)
    _check(
        get_op("broadcast_axis"),
        {"axis": axes, "size": tuple(shape[a] for a in axes)},
        [x],
    )


@settings(max_examples=120, deadline=None)
@given(
    name=st.sampled_from([*sorted(REDUCE_OPS), "norm"]),
    shape=SHAPES,
    keepdims=st.booleans(),
    exclude=st.booleans(),
    data=st.data(),
)
def test_reduction_shapes(name, shape, keepdims, exclude, data):
    nd = len(shape)
    picked = data.draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd))
    axis = tuple(a - nd if data.draw(st.booleans()) else a for a in picked)
    params: dict[str, Any] = {"keepdims": keepdims}
    if data.draw(st.booleans()):
        params["axis"] = axis
    if name != "norm":
        params["exclude"] = exclude
    x = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    out = _check(get_op(name), params, [x])
    assert out[0] is not None and len(out[0]) >= 1  # never 0-d: MXNet gives (1,)
