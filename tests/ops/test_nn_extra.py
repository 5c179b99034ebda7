"""Deconvolution, LRN and UpSampling: forward against independent numpy implementations and
against MXNet 1.9.1 (tests/golden/ops_extra, made by its make.py), backward against MXNet's
gradients and central differences, parameter errors, and shape inference against MXNet's."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError, NoKernelError, OperatorParamError
from nnsym.ir.spec import KernelCall
from nnsym.ops import get_op
from nnsym.runtime.imperative import run_op
from nnsym.symbol.ops import make_function
from nnsym.test_utils import check_numeric_gradient

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "ops_extra"
CASES = json.loads((GOLDEN / "cases.json").read_text())["cases"]
SHAPES = json.loads((GOLDEN / "shapes.json").read_text())
DECONV, LRN, UP = get_op("Deconvolution"), get_op("LRN"), get_op("UpSampling")


def op_fn(name: str) -> Any:
    """``nnsym.sym.<name>``; made here when the operator registered after nnsym.sym was built."""
    try:
        return getattr(sym, name)
    except AttributeError:
        return make_function(get_op(name), name)


def _params(p: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in p.items()}


def _close(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if want.dtype == np.float64:
        rtol, atol = 1e-10, 1e-12
    else:
        rtol, atol = 1e-5, 1e-6
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale, err_msg=what)


# ---------------------------------------------------------------------------------------------
# Independent numpy implementations (loops over the definitions)


def naive_deconv(x, w, b, kernel, stride=None, dilate=None, pad=None, adj=None, num_group=1,
                 target=None):
    """out[n, g*Fg + f, i*s + k*d - pad] += x[n, g*Cg + c, i] * w[g*Cg + c, f, k], NC... layout;
    with ``target`` the padding is MXNet's: (full - target + 1) // 2, adj (full - target) % 2."""
    nd_ = len(kernel)
    stride = stride or (1,) * nd_
    dilate = dilate or (1,) * nd_
    pad = list(pad or (0,) * nd_)
    adj = list(adj or (0,) * nd_)
    n, c, *xs = x.shape
    fg = w.shape[1]
    f, cg = fg * num_group, c // num_group
    if target is not None and any(target):
        for i in range(nd_):
            full = stride[i] * (xs[i] - 1) + (kernel[i] - 1) * dilate[i] + 1
            pad[i], adj[i] = math.ceil((full - target[i]) / 2), (full - target[i]) % 2
    osz = [stride[i] * (xs[i] - 1) + (kernel[i] - 1) * dilate[i] + 1 - 2 * pad[i] + adj[i]
           for i in range(nd_)]
    out = np.zeros((n, f, *osz))
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    for pos in itertools.product(*(range(v) for v in xs)):
        for kk in itertools.product(*(range(v) for v in kernel)):
            o = [pos[i] * stride[i] + kk[i] * dilate[i] - pad[i] for i in range(nd_)]
            if any(not 0 <= o[i] < osz[i] for i in range(nd_)):
                continue
            for g in range(num_group):
                src = xd[(slice(None), slice(g * cg, (g + 1) * cg), *pos)]
                wk = wd[(slice(g * cg, (g + 1) * cg), slice(None), *kk)]
                out[(slice(None), slice(g * fg, (g + 1) * fg), *o)] += src @ wk
    if b is not None:
        out += b.astype(np.float64).reshape(1, -1, *([1] * nd_))
    return out


def naive_lrn(x, nsize, alpha=1e-4, beta=0.75, knorm=2.0):
    """Window of (nsize - 1) // 2 channels either side (oneDNN's; MXNet's for odd nsize)."""
    xd = x.astype(np.float64)
    c, h = x.shape[1], (nsize - 1) // 2
    out = np.empty_like(xd)
    for ch in range(c):
        win = xd[:, max(0, ch - h) : min(c, ch + h + 1)]
        norm = knorm + alpha / nsize * (win**2).sum(axis=1)
        out[:, ch] = xd[:, ch] * norm**-beta
    return out


def naive_nearest(xs, scale, mode="concat"):
    oh, ow = xs[0].shape[2] * scale, xs[0].shape[3] * scale
    ups = []
    for x in xs:
        rows = np.arange(oh) * x.shape[2] // oh
        cols = np.arange(ow) * x.shape[3] // ow
        ups.append(x.astype(np.float64)[:, :, rows][:, :, :, cols])
    return sum(ups) if mode == "sum" else np.concatenate(ups, axis=1)


