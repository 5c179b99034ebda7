#!/usr/bin/env python
"""Regenerate the model-zoo checkpoint and parity fixtures in this folder.

Run with the *reference* interpreter (a venv holding mxnet==1.9.1), never with the
project interpreter; nnsym's tests only read the files this writes:

    ~/mxref/bin/python tests/golden/modelzoo/make_fixtures.py [--out DIR]

README.md beside this file says what each output holds. The script is deterministic:
two runs give byte-identical files. It imports nothing from nnsym or its tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
from pathlib import Path

# Before mxnet is imported: no MKLDNN subgraph fusion (the executor runs the graph as it is
# written), and one OpenMP thread so reductions always run in the same order.
os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import mxnet as mx
import numpy as np
from mxnet.gluon.model_zoo import vision

if mx.__version__ != "1.9.1":
    raise SystemExit(f"run this with MXNet 1.9.1 (~/mxref/bin/python), not {mx.__version__}")

HERE = Path(__file__).resolve().parent
INPUT_SHAPE = (2, 3, 64, 64)  # batch 2 so training-mode BatchNorm sees >1 value per channel
CLASSES = 10
SEED = 0


def resnet18_v1_w0125():
    # vision.resnet18_v1 is get_resnet(1, 18) = ResNetV1(BasicBlockV1, [2, 2, 2, 2],
    # [64, 64, 128, 256, 512]); the same network at an eighth of the width.
    return vision.resnet.ResNetV1(
        vision.resnet.BasicBlockV1, [2, 2, 2, 2], [8, 8, 16, 32, 64], classes=CLASSES
    )


def mobilenet_v1_w025():
    return vision.get_mobilenet(0.25, classes=CLASSES)


def mobilenet_v2_w025():
    return vision.get_mobilenet_v2(0.25, classes=CLASSES)


MODELS = {
    "resnet18_v1_w0125": resnet18_v1_w0125,
    "mobilenet_v1_w025": mobilenet_v1_w025,
    "mobilenet_v2_w025": mobilenet_v2_w025,
}


def perturb_batchnorm(net, rng):
    """Seeded random BatchNorm parameters and running statistics (after Xavier init they are
    gamma=1, beta=0, mean=0, var=1, which would make inference BatchNorm the identity)."""
    ranges = {
        "gamma": (0.5, 1.5),
        "beta": (-0.2, 0.2),
        "running_mean": (-0.2, 0.2),
        "running_var": (0.5, 2.0),
    }
    for name in sorted(net.collect_params()):
        p = net.collect_params()[name]
        for suffix, (lo, hi) in ranges.items():
            if name.endswith("_" + suffix):
                p.set_data(mx.nd.array(rng.uniform(lo, hi, p.shape).astype(np.float32)))


def run_executor(sym, arg_params, aux_params, data, head_grad, dtype):
    """MXNet's symbol executor on a loaded checkpoint, every input cast to ``dtype``: inference
    forward, then one training step (training forward, backward with ``head_grad``)."""
    exe = sym.simple_bind(
        mx.cpu(), data=INPUT_SHAPE, grad_req="write",
        type_dict={k: dtype for k in sym.list_inputs()},
    )
    for k, v in arg_params.items():
        exe.arg_dict[k][:] = v.astype(dtype)
    for k, v in aux_params.items():
        exe.aux_dict[k][:] = v.astype(dtype)
    exe.arg_dict["data"][:] = data.astype(dtype)

    # Everything is read back at once with asnumpy(): MXNet's engine does not order all reads
    # of executor-owned arrays after the executor's later writes to them (copy() is not safe).
    res = {"out_infer": exe.forward(is_train=False)[0].asnumpy()}
    res["out_train"] = exe.forward(is_train=True)[0].asnumpy()
    mx.nd.waitall()
    # MXNet 1.x moves BatchNorm's running statistics in the *backward* pass, not the forward.
    for k, v in aux_params.items():
        if not np.array_equal(exe.aux_dict[k].asnumpy(), v.astype(dtype).asnumpy()):
            raise SystemExit(f"{k} changed in a training forward")
    exe.backward(out_grads=[mx.nd.array(head_grad, dtype=dtype)])
    # The engine does not order reads of the aux states after the backward's writes to them
    # either: without this wait the first layers' statistics can still read as the old values.
    mx.nd.waitall()
    for k in sym.list_arguments():
        res["grad:" + k] = exe.grad_dict[k].asnumpy()
    for k in sym.list_auxiliary_states():
        res["aux_after:" + k] = exe.aux_dict[k].asnumpy()
    return res


def make_model(name, out):
    """Build, initialise, perturb, hybridize and export one network; then run MXNet's symbol
    executor on the exported checkpoint in float32 and in float64 and save what it computed."""
    mx.random.seed(SEED)
    rng = np.random.RandomState(SEED)
    data = rng.uniform(-1.0, 1.0, INPUT_SHAPE).astype(np.float32)
    head_grad = rng.standard_normal((INPUT_SHAPE[0], CLASSES)).astype(np.float32)

    with mx.name.NameManager():  # fresh, predictable name prefixes
        net = MODELS[name]()
    net.initialize(mx.init.Xavier())
    net(mx.nd.array(data))  # completes the deferred initialisation (inference mode)
    perturb_batchnorm(net, rng)
    net.hybridize()
    gluon_out = net(mx.nd.array(data)).asnumpy()
    prefix = str(out / name)
    net.export(prefix, epoch=0)  # <prefix>-symbol.json, <prefix>-0000.params

    # The symbol API on the checkpoint, as an nnsym user would do it.
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    data_nd, head_nd = mx.nd.array(data), mx.nd.array(head_grad)
    res32 = run_executor(sym, arg_params, aux_params, data_nd, head_nd, "float32")
    if not np.allclose(res32["out_infer"], gluon_out, rtol=1e-5, atol=1e-6):
        d = np.abs(res32["out_infer"] - gluon_out).max()
        raise SystemExit(f"{name}: executor and gluon disagree by {d}")
    res64 = run_executor(sym, arg_params, aux_params, data_nd, head_nd, "float64")
    mx.nd.save(
        f"{prefix}-expected.params",
        {"data": data_nd, "head_grad": head_nd, **{k: mx.nd.array(v) for k, v in res32.items()}},
    )
    mx.nd.save(
        f"{prefix}-expected64.params",
        {k: mx.nd.array(v, dtype=np.float64) for k, v in res64.items()},
    )

    grads = [k for k in res32 if k.startswith("grad:")]
    floor = 1e-3 * max(np.abs(res64[k]).max() for k in grads)

    def rel(k, floor=0.0):
        """max |float32 - float64| / max(max |float64|, floor): MXNet's own float32 error."""
        a, b = res32[k], res64[k]
        return float(np.abs(a - b).max() / max(np.abs(b).max(), floor, 1e-30))

    return {
        "input_shape": list(INPUT_SHAPE),
        "num_arguments": len(sym.list_arguments()),
        "num_aux_states": len(sym.list_auxiliary_states()),
        "num_parameters": int(sum(v.size for v in arg_params.values())),
        "operators": sorted({n["op"] for n in json.loads(sym.tojson())["nodes"]} - {"null"}),
        "out_infer_absmax": float(np.abs(res32["out_infer"]).max()),
        "out_train_absmax": float(np.abs(res32["out_train"]).max()),
        "f32_vs_f64_out_infer": rel("out_infer"),
        "f32_vs_f64_out_train": rel("out_train"),
        # scaled by max(the array's largest |value|, 1e-3 of the largest gradient), as the
        # tests scale errors (some exact gradients are 0: their float32 values are pure noise)
        "f32_vs_f64_grad_worst": max(rel(k, floor) for k in grads),
    }


