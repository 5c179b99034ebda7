"""Writes the Deconvolution / LRN / UpSampling fixtures of tests/ops/test_nn_extra.py.

Run with the MXNet 1.9.1 reference environment (never imported by the tests):

    MXNET_SUBGRAPH_BACKEND=NONE ~/mxref/bin/python tests/golden/ops_extra/make.py

1-D and 2-D Deconvolution cases run MXNet's own CPU kernel (im2col + GEMM,
MXNET_MKLDNN_ENABLED=0; 3-D runs on oneDNN, MXNet has no kernel of its own for it): the
oneDNN path of the default build gives different results for dilated kernels with a stride or
adj (it drops the dilation) and refuses some dilated shapes outright. LRN cases run the default
oneDNN path (the only one that takes an even nsize and 2-D data). Each case records its
backend. Cases are computed in two child processes, one per setting of MXNET_MKLDNN_ENABLED.

Every Deconvolution case is also computed as MXNet's Convolution transposed (a Convolution
bound on the head gradient: its forward is the deconvolution's data gradient, its backward from
the deconvolution's data the deconvolution's output and weight gradient). Where the two differ,
MXNet's Deconvolution is the one that is wrong -- its native kernel, for a dilated kernel with a
stride > 1, adds some columns twice and misses others -- and the fixture holds the Convolution
transpose (``"source": "Convolution transposed"``, with Deconvolution's error recorded).

cases.json lists every case; the arrays are <case>_<name>.npy beside it: the inputs, the
output-gradient head, the output (``out``) and the input gradients (``grad_<input>``) that
MXNet computed. shapes.json holds MXNet's infer_shape_partial results (or its error) for
partially and fully known inputs.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")

import mxnet as mx
import numpy as np

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent

# (case id, operator, params, input shapes, dtype)
CASES = [
    ("deconv1d_group_dilate_adj", "Deconvolution",
     dict(kernel=(3,), num_filter=6, num_group=2, stride=(2,), pad=(1,), dilate=(2,), adj=(1,),
          no_bias=False), [(2, 4, 5)], "float32"),
    ("deconv2d_bias", "Deconvolution", dict(kernel=(3, 3), num_filter=5, no_bias=False),
     [(2, 3, 4, 4)], "float32"),
    ("deconv2d_stride_pad_adj_dilate", "Deconvolution",
     dict(kernel=(3, 2), num_filter=2, stride=(2, 3), pad=(1, 0), adj=(1, 2), dilate=(1, 2)),
     [(1, 3, 4, 5)], "float32"),
    ("deconv2d_dilate_stride1", "Deconvolution",
     dict(kernel=(3, 3), num_filter=3, dilate=(2, 1), pad=(1, 1), no_bias=False),
     [(1, 2, 4, 4)], "float32"),
    ("deconv2d_target_shape", "Deconvolution",
     dict(kernel=(4, 4), num_filter=3, stride=(2, 2), target_shape=(9, 8)), [(2, 2, 4, 4)],
     "float32"),
    ("deconv2d_depthwise", "Deconvolution",
     dict(kernel=(3, 3), num_filter=4, num_group=4, stride=(2, 2), pad=(1, 1), no_bias=False),
     [(2, 4, 5, 5)], "float32"),
    ("deconv2d_group_f64", "Deconvolution",
     dict(kernel=(3, 3), num_filter=4, num_group=2, stride=(2, 2), pad=(1, 1), no_bias=False),
     [(2, 6, 3, 4)], "float64"),
    ("deconv3d", "Deconvolution",
     dict(kernel=(2, 3, 2), num_filter=2, stride=(2, 1, 2), pad=(0, 1, 0)), [(1, 2, 3, 3, 2)],
     "float32"),
    ("lrn_default", "LRN", dict(nsize=3), [(2, 7, 3, 4)], "float32"),
    ("lrn_params", "LRN", dict(nsize=5, alpha=0.5, beta=0.9, knorm=1.5), [(2, 6, 3, 3)],
     "float32"),
    ("lrn_even_nsize", "LRN", dict(nsize=4, alpha=1.0, beta=0.5, knorm=1.0), [(2, 7, 2, 2)],
     "float32"),
    ("lrn_2d", "LRN", dict(nsize=3, alpha=1.0), [(3, 5)], "float32"),
    ("up_nearest", "UpSampling", dict(scale=2, sample_type="nearest"), [(2, 3, 4, 5)],
     "float32"),
    ("up_nearest_scale3", "UpSampling", dict(scale=3, sample_type="nearest"), [(1, 2, 3, 2)],
     "float32"),
    ("up_nearest_concat", "UpSampling", dict(scale=2, sample_type="nearest"),
     [(2, 3, 4, 4), (2, 2, 2, 2), (2, 1, 8, 8)], "float32"),
    ("up_nearest_sum", "UpSampling",
     dict(scale=3, sample_type="nearest", multi_input_mode="sum"), [(2, 3, 2, 2), (2, 3, 1, 1)],
     "float32"),
    ("up_bilinear2", "UpSampling", dict(scale=2, sample_type="bilinear", num_filter=3),
     [(1, 3, 3, 4)], "float32"),
    ("up_bilinear3_f64", "UpSampling", dict(scale=3, sample_type="bilinear", num_filter=2),
     [(2, 2, 3, 2)], "float64"),
]

# (operator, params, {input: shape (0 = unknown dim) or None}) for infer_shape_partial
SHAPES = [
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4), {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, stride=(2, 2), pad=(1, 1), adj=(1, 1)),
     {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, stride=(2, 2), pad=(1, 1), adj=(1, 1),
                           no_bias=False), {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(4, 4), num_filter=4, stride=(2, 2), target_shape=(10, 10)),
     {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(4, 4), num_filter=4, stride=(2, 2), target_shape=(11, 10)),
     {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(4, 4), num_filter=4, stride=(2, 2), target_shape=(0, 10)),
     {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, stride=(1, 1), target_shape=(7, 8)),
     {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(4, 4), num_filter=4, stride=(2, 2), target_shape=(30, 10)),
     {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, stride=(1, 1), target_shape=(6, 7)),
     {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(3,), num_filter=6, num_group=2, stride=(2,), dilate=(2,),
                           pad=(1,), adj=(1,)), {"data": (2, 4, 5)}),
    ("Deconvolution", dict(kernel=(3, 3, 3), num_filter=4, stride=(2, 1, 1)),
     {"data": (2, 4, 5, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, layout="NHWC"), {"data": (2, 5, 5, 4)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=6, num_group=3),
     {"data": (2, 6, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=6, num_group=4), {"data": (2, 8, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=6, num_group=4), {"data": (2, 6, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, pad=(5, 5)), {"data": (2, 4, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4), {"data": (2, 4, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, stride=(2, 2)), {"data": (0, 4, 5, 0)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4, stride=(2, 2)), {"data": (2, 0, 5, 5)}),
    ("Deconvolution", dict(kernel=(3, 3), num_filter=4), {"data": None}),
    ("LRN", dict(nsize=3), {"data": (2, 7, 3, 4)}),
    ("LRN", dict(nsize=3), {"data": (2, 0, 3)}),
    ("LRN", dict(nsize=5), {"data": None}),
    ("UpSampling", dict(scale=2, sample_type="nearest"), {"arg0": (2, 3, 4, 5)}),
    ("UpSampling", dict(scale=2, sample_type="nearest"), {"arg0": (2, 0, 4, 5)}),
    ("UpSampling", dict(scale=2, sample_type="nearest"),
     {"arg0": (2, 3, 4, 4), "arg1": (2, 5, 2, 2)}),
    ("UpSampling", dict(scale=2, sample_type="nearest", multi_input_mode="sum"),
     {"arg0": (2, 3, 4, 4), "arg1": (2, 3, 2, 2)}),
    ("UpSampling", dict(scale=2, sample_type="nearest", multi_input_mode="sum"),
     {"arg0": (2, 3, 4, 4), "arg1": (2, 4, 2, 2)}),
    ("UpSampling", dict(scale=2, sample_type="nearest"),
     {"arg0": (2, 3, 4, 4), "arg1": (2, 5, 3, 3)}),
    ("UpSampling", dict(scale=2, sample_type="nearest"), {"arg0": (2, 3, 4)}),
    ("UpSampling", dict(scale=2, sample_type="bilinear", num_filter=3),
     {"data": (2, 3, 4, 4)}),
    ("UpSampling", dict(scale=3, sample_type="bilinear", num_filter=3),
     {"data": (2, 3, 4, 4)}),
]


def _symbol(op, params, n_inputs):
    if op == "UpSampling" and params["sample_type"] == "nearest":
        xs = [mx.sym.Variable(f"arg{i}") for i in range(n_inputs)]
        return getattr(mx.sym, op)(*xs, name="node", **params)
    return getattr(mx.sym, op)(mx.sym.Variable("data"), name="node", **params)


def _pads(params, xs):
    """Deconvolution's padding (MXNet's DeconvolutionParam::InferPad)."""
    k = params["kernel"]
    nd = len(k)
    stride = params.get("stride", (1,) * nd)
    dilate = params.get("dilate", (1,) * nd)
    target = params.get("target_shape", ())
    if any(target):
        full = [s * (x - 1) + (kk - 1) * d + 1 for s, x, kk, d in zip(stride, xs, k, dilate)]
        return tuple((f - t + 1) // 2 for f, t in zip(full, target))
    return tuple(params.get("pad", (0,) * nd))


def deconv_by_convolution(params, arrays, head, dtype):
    """Deconvolution as MXNet's Convolution transposed: one Convolution bound on the head
    gradient (its data) and the weight: its forward is the deconvolution's data gradient, its
    backward from the deconvolution's data gives the deconvolution's output (data gradient)
    and weight gradient."""
    x, w = arrays["data"], arrays["node_weight"]
    nd = len(params["kernel"])
    conv = mx.sym.Convolution(
        mx.sym.Variable("y"), mx.sym.Variable("w"), kernel=params["kernel"],
        stride=params.get("stride", (1,) * nd), dilate=params.get("dilate", (1,) * nd),
        pad=_pads(params, x.shape[2:]), num_filter=x.shape[1],
        num_group=params.get("num_group", 1), no_bias=True)
    args = {"y": mx.nd.array(head, dtype=dtype), "w": mx.nd.array(w, dtype=dtype)}
    grads = {k: mx.nd.zeros(v.shape, dtype=dtype) for k, v in args.items()}
    exe = conv.bind(mx.cpu(), args, args_grad=grads)
    res = {"grad_data": exe.forward(is_train=True)[0].asnumpy()}
    exe.backward([mx.nd.array(x, dtype=dtype)])
    res["out"] = grads["y"].asnumpy()
    res["grad_node_weight"] = grads["w"].asnumpy()
    if "node_bias" in arrays:
        b = arrays["node_bias"]
        res["out"] = res["out"] + b.reshape(1, -1, *([1] * nd))
        res["grad_node_bias"] = head.sum(axis=(0, *range(2, 2 + nd)), dtype=np.float64)
    return {k: v.astype(dtype) for k, v in res.items()}


def make_case(cid, op, params, shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    s = _symbol(op, params, len(shapes))
    names = s.list_arguments()
    known = {n: sh for n, sh in zip(names, shapes)}
    arg_shapes, out_shapes, _ = s.infer_shape(**known)
    arrays = {n: rng.uniform(-2, 2, sh).astype(dtype) for n, sh in zip(names, arg_shapes)}
    head = rng.standard_normal(out_shapes[0]).astype(dtype)
    args = {n: mx.nd.array(a, dtype=dtype) for n, a in arrays.items()}
    grads = {n: mx.nd.zeros(a.shape, dtype=dtype) for n, a in arrays.items()}
    exe = s.bind(mx.cpu(), args, args_grad=grads, grad_req="write")
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward([mx.nd.array(head, dtype=dtype)])
    files = {}
    for n, a in arrays.items():
        files[n] = a
        files[f"grad_{n}"] = grads[n].asnumpy()
    files["head"] = head
    files["out"] = out
    rec = {"id": cid, "op": op, "params": params, "inputs": names, "dtype": dtype,
           "source": op}
    if op == "Deconvolution":
        ref = deconv_by_convolution(params, arrays, head, dtype)
        diff = max(float(np.abs(ref[k] - files[k]).max()) for k in ref)
        scale = max(float(np.abs(ref[k]).max()) for k in ref)
        if diff > 1e-4 * scale:
            # MXNet's Deconvolution kernels are wrong here (see the module docstring): the
            # fixture holds the Convolution transpose, and records how far Deconvolution is.
            files.update(ref)
            rec["source"] = "Convolution transposed"
            rec["mxnet_deconvolution_max_abs_error"] = diff
    rec["arrays"] = sorted(files)
    for k, v in files.items():
        np.save(OUT / f"{cid}_{k}.npy", v)
    return rec


def shape_case(op, params, given):
    n = len(given) if op == "UpSampling" and params["sample_type"] == "nearest" else 1
    s = _symbol(op, params, n)
    kw = {k: v for k, v in given.items() if v is not None}
    rec = {"op": op, "params": params, "given": given, "arguments": s.list_arguments()}
    try:
        a, o, _ = s.infer_shape_partial(**kw)
        rec["arg_shapes"] = [list(x) for x in a]
        rec["out_shapes"] = [list(x) for x in o]
    except mx.base.MXNetError as e:
        rec["error"] = str(e).split("\n")[0]
    return rec


def _native(case):
    """1-D/2-D Deconvolution on MXNet's own kernel (it has no 3-D one: oneDNN runs those)."""
    return case[1] == "Deconvolution" and len(case[2]["kernel"]) < 3


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    if os.environ.get("_OPS_EXTRA_CHILD"):
        native = os.environ.get("MXNET_MKLDNN_ENABLED") == "0"
        done = [make_case(*c, seed=i) for i, c in enumerate(CASES) if _native(c) == native]
        for d in done:
            d["backend"] = "native" if native else "default (oneDNN where supported)"
        print(json.dumps(done))
        return
    cases = []
    for flag in ("0", "1"):
        env = dict(os.environ, _OPS_EXTRA_CHILD="1", MXNET_MKLDNN_ENABLED=flag,
                   MXNET_STORAGE_FALLBACK_LOG_VERBOSE="0")
        res = subprocess.run([sys.executable, __file__, str(OUT)], env=env, check=True,
                             capture_output=True, text=True)
        cases += json.loads(res.stdout.strip().splitlines()[-1])
    order = [c[0] for c in CASES]
    cases.sort(key=lambda c: order.index(c["id"]))
    meta = {"mxnet": mx.__version__, "numpy": np.__version__,
            "MXNET_SUBGRAPH_BACKEND": os.environ["MXNET_SUBGRAPH_BACKEND"]}
    (OUT / "cases.json").write_text(json.dumps({"meta": meta, "cases": cases}, indent=1) + "\n")
    shapes = [shape_case(*c) for c in SHAPES]
    (OUT / "shapes.json").write_text(json.dumps(shapes, indent=1) + "\n")


if __name__ == "__main__":
    main()