def _rand(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


# ---------------------------------------------------------------------------------------------
# Forward against the numpy implementations


DECONV_CASES = [
    # (data shape, weight shape, bias?, params)
    ((2, 3, 5), (3, 4, 3), False, {"kernel": (3,), "num_filter": 4}),
    ((2, 4, 5), (4, 3, 3), True, {"kernel": (3,), "num_filter": 6, "num_group": 2,
                                  "stride": (2,), "pad": (1,), "dilate": (2,), "adj": (1,)}),
    ((2, 3, 4, 4), (3, 5, 3, 3), True, {"kernel": (3, 3), "num_filter": 5}),
    ((1, 3, 4, 5), (3, 2, 3, 2), False, {"kernel": (3, 2), "num_filter": 2, "stride": (2, 3),
                                         "pad": (1, 0), "adj": (1, 2), "dilate": (1, 2)}),
    ((2, 2, 4, 4), (2, 3, 4, 4), False, {"kernel": (4, 4), "num_filter": 3, "stride": (2, 2),
                                         "target_shape": (9, 8)}),
    ((2, 2, 3, 4), (2, 3, 3, 3), True, {"kernel": (3, 3), "num_filter": 3, "stride": (3, 2),
                                        "dilate": (2, 1), "target_shape": (10, 8)}),
    ((2, 4, 5, 5), (4, 1, 3, 3), True, {"kernel": (3, 3), "num_filter": 4, "num_group": 4,
                                        "stride": (2, 2), "pad": (1, 1)}),
    ((1, 4, 3, 3), (4, 3, 2, 2), False, {"kernel": (2, 2), "num_filter": 6, "num_group": 2,
                                         "pad": (1, 0)}),
    ((1, 2, 3, 3, 2), (2, 2, 2, 3, 2), True, {"kernel": (2, 3, 2), "num_filter": 2,
                                              "stride": (2, 1, 2), "pad": (0, 1, 0)}),
]


def _deconv_naive_for(p: dict, x, w, b):
    return naive_deconv(x, w, b, p["kernel"], p.get("stride"), p.get("dilate"), p.get("pad"),
                        p.get("adj"), p.get("num_group", 1), p.get("target_shape"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("dshape", "wshape", "bias", "params"), DECONV_CASES)
def test_deconvolution_matches_naive(dshape, wshape, bias, params, dtype):
    x, w = _rand(dshape, dtype, 1), _rand(wshape, dtype, 2)
    b = _rand((params["num_filter"],), dtype, 3) if bias else None
    p = {**params, "no_bias": not bias}
    want = _deconv_naive_for(params, x, w, b).astype(dtype)
    ins = [x, w] + ([b] if bias else [])
    _close(run_op(DECONV, p, ins)[0], want)
    pre = _rand(want.shape, dtype, 4)
    got = run_op(DECONV, p, ins, req="add", outputs=[pre.copy()])[0]
    _close(got, (pre.astype(np.float64) + want).astype(dtype), "req=add")


def test_deconvolution_channel_last_matches_naive():
    x, w, b = _rand((2, 4, 3, 3)), _rand((3, 2, 2, 2)), _rand((2,))
    p = {"kernel": (2, 2), "num_filter": 2, "stride": (2, 1), "layout": "NHWC",
         "no_bias": False}
    got = run_op(DECONV, p, [x, w, b])[0]
    want = naive_deconv(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), b, (2, 2), (2, 1))
    _close(got, want.transpose(0, 2, 3, 1).astype(np.float32))


def test_deconvolution_target_shape_zero_entry_gives_an_empty_dimension():
    # MXNet 1.9.1 derives pad/adj from a 0 entry too, which leaves that output dimension empty.
    p = {"kernel": (4, 4), "num_filter": 3, "stride": (2, 2), "target_shape": (0, 10)}
    out = run_op(DECONV, p, [_rand((1, 2, 5, 5)), _rand((2, 3, 4, 4))])[0]
    assert out.shape == (1, 3, 0, 10)


@pytest.mark.parametrize(
    ("shape", "params"),
    [
        ((2, 7, 3, 4), {"nsize": 3}),
        ((2, 6, 3, 3), {"nsize": 5, "alpha": 0.5, "beta": 0.9, "knorm": 1.5}),
        ((2, 7, 2, 2), {"nsize": 4, "alpha": 1.0, "beta": 0.5, "knorm": 1.0}),
        ((3, 5), {"nsize": 3, "alpha": 1.0}),
        ((2, 4, 5), {"nsize": 1, "alpha": 2.0, "beta": 0.5, "knorm": 1.0}),
        ((1, 5, 2, 3, 2), {"nsize": 9, "alpha": 1.0, "beta": 0.5, "knorm": 1.0}),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lrn_matches_naive(shape, params, dtype):
    x = _rand(shape, dtype)
    out, norm = run_op(LRN, params, [x])
    _close(out, naive_lrn(x, **params).astype(dtype))
    # the hidden output is the norm: out = x * norm ** -beta
    beta = params.get("beta", 0.75)
    _close(out, (x.astype(np.float64) * norm.astype(np.float64) ** -beta).astype(dtype), "norm")


def test_lrn_float16_computes_in_float32():
    x = _rand((2, 5, 3, 3), "float16")
    out = run_op(LRN, {"nsize": 3, "alpha": 1.0}, [x])[0]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), naive_lrn(x, 3, alpha=1.0), rtol=2e-3,
                               atol=2e-3)


@pytest.mark.parametrize(
    ("shapes", "scale", "mode"),
    [
        ([(2, 3, 4, 5)], 2, "concat"),
        ([(1, 2, 3, 2)], 3, "concat"),
        ([(2, 3, 4, 4), (2, 2, 2, 2), (2, 1, 8, 8)], 2, "concat"),
        ([(2, 3, 2, 2), (2, 3, 1, 1)], 3, "sum"),
        ([(1, 2, 2, 3), (1, 2, 1, 1), (1, 2, 2, 3)], 1, "concat"),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_upsampling_nearest_matches_naive(shapes, scale, mode, dtype):
    if len(shapes) == 3 and scale == 1:  # (1, 1) cannot reach (2, 3): MXNet fails too
        with pytest.raises(NNSymError, match=r"factor|divide"):
            run_op(UP, {"scale": scale, "sample_type": "nearest", "num_args": 3}, [
                _rand(s, dtype) for s in shapes])
        return
    xs = [_rand(s, dtype, i) for i, s in enumerate(shapes)]
    p = {"scale": scale, "sample_type": "nearest", "num_args": len(xs), "multi_input_mode": mode}
    want = naive_nearest(xs, scale, mode).astype(dtype)
    got = run_op(UP, p, xs)[0]
    pre = _rand(want.shape, dtype, 9)
    added = run_op(UP, p, xs, req="add", outputs=[pre.copy()])[0]
    added_want = (pre.astype(np.float64) + want).astype(dtype)
    if dtype == "float16":
        for g, w in ((got, want), (added, added_want)):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-3,
                                       atol=4e-3)
    else:
        _close(got, want)
        _close(added, added_want, "req=add")


@pytest.mark.parametrize(("scale", "shape"),
                         [(2, (1, 3, 3, 4)), (3, (2, 2, 3, 2)), (4, (1, 1, 2, 2))])
def test_upsampling_bilinear_is_a_per_channel_deconvolution(scale, shape):
    c = shape[1]
    k = 2 * scale - scale % 2
    x, w = _rand(shape, "float64"), _rand((c, 1, k, k), "float64", 5)
    p = {"scale": scale, "sample_type": "bilinear", "num_filter": c, "num_args": 2}
    got = run_op(UP, p, [x, w])[0]
    pad = math.ceil((scale - 1) / 2)
    want = naive_deconv(x, w, None, (k, k), (scale, scale), None, (pad, pad), None, c)
    assert got.shape == (shape[0], c, shape[2] * scale, shape[3] * scale)
    _close(got, want)


# ---------------------------------------------------------------------------------------------
# MXNet 1.9.1 fixtures: forward and backward


def _fixture_symbol(case: dict) -> Any:
    p = _params(case["params"])
    fn = op_fn(case["op"])
    if case["op"] == "UpSampling" and p["sample_type"] == "nearest":
        return fn(*[sym.Variable(n) for n in case["inputs"]], name="node", **p)
    return fn(sym.Variable("data"), name="node", **p)


def _load(case: dict, name: str) -> np.ndarray:
    return np.load(GOLDEN / f"{case['id']}_{name}.npy")


def test_fixtures_cover_every_operator():
    assert {c["op"] for c in CASES} == {"Deconvolution", "LRN", "UpSampling"}
    assert len(SHAPES) >= 30


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_forward_and_backward_match_mxnet(case):
    s = _fixture_symbol(case)
    assert s.list_arguments() == case["inputs"]
    dt = case["dtype"]
    args = {n: nd.array(_load(case, n), dtype=dt) for n in case["inputs"]}
    grads = {n: nd.zeros(args[n].shape, dtype=dt) for n in case["inputs"]}
    exe = s.bind(None, args, args_grad=grads, grad_req="write")
    out = exe.forward(is_train=True)
    assert len(out) == 1
    _close(out[0].asnumpy(), _load(case, "out"), "output")
    exe.backward([nd.array(_load(case, "head"), dtype=dt)])
    for n in case["inputs"]:
        _close(grads[n].asnumpy(), _load(case, f"grad_{n}"), f"gradient of {n}")


@pytest.mark.parametrize("case", [c for c in CASES if c["op"] == "Deconvolution"],
                         ids=lambda c: c["id"])
def test_mxnet_deconvolution_fixtures_agree_with_naive(case):
    """The fixtures themselves against the loop definition (guards the fixtures and the
    numpy implementation against sharing a mistake with the operator)."""
    p = _params(case["params"])
    names = case["inputs"]
    x, w = _load(case, names[0]), _load(case, names[1])
    b = _load(case, names[2]) if len(names) > 2 else None
    _close(_deconv_naive_for(p, x, w, b).astype(x.dtype), _load(case, "out"))


# ---------------------------------------------------------------------------------------------
# Backward against central differences (float64)


GRAD_CASES = [
    ("Deconvolution", [(2, 4, 5), (4, 3, 3), (6,)],
     {"kernel": (3,), "num_filter": 6, "num_group": 2, "stride": (2,), "pad": (1,),
      "dilate": (2,), "adj": (1,), "no_bias": False}),
    ("Deconvolution", [(1, 2, 3, 3), (2, 3, 4, 4)],
     {"kernel": (4, 4), "num_filter": 3, "stride": (2, 2), "target_shape": (7, 6)}),
    ("Deconvolution", [(1, 3, 3, 3), (3, 1, 3, 3), (3,)],
     {"kernel": (3, 3), "num_filter": 3, "num_group": 3, "stride": (2, 2), "pad": (1, 1),
      "no_bias": False}),
    ("Deconvolution", [(1, 3, 2, 2), (2, 2, 2, 3), (3,)],
     {"kernel": (2, 2), "num_filter": 3, "layout": "NHWC", "stride": (2, 2), "no_bias": False}),
    ("LRN", [(2, 6, 2, 3)], {"nsize": 3, "alpha": 0.7, "beta": 0.6, "knorm": 1.2}),
    ("LRN", [(2, 7, 3)], {"nsize": 4, "alpha": 1.0, "beta": 0.5, "knorm": 1.0}),
    ("UpSampling", [(1, 2, 2, 3), (1, 1, 2, 3)],
     {"scale": 2, "sample_type": "nearest", "multi_input_mode": "concat"}),
    ("UpSampling", [(1, 2, 2, 2), (1, 2, 4, 4)],
     {"scale": 2, "sample_type": "nearest", "multi_input_mode": "sum"}),
    ("UpSampling", [(1, 2, 2, 3), (2, 1, 4, 4)],
     {"scale": 2, "sample_type": "bilinear", "num_filter": 2}),
]


@pytest.mark.parametrize(("name", "shapes", "params"), GRAD_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GRAD_CASES)])
def test_backward_matches_finite_differences(name, shapes, params):
    names = [f"in{i}" for i in range(len(shapes))]
    s = op_fn(name)(*[sym.Variable(n) for n in names], **params)
    loc = {n: _rand(sh, "float64", i) for i, (n, sh) in enumerate(zip(names, shapes))}
    if name == "LRN":
        loc = {k: v + np.sign(v) * 0.5 for k, v in loc.items()}
    check_numeric_gradient(s, loc, numeric_eps=1e-5, rtol=1e-5)


