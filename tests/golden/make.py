#!/usr/bin/env python
"""Regenerate the MXNet-1.9.1 golden fixtures in this folder.

Run with the *reference* interpreter (a venv holding mxnet==1.9.1), never
with the project interpreter; the test-suite only reads the JSON this writes:

    MXNET_SUBGRAPH_BACKEND=NONE ~/mxref/bin/python tests/golden/make.py [--out DIR]

See README.md beside this file for what each output holds.
The script is deterministic: running it twice gives byte-identical files.
"""
import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import warnings

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")

import numpy as np  # noqa: E402
import mxnet as mx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES_EXTRA = ["float16", "float64", "int32"]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def jsonable(v):
    """Python param value -> JSON value (tuples become lists)."""
    if isinstance(v, (tuple, list)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, np.generic):
        return v.item()
    return v


def shp(s):
    return None if s is None else [int(d) for d in s]


def shplist(lst):
    return None if lst is None else [shp(s) for s in lst]


def dt(t):
    return None if t is None else np.dtype(t).name


def dtlist(lst):
    return None if lst is None else [dt(t) for t in lst]


_TS = re.compile(r"\[\d\d:\d\d:\d\d\] ")
_SRC = re.compile(r"(\.\./)*[\w./-]+\.(h|cc|cu|cuh|hpp|cpp):\d+: ")


def errline(e):
    """First meaningful line of an exception message, made deterministic
    (drops the '[hh:mm:ss] src/file.cc:123: ' prefix MXNet puts there)."""
    msg = str(e).strip()
    lines = [l for l in msg.splitlines() if l.strip()]
    line = lines[0] if lines else ""
    # MXNet sometimes starts with a stack-trace header; prefer the real message.
    if line.startswith("Traceback") or line.endswith("Traceback (most recent call last):"):
        for l in reversed(lines):
            if "Error" in l or "Check failed" in l:
                line = l.strip()
                break
    line = _TS.sub("", line)
    line = _SRC.sub("", line)
    return "%s: %s" % (type(e).__name__, line) if not line.startswith(type(e).__name__) else line


