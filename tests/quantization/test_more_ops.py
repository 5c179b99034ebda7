"""quantize_asym, quantized_elemwise_add/_mul and calibrate_entropy against the outputs MXNet
1.9.1's pip build gave for the same inputs (golden/ops.json, made by golden/make_ops.py), bit
for bit; then the errors and the gradient rules."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym.errors import DTypeError, NNSymError, ShapeError
from nnsym.ops import REGISTRY

CASES = json.loads((Path(__file__).parent / "golden" / "ops.json").read_text())["cases"]


def _arr(e: dict) -> np.ndarray:
    return np.array(e["data"], dtype=e["dtype"]).reshape(e["shape"])


def _nd(a, dtype="float32"):
    return mx.nd.array(np.asarray(a), dtype=dtype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_matches_mxnet(case):
    ins = [_arr(e) for e in case["inputs"]]
    outs = getattr(mx.nd.contrib, case["op"])(*[_nd(a, a.dtype) for a in ins], **case["params"])
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    assert len(outs) == len(case["outputs"])
    for got, want in zip(outs, case["outputs"], strict=True):
        w = _arr(want)
        assert got.dtype == w.dtype
        np.testing.assert_array_equal(got.asnumpy(), w)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_reference_matches_mxnet(case):
    op = REGISTRY[f"_contrib_{case['op']}"]
    want = [_arr(e) for e in case["outputs"]]
    got = op.reference(op.params(**case["params"]), *[_arr(e) for e in case["inputs"]])
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_quantize_asym_in_a_graph_and_any_rank():
    d = mx.sym.var("data")
    s = mx.sym.contrib.quantize_asym(d, name="qa")
    assert s.list_outputs() == ["qa_output", "qa_scale", "qa_shift"]
    _, outs, _ = s.infer_shape(data=(4, 5))
    assert outs == [(4, 5), (1,), (1,)]
    x = np.array([[-1.0, 0.0, 3.0]], np.float32)  # 2-D: MXNet's pip build crashes here
    q, scale, shift = (o.asnumpy() for o in s.bind(mx.cpu(), {"data": _nd(x)}).forward())
    # scale 255 / 4, shift 255 - 3 * scale
    np.testing.assert_array_equal(q, [[0, 64, 255]])
    assert (scale.tolist(), shift.tolist()) == ([63.75], [63.75])


def test_a_zero_range_gives_zeros():
    q, scale, shift = mx.nd.contrib.quantize_asym(_nd(np.full((1, 2, 3), 2.5)))
    assert q.asnumpy().tolist() == [[[0, 0, 0], [0, 0, 0]]]
    assert scale.asnumpy()[0] == np.inf and shift.asnumpy()[0] == -np.inf


def test_mul_float_output_has_one_output():
    s = mx.sym.contrib.quantized_elemwise_mul(name="m", enable_float_output=True)
    assert s.list_outputs() == ["m_output"]
    assert s.list_arguments() == ["m_lhs", "m_rhs", "m_lhs_min", "m_lhs_max", "m_rhs_min",
                                  "m_rhs_max"]
    assert len(mx.sym.contrib.quantized_elemwise_mul().list_outputs()) == 3


def test_bad_inputs_raise():
    r = [_nd([-1.0]), _nd([1.0]), _nd([-1.0]), _nd([1.0])]
    a8, u8 = _nd([[1, 2]], "int8"), _nd([[1, 2]], "uint8")
    with pytest.raises(DTypeError, match="float32"):
        mx.nd.contrib.quantize_asym(_nd([[1.0]], "float64"))
    with pytest.raises(DTypeError, match="one dtype"):
        mx.nd.contrib.quantized_elemwise_add(a8, u8, *r)
    with pytest.raises(DTypeError, match="int8"):
        mx.nd.contrib.quantized_elemwise_mul(u8, u8, *r)
    with pytest.raises(ShapeError, match="broadcast"):
        mx.nd.contrib.quantized_elemwise_add(a8, _nd([[[1, 2]]], "int8"), *r)
    with pytest.raises(ShapeError):
        mx.nd.contrib.quantized_elemwise_mul(a8, _nd([[1, 2, 3]], "int8"), *r)
    h = _nd(np.ones(21))
    with pytest.raises(ShapeError, match="22"):
        mx.nd.contrib.calibrate_entropy(h, _nd(np.ones(21)), num_quantized_bins=5)
    with pytest.raises(ShapeError, match="odd"):
        mx.nd.contrib.calibrate_entropy(_nd(np.ones(20)), _nd(np.ones(21)), num_quantized_bins=5)
    with pytest.raises(ShapeError, match="fewer"):
        mx.nd.contrib.calibrate_entropy(h, _nd(np.ones(22)), num_quantized_bins=255)
    with pytest.raises(NNSymError, match="num_quantized_bins"):
        mx.nd.contrib.calibrate_entropy(h, _nd(np.ones(22)), num_quantized_bins=0)


def test_quantized_fully_connected_uses_fully_connected_shapes():
    s = mx.sym.contrib.quantized_fully_connected(num_hidden=4, no_bias=True, name="f")
    assert s.list_arguments() == ["f_data", "f_weight", "f_min_data", "f_max_data",
                                  "f_min_weight", "f_max_weight"]
    args, outs, _ = s.infer_shape(f_data=(2, 3, 5))
    assert args[:2] == [(2, 3, 5), (4, 15)] and outs == [(2, 4), (1,), (1,)]
    s = mx.sym.contrib.quantized_fully_connected(num_hidden=4, flatten=False, name="g")
    args, outs, _ = s.infer_shape(g_data=(2, 3, 5))
    assert args[:3] == [(2, 3, 5), (4, 5), (4,)] and outs[0] == (2, 3, 4)
    r = [_nd([-1.0]), _nd([1.0])] * 2
    with pytest.raises(DTypeError, match="weight"):
        mx.nd.contrib.quantized_fully_connected(_nd([[1, 2]], "int8"), _nd([[1, 2]], "uint8"), *r,
                                                num_hidden=1, no_bias=True)
    with pytest.raises(DTypeError, match="int8 or uint8"):
        mx.nd.contrib.quantized_fully_connected(_nd([[1, 2]]), _nd([[1, 2]], "int8"), *r,
                                                num_hidden=1, no_bias=True)


def test_quantized_pooling_refuses_what_mxnet_refuses():
    x, r = _nd(np.zeros((1, 1, 4, 4)), "int8"), [_nd([-1.0]), _nd([1.0])]
    for kw, msg in (({"pool_type": "sum"}, "max and avg"), ({"layout": "NHWC"}, "NCHW"),
                    ({"pool_type": "lp", "p_value": 2}, "max and avg")):
        with pytest.raises(NNSymError, match=msg):
            mx.nd.contrib.quantized_pooling(x, *r, kernel=(2, 2), **kw)
    with pytest.raises(ShapeError, match="4-D or 5-D"):
        mx.nd.contrib.quantized_pooling(_nd(np.zeros((1, 1, 4)), "int8"), *r, kernel=(2,))
    with pytest.raises(DTypeError, match="int8 or uint8"):
        mx.nd.contrib.quantized_pooling(_nd(np.zeros((1, 1, 4, 4))), *r, kernel=(2, 2))
    s = mx.sym.contrib.quantized_pooling(kernel=(2, 2), stride=(2, 2), name="p")
    assert s.list_arguments() == ["p_data", "p_min_data", "p_max_data"]
    assert s.infer_shape(p_data=(2, 3, 6, 7))[1] == [(2, 3, 3, 3), (1,), (1,)]


def test_quantized_conv_shapes_and_refusals():
    s = mx.sym.contrib.quantized_conv(kernel=(3, 3), num_filter=4, pad=(1, 1), name="c")
    assert s.list_arguments()[:3] == ["c_data", "c_weight", "c_bias"]
    args, outs, _ = s.infer_shape(c_data=(2, 3, 5, 6))
    assert args[:3] == [(2, 3, 5, 6), (4, 3, 3, 3), (4,)] and outs == [(2, 4, 5, 6), (1,), (1,)]
    x, w, r = _nd(np.zeros((1, 2, 4, 4)), "uint8"), _nd(np.zeros((2, 1, 3, 3)), "int8"), \
        [_nd([-1.0]), _nd([1.0])] * 2
    with pytest.raises(ShapeError, match="num_group"):
        mx.nd.contrib.quantized_conv(x, w, *r, kernel=(3, 3), num_filter=2, num_group=2,
                                     no_bias=True)
    with pytest.raises(ShapeError, match="2-D"):
        mx.nd.contrib.quantized_conv(_nd(np.zeros((1, 2, 4)), "uint8"),
                                     _nd(np.zeros((2, 2, 3)), "int8"), *r, kernel=(3,),
                                     num_filter=2, no_bias=True)
    with pytest.raises(DTypeError, match="int8 or uint8"):
        mx.nd.contrib.quantized_conv(_nd(np.zeros((1, 1, 4, 4))), w, *r, kernel=(3, 3),
                                     num_filter=2, no_bias=True)


def test_quantized_embedding_shapes_and_refusals():
    s = mx.sym.contrib.quantized_embedding(input_dim=6, output_dim=4, name="e")
    assert s.list_arguments() == ["e_data", "e_weight", "e_min_weight", "e_max_weight"]
    args, outs, _ = s.infer_shape(e_data=(2, 3))
    assert args[1] == (6, 4) and outs == [(2, 3, 4), (1,), (1,)]
    with pytest.raises(DTypeError, match="int8"):
        mx.nd.contrib.quantized_embedding(_nd([0.0]), _nd(np.zeros((6, 4)), "uint8"),
                                          _nd([-1.0]), _nd([1.0]), input_dim=6, output_dim=4)


def test_quantized_batch_norm_names_and_refusals():
    s = mx.sym.contrib.quantized_batch_norm(name="b", min_calib_range=-1.0, max_calib_range=1.0)
    assert s.list_arguments() == ["b_data", "b_gamma", "b_beta", "b_min_data", "b_max_data"]
    assert s.list_auxiliary_states() == ["b_moving_mean", "b_moving_var"]
    args, outs, aux = s.infer_shape(b_data=(2, 3, 4, 4))
    assert args[1] == (3,) and aux == [(3,), (3,)] and outs == [(2, 3, 4, 4), (1,), (1,)]
    v = [_nd(np.ones(3))] * 4 + [_nd([-1.0]), _nd([1.0])]
    with pytest.raises(NNSymError, match="min_calib_range"):
        mx.nd.contrib.quantized_batch_norm(_nd(np.zeros((1, 3, 2, 2)), "int8"), *v)
    with pytest.raises(DTypeError, match="int8 or uint8"):
        mx.nd.contrib.quantized_batch_norm(_nd(np.zeros((1, 3, 2, 2))), *v,
                                           min_calib_range=-1.0, max_calib_range=1.0)


def test_a_failed_mxnet_check_gives_nan():
    # A bin smoothed to a negative value: MXNet's CHECK aborts the process (it throws inside an
    # OpenMP region); nnsym's kernels cannot raise, so both outputs are NaN.
    h = np.zeros(9, np.float32)
    h[4], h[3] = 5.0, 1e-7
    t, d = mx.nd.contrib.calibrate_entropy(_nd(h), _nd(np.linspace(-1, 1, 10)),
                                           num_quantized_bins=3)
    assert np.isnan(t.asnumpy()[0]) and np.isnan(d.asnumpy()[0])
    op = REGISTRY["_contrib_calibrate_entropy"]
    ref = op.reference(op.params(num_quantized_bins=3), h, np.linspace(-1, 1, 10))
    assert np.isnan(ref[0][0]) and np.isnan(ref[1][0])


@pytest.mark.parametrize(("name", "zero_grad"), [
    ("_contrib_quantize_asym", True), ("_contrib_quantized_elemwise_mul", True),
    ("_contrib_quantized_fully_connected", True), ("_contrib_quantized_pooling", True),
    ("_contrib_quantized_conv", True), ("_contrib_quantized_embedding", True),
    ("_contrib_quantized_batch_norm", True),
    ("_contrib_quantized_elemwise_add", False), ("_contrib_calibrate_entropy", False)])
def test_not_differentiable_as_in_mxnet(name, zero_grad):
    """MXNet registers zero gradients (MakeZeroGradNodes) for quantize_asym,
    quantized_elemwise_mul and quantized_fully_connected, and no FGradient for the others."""
    op = REGISTRY[name]
    assert not op.differentiable
    assert (op.grad is not None) == zero_grad