@pytest.mark.parametrize("wanted", [("data",), ("w",), ("b",), ("w", "b"), ("data", "b")])
def test_deconvolution_partial_gradients(wanted):
    """Only the requested gradients are computed (each backward launch reads its own pointers);
    they equal the ones from a full backward."""
    p = {"kernel": (3, 3), "num_filter": 4, "num_group": 2, "stride": (2, 2), "pad": (1, 1),
         "adj": (1, 0), "no_bias": False}
    s = op_fn("Deconvolution")(sym.Variable("data"), sym.Variable("w"), sym.Variable("b"), **p)
    vals = {"data": _rand((2, 4, 3, 3), "float64"), "w": _rand((4, 2, 3, 3), "float64", 1),
            "b": _rand((4,), "float64", 2)}
    head = _rand((2, 4, 6, 5), "float64", 3)

    def grads(req: dict) -> dict:
        g = {k: nd.array(np.full(v.shape, 7.0)) for k, v in vals.items()}
        exe = s.bind(None, {k: nd.array(v) for k, v in vals.items()}, args_grad=g, grad_req=req)
        exe.forward(is_train=True)
        exe.backward([nd.array(head)])
        return {k: v.asnumpy() for k, v in g.items()}

    full = grads({k: "write" for k in vals})
    part = grads({k: ("write" if k in wanted else "null") for k in vals})
    for k in vals:
        if k in wanted:
            np.testing.assert_allclose(part[k], full[k], rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(part[k], 7.0)


# ---------------------------------------------------------------------------------------------
# Parameters and shapes


BAD = [
    ("Deconvolution", {"num_filter": 4}, "kernel"),
    ("Deconvolution", {"kernel": (3, 3)}, "num_filter"),
    ("Deconvolution", {"kernel": (3, 3, 3, 3), "num_filter": 4}, "4-D"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "stride": (1,)}, "stride"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "adj": (1, 1)}, "adj"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "adj": (2, 0)},
     "smaller than stride"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 6, "num_group": 4}, "divisible"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "target_shape": (8,)}, "target_shape"),
    ("Deconvolution", {"kernel": (3, 3, 3), "num_filter": 4, "dilate": (1, 2, 1)}, "3-D"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "layout": "NCW"}, "layout"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "pad": (-1, 0)}, "pad"),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "bogus": 1}, "bogus"),
    ("LRN", {}, "nsize"),
    ("LRN", {"nsize": 0}, "nsize"),
    ("LRN", {"nsize": 3, "beta": "x"}, "beta"),
    ("UpSampling", {"scale": 2}, "sample_type"),
    ("UpSampling", {"sample_type": "nearest"}, "scale"),
    ("UpSampling", {"scale": 0, "sample_type": "nearest"}, "scale"),
    ("UpSampling", {"scale": 2, "sample_type": "bicubic"}, "sample_type"),
    ("UpSampling", {"scale": 2, "sample_type": "nearest", "multi_input_mode": "max"},
     "multi_input_mode"),
    ("UpSampling", {"scale": 2, "sample_type": "bilinear"}, "num_filter"),
]