@contextlib.contextmanager
def quiet():
    """Silence MXNet's python-side prints/warnings during infer_* calls."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(io.StringIO()):
            yield


def shape_triple(sym, shapes, partial=False):
    with quiet():
        if partial:
            a, o, x = sym.infer_shape_partial(**shapes)
        else:
            a, o, x = sym.infer_shape(**shapes)
    return shplist(a), shplist(o), shplist(x)


def type_triple(sym, types, partial=False):
    with quiet():
        if partial:
            a, o, x = sym.infer_type_partial(**types)
        else:
            a, o, x = sym.infer_type(**types)
    return dtlist(a), dtlist(o), dtlist(x)


def _fmt(obj, ind=0):
    """JSON with one-space indentation, but flat lists (shapes, name lists)
    kept on one line so the files stay small and diff-friendly."""
    pad, pad1 = " " * ind, " " * (ind + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = ["%s%s: %s" % (pad1, json.dumps(k), _fmt(v, ind + 1)) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if all(not isinstance(x, (list, tuple, dict)) for x in obj) or \
                all(isinstance(x, (list, tuple)) and
                    all(not isinstance(y, (list, tuple, dict)) for y in x) for x in obj):
            return json.dumps(obj)
        return "[\n" + ",\n".join(pad1 + _fmt(x, ind + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj)


def dump(path, obj):
    with open(path, "w") as f:
        f.write(_fmt(obj))
        f.write("\n")


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


# --------------------------------------------------------------------------
# (a)+(b) network symbols
# --------------------------------------------------------------------------
def net_mlp():
    data = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(data, name="fc1", num_hidden=128)
    x = mx.sym.Activation(x, name="relu1", act_type="relu")
    x = mx.sym.FullyConnected(x, name="fc2", num_hidden=10)
    return mx.sym.SoftmaxOutput(x, name="softmax")


def net_convbn():
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, name="conv1", kernel=(3, 3), num_filter=8, pad=(1, 1))
    x = mx.sym.BatchNorm(x, name="bn1", fix_gamma=False)
    x = mx.sym.Activation(x, name="relu1", act_type="relu")
    x = mx.sym.Pooling(x, name="pool1", kernel=(2, 2), stride=(2, 2), pool_type="max")
    x = mx.sym.Convolution(x, name="conv2", kernel=(3, 3), num_filter=16, stride=(2, 2), no_bias=True)
    x = mx.sym.BatchNorm(x, name="bn2")
    x = mx.sym.Activation(x, name="relu2", act_type="relu")
    x = mx.sym.Pooling(x, name="pool2", global_pool=True, pool_type="avg", kernel=(1, 1))
    x = mx.sym.Flatten(x, name="flatten")
    x = mx.sym.FullyConnected(x, name="fc", num_hidden=10)
    return mx.sym.SoftmaxOutput(x, name="softmax")


def net_gluon(name):
    """Export a model-zoo network and return its symbol JSON text."""
    from mxnet.gluon.model_zoo import vision
    mx.random.seed(0)
    np.random.seed(0)
    with mx.name.NameManager():  # fresh 'resnetv10_' prefix for every net
        net = vision.get_model(name, pretrained=False)
        net.initialize(mx.init.Xavier())
        net.hybridize()
        net(mx.nd.zeros((1, 3, 224, 224)))
        tmp = tempfile.mkdtemp()
        try:
            prefix = os.path.join(tmp, name)
            net.export(prefix)
            with open(prefix + "-symbol.json") as f:
                return f.read()
        finally:
            shutil.rmtree(tmp)


NETS = [
    ("mlp", {"data": (4, 784)}),
    ("convbn", {"data": (2, 3, 32, 32)}),
    ("resnet18_v1", {"data": (1, 3, 224, 224)}),
    ("resnet50_v1", {"data": (1, 3, 224, 224)}),
]


def make_nets(out):
    for name, shapes in NETS:
        if name == "mlp":
            text = net_mlp().tojson()
        elif name == "convbn":
            text = net_convbn().tojson()
        else:
            text = net_gluon(name)
        write_text(os.path.join(out, name + "-symbol.json"), text)
        sym = mx.sym.load_json(text)
        rec = {
            "name": name,
            "mxnet_version": mx.__version__,
            "symbol_file": name + "-symbol.json",
            "source": ("mxnet.gluon.model_zoo.vision.get_model(%r, pretrained=False)"
                       " -> initialize -> hybridize -> forward(1,3,224,224) -> export" % name)
            if name.startswith("resnet") else "mx.sym (see make.py net_%s)" % name,
            "input_shapes": {k: list(v) for k, v in shapes.items()},
            "list_arguments": sym.list_arguments(),
            "list_outputs": sym.list_outputs(),
            "list_auxiliary_states": sym.list_auxiliary_states(),
            "list_inputs": sym.list_inputs(),
        }
        a, o, x = shape_triple(sym, shapes)
        rec["infer_shape"] = {"arg_shapes": a, "out_shapes": o, "aux_shapes": x}
        a, o, x = shape_triple(sym, {}, partial=True)
        rec["infer_shape_partial_noinput"] = {"arg_shapes": a, "out_shapes": o, "aux_shapes": x}
        for d in ["float32", "float16"]:
            try:
                a, o, x = type_triple(sym, {"data": d})
                rec["infer_type_" + d] = {"arg_types": a, "out_types": o, "aux_types": x}
            except Exception as e:  # pragma: no cover - recorded
                rec["infer_type_" + d] = {"error": errline(e)}
        internals = sym.get_internals()
        rec["internals"] = {
            "list_outputs": internals.list_outputs(),
            "out_shapes": shape_triple(internals, shapes)[1],
            "out_types_float32": type_triple(internals, {"data": "float32"})[1],
        }
        dump(os.path.join(out, name + "-infer.json"), rec)
        print("wrote %s (%d nodes)" % (name, len(json.loads(text)["nodes"])))


# --------------------------------------------------------------------------
# (c) per-operator cases
# --------------------------------------------------------------------------
CASES = []


def C(op, inputs, params=None, note=None):
    """inputs: list of (var_name, shape or None).  None = variable created but
    no shape given to infer_shape.  Variables are passed positionally."""
    CASES.append({"op": op, "params": params or {}, "inputs": inputs, "note": note})


def build_cases():
    S = (2, 3)
    S4 = (2, 3, 4, 5)
    # ---- unary / activation
    for act in ["relu", "sigmoid", "tanh", "softrelu", "softsign"]:
        C("Activation", [("data", S)], {"act_type": act})
    C("Activation", [("data", S4)], {"act_type": "relu"})
    C("Activation", [("data", None)], {"act_type": "relu"}, "unknown input shape")
    C("Activation", [("data", S)], {"act_type": "bogus"}, "bad enum")
    for op in ["relu", "sigmoid", "tanh", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt",
               "square", "abs", "sign", "negative", "reciprocal", "sin", "cos", "floor",
               "ceil", "round"]:
        C(op, [("data", S)])
    C("relu", [("data", S4)])
    C("exp", [("data", (7,))])
    C("clip", [("data", S)], {"a_min": -1.0, "a_max": 1.0})
    C("clip", [("data", S4)], {"a_min": 0, "a_max": 6})
    C("clip", [("data", S)], {"a_min": 0.0}, "missing a_max")
    # ---- elementwise binary
    for op in ["elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div",
               "_maximum", "_minimum", "_power"]:
        C(op, [("lhs", S), ("rhs", S)])
    C("elemwise_add", [("lhs", S4), ("rhs", S4)])
    C("elemwise_add", [("lhs", S), ("rhs", None)], None, "rhs inferred from lhs")
    C("elemwise_add", [("lhs", None), ("rhs", S)], None, "lhs inferred from rhs")
    C("elemwise_add", [("lhs", S), ("rhs", (3, 2))], None, "mismatch")
    C("elemwise_mul", [("lhs", S), ("rhs", (1, 3))], None, "no broadcasting")
    C("_maximum", [("lhs", S), ("rhs", (2, 4))], None, "mismatch")
    C("add_n", [("a0", S), ("a1", S)])
    C("add_n", [("a0", S), ("a1", S), ("a2", S)])
    C("add_n", [("a0", S4), ("a1", None), ("a2", S4), ("a3", S4)])
    C("add_n", [("a0", S), ("a1", (3, 2))], None, "mismatch")
    C("add_n", [("a0", S)])
    # ---- scalar
    for op, sc in [("_plus_scalar", 2.0), ("_minus_scalar", 1.5), ("_rminus_scalar", 1.0),
                   ("_mul_scalar", 2.5), ("_div_scalar", 4.0), ("_rdiv_scalar", 1.0),
                   ("_power_scalar", 2.0), ("_rpower_scalar", 2.0), ("_maximum_scalar", 0.0),
                   ("_minimum_scalar", 6.0)]:
        C(op, [("data", S)], {"scalar": sc})
    C("_plus_scalar", [("data", S4)], {"scalar": 3}, "int scalar")
    C("_mul_scalar", [("data", S)], {"scalar": -1}, "int scalar")
    C("_power_scalar", [("data", S)], {"scalar": 0.5})
    C("_div_scalar", [("data", S)], {"scalar": 0}, "divide by zero scalar")
    # ---- broadcast binary
    pairs = [((2, 3), (2, 3)), ((2, 3), (1, 3)), ((2, 1), (1, 3)), ((3,), (2, 3)),
             ((2, 3, 4), (4,)), ((1,), (2, 3)), ((2, 1, 4), (3, 1)), ((5, 1, 4, 1), (3, 1, 6)),
             ((2, 3), (4, 3))]
    for a, b in pairs:
        C("broadcast_add", [("lhs", a), ("rhs", b)])
    for op in ["broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_power",
               "broadcast_maximum", "broadcast_minimum"]:
        C(op, [("lhs", (2, 1, 4)), ("rhs", (3, 1))])
        C(op, [("lhs", (2, 3)), ("rhs", (3, 2))])
    C("broadcast_add", [("lhs", (2, 3)), ("rhs", None)], None, "rhs unknown")
    C("broadcast_to", [("data", (1, 3))], {"shape": (4, 3)})
    C("broadcast_to", [("data", (2, 1))], {"shape": (0, 5)}, "0 keeps input dim")
    C("broadcast_to", [("data", (2, 1, 1))], {"shape": (0, 3, 0)})
    C("broadcast_to", [("data", (3,))], {"shape": (2, 3)}, "ndim differs")
    C("broadcast_to", [("data", (2, 3))], {"shape": (2, 4)}, "not broadcastable")
    C("broadcast_axis", [("data", (1, 3, 1))], {"axis": (0, 2), "size": (2, 4)})
    C("broadcast_axis", [("data", (1, 3))], {"axis": 0, "size": 5})
    C("broadcast_axis", [("data", (2, 1))], {"axis": -1, "size": 3}, "negative axis")
    C("broadcast_axis", [("data", (2, 3))], {"axis": 1, "size": 4}, "axis dim != 1")
    # ---- reductions
    D = (2, 3, 4)
    for op in ["sum", "mean", "max", "min", "prod"]:
        C(op, [("data", D)])
        C(op, [("data", D)], {"axis": 1})
        C(op, [("data", D)], {"axis": (0, 2)})
        C(op, [("data", D)], {"axis": -1, "keepdims": True})
    C("sum", [("data", D)], {"keepdims": True})
    C("sum", [("data", D)], {"axis": 1, "exclude": True})
    C("sum", [("data", D)], {"axis": (0, -1), "exclude": True})
    C("sum", [("data", D)], {"axis": (), "keepdims": False}, "empty axis tuple")
    C("sum", [("data", D)], {"axis": 3}, "axis out of range")
    C("sum", [("data", D)], {"axis": -3})
    C("mean", [("data", D)], {"axis": (0, 1, 2)})
    C("max", [("data", D)], {"axis": 0, "exclude": True, "keepdims": True})
    C("sum", [("data", (5,))], {"axis": 0}, "reduce 1-D to scalar")
    C("norm", [("data", D)])
    C("norm", [("data", D)], {"axis": 1})
    C("norm", [("data", D)], {"axis": -1, "keepdims": True})
    C("norm", [("data", D)], {"ord": 1, "axis": 0})
    C("norm", [("data", D)], {"axis": (1, 2)})
    C("norm", [("data", D)], {"ord": 3}, "unsupported ord")
    # ---- Reshape (important)
    R = [
        ((2, 3, 4), (4, 0, 2), False, None),
        ((2, 3, 4), (6, 1, -1), False, None),
        ((2, 3, 4), (-1,), False, None),
        ((2, 3, 4), (0, -1), False, None),
        ((2, 3, 4), (-1, 0), False, None),
        ((2, 3, 4), (-2,), False, None),
        ((2, 3, 4), (2, -2), False, None),
        ((2, 3, 4), (-2, 1, 1), False, None),
        ((2, 3, 4), (-3, 4), False, None),
        ((2, 3, 4, 5), (-3, -3), False, None),
        ((2, 3, 4), (0, -3), False, None),
        ((2, 3, 4), (-3, -2), False, None),
        ((2, 3, 4), (-4, 1, 2, -2), False, None),
        ((2, 3, 4), (2, -4, -1, 3, -2), False, None),
        ((6, 4), (-4, 2, -1, 0), False, None),
        ((2, 6, 4), (0, -4, 3, -1, 0), False, None),
        ((2, 6, 4), (0, -4, -1, 2, -1), False, "-4 then a free -1"),
        ((10, 5, 4), (-1, 0), False, None),
        ((10, 5, 4), (-1, 0), True, "reverse"),
        ((10, 5, 4), (0, -1), True, "reverse"),
        ((10, 5, 4), (0, 0, -1), True, "reverse"),
        ((2, 3, 4), (-3, 0), True, "reverse with -3"),
        ((2, 3, 4, 5), (-1, 0, 0), True, "reverse"),
        ((2, 3), (-3,), False, None),
        ((2, 3), (3, 2), False, None),
        ((24,), (2, 3, 4), False, None),
        ((2, 3, 4), (24,), False, None),
        ((2, 3, 4), (0, 0, 0), False, None),
        ((2, 3, 4), (0, 0, 0, 1), False, "0 beyond input ndim?"),
        ((2, 3), (0, 0, 0), False, "0 beyond input ndim"),
        ((2, 3), (5, -1), False, "indivisible"),
        ((2, 3), (-1, -1), False, "two -1"),
        ((2, 3), (4, 2), False, "size mismatch"),
        ((6, 4), (-4, 2, 2, -2), False, "-4 split mismatch"),
        ((6, 4), (-4, -1, -1, 0), False, "-4 with two -1"),
        ((2, 3, 4), (-2, -1), False, "-2 followed by -1"),
        ((1,), (), False, "empty target shape"),
        ((2, 3, 4), (1, -1, 1), False, None),
        ((2, 3, 4), (-1, 1), True, "reverse -1 with literal"),
        ((2, 3, 4), (0, -2), False, None),
        ((2, 3, 4), (0, 0, -2), False, None),
        ((2, 3, 4), (-1, -2), False, "-1 followed by -2"),
        ((2, 3, 4), (-2, -2), False, "two -2"),
        ((2, 3, 4), (-3, -1), False, None),
        ((2, 3, 4), (-1, -3), False, "-1 then -3"),
        ((2, 3, 4), (-3, -3), False, "-3 runs out of dims"),
        ((2, 3, 4), (-4, -1, 2, -2), False, None),
        ((8,), (-4, 2, -1), False, None),
        ((2, 3, 4), (-2,), True, "reverse -2"),
        ((2, 3, 4), (6, -1), True, "reverse"),
        ((2, 3, 4), (-1,), True, "reverse"),
        ((2, 3, 4), (0, -4, 1, -1, 0), True, "reverse with -4"),
        ((2, 3, 4), (2, 3, 4), False, "identity"),
        ((2, 3, 4), (1, 2, 3, 4), False, None),
        ((2, 3), (4, 2), False, "size mismatch 2"),
        ((2, 3, 4), (5, 0), False, "size mismatch with 0"),
    ]
    for data, shape, rev, note in R:
        p = {"shape": shape}
        if rev:
            p["reverse"] = True
        C("Reshape", [("data", data)], p, note)
    C("reshape", [("data", (2, 3, 4))], {"shape": (4, -1)}, "lower-case alias")
    C("reshape", [("data", (2, 3, 4))], {"shape": (-1, 0), "reverse": True}, "lower-case alias")
    C("Reshape", [("data", (2, 3, 4))], {"target_shape": (6, 4)}, "deprecated target_shape")
    C("Reshape", [("data", None)], {"shape": (-1, 4)}, "unknown input")
    C("Reshape", [("data", None)], {"shape": (6, 4)}, "unknown input, fully given target")
    C("Reshape", [("data", (0, 3, 4))], {"shape": (0, -1)}, "partially known input (0 = unknown)")
    # ---- Flatten / transpose / swapaxes / expand_dims / squeeze
    C("Flatten", [("data", (2, 3, 4))])
    C("Flatten", [("data", S4)])
    C("Flatten", [("data", (5,))], None, "1-D input")
    C("Flatten", [("data", S)])
    C("flatten", [("data", (2, 3, 4))], None, "lower-case alias")
    C("transpose", [("data", (2, 3, 4))])
    C("transpose", [("data", (2, 3, 4))], {"axes": (1, 0, 2)})
    C("transpose", [("data", S4)], {"axes": (0, 2, 3, 1)})
    C("transpose", [("data", (2, 3, 4))], {"axes": (0, -1, 1)}, "negative axis")
    C("transpose", [("data", (2, 3, 4))], {"axes": (1, 0)}, "wrong length")
    C("swapaxes", [("data", (2, 3, 4))], {"dim1": 0, "dim2": 2})
    C("swapaxes", [("data", S4)], {"dim1": 1, "dim2": 3})
    C("SwapAxis", [("data", (2, 3, 4))], {"dim1": 0, "dim2": -1}, "negative dim")
    C("swapaxes", [("data", (2, 3, 4))], {"dim1": 0, "dim2": 3}, "out of range")
    C("expand_dims", [("data", (2, 3))], {"axis": 0})
    C("expand_dims", [("data", (2, 3))], {"axis": 2})
    C("expand_dims", [("data", (2, 3))], {"axis": -1})
    C("expand_dims", [("data", (2, 3))], {"axis": -3})
    C("expand_dims", [("data", (2, 3))], {"axis": 3}, "out of range")
    C("expand_dims", [("data", (2, 3))], {"axis": -4}, "out of range")
    C("squeeze", [("data", (1, 3, 1))])
    C("squeeze", [("data", (1, 3, 1))], {"axis": 0})
    C("squeeze", [("data", (1, 3, 1))], {"axis": (0, 2)})
    C("squeeze", [("data", (1, 3, 1))], {"axis": -1})
    C("squeeze", [("data", (1, 3, 1))], {"axis": 1}, "dim is not 1")
    C("squeeze", [("data", (1, 1))], None, "all ones")
    # ---- Concat / split
    C("Concat", [("a0", (2, 3)), ("a1", (2, 4))], {"dim": 1})
    C("Concat", [("a0", (2, 3)), ("a1", (5, 3))], {"dim": 0})
    C("Concat", [("a0", (2, 3, 4)), ("a1", (2, 3, 1)), ("a2", (2, 3, 2))], {"dim": -1})
    C("Concat", [("a0", (2, 3)), ("a1", (2, 4))], None, "default dim")
    C("Concat", [("a0", (2, 3)), ("a1", (3, 4))], {"dim": 1}, "mismatch")
    C("Concat", [("a0", (2, 3)), ("a1", None)], {"dim": 1}, "one unknown")
    C("Concat", [("a0", (2, 3)), ("a1", None), ("a2", (4, 3))], {"dim": 0}, "one unknown")
    C("Concat", [("a0", (2, 3)), ("a1", None), ("a2", (2, 5))], {"dim": 0}, "mismatch + one unknown")
    C("concat", [("a0", (2, 3)), ("a1", (2, 4))], {"dim": 1}, "lower-case alias")
    C("SliceChannel", [("data", (2, 6))], {"num_outputs": 3})
    C("SliceChannel", [("data", (2, 6))], {"num_outputs": 3, "axis": 1})
    C("SliceChannel", [("data", (4, 6))], {"num_outputs": 2, "axis": 0})
    C("SliceChannel", [("data", (2, 3))], {"num_outputs": 3, "axis": 1, "squeeze_axis": True})
    C("SliceChannel", [("data", (2, 3, 4))], {"num_outputs": 2, "axis": -1})
    C("SliceChannel", [("data", (2, 5))], {"num_outputs": 2, "axis": 1}, "indivisible")
    C("SliceChannel", [("data", (2, 6))], {"num_outputs": 2, "axis": 1, "squeeze_axis": True},
      "squeeze a dim != 1")
    C("split", [("data", (2, 6))], {"num_outputs": 2, "axis": 1}, "lower-case alias")
    # ---- slicing / tile
    V = (5, 6, 7)
    C("slice", [("data", V)], {"begin": (0, 1), "end": (2, 4)})
    C("slice", [("data", V)], {"begin": (None,), "end": (None,)})
    C("slice", [("data", V)], {"begin": (0,), "end": (5,), "step": (2,)})
    C("slice", [("data", V)], {"begin": (-3,), "end": (None,)})
    C("slice", [("data", V)], {"begin": (None,), "end": (None,), "step": (-1,)})
    C("slice", [("data", V)], {"begin": (4, None), "end": (0, None), "step": (-2, None)})
    C("slice", [("data", V)], {"begin": (1, 0, 0), "end": (3, 6, 7), "step": (1, 3, 2)})
    C("slice", [("data", V)], {"begin": (0, -4), "end": (5, -1)})
    C("slice", [("data", V)], {"begin": (0,), "end": (10,)}, "end past dim")
    C("slice", [("data", V)], {"begin": (3,), "end": (1,)}, "empty range")
    C("slice", [("data", V)], {"begin": (0, 0, 0, 0), "end": (1, 1, 1, 1)}, "too many dims")
    C("slice", [("data", V)], {"begin": (0,), "end": (3,), "step": (0,)}, "zero step")
    C("slice_axis", [("data", V)], {"axis": 1, "begin": 1, "end": 3})
    C("slice_axis", [("data", V)], {"axis": -1, "begin": -3, "end": None})
    C("slice_axis", [("data", V)], {"axis": 0, "begin": 0, "end": None})
    C("slice_axis", [("data", V)], {"axis": 2, "begin": 2, "end": -1})
    C("slice_axis", [("data", V)], {"axis": 0, "begin": 6, "end": None}, "begin out of range")
    C("slice_axis", [("data", V)], {"axis": 3, "begin": 0, "end": 1}, "axis out of range")
    C("tile", [("data", S)], {"reps": (2, 2)})
    C("tile", [("data", (2, 3, 4))], {"reps": (3,)}, "reps shorter than ndim")
    C("tile", [("data", S)], {"reps": (2, 1, 2)}, "reps longer than ndim")
    C("tile", [("data", S)], {"reps": (1,)})
    C("tile", [("data", S)], {"reps": (0, 2)}, "zero rep")
    # ---- misc unary-shaped
    for d in ["float16", "int32", "uint8", "float64"]:
        C("Cast", [("data", S)], {"dtype": d})
    C("cast", [("data", S)], {"dtype": "int8"}, "lower-case alias")
    for op in ["zeros_like", "ones_like", "BlockGrad", "stop_gradient", "identity", "_copy"]:
        C(op, [("data", S)])
    C("identity", [("data", None)], None, "unknown")
    # ---- dot / batch_dot
    C("dot", [("lhs", (2, 3)), ("rhs", (3, 4))])
    C("dot", [("lhs", (3, 2)), ("rhs", (3, 4))], {"transpose_a": True})
    C("dot", [("lhs", (2, 3)), ("rhs", (4, 3))], {"transpose_b": True})
    C("dot", [("lhs", (3, 2)), ("rhs", (4, 3))], {"transpose_a": True, "transpose_b": True})
    C("dot", [("lhs", (3,)), ("rhs", (3,))], None, "1-D . 1-D")
    C("dot", [("lhs", (2, 3)), ("rhs", (3,))], None, "2-D . 1-D")
    C("dot", [("lhs", (3,)), ("rhs", (3, 4))], None, "1-D . 2-D")
    C("dot", [("lhs", (2, 3, 4)), ("rhs", (4, 5))], None, "N-D . 2-D")
    C("dot", [("lhs", (2, 3, 4)), ("rhs", (4, 5, 6))], None, "N-D . N-D")
    C("dot", [("lhs", (4, 3, 2)), ("rhs", (4, 5))], {"transpose_a": True}, "N-D transpose_a")
    C("dot", [("lhs", (2, 3, 4)), ("rhs", (5, 4))], {"transpose_b": True}, "N-D transpose_b")
    C("dot", [("lhs", (2, 3)), ("rhs", (4, 5))], None, "mismatch")
    C("dot", [("lhs", (2, 3)), ("rhs", None)], None, "rhs unknown")
    C("batch_dot", [("lhs", (2, 3, 4)), ("rhs", (2, 4, 5))])
    C("batch_dot", [("lhs", (2, 4, 3)), ("rhs", (2, 4, 5))], {"transpose_a": True})
    C("batch_dot", [("lhs", (2, 3, 4)), ("rhs", (2, 5, 4))], {"transpose_b": True})
    C("batch_dot", [("lhs", (2, 4, 3)), ("rhs", (2, 5, 4))], {"transpose_a": True, "transpose_b": True})
    C("batch_dot", [("lhs", (2, 3, 4)), ("rhs", (3, 4, 5))], None, "batch mismatch")
    C("batch_dot", [("lhs", (2, 3, 4)), ("rhs", (2, 3, 5))], None, "inner mismatch")
    C("batch_dot", [("lhs", (6, 2, 3, 4)), ("rhs", (6, 2, 4, 5))], None, "4-D")
    C("batch_dot", [("lhs", (3, 4)), ("rhs", (4, 5))], None, "2-D")
    # ---- FullyConnected
    C("FullyConnected", [("data", (4, 10))], {"num_hidden": 5})
    C("FullyConnected", [("data", (4, 10))], {"num_hidden": 5, "no_bias": True})
    C("FullyConnected", [("data", (2, 3, 10))], {"num_hidden": 5, "flatten": False})
    C("FullyConnected", [("data", (2, 3, 10))], {"num_hidden": 5})
    C("FullyConnected", [("data", S4)], {"num_hidden": 7}, "4-D data flattened")
    C("FullyConnected", [("data", S4)], {"num_hidden": 7, "flatten": False}, "4-D data not flattened")
    C("FullyConnected", [("data", (4, 10)), ("weight", (5, 10)), ("bias", (5,))], {"num_hidden": 5})
    C("FullyConnected", [("data", None), ("weight", (5, 10))], {"num_hidden": 5},
      "data unknown, weight given")
    C("FullyConnected", [("data", (4, 10)), ("weight", (5, 9))], {"num_hidden": 5}, "weight mismatch")
    C("FullyConnected", [("data", (10,))], {"num_hidden": 5}, "1-D data")
    # ---- LeakyReLU
    C("LeakyReLU", [("data", S)], {"act_type": "leaky", "slope": 0.1})
    C("LeakyReLU", [("data", S4)])
    C("LeakyReLU", [("data", S)], {"act_type": "elu", "slope": 1.0})
    C("LeakyReLU", [("data", (2, 3, 4, 4))], {"act_type": "prelu"})
    C("LeakyReLU", [("data", (2, 5))], {"act_type": "prelu"})
    C("LeakyReLU", [("data", (2, 3, 4, 4)), ("gamma", (1,))], {"act_type": "prelu"}, "gamma (1,)")
    C("LeakyReLU", [("data", (2, 3, 4, 4)), ("gamma", (3,))], {"act_type": "prelu"}, "gamma given")
    C("LeakyReLU", [("data", S)], {"act_type": "selu"})
    C("LeakyReLU", [("data", S)], {"act_type": "gelu"})
    C("LeakyReLU", [("data", S)], {"act_type": "rrelu", "lower_bound": 0.1, "upper_bound": 0.3})
    # ---- softmax family
    C("softmax", [("data", (2, 3, 4))])
    C("softmax", [("data", (2, 3, 4))], {"axis": 0})
    C("softmax", [("data", (2, 3, 4))], {"axis": 1, "temperature": 2.0})
    C("softmax", [("data", S)], {"dtype": "float64"}, "dtype param")
    C("log_softmax", [("data", (2, 3, 4))])
    C("log_softmax", [("data", (2, 3, 4))], {"axis": -2, "temperature": 0.5})
    C("softmax", [("data", S)], {"axis": 2}, "axis out of range")
    C("SoftmaxOutput", [("data", (4, 10))])
    C("SoftmaxOutput", [("data", (4, 10)), ("label", (4,))])
    C("SoftmaxOutput", [("data", (2, 3, 4, 5))], {"multi_output": True})
    C("SoftmaxOutput", [("data", (2, 3, 4))], {"preserve_shape": True})
    C("SoftmaxOutput", [("data", (2, 3, 4))], None, "3-D no flags")
    C("SoftmaxOutput", [("data", (4, 10))], {"grad_scale": 2.0, "ignore_label": -1, "use_ignore": True,
                                              "normalization": "valid"})
    C("SoftmaxOutput", [("data", (4, 10)), ("label", (4, 10))], None, "label same shape as data")
    C("SoftmaxOutput", [("data", (4, 10)), ("label", (5,))], None, "label mismatch")
    C("LinearRegressionOutput", [("data", (4, 1))])
    C("LinearRegressionOutput", [("data", (4, 3))])
    C("LinearRegressionOutput", [("data", (4,))])
    C("LogisticRegressionOutput", [("data", (4, 1))])
    C("LogisticRegressionOutput", [("data", (4, 3)), ("label", (4, 3))])
    C("MakeLoss", [("data", S)])
    C("MakeLoss", [("data", S)], {"grad_scale": 0.5, "normalization": "batch"})
    # ---- Convolution
    C("Convolution", [("data", (2, 3, 10))], {"kernel": (3,), "num_filter": 4}, "1-D")
    C("Convolution", [("data", (2, 3, 32, 32))], {"kernel": (3, 3), "num_filter": 8})
    C("Convolution", [("data", (2, 3, 32, 32))], {"kernel": (3, 3), "num_filter": 8, "stride": (2, 2)})
    C("Convolution", [("data", (2, 3, 32, 32))], {"kernel": (3, 3), "num_filter": 8, "pad": (1, 1)})
    C("Convolution", [("data", (2, 3, 32, 32))], {"kernel": (3, 3), "num_filter": 8, "dilate": (2, 2)})
    C("Convolution", [("data", (2, 3, 32, 32))],
      {"kernel": (5, 3), "num_filter": 8, "stride": (2, 1), "pad": (2, 0), "dilate": (1, 2)})
    C("Convolution", [("data", (2, 6, 16, 16))], {"kernel": (3, 3), "num_filter": 9, "num_group": 3})
    C("Convolution", [("data", (2, 3, 16, 16))], {"kernel": (1, 1), "num_filter": 4, "no_bias": True})
    C("Convolution", [("data", (1, 2, 8, 8, 8))], {"kernel": (3, 3, 3), "num_filter": 4}, "3-D")
    C("Convolution", [("data", (2, 3, 32, 32))], {"kernel": (3, 3), "num_filter": 8, "layout": "NCHW"})
    C("Convolution", [("data", (2, 5, 5, 3))], {"kernel": (3, 3), "num_filter": 8, "layout": "NHWC"})
    C("Convolution", [("data", (2, 3, 4, 4))], {"kernel": (5, 5), "num_filter": 8}, "kernel too big")
    C("Convolution", [("data", (2, 4, 8, 8))], {"kernel": (3, 3), "num_filter": 6, "num_group": 3},
      "channels not divisible by group")
    C("Convolution", [("data", (2, 3, 8, 8))], {"kernel": (3,), "num_filter": 4}, "kernel ndim != data")
    C("Convolution", [("data", None), ("weight", (8, 3, 3, 3))], {"kernel": (3, 3), "num_filter": 8},
      "data unknown")
    # ---- Pooling
    P = (1, 1, 7, 7)
    C("Pooling", [("data", (2, 3, 8, 8))], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"})
    C("Pooling", [("data", (2, 3, 8, 8))], {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1),
                                            "pool_type": "avg"})
    C("Pooling", [("data", (2, 3, 8, 8))], {"kernel": (2, 2), "pool_type": "sum"}, "default stride")
    C("Pooling", [("data", (2, 3, 8, 8))], {"kernel": (2, 2)}, "default pool_type")
    C("Pooling", [("data", (2, 3, 8, 8))], {"global_pool": True, "pool_type": "avg", "kernel": (1, 1)})
    C("Pooling", [("data", (2, 3, 8, 8))], {"global_pool": True, "pool_type": "max"}, "no kernel")
    C("Pooling", [("data", (2, 3, 10))], {"global_pool": True, "pool_type": "avg"}, "1-D global")
    C("Pooling", [("data", P)], {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "valid"})
    C("Pooling", [("data", P)], {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "full"})
    C("Pooling", [("data", P)], {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1),
                                 "pooling_convention": "full"})
    C("Pooling", [("data", (2, 3, 10))], {"kernel": (3,), "stride": (2,), "pool_type": "max"}, "1-D")
    C("Pooling", [("data", (1, 2, 8, 8, 8))], {"kernel": (2, 2, 2), "stride": (2, 2, 2)}, "3-D")
    C("Pooling", [("data", (2, 3, 8, 8))], {"kernel": (3, 3), "pad": (1, 1), "pool_type": "avg",
                                            "count_include_pad": False})
    C("Pooling", [("data", (2, 3, 4, 4))], {"kernel": (5, 5), "pool_type": "max"}, "kernel too big")
    C("Pooling", [("data", (2, 3, 8, 8))], {"kernel": (2, 2), "pool_type": "lp", "p_value": 2}, "lp")
    # ---- BatchNorm
    B = (2, 3, 4, 4)
    C("BatchNorm", [("data", B)])
    C("BatchNorm", [("data", B)], {"axis": -1}, "axis -1")
    C("BatchNorm", [("data", B)], {"fix_gamma": False})
    C("BatchNorm", [("data", B)], {"use_global_stats": True})
    C("BatchNorm", [("data", B)], {"output_mean_var": True})
    C("BatchNorm", [("data", (4, 5))], {"eps": 1e-5, "momentum": 0.8})
    C("BatchNorm", [("data", B)], {"axis": 4}, "axis out of range")
    C("BatchNorm", [("data", None), ("gamma", (3,))], None, "data unknown")
    # ---- Dropout
    C("Dropout", [("data", S)])
    C("Dropout", [("data", S4)], {"p": 0.3})
    C("Dropout", [("data", S)], {"p": 0.5, "mode": "always"})
    C("Dropout", [("data", S4)], {"p": 0.5, "axes": (2, 3)})
    # ---- Embedding
    C("Embedding", [("data", (2, 3))], {"input_dim": 10, "output_dim": 4})
    C("Embedding", [("data", (5,))], {"input_dim": 10, "output_dim": 4})
    C("Embedding", [("data", (2, 3))], {"input_dim": 10, "output_dim": 4, "dtype": "float16"})
    C("Embedding", [("data", (2, 3)), ("weight", (10, 4))], {"input_dim": 10, "output_dim": 4})
    C("Embedding", [("data", (2, 3)), ("weight", (10, 5))], {"input_dim": 10, "output_dim": 4},
      "weight mismatch")
    # ---- contrib.quadratic
    C("contrib.quadratic", [("data", S)], {"a": 1.0, "b": 2.0, "c": 3.0})
    C("contrib.quadratic", [("data", S4)])
    C("contrib.quadratic", [("data", S)], {"a": 0.5})


def resolve(op):
    """op name -> (python callable, dotted python path)."""
    if op.startswith("contrib."):
        return getattr(mx.sym.contrib, op.split(".", 1)[1]), "mx.sym." + op
    if hasattr(mx.sym, op):
        return getattr(mx.sym, op), "mx.sym." + op
    return getattr(mx.sym._internal, op), "mx.sym._internal." + op


def run_case(idx, c):
    op, params, inputs = c["op"], c["params"], c["inputs"]
    rec = {"id": "%03d-%s" % (idx, op), "op": op}
    fn, path = resolve(op)
    rec["py_func"] = path
    rec["params"] = jsonable(params)
    rec["inputs"] = {k: shp(s) for k, s in inputs}
    rec["input_order"] = [k for k, _ in inputs]
    if c["note"]:
        rec["note"] = c["note"]
    shapes = {k: s for k, s in inputs if s is not None}
    try:
        with mx.name.NameManager(), quiet():
            vars_ = [mx.sym.Variable(k) for k, _ in inputs]
            sym = fn(*vars_, name="n", **params)
    except Exception as e:
        rec["stage"] = "construct"
        rec["error"] = errline(e)
        return rec
    rec["tojson"] = sym.tojson()
    rec["list_arguments"] = sym.list_arguments()
    rec["list_outputs"] = sym.list_outputs()
    rec["list_auxiliary_states"] = sym.list_auxiliary_states()
    try:
        with quiet():
            a, o, x = sym.infer_shape(**shapes)
        if a is None:
            rec["incomplete"] = True
            with quiet():
                a, o, x = sym.infer_shape_partial(**shapes)
        rec["out_shapes"] = shplist(o)
        rec["arg_shapes"] = dict(zip(sym.list_arguments(), shplist(a)))
        rec["aux_shapes"] = dict(zip(sym.list_auxiliary_states(), shplist(x)))
    except Exception as e:
        rec["stage"] = "infer_shape"
        rec["error"] = errline(e)
    first = inputs[0][0]
    types = {}
    for d in ["float32"] + DTYPES_EXTRA:
        try:
            with quiet():
                a, o, x = sym.infer_type(**{first: d})
            t = {}
            if a is None:
                t["incomplete"] = True
                with quiet():
                    a, o, x = sym.infer_type_partial(**{first: d})
            t["arg_types"] = dict(zip(sym.list_arguments(), dtlist(a)))
            t["out_types"] = dtlist(o)
            t["aux_types"] = dict(zip(sym.list_auxiliary_states(), dtlist(x)))
        except Exception as e:
            t = {"error": errline(e)}
        types[d] = t
    rec["out_types"] = types["float32"].get("out_types")
    rec["types"] = types
    if len(inputs) >= 2:
        # mixed dtypes: first input float32, second float16
        second = inputs[1][0]
        try:
            with quiet():
                a, o, x = sym.infer_type(**{first: "float32", second: "float16"})
            if a is None:
                with quiet():
                    a, o, x = sym.infer_type_partial(**{first: "float32", second: "float16"})
            rec["types_mixed"] = {"given": {first: "float32", second: "float16"},
                                  "arg_types": dict(zip(sym.list_arguments(), dtlist(a))),
                                  "out_types": dtlist(o)}
        except Exception as e:
            rec["types_mixed"] = {"given": {first: "float32", second: "float16"}, "error": errline(e)}
    return rec


def make_ops(out):
    build_cases()
    recs = [run_case(i, c) for i, c in enumerate(CASES)]
    dump(os.path.join(out, "ops-shapes.json"), recs)
    nerr = sum(1 for r in recs if "error" in r)
    ninc = sum(1 for r in recs if r.get("incomplete"))
    print("wrote ops-shapes.json: %d cases, %d errors, %d incomplete" % (len(recs), nerr, ninc))


# --------------------------------------------------------------------------
# (d) Symbol API cases
# --------------------------------------------------------------------------
# Each code string is executed inside `with mx.name.NameManager(),
# mx.AttrScope():` (fresh auto-name counters, empty attribute scope) with
# `mx` and `np` in scope.  It must bind `out` (a Symbol); it may bind `extra`
# (a dict of JSON-able values computed from the symbols).
API_CASES = [
    ("auto_naming_fc", """
