"""The quantization operators: values MXNet 1.9.1's pip build printed for the same calls
(golden/make.py, run in the reference venv), the reference-implementation case where that build
is wrong, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym as mx
from nnsym.errors import NNSymError, OperatorParamError
from nnsym.ops import REGISTRY

X = np.array([[-1.5, 0.3, 2.0], [0.7, -0.2, 1.1]], np.float32)


def _nd(a, dtype="float32"):
    return mx.nd.array(np.asarray(a), dtype=dtype)


def _np(outs):
    return [o.asnumpy() for o in outs]


@pytest.mark.parametrize(
    ("out_type", "want", "lo", "hi"),
    [
        ("int8", [[-95, 19, 127], [44, -13, 70]], -2.0, 2.0),
        # uint8: negatives clamp to 0, scale 255 / MaxAbs(range); the range passes through.
        ("uint8", [[0, 38, 255], [89, 0, 140]], -1.5, 2.0),
    ],
)
def test_quantize_matches_mxnet(out_type, want, lo, hi):
    q, omin, omax = _np(mx.nd.contrib.quantize(_nd(X), _nd([-1.5]), _nd([2.0]),
                                               out_type=out_type))
    assert q.dtype == np.dtype(out_type)
    np.testing.assert_array_equal(q, want)
    assert (omin.tolist(), omax.tolist()) == ([lo], [hi])


@pytest.mark.parametrize(
    ("params", "dtype", "want", "lo", "hi"),
    [
        ({}, "int8", [[-96, 19, 127], [45, -13, 70]], -2.0, 2.0),
        ({"out_type": "uint8"}, "uint8", [[0, 38, 255], [89, 0, 141]], -1.5, 2.0),
        ({"min_calib_range": -1.0, "max_calib_range": 1.0}, "int8",
         [[-128, 38, 127], [89, -26, 127]], -1.0, 1.0),
        ({"out_type": "uint8", "min_calib_range": -1.0, "max_calib_range": 1.0}, "uint8",
         [[0, 77, 255], [179, 0, 255]], -1.0, 1.0),
    ],
)
def test_quantize_v2_matches_mxnet(params, dtype, want, lo, hi):
    q, omin, omax = _np(mx.nd.contrib.quantize_v2(_nd(X), **params))
    assert q.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(q, want)
    assert (omin.tolist(), omax.tolist()) == ([lo], [hi])


def test_quantize_v2_auto_picks_uint8_only_for_a_nonnegative_calibrated_range():
    x = _nd([[0.5, 0.3, 2.0]])
    q = mx.nd.contrib.quantize_v2(x, out_type="auto")
    assert q[0].dtype == np.int8
    np.testing.assert_array_equal(q[0].asnumpy(), [[32, 19, 127]])
    q = mx.nd.contrib.quantize_v2(x, out_type="auto", min_calib_range=0.0, max_calib_range=2.0)
    assert q[0].dtype == np.uint8
    np.testing.assert_array_equal(q[0].asnumpy(), [[64, 38, 255]])


def test_dequantize_matches_mxnet():
    got = mx.nd.contrib.dequantize(_nd([[-127, 5, 100]], "int8"), _nd([-2.0]), _nd([1.0]))
    np.testing.assert_array_equal(got.asnumpy(), np.array(
        [[-1.992156982421875, 0.0784313753247261, 1.5686275959014893]], np.float32))
    got = mx.nd.contrib.dequantize(_nd([[0, 5, 255]], "uint8"), _nd([-2.0]), _nd([1.0]))
    np.testing.assert_array_equal(got.asnumpy(), np.array(
        [[0.0, 0.03913894295692444, 1.9960861206054688]], np.float32))


QI = [[-2000000000, 5, 1000000, 2147483647]]


def test_requantize_with_calibration_matches_mxnet():
    q, omin, omax = _np(mx.nd.contrib.requantize(
        _nd(QI, "int32"), _nd([-10.0]), _nd([10.0]), min_calib_range=-3.0, max_calib_range=2.0))
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q, [[-128, 0, 0, 127]])
    assert (omin.tolist(), omax.tolist()) == ([-3.0], [3.0])


def test_requantize_without_calibration_follows_the_reference_implementation():
    # MXNet 1.9.1's pip build prints [[118, 0, 0, -127]] with the range (10, -10) here (signs
    # flipped); its reference kernel scales by the data's own range, MaxAbs = 10.
    q, omin, omax = _np(mx.nd.contrib.requantize(_nd(QI, "int32"), _nd([-10.0]), _nd([10.0])))
    np.testing.assert_array_equal(q, [[-118, 0, 0, 127]])
    assert (omin.tolist(), omax.tolist()) == ([-10.0], [10.0])


def test_zero_range_gives_zeros():
    q = mx.nd.contrib.quantize(_nd(X), _nd([0.0]), _nd([0.0]), out_type="int8")[0]
    np.testing.assert_array_equal(q.asnumpy(), np.zeros((2, 3), np.int8))
    q = mx.nd.contrib.quantize_v2(_nd(np.zeros((2, 2))))
    assert q[0].asnumpy().tolist() == [[0, 0], [0, 0]]
    assert (q[1].asnumpy().tolist(), q[2].asnumpy().tolist()) == ([0.0], [0.0])


def test_round_trip_in_a_bound_graph():
    data = mx.sym.var("data")
    q = mx.sym.contrib.quantize_v2(data, min_calib_range=-2.0, max_calib_range=2.0)
    out = mx.sym.contrib.dequantize(q[0], q[1], q[2])
    exe = out.bind(mx.cpu(), {"data": _nd(X)})
    got = exe.forward()[0].asnumpy()
    np.testing.assert_allclose(got, X, atol=2.0 / 127.5)
    assert mx.sym.contrib.quantize(data).list_arguments()[0] == "data"
    assert len(mx.sym.contrib.quantize(data).list_outputs()) == 3


def test_bad_inputs_raise():
    with pytest.raises(NNSymError, match="float32"):
        mx.nd.contrib.quantize(_nd(X, "float64"), _nd([-1.0]), _nd([1.0]))
    with pytest.raises(NNSymError, match="int32"):
        mx.nd.contrib.requantize(_nd(QI, "int8"), _nd([-1.0]), _nd([1.0]))
    with pytest.raises(NNSymError, match="uint8"):
        mx.nd.contrib.requantize(_nd(QI, "int32"), _nd([-1.0]), _nd([1.0]), out_type="uint8")
    with pytest.raises(NNSymError, match="int8 or uint8"):
        mx.nd.contrib.dequantize(_nd(X), _nd([-1.0]), _nd([1.0]))
    with pytest.raises(OperatorParamError, match="quantize_v2"):
        mx.nd.contrib.quantize_v2(_nd(X), min_calib_range=-1.0)


@pytest.mark.parametrize("name", ["_contrib_quantize", "_contrib_quantize_v2",
                                  "_contrib_dequantize", "_contrib_requantize",
                                  "_contrib_quantized_flatten", "_contrib_quantized_act",
                                  "_contrib_quantized_concat"])
def test_not_differentiable(name):
    assert not REGISTRY[name].differentiable


def test_backward_through_quantization_gives_zero_gradients_as_mxnet():
    d = mx.sym.var("data")
    q = mx.sym.contrib.quantize_v2(d, min_calib_range=-1.0, max_calib_range=1.0)
    out = mx.sym.contrib.dequantize(q[0], q[1], q[2])
    exe = out.simple_bind(mx.cpu(), data=(2, 3))
    exe.forward(is_train=True, data=mx.nd.ones((2, 3)))
    exe.backward(mx.nd.ones((2, 3)))
    np.testing.assert_array_equal(exe.grad_dict["data"].asnumpy(), np.zeros((2, 3)))
    assert REGISTRY["_contrib_quantized_act"].grad is None  # MXNet registers no FGradient


Q4 = np.array([[[[-100, 5], [60, -3]], [[127, -128], [0, 1]]]], np.int8)


def test_quantized_flatten_and_relu_match_mxnet():
    lo, hi = _nd([-2.0]), _nd([1.0])
    q, omin, omax = _np(mx.nd.contrib.quantized_flatten(_nd(Q4, "int8"), lo, hi))
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q, [[-100, 5, 60, -3, 127, -128, 0, 1]])
    assert (omin.tolist(), omax.tolist()) == ([-2.0], [1.0])
    q, omin, omax = _np(mx.nd.contrib.quantized_act(_nd(Q4, "int8"), lo, hi, act_type="relu"))
    np.testing.assert_array_equal(q, [[[[0, 5], [60, 0]], [[127, 0], [0, 1]]]])
    assert (omin.tolist(), omax.tolist()) == ([-2.0], [1.0])
    assert mx.sym.contrib.quantized_act(mx.sym.var("data"), act_type="relu").list_arguments()[0] \
        == "data"


def test_quantized_act_refuses_what_mxnet_refuses():
    with pytest.raises(OperatorParamError, match="relu"):
        mx.nd.contrib.quantized_act(_nd(Q4, "int8"), _nd([-1.0]), _nd([1.0]), act_type="tanh")
    with pytest.raises(NNSymError, match="int8"):
        mx.nd.contrib.quantized_act(_nd(Q4, "uint8"), _nd([-1.0]), _nd([1.0]), act_type="relu")


def test_quantized_concat_matches_mxnet():
    q4 = _nd(Q4, "int8")
    q, omin, omax = _np(mx.nd.contrib.quantized_concat(
        q4, q4, _nd([-2.0]), _nd([1.0]), _nd([-3.0]), _nd([0.5]), num_args=2, dim=1))
    np.testing.assert_array_equal(
        q, [[[[-67, 3], [40, -2]], [[85, -85], [0, 1]], [[-100, 5], [60, -3]],
             [[127, -128], [0, 1]]]])
    assert (omin.tolist(), omax.tolist()) == ([-3.0], [1.0])
    s = mx.sym.contrib.quantized_concat(num_args=2, name="qc")
    assert s.list_arguments() == ["qc_arg0", "qc_arg1", "qc_arg0_min", "qc_arg0_max",
                                  "qc_arg1_min", "qc_arg1_max"]
    with pytest.raises(NNSymError, match="except along dim"):
        mx.nd.contrib.quantized_concat(q4, _nd(np.zeros((2, 2, 2, 2)), "int8"), _nd([-1.0]),
                                       _nd([1.0]), _nd([-1.0]), _nd([1.0]), num_args=2)
