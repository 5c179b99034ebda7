"""Writes ops.json: inputs and MXNet 1.9.1's outputs for quantize_asym, quantized_elemwise_add/
_mul and calibrate_entropy (run in the reference venv:
``~/mxref/bin/python tests/quantization/golden/make_ops.py``). tests/quantization/test_more_ops.py
reads the file; this script is never imported by tests."""

import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
import mxnet as mx

rs = np.random.RandomState(13)
F = "float32"


def i8(*shape):
    return rs.randint(-128, 128, shape).astype("int8")


def u8(*shape):
    return rs.randint(0, 256, shape).astype("uint8")


def rng(v):
    return np.array([v], F)


def run(op, inputs, params, argnames=None):
    """Symbolic bind: quantized_elemwise_mul's imperative call fails in MXNet 1.9.1."""
    names = [f"in{i}" for i in range(len(inputs))]
    syms = [mx.sym.var(n) for n in names]
    if argnames:
        s = getattr(mx.sym.contrib, op)(**dict(zip(argnames, syms)), **params)
    else:
        s = getattr(mx.sym.contrib, op)(*syms, **params)
    arrays = {n: mx.nd.array(a, dtype=a.dtype) for n, a in zip(names, inputs)}
    aux = {n: arrays.pop(n) for n in s.list_auxiliary_states()}
    ex = s.bind(mx.cpu(), arrays, aux_states=aux)
    return [o.asnumpy() for o in ex.forward()]


CASES = []


def case(name, op, inputs, params, argnames=None):
    CASES.append((name, op, inputs, params, argnames))


# quantize_asym: the pip build (oneDNN) runs it for 3-D data only (other ranks crash it).
X3 = rs.uniform(-1.5, 2.0, (2, 3, 4)).astype(F)
case("asym", "quantize_asym", [X3], {})
case("asym_calib", "quantize_asym", [X3], {"min_calib_range": -1.0, "max_calib_range": 1.0})
case("asym_pos", "quantize_asym", [rs.uniform(0.2, 3.0, (1, 5, 6)).astype(F)], {})
case("asym_halves", "quantize_asym", [np.array([[[2.5, 3.5, -0.5, 254.5, 300.0, 0.5]]], F)],
     {"min_calib_range": 0.0, "max_calib_range": 255.0})

for dt, gen in (("int8", i8), ("uint8", u8)):
    a, b = gen(3, 4, 5), gen(3, 4, 5)
    lo1, hi1 = (-2.0, 1.0) if dt == "int8" else (0.0, 1.0)
    lo2, hi2 = (-0.5, 3.0) if dt == "int8" else (0.0, 3.0)
    ins = [a, b, rng(lo1), rng(hi1), rng(lo2), rng(hi2)]
    case(f"add_{dt}", "quantized_elemwise_add", ins, {})
    case(f"add_{dt}_calib", "quantized_elemwise_add", ins,
         {"min_calib_range": -2.0 if dt == "int8" else 0.0, "max_calib_range": 2.5})

a, b = i8(4, 6), i8(4, 6)
mins = [rng(-2.0), rng(1.0), rng(-0.5), rng(3.0)]
case("mul", "quantized_elemwise_mul", [a, b, *mins], {})
case("mul_calib", "quantized_elemwise_mul", [a, b, *mins],
     {"min_calib_range": -2.0, "max_calib_range": 2.5})
case("mul_calib_wide", "quantized_elemwise_mul", [a, b, *mins],
     {"min_calib_range": -40.0, "max_calib_range": 40.0})
case("mul_float", "quantized_elemwise_mul", [a, b, *mins], {"enable_float_output": True})

# quantized_fully_connected: int8/uint8 data, int8 weight and bias, int32 out
d8, du8 = i8(3, 2, 4), u8(3, 8)
w, b = i8(5, 8), i8(5)
case("fc", "quantized_fully_connected",
     [d8, w, b, rng(-2.0), rng(1.0), rng(-0.5), rng(0.5), rng(-1.0), rng(1.0)],
     {"num_hidden": 5})
case("fc_nobias_u8", "quantized_fully_connected",
     [du8, w, rng(0.0), rng(1.0), rng(-0.5), rng(0.5)], {"num_hidden": 5, "no_bias": True},
     ["data", "weight", "min_data", "max_data", "min_weight", "max_weight"])
case("fc_u8_bias", "quantized_fully_connected",
     [du8, w, b, rng(0.0), rng(3.0), rng(-0.25), rng(0.5), rng(-2.0), rng(0.5)],
     {"num_hidden": 5})
case("fc_noflatten", "quantized_fully_connected",
     [i8(2, 3, 4), i8(6, 4), i8(6), rng(-1.0), rng(1.0), rng(-1.0), rng(1.0), rng(-3.0),
      rng(3.0)], {"num_hidden": 6, "flatten": False})