data = mx.sym.Variable('data')
fc_a = mx.sym.FullyConnected(data, num_hidden=10)
out = mx.sym.FullyConnected(fc_a, num_hidden=5)
extra = {'names': [fc_a.name, out.name]}
"""),
    ("auto_naming_mixed", """
data = mx.sym.Variable('data')
a = mx.sym.Activation(data, act_type='relu')
b = mx.sym.Convolution(a, kernel=(3, 3), num_filter=4)
c = mx.sym.Activation(b, act_type='tanh')
d = mx.sym.relu(c)
e = mx.sym.BatchNorm(d)
out = mx.sym.SoftmaxOutput(mx.sym.Flatten(e))
extra = {'names': [a.name, b.name, c.name, d.name, e.name, out.name]}
"""),
    ("auto_naming_arith", """
x = mx.sym.Variable('x')
y = mx.sym.Variable('y')
out = (x + y) * (x - 1) + 2 * x
extra = {'name': out.name}
"""),
    ("name_prefix", """
data = mx.sym.Variable('data')
with mx.name.Prefix('blk_'):
    fc = mx.sym.FullyConnected(data, num_hidden=3)
    out = mx.sym.Activation(fc, act_type='relu', name='act')
extra = {'names': [fc.name, out.name]}
"""),
    ("lr_mult_via_attr", """
