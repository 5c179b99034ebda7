"""Dense C kernels of dot, batch_dot and the neural-network operators (FullyConnected, Activation,
LeakyReLU, softmax, log_softmax, the loss heads, Embedding, Dropout) against their numpy
references: every example in write and add mode and in every supported dtype, random shapes,
NaN/Inf, zero-size arrays, in-place calls, and Dropout's random mask.

Tolerances: float32 rtol 1e-5 (+ a small atol where values can be ~0), float64 rtol 1e-12,
float16 rtol 1e-3, integers exact. float16 references run on float32 copies of the inputs
(numpy's own float16 arithmetic rounds every step; the kernels compute in float32).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym.ir.opdef import DENSE
from nnsym.ops import REGISTRY
from nnsym.ops.nn import dropout as dropout_mod
from nnsym.runtime.imperative import compile_call, infer_one, run_op
from nnsym.testing import assert_close, make_inputs, prefilled, reference_as

GEMM = ("dot", "batch_dot", "FullyConnected")
ELEMWISE = (
    "Activation", "LeakyReLU", "LinearRegressionOutput", "LogisticRegressionOutput",
    "MAERegressionOutput", "MakeLoss",
)  # fmt: skip
SOFTMAX = ("softmax", "log_softmax", "SoftmaxOutput")
NAMES = (*GEMM, *ELEMWISE, *SOFTMAX, "Embedding", "Dropout")
INT_OK = (*GEMM, "Embedding", "Dropout")
FLOATS = ("float32", "float64", "float16")
INTS = ("int32", "int64", "uint8")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _cases():
    for n in NAMES:
        op = REGISTRY[n]
        for ex in op.examples:
            dts = FLOATS + (INTS if n in INT_OK else ())
            for dt in dts:
                yield pytest.param(op, ex, dt, id=f"{n}-{ex}-{dt}")


CASES = list(_cases())


def _tol(dtype, op_name=""):
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        return 0.0, 0.0
    if dt == np.float16:
        return 1e-3, 1e-3
    if dt == np.float64:
        return 1e-12, 1e-13
    # GEMMs sum k products: allow a few float32 ulps of the terms' magnitude
    return 1e-5, (1e-5 if op_name in GEMM else 1e-6)


def _cast_inputs(op, ex, dtype):
    """The example's inputs in another dtype (integer values where the example says so)."""
    ins = make_inputs(op, ex)
    dt = np.dtype(dtype)
    out = []
    for i, a in enumerate(ins):
        if dt.kind in "iu" and i not in ex.ints:
            a = np.round(a * 3)
            if dt.kind == "u":
                a = np.abs(a)
        out.append(a.astype(dt))
    return out


def check(op, params, inputs, req="write", rtol=None, atol=None, seed=1):
    """run_op equals the reference (write: on NaN-filled outputs; add: on random prefills)."""
    p, _ = op.parse_params(params)
    _, out_t = infer_one(op, p, [a.shape for a in inputs], [a.dtype for a in inputs], "t")
    want = reference_as(op, p, inputs, out_t)
    if req == "add":
        pre = [prefilled(w.shape, w.dtype, seed) for w in want]
        got = run_op(op, params, inputs, req="add", outputs=[x.copy() for x in pre])
        want = [
            (a.astype(np.float64) + b.astype(np.float64)).astype(a.dtype)
            if a.dtype.kind == "f"
            else (a + b).astype(a.dtype)
            for a, b in zip(pre, want)
        ]
    else:
        outs = [np.full(w.shape, np.nan if w.dtype.kind == "f" else 77, w.dtype) for w in want]
        got = run_op(op, params, inputs, outputs=outs)
    assert len(got) == len(want)
    r0, a0 = _tol(want[0].dtype, op.name)
    for g, w in zip(got, want):
        assert_close(g, w, r0 if rtol is None else rtol, a0 if atol is None else atol)
    return got


# ---------------------------------------------------------------------------------------------
# Every example, every dtype, write and add


def test_every_operator_here_has_a_dense_kernel():
    assert all(DENSE in REGISTRY[n].kernels for n in NAMES)