def make_tiny(out):
    """A small checkpoint written by mx.model.save_checkpoint itself (not Gluon's export): the
    reference for the bytes nnsym's save_checkpoint writes."""
    rng = np.random.RandomState(SEED)
    with mx.name.NameManager():
        x = mx.sym.Variable("data")
        x = mx.sym.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
        x = mx.sym.BatchNorm(x, fix_gamma=False, name="bn")
        x = mx.sym.Activation(x, act_type="relu", name="relu")
        x = mx.sym.FullyConnected(x, num_hidden=3, name="fc")
    arg_shapes, _, aux_shapes = x.infer_shape(data=(1, 2, 4, 4))
    arg_params = {
        k: mx.nd.array(rng.standard_normal(s).astype(np.float32))
        for k, s in zip(x.list_arguments(), arg_shapes)
        if k != "data"
    }
    aux_params = {
        k: mx.nd.array(rng.uniform(0.5, 1.5, s).astype(np.float32))
        for k, s in zip(x.list_auxiliary_states(), aux_shapes)
    }
    mx.model.save_checkpoint(str(out / "tiny"), 3, x, arg_params, aux_params)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    ap.add_argument("--only", choices=sorted(MODELS), action="append", help="one model")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    models = {}
    for name in args.only or MODELS:
        models[name] = make_model(name, args.out)
        print(name, models[name], file=sys.stderr)
    make_tiny(args.out)
    files = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(args.out.iterdir())
        if p.name.endswith((".json", ".params")) and p.name != "meta.json"
    }
    meta = {
        "mxnet": mx.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "env": {k: os.environ[k] for k in ("MXNET_SUBGRAPH_BACKEND", "OMP_NUM_THREADS")},
        "seed": SEED,
        "models": models,
        "sha256": files,
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