data = mx.sym.Variable('data')
out = mx.sym.FullyConnected(data, num_hidden=4, name='fc', attr={'__lr_mult__': '2'})
extra = {'attr_lr_mult': out.attr('__lr_mult__'), 'list_attr': out.list_attr()}
"""),
    ("lr_mult_via_attrscope", """
data = mx.sym.Variable('data')
with mx.AttrScope(lr_mult='2', ctx_group='dev1'):
    fc = mx.sym.FullyConnected(data, num_hidden=4, name='fc')
out = mx.sym.Activation(fc, act_type='relu', name='act')
extra = {'fc_list_attr': fc.list_attr()}
"""),
    ("attrscope_variable", """
with mx.AttrScope(group='4', data='great'):
    x = mx.sym.Variable('x', attr={'dtype': 'data', 'group': '1'})
out = mx.sym.elemwise_add(x, mx.sym.Variable('y'), name='add')
extra = {'x_list_attr': x.list_attr()}
"""),
    ("variable_full", """
out = mx.sym.Variable('w', shape=(3, 4), dtype='float16', lr_mult=2.0, wd_mult=0.5,
                      init=mx.init.Xavier(magnitude=2), stype='default', attr={'foo': 'bar'})
extra = {'list_attr': out.list_attr(), 'name': out.name}
"""),
    ("variable_np_dtype_csr", """
