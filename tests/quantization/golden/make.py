"""Prints the MXNet 1.9.1 values tests/quantization/test_quantize.py compares with (run in the
reference venv: ``~/mxref/bin/python tests/quantization/golden/make.py``). The test file holds
them as literals; this script is never imported by tests."""

import os

import numpy as np

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
import mxnet as mx

nd = mx.nd
X = nd.array([[-1.5, 0.3, 2.0], [0.7, -0.2, 1.1]])
QI = nd.array([[-2000000000, 5, 1000000, 2147483647]], dtype="int32")
Q4 = nd.array(np.array([[[[-100, 5], [60, -3]], [[127, -128], [0, 1]]]]), dtype="int8")
LO, HI = nd.array([-1.5]), nd.array([2.0])


def show(tag, outs):
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    print(tag, [(o.asnumpy().tolist(), o.dtype.__name__) for o in outs])


for ot in ("int8", "uint8"):
    show(f"quantize {ot}", nd.contrib.quantize(X, LO, HI, out_type=ot))
for kw in ({}, {"out_type": "uint8"}, {"min_calib_range": -1.0, "max_calib_range": 1.0},
           {"out_type": "uint8", "min_calib_range": -1.0, "max_calib_range": 1.0}):
    show(f"quantize_v2 {kw}", nd.contrib.quantize_v2(X, **kw))
xp = nd.array([[0.5, 0.3, 2.0]])
show("quantize_v2 auto", nd.contrib.quantize_v2(xp, out_type="auto"))
show("quantize_v2 auto calib", nd.contrib.quantize_v2(xp, out_type="auto", min_calib_range=0.0,
                                                      max_calib_range=2.0))
show("dequantize int8", nd.contrib.dequantize(nd.array([[-127, 5, 100]], dtype="int8"),
                                              nd.array([-2.0]), nd.array([1.0])))
show("dequantize uint8", nd.contrib.dequantize(nd.array([[0, 5, 255]], dtype="uint8"),
                                               nd.array([-2.0]), nd.array([1.0])))
show("requantize calib", nd.contrib.requantize(QI, nd.array([-10.0]), nd.array([10.0]),
                                               min_calib_range=-3.0, max_calib_range=2.0))
# The pip build's answer here has the wrong sign and an inverted range; nnsym follows the
# reference kernel (see docs/differences-from-mxnet.md).
show("requantize (pip build, not followed)",
     nd.contrib.requantize(QI, nd.array([-10.0]), nd.array([10.0])))
show("quantized_flatten", nd.contrib.quantized_flatten(Q4, nd.array([-2.0]), nd.array([1.0])))
show("quantized_act", nd.contrib.quantized_act(Q4, nd.array([-2.0]), nd.array([1.0]),
                                               act_type="relu"))
show("quantized_concat", nd.contrib.quantized_concat(
    Q4, Q4, nd.array([-2.0]), nd.array([1.0]), nd.array([-3.0]), nd.array([0.5]), num_args=2,
    dim=1))
