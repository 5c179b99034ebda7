"""Dense kernels of Convolution, Pooling and BatchNorm against their numpy references: every
example in write and add mode, hypothesis-random configurations, float16, NaN/Inf, empty batches.

Convolution accumulates in float32 (float64 for float64 data) through BLAS while the reference
sums in float64, so its tolerance is an error bound: a few float32 roundings of the sum of the
absolute values of the terms (the reference applied to |data|, |weight|, |bias|)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nnsym.errors import NoKernelError
from nnsym.ops import REGISTRY
from nnsym.ops.conv.conv import DEFAULT_LAYOUT, from_ncx
from nnsym.runtime.imperative import run_op
from nnsym.testing import make_inputs, reference_outputs

CONV, POOL, BN = REGISTRY["Convolution"], REGISTRY["Pooling"], REGISTRY["BatchNorm"]
EPS = {"float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _prefill(want: list[np.ndarray], seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, w.shape).astype(w.dtype) for w in want]


def _run(
    op: Any, params: dict[str, Any], inputs: list[np.ndarray], req: str, want: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Outputs of ``op`` and what they should be (prefill + reference in add mode)."""
    if req == "write":
        return run_op(op, params, inputs), want
    pre = _prefill(want)
    got = run_op(op, params, inputs, req="add", outputs=[p.copy() for p in pre])
    return got, [(p + w).astype(w.dtype) for p, w in zip(pre, want)]


# ---------------------------------------------------------------------------------------------
# Convolution


def _conv_bound(p: Any, inputs: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """The reference on absolute values (|terms| summed) and the number of terms per output."""
    absin = [np.abs(a.astype(np.float64)) for a in inputs]
    bound = CONV.reference(p, *absin)
    return bound, (
        inputs[0].shape[1 if p.data_layout[1] == "C" else -1]
        // p.num_group
        * int(np.prod(p.kernel))
        + 1
    )


def check_conv(params: dict[str, Any], inputs: list[np.ndarray], req: str) -> None:
    p, _ = CONV.parse_params(params)
    want = reference_outputs(CONV, p, inputs)
    got, want = _run(CONV, params, inputs, req, want)
    g, w = got[0], want[0]
    assert g.shape == w.shape and g.dtype == w.dtype
    dt = w.dtype.name
    bound, k = _conv_bound(p, inputs)
    acc_eps = EPS["float64" if dt == "float64" else "float32"]
    err = np.abs(g.astype(np.float64) - w.astype(np.float64))
    allowed = 2 * k * acc_eps * bound + 2 * EPS[dt] * np.abs(w.astype(np.float64)) + 1e-30
    if req == "add":
        allowed += 2 * EPS[dt] * (np.abs(w.astype(np.float64)) + 1)
    bad = err > allowed
    assert not bad.any(), (
        f"{bad.sum()} of {bad.size} outputs off; worst error {err.max()} "
        f"(allowed {allowed.flat[np.argmax(err - allowed)]})"
    )


@pytest.mark.parametrize("req", ["write", "add"])
@pytest.mark.parametrize("ex", CONV.examples, ids=str)
def test_convolution_examples(ex, req):
    check_conv(dict(ex.params), make_inputs(CONV, ex), req)


@st.composite
def conv_cases(draw: Any) -> tuple[dict[str, Any], list[np.ndarray], str]:
    nd = draw(st.integers(1, 3))
    channel_last = draw(st.booleans()) and nd > 1  # NWC is not a Convolution layout
    g = draw(st.integers(1, 3))
    cg, fg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    depthwise = draw(st.booleans())
    if depthwise:
        cg = fg = 1
        g = draw(st.integers(1, 5))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    xs = []
    for k, d, pd in zip(kernel, dilate, pad):
        lo = max(0, (k - 1) * d + 1 - 2 * pd)
        xs.append(draw(st.integers(lo, lo + 6 if nd < 3 else lo + 3)))
    n = draw(st.integers(0, 2))
    no_bias = draw(st.booleans())
    dtype = draw(st.sampled_from(["float32", "float32", "float64", "float16"]))
    req = draw(st.sampled_from(["write", "add"]))
    layout = DEFAULT_LAYOUT[nd] if not channel_last else ("NHWC" if nd == 2 else "NDHWC")
    params: dict[str, Any] = {
        "kernel": kernel,
        "num_filter": g * fg,
        "num_group": g,
        "stride": stride,
        "dilate": dilate,
        "pad": pad,
        "no_bias": no_bias,
    }
    if channel_last:
        params["layout"] = layout
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data = from_ncx((n, g * cg, *xs), layout)
    weight = from_ncx((g * fg, cg, *kernel), layout)
    shapes = [data, weight] + ([] if no_bias else [(g * fg,)])
    inputs = [rng.uniform(-2, 2, s).astype(dtype) for s in shapes]
    return params, inputs, req


@SETTINGS
@given(conv_cases())
def test_convolution_random(case):
    params, inputs, req = case
    check_conv(params, inputs, req)


def test_convolution_write_ignores_old_output():
    """Write mode never reads the output (BLAS with beta = 0 must not see NaN garbage)."""
    rng = np.random.default_rng(0)
    for params, shapes in [
        ({"kernel": (3, 3), "num_filter": 4, "no_bias": True}, [(2, 3, 6, 6), (4, 3, 3, 3)]),
        ({"kernel": (1, 1), "num_filter": 4, "no_bias": True}, [(2, 3, 6, 6), (4, 3, 1, 1)]),
        ({"kernel": (3, 3), "num_filter": 3, "num_group": 3}, [(2, 3, 6, 6), (3, 1, 3, 3), (3,)]),
    ]:
        inputs = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
        p, _ = CONV.parse_params(params)
        want = reference_outputs(CONV, p, inputs)[0]
        got = run_op(CONV, params, inputs, outputs=[np.full(want.shape, np.nan, np.float32)])
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)