out = mx.sym.var('v', shape=(5,), dtype=np.float64, stype='csr', init=mx.init.Zero())
extra = {'list_attr': out.list_attr()}
"""),
    ("variable_int_dtype", """
out = mx.sym.Variable('idx', dtype='int32', shape=(2, 0))
extra = {'list_attr': out.list_attr()}
"""),
    ("variable_in_op", """
w = mx.sym.Variable('fc_weight', shape=(4, 8), lr_mult=0.1)
out = mx.sym.FullyConnected(mx.sym.Variable('data'), weight=w, num_hidden=4, name='fc')
"""),
]
for _nm, _expr in [("add", "x + y"), ("sub", "x - y"), ("mul", "x * y"), ("div", "x / y"),
                   ("pow", "x ** y"), ("mod", "x % y"),
                   ("add_scalar", "x + 1"), ("radd_scalar", "1 + x"),
                   ("sub_scalar", "x - 1"), ("rsub_scalar", "1 - x"),
                   ("mul_scalar", "x * 2.5"), ("rmul_scalar", "2 * x"),
                   ("div_scalar", "x / 2"), ("rdiv_scalar", "2 / x"),
                   ("pow_scalar", "x ** 2"), ("rpow_scalar", "2 ** x"),
                   ("neg", "-x"), ("eq", "x == y"), ("gt_scalar", "x > 2"),
                   ("abs", "abs(x)"), ("chain", "(x + y) / (x * 3) - 2 ** y")]:
    API_CASES.append(("arith_" + _nm, "x = mx.sym.Variable('x')\ny = mx.sym.Variable('y')\n"
                      "out = %s\n" % _expr))
API_CASES += [
    ("group", """