@pytest.mark.parametrize("req", ["write", "add"])
@pytest.mark.parametrize(("op", "ex", "dtype"), CASES)
def test_example(op, ex, dtype, req):
    check(op, dict(ex.params), _cast_inputs(op, ex, dtype), req)


# ---------------------------------------------------------------------------------------------
# dot / batch_dot / FullyConnected


@st.composite
def _dot_case(draw):
    ta, tb = draw(st.booleans()), draw(st.booleans())
    k = draw(st.integers(0, 9))
    kept_a = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    kept_b = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    if not kept_a and not kept_b:
        ta = tb = False
    a = (k, *kept_a) if ta else (*kept_a, k)
    b = (*kept_b, k) if tb else (k, *kept_b)
    return {"transpose_a": ta, "transpose_b": tb}, a, b


@SETTINGS
@given(
    case=_dot_case(),
    dtype=st.sampled_from(("float32", "float64", "int32")),
    req=st.sampled_from(("write", "add")),
)
def test_dot_random_shapes(case, dtype, req):
    params, a, b = case
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, a).round(1 if dtype == "int32" else 8).astype(dtype)
    y = rng.uniform(-2, 2, b).round(1 if dtype == "int32" else 8).astype(dtype)
    check(REGISTRY["dot"], params, [x, y], req)


@SETTINGS
@given(
    batch=st.lists(st.integers(0, 3), min_size=1, max_size=2),
    m=st.integers(0, 6),
    n=st.integers(0, 6),
    k=st.integers(0, 6),
    ta=st.booleans(),
    tb=st.booleans(),
    dtype=st.sampled_from(FLOATS),
    req=st.sampled_from(("write", "add")),
)
def test_batch_dot_random_shapes(batch, m, n, k, ta, tb, dtype, req):
    rng = np.random.default_rng(1)
    a = rng.uniform(-2, 2, (*batch, *((k, m) if ta else (m, k)))).astype(dtype)
    b = rng.uniform(-2, 2, (*batch, *((n, k) if tb else (k, n)))).astype(dtype)
    check(REGISTRY["batch_dot"], {"transpose_a": ta, "transpose_b": tb}, [a, b], req)


@SETTINGS
@given(
    data=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    nh=st.integers(1, 7),
    flatten=st.booleans(),
    no_bias=st.booleans(),
    dtype=st.sampled_from(FLOATS),
    req=st.sampled_from(("write", "add")),
)
def test_fully_connected_random_shapes(data, nh, flatten, no_bias, dtype, req):
    rng = np.random.default_rng(2)
    k = int(np.prod(data[1:])) if flatten else data[-1]
    ins = [rng.uniform(-2, 2, data), rng.uniform(-2, 2, (nh, k))]
    if not no_bias:
        ins.append(rng.uniform(-2, 2, (nh,)))
    params = {"num_hidden": nh, "flatten": flatten, "no_bias": no_bias}
    check(REGISTRY["FullyConnected"], params, [a.astype(dtype) for a in ins], req)


def test_fully_connected_bias_of_shape_n_by_1():
    rng = np.random.default_rng(3)
    ins = [rng.standard_normal((4, 6)), rng.standard_normal((3, 6)), rng.standard_normal((3, 1))]
    for req in ("write", "add"):
        check(
            REGISTRY["FullyConnected"], {"num_hidden": 3}, [a.astype("float32") for a in ins], req
        )