@pytest.mark.parametrize(("name", "params", "word"), BAD,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_parameters_raise_operator_param_error(name, params, word):
    with pytest.raises(OperatorParamError) as info:
        op_fn(name)(sym.Variable("x"), **params)
    assert name in str(info.value) and word in str(info.value)


def _mx_form(shape: Any) -> list[int]:
    return [] if shape is None else list(shape)


def _shape_symbol(fn: Any, case: dict, p: dict) -> Any:
    if case["op"] == "UpSampling" and p["sample_type"] == "nearest":
        return fn(*[sym.Variable(n) for n in case["given"]], name="node", **p)
    return fn(sym.Variable("data"), name="node", **p)


@pytest.mark.parametrize("case", SHAPES, ids=lambda c: f"{c['op']}-{sorted(c['params'].items())}"
                         f"-{sorted(c['given'].items())}")
def test_shape_inference_matches_mxnet(case):
    p = _params(case["params"])
    fn = op_fn(case["op"])
    given = {k: tuple(v) for k, v in case["given"].items() if v is not None}
    if "error" in case:
        # nnsym refuses parameter-only conditions (num_filter % num_group) when the symbol is
        # made; MXNet when it infers shapes
        with pytest.raises(NNSymError):
            _shape_symbol(fn, case, p).infer_shape_partial(**given)
        return
    s = _shape_symbol(fn, case, p)
    assert s.list_arguments() == case["arguments"]
    arg, out, _ = s.infer_shape_partial(**given)
    assert [_mx_form(a) for a in arg] == case["arg_shapes"]
    for got, want in zip(out, case["out_shapes"]):
        if want == [] and case["op"] == "LRN" and case["given"]["data"] is not None:
            # MXNet 1.9.1's LRN says nothing about a partially known shape; nnsym passes it on
            assert _mx_form(got) == case["given"]["data"]
        else:
            assert _mx_form(got) == want


def test_shape_inference_fully_known_through_infer_shape():
    s = op_fn("Deconvolution")(sym.Variable("data"), kernel=(4, 4), num_filter=8, num_group=2,
                               stride=(2, 2), target_shape=(11, 9), no_bias=False, name="dc")
    arg, out, aux = s.infer_shape(data=(3, 6, 5, 4))
    assert s.list_arguments() == ["data", "dc_weight", "dc_bias"]
    assert arg == [(3, 6, 5, 4), (6, 4, 4, 4), (8,)] and out == [(3, 8, 11, 9)] and aux == []
    assert op_fn("LRN")(sym.Variable("x"), nsize=5).infer_shape(x=(2, 3, 4))[1] == [(2, 3, 4)]
    up = op_fn("UpSampling")(sym.Variable("a"), sym.Variable("b"), scale=2,
                             sample_type="nearest")
    assert up.infer_shape(a=(2, 3, 4, 4), b=(2, 5, 2, 2))[1] == [(2, 8, 8, 8)]


def test_lrn_hides_its_norm_output():
    s = op_fn("LRN")(sym.Variable("data"), nsize=3, name="lrn0")
    assert s.list_outputs() == ["lrn0_output"]
    assert json.loads(s.tojson())["node_row_ptr"] == [0, 1, 3]


def test_upsampling_second_input_gets_bilinear_init_like_mxnet():
    up = op_fn("UpSampling")(sym.Variable("data"), scale=2, sample_type="bilinear",
                             num_filter=3, name="up")
    nodes = json.loads(up.tojson())["nodes"]
    assert nodes[1]["name"] == "up_weight"
    assert nodes[1]["attrs"]["__init__"] == '["bilinear", {}]'
    near = op_fn("UpSampling")(sym.Variable("a"), sym.Variable("b"), scale=2,
                               sample_type="nearest", name="up2")
    nodes = json.loads(near.tojson())["nodes"]
    assert nodes[1]["attrs"] == {"__init__": '["bilinear", {}]'}  # MXNet does this too
    assert nodes[2]["attrs"] == {"num_args": "2", "sample_type": "nearest", "scale": "2"}


def test_uneven_height_and_width_factors_are_refused():
    # MXNet 1.9.1 accepts this in shape inference and then fails when it runs
    up = op_fn("UpSampling")(sym.Variable("a"), sym.Variable("b"), scale=2,
                             sample_type="nearest")
    with pytest.raises(NNSymError, match="factor"):
        up.infer_shape(a=(2, 3, 4, 4), b=(2, 5, 2, 4))


# ---------------------------------------------------------------------------------------------
# Lowering: Deconvolution runs Convolution's templates


def _templates(op: Any, params: dict, ins: list, outs: list, reqs=None) -> list[str]:
    p, _ = op.parse_params(params)
    f32 = np.dtype("float32")
    call = KernelCall(p, tuple(ins), (f32,) * len(ins), tuple(outs), (f32,) * len(outs),
                      "write", reqs)
    return [ln.spec.template + (f":{a}" if (a := ln.spec.context().get("algo")) else "")
            for ln in op.kernels[()].lower(call).launches]


def test_deconvolution_lowers_to_convolution_templates():
    p = {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "no_bias": False}
    assert _templates(DECONV, p, [(2, 3, 4, 4), (3, 4, 3, 3), (4,)], [(2, 4, 9, 9)]) == [
        "conv/conv_backward.c.j2:per_image", "conv/deconv_bias.c.j2"]
    back = get_op("_backward_Deconvolution")
    ins = [(2, 4, 9, 9), (2, 3, 4, 4), (3, 4, 3, 3)]
    outs = [(2, 3, 4, 4), (3, 4, 3, 3), (4,)]
    # the data gradient is a Convolution forward (several images per GEMM for small outputs)
    assert _templates(back, p, ins, outs) == [
        "conv/conv_forward.c.j2:batched", "conv/conv_backward.c.j2:per_image",
        "conv/deconv_bias.c.j2"]
    assert _templates(back, p, ins, outs, ("null", "write", "null")) == [
        "conv/conv_backward.c.j2:per_image"]
    dw = {"kernel": (3, 3), "num_filter": 3, "num_group": 3}
    assert _templates(get_op("_backward_Deconvolution"), dw,
                      [(1, 3, 6, 6), (1, 3, 4, 4), (3, 1, 3, 3)],
                      [(1, 3, 4, 4), (3, 1, 3, 3)], ("write", "null")) == [
        "conv/conv_forward.c.j2:depthwise"]


def test_float16_deconvolution_has_no_kernel():
    with pytest.raises(NoKernelError, match="Deconvolution"):
        run_op(DECONV, {"kernel": (3,), "num_filter": 2},
               [_rand((1, 2, 4), "float16"), _rand((2, 2, 3), "float16")])