data = mx.sym.Variable('data')
a = mx.sym.FullyConnected(data, num_hidden=3, name='a')
b = mx.sym.Activation(data, act_type='relu', name='b')
out = mx.sym.Group([a, b])
extra = {'name': out.name, 'num_outputs': len(out)}
"""),
    ("get_internals", """
data = mx.sym.Variable('data')
fc1 = mx.sym.FullyConnected(data, num_hidden=8, name='fc1')
act = mx.sym.Activation(fc1, act_type='relu', name='relu1')
out = mx.sym.FullyConnected(act, num_hidden=2, name='fc2')
internals = out.get_internals()
extra = {'internals': internals.list_outputs(),
         'internals_len': len(internals),
         'fc1_output_args': internals['fc1_output'].list_arguments(),
         'index_2_outputs': internals[2].list_outputs()}
"""),
    ("indexing", """
data = mx.sym.Variable('data')
s = mx.sym.SliceChannel(data, num_outputs=3, name='sc')
out = mx.sym.Group([s[0], s['sc_output2']])
extra = {'s0': s[0].list_outputs(), 's_by_name': s['sc_output1'].list_outputs(),
         's_len': len(s), 's_iter': [t.list_outputs()[0] for t in s]}
"""),
    ("get_children", """
data = mx.sym.Variable('data')
fc = mx.sym.FullyConnected(data, num_hidden=4, name='fc')
out = mx.sym.Activation(fc, act_type='relu', name='act')
extra = {'act_children': out.get_children().list_outputs(),
         'fc_children': fc.get_children().list_outputs(),
         'data_children_is_none': data.get_children() is None}
