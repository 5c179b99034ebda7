"""Writes the initializer fixtures with MXNet 1.9.1: run ``~/mxref/bin/python make.py`` here.

Only deterministic initializers are recorded (random draws cannot match across libraries):
``fixtures.npz`` holds the filled arrays, ``cases.json`` the dumps() strings, variable
attributes and the errors MXNet raised, ``loadme.params`` a small file for ``Load``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import mxnet as mx
import numpy as np

HERE = Path(__file__).resolve().parent
arrays: dict[str, np.ndarray] = {}
cases: dict[str, object] = {"meta": {"mxnet": mx.__version__, "numpy": np.__version__}}
errors: dict[str, str] = {}


def fill(key: str, init, desc, shape, dtype="float32", legacy=False):
    """Run ``init(desc, arr)`` on a zero array of ``shape``; record the array or the error."""
    arr = mx.nd.full(shape, -9.0, dtype=dtype)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            init(desc, arr)
    except Exception as e:  # the fixture records whatever MXNet raised
        errors[key] = f"{type(e).__name__}: {e}"
        return
    arrays[key] = arr.asnumpy()


class Tagged(mx.init.Initializer):
    """Fills a weight with ``arange(size) + 1000 * len(name)`` (shows which piece went where)."""

    def _init_weight(self, name, arr):
        arr[:] = np.arange(arr.size).reshape(arr.shape) + 1000 * len(name)


D = mx.init.InitDesc
# deterministic initializers on weights
fill("constant_scalar", mx.init.Constant(0.5), D("fc_weight"), (3, 4))
fill("constant_array", mx.init.Constant(mx.nd.array([[1, 2, 3, 4]])), D("fc_weight"), (3, 4))
fill("zero", mx.init.Zero(), D("fc_weight"), (2, 3))
fill("one", mx.init.One(), D("fc_weight"), (2, 3))
fill("one_f64", mx.init.One(), D("fc_weight"), (2, 3), dtype="float64")
for shape in [(2, 3, 4, 4), (1, 1, 3, 5), (2, 1, 5, 6), (1, 2, 1, 7), (1, 1, 2, 3, 4)]:
    fill("bilinear_" + "x".join(map(str, shape)), mx.init.Bilinear(), D("up_weight"), shape)
fill("lstmbias_default", mx.init.LSTMBias(), D("lstm_i2h_weight"), (8,))
fill("lstmbias_2.5", mx.init.LSTMBias(forget_bias=2.5), D("lstm_i2h_weight"), (12,))
fill("lstmbias_odd", mx.init.LSTMBias(forget_bias=3.0), D("lstm_i2h_weight"), (10,))

# name dispatch with an InitDesc: Constant(7) marks the weight rule
NAMES = ["fc_weight", "fc_bias", "bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var",
         "q_min", "q_max", "fc_weight_quantize", "fc_bias_quantize", "upsampling0_weight",
         "stn_loc_weight", "stn_loc_bias", "data", "bn_moving_inv_var", "x_moving_avg"]
cases["dispatch_names"] = NAMES
for name in NAMES:
    shape = (6,) if name.startswith("stn_loc") and name.endswith("bias") else (2, 3, 2, 2)
    if name != "fc_weight_quantize":  # that one draws a random integer
        fill(f"desc:{name}", mx.init.Constant(7.0), D(name), shape)
    fill(f"legacy:{name}", mx.init.Constant(7.0), name, shape, legacy=True)

# the __init__ attribute wins over the name
ATTRS = {
    "w_constant": '["constant", {"value": 2.0}]',
    "b_one": '["one", {}]',
    "g_capital": '["Constant", {"value": 0.25}]',
    "mm_zero": '["zero", {}]',
    "up_bilinear": '["bilinear", {}]',
    "x_lstmbias": '["lstmbias", {"forget_bias": 3.0}]',
    "z_zeros_alias": '["zeros", {}]',
}
cases["attr_inits"] = ATTRS
for name, init in ATTRS.items():
    shape = (1, 1, 3, 4) if "bilinear" in init else (8,)
    fill(f"attr:{name}", mx.init.Uniform(), D(name, attrs={"__init__": init}), shape)

# Load: a dict (arg:/aux: prefixes dropped), a default, and a .params file
params = {"arg:fc_weight": mx.nd.array(np.arange(6).reshape(2, 3)),
          "aux:bn_moving_var": mx.nd.array([4.0, 5.0]), "plain": mx.nd.array([1.0, 2.0])}
mx.nd.save(str(HERE / "loadme.params"), params)
ld = mx.init.Load(params, default_init=mx.init.Constant(3.0))
fill("load_fc_weight", ld, D("fc_weight"), (2, 3))
fill("load_bn_moving_var", ld, D("bn_moving_var"), (2,))
fill("load_plain", ld, D("plain"), (2,))
fill("load_default_weight", ld, D("other_weight"), (2, 2))
fill("load_default_bias", ld, D("other_bias"), (2,))
fill("load_shape_mismatch", ld, D("fc_weight"), (3, 2))
fill("load_missing_no_default", mx.init.Load(params), D("other_weight"), (2,))
fill("loadfile_fc_weight", mx.init.Load(str(HERE / "loadme.params")), D("fc_weight"), (2, 3))

# Mixed: the first regex that matches (re.match, so anchored at the start)
mixed = mx.init.Mixed(["bias", ".*gamma", ".*"],
                      [mx.init.Zero(), mx.init.Constant(2.0), mx.init.Constant(5.0)])
for name in ["bias_x", "fc_bias", "bn_gamma", "fc_weight"]:
    fill(f"mixed:{name}", mixed, D(name), (3,))
fill("mixed:nomatch", mx.init.Mixed(["bias"], [mx.init.Zero()]), D("fc_weight"), (3,))

# FusedRNN: every unpacked piece tagged by its name's length
for mode, layers, bidir, ni, h in [("lstm", 2, True, 3, 2), ("gru", 1, False, 4, 3),
                                   ("rnn_tanh", 2, False, 2, 2)]:
    m = {"lstm": 4, "gru": 3}.get(mode, 1)
    b = 2 if bidir else 1
    total = (ni + h + 2) * h * m * b + (layers - 1) * m * h * (h + b * h + 2) * b
    key = f"fusedrnn_{mode}_{layers}_{int(bidir)}_{ni}_{h}"
    fill(key, mx.init.FusedRNN(Tagged(), h, layers, mode, bidir, forget_bias=1.5),
         D("rnn_weight"), (total,))
    fill(key + "_global", Tagged(),  # no init of its own: the global one (Tagged) is used
         D("rnn_parameters", attrs={"__init__": mx.init.FusedRNN(
             None, h, layers, mode, bidir).dumps()}), (total,))

# a small net initialized as Module.init_params does: InitDesc(name, the variable's attrs)
data = mx.sym.Variable("data")
net = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, name="c1")
net = mx.sym.BatchNorm(net, name="bn")
net = mx.sym.LeakyReLU(net, act_type="prelu", name="pr")
net = mx.sym.UpSampling(net, scale=2, sample_type="bilinear", num_filter=4, name="up")
arg_shapes, _, aux_shapes = net.infer_shape(data=(1, 3, 8, 8))
attrs = net.attr_dict()
shapes = dict(zip(net.list_arguments() + net.list_auxiliary_states(), arg_shapes + aux_shapes))
cases["net"] = {"attrs": attrs, "shapes": {k: list(v) for k, v in shapes.items()}}
for name, shape in shapes.items():
    if name not in ("data", "c1_weight"):  # c1_weight is a random (Xavier) draw
        fill(f"net:{name}", mx.init.Xavier(), D(name, attrs.get(name, {})), shape)

# dumps() strings
cases["dumps"] = {
    "Zero()": mx.init.Zero().dumps(),
    "One()": mx.init.One().dumps(),
    "Constant(0.5)": mx.init.Constant(0.5).dumps(),
    "Constant(array)": mx.init.Constant(mx.nd.array([1, 2])).dumps(),
    "Uniform()": mx.init.Uniform().dumps(),
    "Uniform(0.1)": mx.init.Uniform(0.1).dumps(),
    "Normal()": mx.init.Normal().dumps(),
    "Normal(0.5)": mx.init.Normal(0.5).dumps(),
    "Xavier()": mx.init.Xavier().dumps(),
    "Xavier(factor_type='in', magnitude=2.34)": mx.init.Xavier(
        factor_type="in", magnitude=2.34).dumps(),
    "Xavier(rnd_type='gaussian', factor_type='out', magnitude=2)": mx.init.Xavier(
        rnd_type="gaussian", factor_type="out", magnitude=2).dumps(),
    "MSRAPrelu()": mx.init.MSRAPrelu().dumps(),
    "MSRAPrelu('in', 0.1)": mx.init.MSRAPrelu("in", 0.1).dumps(),
    "Orthogonal()": mx.init.Orthogonal().dumps(),
    "Orthogonal(2.0, 'normal')": mx.init.Orthogonal(2.0, "normal").dumps(),
    "Bilinear()": mx.init.Bilinear().dumps(),
    "LSTMBias()": mx.init.LSTMBias().dumps(),
    "LSTMBias(2.5)": mx.init.LSTMBias(2.5).dumps(),
    "FusedRNN(Xavier(), 4, 2, 'lstm', True, 2.0)": mx.init.FusedRNN(
        mx.init.Xavier(), 4, 2, "lstm", True, 2.0).dumps(),
    "FusedRNN(None, 3, 1, 'gru')": mx.init.FusedRNN(None, 3, 1, "gru").dumps(),
}
cases["variable_attrs"] = {
    "Xavier(magnitude=2)": mx.sym.Variable("w", init=mx.init.Xavier(magnitude=2)).list_attr(),
    "MSRAPrelu()": mx.sym.Variable("w", init=mx.init.MSRAPrelu()).list_attr(),
    "Constant(0.5)": mx.sym.Variable("w", init=mx.init.Constant(0.5)).list_attr(),
    "Orthogonal()": mx.sym.Variable("w", init=mx.init.Orthogonal()).list_attr(),
}
reg = mx.registry._REGISTRY[mx.init.Initializer]
cases["registered"] = {k: v.__name__ for k, v in sorted(reg.items())}
cases["created"] = {s: type(mx.init.create(s)).__name__ for s in
                    ["zeros", "ones", "Xavier", "msraprelu", '["normal", {"sigma": 0.5}]']}

# bad arguments and too few dimensions
fill("xavier_1d", mx.init.Xavier(), D("fc_weight"), (5,))
fill("bilinear_3d", mx.init.Bilinear(), D("up_weight"), (2, 3, 4))
fill("unknown_name", mx.init.Uniform(), D("data"), (2,))
cases["errors"] = errors

np.savez_compressed(HERE / "fixtures.npz", **arrays)
(HERE / "cases.json").write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")
print(f"{len(arrays)} arrays, {len(errors)} errors")