@pytest.mark.parametrize(
    ("name", "params", "shapes"),
    [
        ("dot", {}, [(0, 3), (3, 4)]),
        ("dot", {}, [(2, 0), (0, 4)]),  # k = 0: zeros (write) / unchanged (add)
        ("dot", {"transpose_b": True}, [(2, 3), (0, 3)]),
        ("dot", {"transpose_a": True}, [(0, 2), (0, 4)]),
        ("dot", {}, [(0,), (0,)]),
        ("batch_dot", {}, [(0, 2, 3), (0, 3, 4)]),
        ("batch_dot", {}, [(2, 2, 0), (2, 0, 4)]),
        ("FullyConnected", {"num_hidden": 3}, [(0, 5), (3, 5), (3,)]),
        ("FullyConnected", {"num_hidden": 3}, [(2, 0), (3, 0), (3,)]),  # bias only
        ("FullyConnected", {"num_hidden": 3, "flatten": False}, [(2, 0, 4), (3, 4), (3,)]),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
@pytest.mark.parametrize("req", ["write", "add"])
def test_gemm_zero_size(name, params, shapes, dtype, req):
    rng = np.random.default_rng(4)
    ins = [rng.integers(-3, 3, s).astype(dtype) for s in shapes]
    check(REGISTRY[name], params, ins, req)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_propagates_nan_and_inf(dtype):
    a = np.ones((3, 4), dtype)
    b = np.ones((4, 2), dtype)
    a[0, 1] = np.nan
    a[1, 2] = np.inf
    b[3, 1] = -np.inf
    check(REGISTRY["dot"], {}, [a, b])
    check(REGISTRY["FullyConnected"], {"num_hidden": 2}, [a, b.T.copy(), np.zeros(2, dtype)])


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_integer_dot_wraps_like_numpy(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    a = rng.integers(info.max // 2, info.max, (3, 5), endpoint=True).astype(dtype)
    b = rng.integers(info.max // 2, info.max, (5, 4), endpoint=True).astype(dtype)
    for params in ({}, {"transpose_b": True}):
        y = b.T.copy() if params else b
        got = run_op(REGISTRY["dot"], params, [a, y])[0]
        np.testing.assert_array_equal(got, np.matmul(a, b))


@pytest.mark.parametrize("params", [{}, {"transpose_a": True}, {"transpose_b": True}])
@pytest.mark.parametrize("req", ["write", "add"])
def test_bool_dot_is_or_of_ands(params, req):
    rng = np.random.default_rng(18)
    a, b = rng.integers(0, 2, (4, 4)).astype(bool), rng.integers(0, 2, (4, 3)).astype(bool)
    x = a.T.copy() if params.get("transpose_a") else a
    y = b.T.copy() if params.get("transpose_b") else b
    pre = rng.integers(0, 2, (4, 3)).astype(bool)
    got = run_op(REGISTRY["dot"], params, [x, y], req=req, outputs=[pre.copy()])[0]
    np.testing.assert_array_equal(got, (pre | (a @ b)) if req == "add" else a @ b)


# ---------------------------------------------------------------------------------------------
# Elementwise activations and loss heads


ELEMWISE_PARAMS = [
    *[("Activation", {"act_type": t}) for t in ("relu", "sigmoid", "tanh", "softrelu", "softsign")],
    *[("LeakyReLU", {"act_type": t, "slope": 0.3}) for t in ("leaky", "elu", "selu", "gelu")],
    ("LeakyReLU", {"act_type": "rrelu", "lower_bound": 0.2, "upper_bound": 0.5}),
    ("LinearRegressionOutput", {}),
    ("LogisticRegressionOutput", {}),
    ("MAERegressionOutput", {}),
    ("MakeLoss", {}),
]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0, 100, -100])


def _elemwise_inputs(name, x):
    if name.endswith("RegressionOutput"):
        return [x, np.zeros_like(x)]
    return [x]


@pytest.mark.parametrize(("name", "params"), ELEMWISE_PARAMS, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_elementwise_nan_inf(name, params, dtype):
    x = SPECIAL.astype(dtype)
    got = check(REGISTRY[name], params, _elemwise_inputs(name, x))
    assert np.isnan(got[0][0])


@pytest.mark.parametrize(("name", "params"), ELEMWISE_PARAMS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elementwise_large_and_in_place(name, params, dtype):
    rng = np.random.default_rng(6)
    x = rng.uniform(-8, 8, (3, 1000)).astype(dtype)
    op = REGISTRY[name]
    ins = _elemwise_inputs(name, x)
    want = check(op, params, ins)
    buf = x.copy()
    outs = [buf, *(np.empty_like(w) for w in want[1:])]
    run_op(op, params, [buf, *ins[1:]], outputs=outs)  # output aliases the data
    np.testing.assert_array_equal(buf, want[0])


@pytest.mark.parametrize(("name", "params"), ELEMWISE_PARAMS, ids=str)
def test_elementwise_zero_size(name, params):
    for req in ("write", "add"):
        check(REGISTRY[name], params, _elemwise_inputs(name, np.zeros((0, 3), "float32")), req)


@pytest.mark.parametrize(
    ("data", "gamma"),
    [
        ((2, 3, 4, 4), (3,)),
        ((2, 3, 4, 4), (1,)),
        ((2, 5), (5,)),
        ((4, 3, 5), (4, 3)),
        ((4, 3, 5), (4, 1)),
        ((6,), (6,)),
        ((6,), (1,)),
        ((0, 3, 2), (3,)),
        ((2, 3), (1, 1)),
    ],
)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("req", ["write", "add"])
def test_prelu_gamma_broadcast(data, gamma, dtype, req):
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, data).astype(dtype)
    g = rng.uniform(0, 1, gamma).astype(dtype)
    x.flat[:1] = np.nan
    check(REGISTRY["LeakyReLU"], {"act_type": "prelu"}, [x, g], req)


# ---------------------------------------------------------------------------------------------
# softmax, log_softmax, SoftmaxOutput


@SETTINGS
@given(
    shape=st.lists(st.integers(0, 6), min_size=1, max_size=4),
    data=st.data(),
    log=st.booleans(),
    temperature=st.sampled_from((None, 0.5, 3.0, -2.0)),
    dtype=st.sampled_from(FLOATS),
    req=st.sampled_from(("write", "add")),
)
def test_softmax_random_shapes(shape, data, log, temperature, dtype, req):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(8).uniform(-10, 10, shape).astype(dtype)
    params = {"axis": axis, "temperature": temperature}
    check(REGISTRY["log_softmax" if log else "softmax"], params, [x], req)


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    data=st.data(),
    len_dtype=st.sampled_from(("int32", "int64", "float32")),
    req=st.sampled_from(("write", "add")),
)
def test_softmax_use_length_random(shape, data, len_dtype, req):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ax = axis % len(shape)
    lshape = (1,) if len(shape) == 1 else (*shape[:ax], *shape[ax + 1 :])
    rng = np.random.default_rng(9)
    x = rng.uniform(-5, 5, shape).astype("float32")
    length = rng.integers(-1, shape[ax] + 2, lshape).astype(len_dtype)
    check(REGISTRY["softmax"], {"axis": axis, "use_length": True}, [x, length], req)


def test_softmax_fractional_and_nan_lengths():
    x = np.random.default_rng(10).uniform(-1, 1, (5, 4)).astype("float32")
    length = np.array([1.5, np.nan, -0.5, 3.0, np.inf], "float32")
    check(REGISTRY["softmax"], {"use_length": True}, [x, length])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_nan_inf_rows(name, axis, dtype):
    x = np.array(
        [
            [1.0, 2.0, 3.0, 4.0],
            [1.0, np.nan, 3.0, 4.0],
            [1.0, np.inf, 3.0, 4.0],
            [-np.inf, -np.inf, -np.inf, -np.inf],
            [-np.inf, 0.0, -np.inf, 1.0],
            [1e30, -1e30, 0.0, 1e30],
        ]
    )
    x = x if axis == -1 else x.T.copy()
    if dtype == "float16":
        x = np.where(np.abs(x) > 1e4, np.sign(x) * 6e4, x)
    x = x.astype(dtype)
    check(REGISTRY[name], {"axis": axis}, [x])


@pytest.mark.parametrize(
    ("params", "in_dt"),
    [
        ({"dtype": "float64"}, "float32"),
        ({"dtype": "float32"}, "float16"),
        ({"dtype": "float16"}, "float32"),
        ({"dtype": "float32"}, "float64"),
    ],
)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_output_dtype(params, in_dt, name):
    x = np.random.default_rng(11).uniform(-3, 3, (3, 7)).astype(in_dt)
    got = check(
        REGISTRY[name],
        {**params, "axis": 0},
        [x],
        rtol=1e-3 if "float16" in (in_dt, params["dtype"]) else 1e-5,
        atol=1e-6,
    )
    assert got[0].dtype == np.dtype(params["dtype"])


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "SoftmaxOutput"])
def test_softmax_in_place(name):
    x = np.random.default_rng(12).uniform(-4, 4, (6, 50)).astype("float32")
    ins = [x, np.zeros(6, "float32")] if name == "SoftmaxOutput" else [x]
    want = check(REGISTRY[name], {}, ins)[0]
    buf = x.copy()
    run_op(REGISTRY[name], {}, [buf, *ins[1:]], outputs=[buf])
    np.testing.assert_array_equal(buf, want)


@pytest.mark.parametrize(
    ("params", "shape"),
    [
        ({}, (3, 4, 5)),
        ({"multi_output": True}, (3, 4, 5)),
        ({"preserve_shape": True}, (3, 4, 5)),
        ({"multi_output": True, "preserve_shape": True}, (2, 3, 2, 2)),
        ({}, (5,)),
        ({"multi_output": True}, (0, 3, 2)),
        ({}, (0, 4)),
    ],
)
@pytest.mark.parametrize("req", ["write", "add"])
def test_softmax_output_axes(params, shape, req):
    x = np.random.default_rng(13).uniform(-3, 3, shape).astype("float32")
    multi = params.get("multi_output")
    lshape = (shape[0], int(np.prod(shape[2:]))) if multi else shape[:-1]
    label = np.zeros(lshape if len(shape) > 1 else shape, "float32")  # 1-D: probabilities
    check(REGISTRY["SoftmaxOutput"], params, [x, label], req)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (2, 0, 3)])