"""),
    ("compose_call", """
data = mx.sym.Variable('data')
fc = mx.sym.FullyConnected(data=data, num_hidden=4, name='fc')
x = mx.sym.Variable('x')
act = mx.sym.Activation(x, act_type='relu', name='act')
out = fc(data=act)
extra = {'fc_args_unchanged': fc.list_arguments(), 'name': out.name}
"""),
    ("compose_call_named", """
data = mx.sym.Variable('data')
net1 = mx.sym.FullyConnected(data=data, num_hidden=4, name='fc1')
net1 = mx.sym.Activation(net1, act_type='relu', name='r1')
data2 = mx.sym.Variable('data2')
net2 = mx.sym.FullyConnected(data=data2, num_hidden=3, name='fc2')
out = net2(data2=net1, name='composed')
extra = {'name': out.name}
"""),
    ("slicechannel_outputs", """
data = mx.sym.Variable('data')
out = mx.sym.SliceChannel(data, num_outputs=4, axis=1, name='slice')
extra = {'num_outputs': len(out)}
"""),
    ("split_squeeze_outputs", """
data = mx.sym.Variable('data')
out = mx.sym.split(data, num_outputs=2, axis=0, squeeze_axis=True)
"""),
    ("batchnorm_outputs", """
data = mx.sym.Variable('data')
out = mx.sym.BatchNorm(data, name='bn')
extra = {'internals': out.get_internals().list_outputs()}
"""),
    ("batchnorm_output_mean_var", """