def test_convolution_1x1_and_large_chunks():
    """The 1x1 path (data used as its own column matrix, per group) and several row chunks."""
    rng = np.random.default_rng(1)
    for params, shapes in [
        ({"kernel": (1, 1), "num_filter": 6, "num_group": 2}, [(3, 4, 9, 7), (6, 2, 1, 1), (6,)]),
        (
            {"kernel": (1, 1), "num_filter": 6, "num_group": 3, "layout": "NHWC"},
            [(2, 5, 4, 6), (6, 1, 1, 2), (6,)],
        ),
        (
            {"kernel": (3, 3), "num_filter": 8, "pad": (1, 1)},
            [(2, 16, 80, 90), (8, 16, 3, 3), (8,)],
        ),
    ]:
        inputs = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
        for req in ("write", "add"):
            check_conv(params, inputs, req)


def test_convolution_nan_propagates():
    x = np.ones((1, 2, 5, 5), np.float32)
    x[0, 1, 2, 2] = np.nan
    for groups in (1, 2):
        w = np.ones((2, 2 // groups, 3, 3), np.float32)
        y = run_op(
            CONV, {"kernel": (3, 3), "num_filter": 2, "num_group": groups, "no_bias": True}, [x, w]
        )[0]
        assert np.isnan(y[0, 1]).all()
        assert np.isnan(y[0, 0]).all() == (groups == 1)


def test_convolution_rejects_integer_data():
    x, w = np.ones((1, 1, 4, 4), np.int32), np.ones((1, 1, 3, 3), np.int32)
    with pytest.raises(NoKernelError, match="float"):
        run_op(CONV, {"kernel": (3, 3), "num_filter": 1, "no_bias": True}, [x, w])


# ---------------------------------------------------------------------------------------------
# Pooling


def check_pool(params: dict[str, Any], inputs: list[np.ndarray], req: str) -> None:
    p, _ = POOL.parse_params(params)
    want = reference_outputs(POOL, p, inputs)
    got, want = _run(POOL, params, inputs, req, want)
    g, w = got[0], want[0]
    assert g.shape == w.shape and g.dtype == w.dtype
    if p.pool_type == "max" and req == "write":
        np.testing.assert_array_equal(g, w)  # exact, NaN where numpy's max gives NaN
        return
    dt = w.dtype.name
    rtol = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}[dt]
    atol = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}[dt]
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("req", ["write", "add"])
@pytest.mark.parametrize("ex", POOL.examples, ids=str)
def test_pooling_examples(ex, req):
    check_pool(dict(ex.params), make_inputs(POOL, ex), req)


def _windows_touch_data(x: int, o: int, k: int, s: int, pd: int) -> bool:
    """Every window overlaps the data (the reference cannot take the max of nothing)."""
    return all(max(i * s - pd, 0) < min(i * s - pd + k, x) for i in range(o))