# quantized_pooling: 4-D/5-D NC(D)HW int8/uint8, max and avg
PA = ["data", "min_data", "max_data"]
p8, pu8 = i8(2, 3, 5, 6), u8(1, 2, 5, 5)
for tag, x_, kw in (
        ("max", p8, {"kernel": (2, 2)}),
        ("max_full", p8, {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full"}),
        ("avg", p8, {"kernel": (2, 2), "pool_type": "avg"}),
        ("avg_pad", p8, {"kernel": (3, 3), "pool_type": "avg", "stride": (1, 1), "pad": (1, 1)}),
        ("avg_nopad", p8, {"kernel": (3, 3), "pool_type": "avg", "stride": (2, 2),
                           "pad": (1, 1), "count_include_pad": False}),
        ("avg_full", p8, {"kernel": (3, 3), "pool_type": "avg", "stride": (2, 2),
                          "pooling_convention": "full"}),
        ("avg_u8", pu8, {"kernel": (3, 3), "pool_type": "avg", "stride": (2, 2)}),
        ("global", p8, {"kernel": (1, 1), "pool_type": "avg", "global_pool": True}),
        ("max_3d", i8(1, 2, 4, 4, 5), {"kernel": (2, 2, 2), "stride": (1, 2, 2)}),
        ("avg_3d", i8(1, 2, 4, 4, 5), {"kernel": (2, 3, 3), "pool_type": "avg",
                                       "pad": (1, 1, 1)})):
    case(f"pool_{tag}", "quantized_pooling", [x_, rng(-2.0), rng(1.0)], kw, PA)

# quantized_conv: the pip build takes uint8 NCHW/NCDHW data and num_group=1 only
CA = ["data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight", "min_bias",
      "max_bias"]
CN = ["data", "weight", "min_data", "max_data", "min_weight", "max_weight"]
cu8 = u8(2, 3, 5, 6)
case("conv", "quantized_conv",
     [cu8, i8(4, 3, 2, 2), i8(4), rng(0.0), rng(1.0), rng(-0.5), rng(0.5), rng(-1.0), rng(1.0)],
     {"kernel": (2, 2), "num_filter": 4}, CA)
case("conv_bias_range", "quantized_conv",
     [cu8, i8(4, 3, 3, 3), i8(4), rng(0.0), rng(3.0), rng(-0.25), rng(0.5), rng(-7.0),
      rng(2.0)], {"kernel": (3, 3), "num_filter": 4, "pad": (1, 1), "stride": (2, 1)}, CA)
case("conv_nobias_dilate", "quantized_conv",
     [cu8, i8(2, 3, 2, 3), rng(0.0), rng(2.0), rng(-1.0), rng(0.5)],
     {"kernel": (2, 3), "num_filter": 2, "no_bias": True, "dilate": (2, 1), "pad": (0, 1)}, CN)
case("conv_3d", "quantized_conv",
     [u8(1, 2, 3, 4, 4), i8(3, 2, 2, 2, 2), i8(3), rng(0.0), rng(1.0), rng(-0.5), rng(0.5),
      rng(-1.0), rng(1.0)], {"kernel": (2, 2, 2), "num_filter": 3}, CA)

# quantized_embedding: indices truncated and clipped; int8 weight
EA = ["data", "weight", "min_weight", "max_weight"]
ew = i8(6, 4)
case("embed", "quantized_embedding",
     [np.array([[0, 5, 2], [1, 1, 3]], F), ew, rng(-2.0), rng(1.0)],
     {"input_dim": 6, "output_dim": 4}, EA)
case("embed_clip", "quantized_embedding",
     [np.array([-1.0, 2.7, 5.9, 9.0, -0.5], F), ew, rng(-0.5), rng(3.0)],
     {"input_dim": 6, "output_dim": 4}, EA)

# quantized_batch_norm: calibrated output range only (MXNet refuses the rest)
BA = ["data", "gamma", "beta", "moving_mean", "moving_var", "min_data", "max_data"]
C = 4
g, be = rs.uniform(0.2, 2, C).astype(F), rs.uniform(-1, 1, C).astype(F)
mm, mv = rs.uniform(-1, 1, C).astype(F), rs.uniform(0.1, 2, C).astype(F)
for tag, x_, lo, hi in (("i8", i8(3, C, 5, 5), -2.0, 1.5), ("u8", u8(3, C, 5, 5), 0.0, 3.0)):
    for clo, chi in ((-3.0, 3.0), (-1.0, 5.0)):
        case(f"bn_{tag}_{clo}_{chi}", "quantized_batch_norm", [x_, g, be, mm, mv, rng(lo), rng(hi)],
             {"min_calib_range": clo, "max_calib_range": chi, "eps": 1e-3}, BA)
case("bn_eps_nofix", "quantized_batch_norm", [i8(2, C, 3, 3), g, be, mm, mv, rng(-1.0), rng(1.0)],
     {"min_calib_range": -2.0, "max_calib_range": 2.0, "eps": 1e-5, "fix_gamma": False}, BA)

x = np.concatenate([rs.randn(5000), 0.1 * rs.randn(20000)]).astype(F)
th = float(np.abs(x).max())
for nb, nq in ((21, 5), (41, 7), (1001, 255), (9, 1), (101, 100)):
    h, e = np.histogram(x, bins=nb, range=(-th, th))
    case(f"calib_{nb}_{nq}", "calibrate_entropy", [h.astype(F), e.astype(F)],
         {"num_quantized_bins": nq})
h = np.zeros(21, F)
h[10] = 5
case("calib_spike", "calibrate_entropy", [h, np.linspace(-1, 1, 22).astype(F)],
     {"num_quantized_bins": 5})
case("calib_all_zero", "calibrate_entropy",
     [np.zeros(9, F), np.linspace(-1, 1, 10).astype(F)], {"num_quantized_bins": 3})
case("calib_fractional", "calibrate_entropy",
     [rs.uniform(0, 3, 31).astype(F), np.linspace(-1, 1, 32).astype(F)],
     {"num_quantized_bins": 5})


def enc(a):
    return {"dtype": a.dtype.name, "shape": list(a.shape),
            "data": [float(v) if a.dtype.kind == "f" else int(v) for v in a.reshape(-1)]}


out = []
for name, op, inputs, params, argnames in CASES:
    res = run(op, inputs, params, argnames)
    out.append({"name": name, "op": op, "params": params, "inputs": [enc(a) for a in inputs],
                "outputs": [enc(r) for r in res]})
dest = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("ops.json")
dest.write_text(json.dumps({"mxnet": mx.__version__, "cases": out}, indent=None) + "\n")
print(f"wrote {len(out)} cases to {dest}")