data = mx.sym.Variable('data')
out = mx.sym.BatchNorm(data, name='bn', output_mean_var=True)
extra = {'num_outputs': len(out)}
"""),
    ("dropout_outputs", """
data = mx.sym.Variable('data')
out = mx.sym.Dropout(data, p=0.2, name='drop')
extra = {'internals': out.get_internals().list_outputs()}
"""),
    ("softmaxoutput_label", """
data = mx.sym.Variable('data')
out = mx.sym.SoftmaxOutput(data, name='softmax')
"""),
    ("load_json_roundtrip", """
data = mx.sym.Variable('data')
net = mx.sym.FullyConnected(data, num_hidden=3, name='fc')
out = mx.sym.load_json(net.tojson())
extra = {'same': out.tojson() == net.tojson()}
"""),
    ("group_of_group", """
a = mx.sym.Variable('a')
b = mx.sym.Variable('b')
g = mx.sym.Group([a + b, a * b])
out = mx.sym.Group([g, mx.sym.relu(a, name='r')])
extra = {'num_outputs': len(out)}
"""),
    ("shared_input", """
data = mx.sym.Variable('data')
a = mx.sym.FullyConnected(data, num_hidden=3, name='a')
b = mx.sym.FullyConnected(data, num_hidden=3, name='b', weight=mx.sym.Variable('a_weight'))
out = a + b
"""),
]


def make_api(out):
    recs = []
    for name, code in API_CASES:
        code = code.strip("\n") + "\n"
        ns = {"mx": mx, "np": np}
        rec = {"name": name, "code": code}
        try:
            with mx.name.NameManager(), mx.AttrScope(), quiet():
                exec(code, ns)
            sym = ns["out"]
            rec["tojson"] = sym.tojson()
            rec["list_arguments"] = sym.list_arguments()
            rec["list_outputs"] = sym.list_outputs()
            rec["list_auxiliary_states"] = sym.list_auxiliary_states()
            rec["list_inputs"] = sym.list_inputs()
            rec["attr_dict"] = sym.attr_dict()
            if "extra" in ns:
                rec["extra"] = jsonable(ns["extra"])
        except Exception as e:
            rec["error"] = errline(e)
        recs.append(rec)
    dump(os.path.join(out, "symbol-api.json"), {
        "harness": "each code runs via exec() inside `with mx.name.NameManager(), mx.AttrScope():` "
                   "with mx and np (numpy) in scope; `out` is the Symbol recorded, `extra` extra values",
        "cases": recs})
    print("wrote symbol-api.json: %d cases, %d errors" % (len(recs), sum("error" in r for r in recs)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE, help="output folder (default: this script's folder)")
    ap.add_argument("--only", choices=["nets", "ops", "api"], help="write just one group")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.only in (None, "nets"):
        make_nets(args.out)
    if args.only in (None, "ops"):
        make_ops(args.out)
    if args.only in (None, "api"):
        make_api(args.out)
    dump(os.path.join(args.out, "meta.json"), {
        "mxnet_version": mx.__version__,
        "numpy_version": np.__version__,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "env": {"MXNET_SUBGRAPH_BACKEND": os.environ.get("MXNET_SUBGRAPH_BACKEND")},
        "generator": "tests/golden/make.py",
    })


if __name__ == "__main__":
    main()