@st.composite
def pool_cases(draw: Any) -> tuple[dict[str, Any], list[np.ndarray], str]:
    nd = draw(st.integers(1, 3))
    channel_last = draw(st.booleans())
    pool_type = draw(st.sampled_from(["max", "max", "avg", "sum", "lp"]))
    params: dict[str, Any] = {"pool_type": pool_type}
    if pool_type == "lp":
        params["p_value"] = draw(st.sampled_from([1, 2, 3]))
    if pool_type == "avg":
        params["count_include_pad"] = draw(st.sampled_from([None, True, False]))
    n, c = draw(st.integers(0, 2)), draw(st.integers(1, 4))
    xs = [draw(st.integers(1, 7 if nd < 3 else 4)) for _ in range(nd)]
    if draw(st.booleans()) and draw(st.booleans()):
        params["global_pool"] = True
    else:
        convention = draw(st.sampled_from(["valid", "full"] + (["same"] if nd == 1 else [])))
        kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
        stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
        pad = (
            tuple(draw(st.integers(0, k - 1)) for k in kernel)
            if convention != "same"
            else (0,) * nd
        )
        assume(all(k <= x + 2 * q for k, x, q in zip(kernel, xs, pad)))
        params.update(kernel=kernel, stride=stride, pad=pad, pooling_convention=convention)
        p, _ = POOL.parse_params(params)
        from nnsym.ops.conv.conv import _pool_out

        osz = [_pool_out(p, x, k, s, q) for x, k, s, q in zip(xs, kernel, stride, pad)]
        assume(
            all(
                _windows_touch_data(x, o, k, s, q)
                for x, o, k, s, q in zip(xs, osz, kernel, stride, pad)
            )
        )
    layout = DEFAULT_LAYOUT[nd]
    if channel_last:
        layout = {1: "NWC", 2: "NHWC", 3: "NDHWC"}[nd]
        params["layout"] = layout
    dtype = draw(st.sampled_from(["float32", "float32", "float64", "float16"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.uniform(-2, 2, from_ncx((n, c, *xs), layout)).astype(dtype)
    if pool_type == "max" and x.size and draw(st.booleans()):
        flat = x.reshape(-1)
        idx = rng.integers(0, flat.size, size=max(1, flat.size // 8))
        flat[idx] = rng.choice([np.nan, np.inf, -np.inf], size=idx.size)
    return params, [x], draw(st.sampled_from(["write", "add"]))


@SETTINGS
@given(pool_cases())
def test_pooling_random(case):
    params, inputs, req = case
    with np.errstate(invalid="ignore", divide="ignore"):
        check_pool(params, inputs, req)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_max_pooling_nan_and_inf(layout):
    x = np.zeros((1, 2, 6, 6), np.float32)
    x[0, 0, 0, 0] = np.nan
    x[0, 0, 3, 3] = np.inf
    x[0, 1, :, :] = -np.inf
    x[0, 1, 5, 5] = np.nan
    params: dict[str, Any] = {"kernel": (2, 2), "stride": (2, 2)}
    if layout == "NHWC":
        x = np.moveaxis(x, 1, -1).copy()
        params["layout"] = "NHWC"
    for p in (params, {"global_pool": True, "kernel": (1, 1), **params}):
        check_pool(p, [x], "write")


def test_global_pooling_long_planes():
    """The flat reduction's 16 lanes and its tail, with a NaN in the tail for max."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 3, 7, 9)).astype(np.float32)
    for pool_type in ("max", "avg", "sum"):
        check_pool({"global_pool": True, "pool_type": pool_type}, [x], "write")
    x[1, 2, 6, 8] = np.nan
    check_pool({"global_pool": True}, [x], "write")


# ---------------------------------------------------------------------------------------------
# BatchNorm


def check_bn(params: dict[str, Any], inputs: list[np.ndarray], req: str) -> None:
    p, _ = BN.parse_params(params)
    want = reference_outputs(BN, p, inputs)
    got, want = _run(BN, params, inputs, req, want)
    assert len(got) == 3
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if req == "write":
            np.testing.assert_array_equal(g, w)  # same double arithmetic, one rounding
        else:
            np.testing.assert_allclose(g, w, rtol=EPS[w.dtype.name] * 4, atol=0)


@pytest.mark.parametrize("req", ["write", "add"])
@pytest.mark.parametrize("ex", BN.examples, ids=str)
def test_batch_norm_examples(ex, req):
    check_bn(dict(ex.params), make_inputs(BN, ex), req)


@SETTINGS
@given(
    shape=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    axis=st.integers(-4, 3),
    fix_gamma=st.booleans(),
    eps=st.sampled_from([1e-3, 1e-5, 0.5]),
    dtype=st.sampled_from(["float32", "float64", "float16"]),
    req=st.sampled_from(["write", "add"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_batch_norm_random(shape, axis, fix_gamma, eps, dtype, req, seed):
    assume(-len(shape) <= axis < len(shape))
    rng = np.random.default_rng(seed)
    pdt = "float32" if dtype == "float16" else dtype
    c = shape[axis]
    x = rng.uniform(-3, 3, shape).astype(dtype)
    params = [rng.uniform(-2, 2, c).astype(pdt) for _ in range(3)]
    var = rng.uniform(0.01, 3, c).astype(pdt)
    check_bn({"axis": axis, "fix_gamma": fix_gamma, "eps": eps}, [x, *params, var], req)


def test_batch_norm_nan_and_inf():
    x = np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32).reshape(1, 4, 1)
    vec = [np.ones(4, np.float32) for _ in range(4)]
    check_bn({}, [x, *vec], "write")


# ---------------------------------------------------------------------------------------------
# Empty batches


@pytest.mark.parametrize("req", ["write", "add"])
def test_empty_batch(req):
    x = np.zeros((0, 4, 5, 5), np.float32)
    check_conv(
        {"kernel": (3, 3), "num_filter": 2},
        [x, np.ones((2, 4, 3, 3), np.float32), np.ones(2, np.float32)],
        req,
    )
    check_conv(
        {"kernel": (3, 3), "num_filter": 4, "num_group": 4},
        [x, np.ones((4, 1, 3, 3), np.float32), np.ones(4, np.float32)],
        req,
    )
    for pool_type in ("max", "avg"):
        check_pool({"kernel": (2, 2), "pool_type": pool_type}, [x], req)
        check_pool({"global_pool": True, "pool_type": pool_type}, [x], req)
    vec = [np.full(4, 0.5, np.float32) for _ in range(4)]
    check_bn({}, [x, *vec], req)


def _max_pool_grad_reference(x: np.ndarray, g: np.ndarray, kernel: tuple[int, ...],
                             stride: tuple[int, ...], pad: tuple[int, ...]) -> np.ndarray:
    """Max pooling's input gradient, channel-first: each output's gradient to the first cell of
    its window (clipped to the data, row-major) holding the maximum, or the first NaN."""
    dx = np.zeros_like(x)
    for idx in np.ndindex(*g.shape):
        n, c, *o = idx
        lo = [max(oi * s - p, 0) for oi, s, p in zip(o, stride, pad)]
        hi = [min(oi * s - p + k, xs) for oi, s, p, k, xs in zip(o, stride, pad, kernel,
                                                               x.shape[2:])]
        win = x[(n, c, *[slice(a, b) for a, b in zip(lo, hi)])]
        flat = win.reshape(-1)
        nans = np.flatnonzero(np.isnan(flat))
        k = nans[0] if nans.size else int(np.argmax(flat))  # argmax: the first maximum
        cell = np.unravel_index(k, win.shape)
        dx[(n, c, *[a + q for a, q in zip(lo, cell)])] += g[idx]
    return dx


@pytest.mark.parametrize("shape,params", [
    ((2, 3, 7, 7), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((2, 3, 9), {"kernel": (3,), "stride": (1,), "pad": (1,)}),
    ((1, 2, 4, 5, 5), {"kernel": (2, 3, 3), "stride": (1, 2, 2), "pad": (0, 1, 1)}),
    # output rows wider than the 2-D path's POOL_BW_ROW (2048): the general plane loop
    ((1, 1, 2, 4200), {"kernel": (2, 3), "stride": (1, 2), "pad": (0, 1)}),
])
def test_max_pooling_gradient_goes_to_the_first_of_tied_maxima(shape, params):
    """Data from three values, so most windows hold their maximum more than once: the gradient
    goes to the first such cell (MXNet's unpool_max), with NaNs mixed in."""
    from nnsym import nd, sym

    rng = np.random.default_rng(11)
    x = rng.choice(np.array([-1.0, 0.0, 2.0], np.float32), size=shape)
    for with_nan in (False, True):
        if with_nan:
            x.reshape(-1)[::7] = np.nan
        exe = sym.Pooling(sym.Variable("x"), pool_type="max", **params).simple_bind(
            x=shape, grad_req="add")
        exe.arg_dict["x"][:] = x
        out = exe.forward(is_train=True)[0].asnumpy()
        g = rng.uniform(-1, 1, out.shape).astype(np.float32)
        pre = rng.uniform(-1, 1, shape).astype(np.float32)
        exe.grad_dict["x"][:] = pre
        exe.backward(nd.array(g))
        want = _max_pool_grad_reference(x, g, params["kernel"], params["stride"],
                                        params["pad"])
        np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), pre + want, rtol=1e-6,
                                   atol=1e-6)