def test_softmax_zero_size(name, shape):
    x = np.zeros(shape, "float32")
    for axis in range(len(shape)):
        for req in ("write", "add"):
            check(REGISTRY[name], {"axis": axis}, [x], req)


# ---------------------------------------------------------------------------------------------
# Embedding


@pytest.mark.parametrize("idx_dtype", ["float32", "float64", "float16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("w_dtype", ["float32", "float64", "float16", "int32", "int8", "uint8"])
@pytest.mark.parametrize("req", ["write", "add"])
def test_embedding_dtypes(idx_dtype, w_dtype, req):
    rng = np.random.default_rng(14)
    idx = rng.integers(0, 12, (3, 4)).astype(idx_dtype)
    w = (rng.uniform(0, 50, (10, 5))).astype(w_dtype)
    params = {"input_dim": 10, "output_dim": 5, "dtype": w_dtype}
    check(REGISTRY["Embedding"], params, [idx, w], req)


def test_embedding_clips_out_of_range_and_special_indices():
    idx = np.array([-5, 0, 2.9, 3.1, 9, 1e6, -1e30, 1e30, np.nan, np.inf, -np.inf, -0.5], "float64")
    w = np.arange(20, dtype="float32").reshape(4, 5)
    with np.errstate(invalid="ignore"):
        got = check(REGISTRY["Embedding"], {"input_dim": 4, "output_dim": 5}, [idx, w])[0]
    rows = [0, 0, 2, 3, 3, 3, 0, 0, 0, 0, 0, 0]
    np.testing.assert_array_equal(got, w[rows])


def test_embedding_zero_size():
    w = np.ones((4, 3), "float32")
    for req in ("write", "add"):
        check(
            REGISTRY["Embedding"],
            {"input_dim": 4, "output_dim": 3},
            [np.zeros((0, 2), "float32"), w],
            req,
        )


# ---------------------------------------------------------------------------------------------
# Dropout


def _run_fresh(op, params, inputs, req="write", outputs=None):
    """An uncached compile (run_op caches per signature, so the seed is drawn once per call
    site): draws the mask seed now."""
    p, _ = op.parse_params(params)
    call = compile_call(op, p, [a.shape for a in inputs], [a.dtype for a in inputs], req)
    outs = outputs or [np.empty(s, t) for s, t in zip(call.out_shapes, call.out_dtypes)]
    call.run(inputs, outs, req)
    return outs


@pytest.mark.parametrize("axes", [(), (1,), (2, 3), (0, 3), (0, 1, 2, 3), (1, 2)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_always_matches_numpy_twin(axes, dtype):
    op = REGISTRY["Dropout"]
    x = np.random.default_rng(15).uniform(-2, 2, (3, 4, 5, 6)).astype(dtype)
    params = {"p": 0.4, "mode": "always", "axes": axes}
    dropout_mod.seed(123)
    out, mask = _run_fresh(op, params, [x])
    dropout_mod.seed(123)
    p, _ = op.parse_params(params)
    want_out, want_mask = op.reference(p, x)
    np.testing.assert_array_equal(mask, want_mask)
    np.testing.assert_array_equal(out, want_out)
    assert mask.shape == tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    scale = mask.dtype.type(np.float32(1 / 0.6) if dtype == "float16" else 1 / 0.6)
    assert set(np.unique(mask)) <= {0, scale}
    comp = np.float32 if dtype == "float16" else x.dtype
    np.testing.assert_array_equal(out, (x.astype(comp) * mask.astype(comp)).astype(dtype))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_mask_statistics(p):
    op = REGISTRY["Dropout"]
    n = 200_000
    x = np.ones(n, "float64")
    dropout_mod.seed(1)
    out, mask = _run_fresh(op, {"p": p, "mode": "always"}, [x])
    kept = mask != 0
    sigma = np.sqrt(n * p * (1 - p))
    assert abs(kept.sum() - n * (1 - p)) < 5 * sigma
    np.testing.assert_allclose(out[kept], 1 / (1 - p), rtol=1e-15)
    assert not out[~kept].any()
    # neighbours are independent: runs of kept elements are as long as a coin gives
    both = np.mean(kept[1:] & kept[:-1])
    assert abs(both - (1 - p) ** 2) < 5 * np.sqrt((1 - p) ** 2 / n)
    # the keep rate does not drift along the mask
    blocks = kept.reshape(100, -1).mean(axis=1)
    assert blocks.std() < 2 * np.sqrt(p * (1 - p) / (n // 100))


def test_dropout_seeds_reproduce_and_differ():
    op = REGISTRY["Dropout"]
    x = np.ones((50, 40), "float32")
    params = {"p": 0.5, "mode": "always"}
    dropout_mod.seed(7)
    a = _run_fresh(op, params, [x])[1]
    b = _run_fresh(op, params, [x])[1]
    dropout_mod.seed(7)
    c = _run_fresh(op, params, [x])[1]
    np.testing.assert_array_equal(a, c)
    assert (a != b).any()


def test_dropout_always_add_mode_and_in_place():
    op = REGISTRY["Dropout"]
    x = np.random.default_rng(16).uniform(-2, 2, (4, 6, 5)).astype("float32")
    for axes in ((), (1,)):
        params = {"p": 0.3, "mode": "always", "axes": axes}
        dropout_mod.seed(3)
        out, mask = _run_fresh(op, params, [x])
        pre_o, pre_m = np.full(out.shape, 0.5, "float32"), np.full(mask.shape, 2.0, "float32")
        dropout_mod.seed(3)
        got_o, got_m = _run_fresh(op, params, [x], "add", [pre_o.copy(), pre_m.copy()])
        np.testing.assert_allclose(got_o, pre_o + out, rtol=1e-6)
        np.testing.assert_allclose(got_m, pre_m + mask, rtol=1e-6)
        buf = x.copy()
        dropout_mod.seed(3)
        _run_fresh(op, params, [buf], outputs=[buf, np.empty_like(mask)])
        np.testing.assert_array_equal(buf, out)


def test_dropout_p_one_and_zero():
    op = REGISTRY["Dropout"]
    x = np.random.default_rng(17).uniform(-2, 2, (30, 7)).astype("float32")
    out, mask = _run_fresh(op, {"p": 1.0, "mode": "always"}, [x])
    assert not out.any() and not mask.any()
    out, mask = _run_fresh(op, {"p": 0.0, "mode": "always"}, [x])
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(mask, np.ones_like(x))


@pytest.mark.parametrize("mode", ["training", "always"])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 4, 2)])
def test_dropout_zero_size(mode, shape):
    op = REGISTRY["Dropout"]
    x = np.zeros(shape, "float32")
    for axes in ((), (0,)):
        params = {"p": 0.5, "mode": mode, "axes": axes}
        dropout_mod.seed(0)
        out, mask = _run_fresh(op, params, [x])
        dropout_mod.seed(0)
        p, _ = op.parse_params(params)
        want_out, want_mask = op.reference(p, x)
        np.testing.assert_array_equal(out, want_out)
        np.testing.assert_array_equal(mask, want_mask)


def test_dropout_inference_passes_nan_through():
    x = SPECIAL.astype("float32")
    out, _ = check(REGISTRY["Dropout"], {"p": 0.5}, [x])
    np.testing.assert_array_equal(out.view(np.uint32), x.view(np.uint32))


# ---------------------------------------------------------------------------------------------
# Speed against numpy (off by default: pytest -m benchmark -s)


def _best(fn, reps=7):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def _compiled(name, params, inputs):
    op = REGISTRY[name]
    p, _ = op.parse_params(params)
    call = compile_call(op, p, [a.shape for a in inputs], [a.dtype for a in inputs])
    outs = [np.empty(s, t) for s, t in zip(call.out_shapes, call.out_dtypes)]
    return lambda: call.run(inputs, outs)


def _np_softmax(x, out):
    m = x.max(axis=1, keepdims=True)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)


@pytest.mark.benchmark
def test_speed_against_numpy():
    rng = np.random.default_rng(0)
    lines = []
    for dt in ("float32", "float64"):
        a, b = rng.standard_normal((1024, 1024)).astype(dt), rng.standard_normal((1024, 1024))
        b = b.astype(dt)
        o = np.empty((1024, 1024), dt)
        t_np = _best(lambda: np.matmul(a, b, out=o))  # noqa: B023
        t_c = _best(_compiled("dot", {}, [a, b]))
        lines.append((f"dot 1024^3 {dt}", t_np, t_c))
        if dt == "float32":
            assert t_np / t_c >= 0.9, f"dot float32 at {t_np / t_c:.2f}x numpy"
    x, w, bias = (rng.standard_normal(s).astype("float32") for s in ((64, 784), (512, 784), (512,)))
    fo = np.empty((64, 512), "float32")

    def np_fc():
        np.matmul(x, w.T, out=fo)
        np.add(fo, bias, out=fo)

    lines.append(
        (
            "FullyConnected (64,784)x(512,784)",
            _best(np_fc),
            _best(_compiled("FullyConnected", {"num_hidden": 512}, [x, w, bias])),
        )
    )
    s = rng.standard_normal((4096, 1000)).astype("float32")
    so = np.empty_like(s)
    lines.append(
        (
            "softmax (4096,1000) float32",
            _best(lambda: _np_softmax(s, so)),
            _best(_compiled("softmax", {}, [s])),
        )
    )
    for name, t_np, t_c in lines:
        print(
            f"{name}: numpy {t_np * 1e3:.2f} ms, nnsym {t_c * 1e3:.2f} ms, "
            f"{t_np / t_c:.2f}x numpy's speed"
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("channels", [4, 6, 9])
def test_batch_norm_training_statistics_by_channel_groups(dtype, channels):
    """The training forward sums four channels' statistics at a time (full groups and a
    remainder of 1-3): outputs, saved mean and inverse std against a float64 reference."""
    from nnsym import sym

    rng = np.random.default_rng(channels)
    shape = (3, channels, 3, 2)
    y = sym.BatchNorm(sym.Variable("x"), fix_gamma=False, output_mean_var=True, name="bn")
    exe = y.simple_bind(x=shape, type_dict={"x": dtype}, grad_req="null")
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    gamma = rng.uniform(0.5, 2, channels).astype(dtype)
    beta = rng.standard_normal(channels).astype(dtype)
    exe.arg_dict["x"][:] = x
    exe.arg_dict["bn_gamma"][:] = gamma
    exe.arg_dict["bn_beta"][:] = beta
    out, mean, invstd = (o.asnumpy() for o in exe.forward(is_train=True))
    xd = x.astype(np.float64)
    mu = xd.mean(axis=(0, 2, 3))
    var = xd.var(axis=(0, 2, 3))
    istd = 1 / np.sqrt(var + 1e-3)
    want = (xd - mu[:, None, None]) * (istd * gamma)[:, None, None] + beta[:, None, None]
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(mean, mu, rtol=tol, atol=tol)
    np.testing.assert_allclose(invstd, istd, rtol=tol, atol=tol)
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol * 10)
