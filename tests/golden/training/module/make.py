"""Make the Module.fit parity fixtures with MXNet 1.9.1 (run in the reference venv):

    ~/mxref/bin/python tests/golden/training/module/make.py tests/golden/training/module

For each case it writes ``<case>.npz``: the data, the initial parameters, the metric values
after every batch (``metric_<epoch>_<batch>``), the parameters after every epoch
(``epoch<k>:<name>``) and the validation score, and for the MLP an MXNet checkpoint written by
``mx.callback.do_checkpoint`` (``mlp-symbol.json``, ``mlp-0002.params``). nnsym's tests read
these files; they never import mxnet.
"""

import json
import os
import sys

import mxnet as mx
import numpy as np

OUT = sys.argv[1]


def mlp():
    data = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="relu", name="relu1")
    h = mx.sym.FullyConnected(h, num_hidden=5, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def convbn():
    data = mx.sym.Variable("data")
    h = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), no_bias=True,
                              name="conv1")
    h = mx.sym.BatchNorm(h, name="bn1")
    h = mx.sym.Activation(h, act_type="relu", name="relu1")
    h = mx.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    h = mx.sym.Flatten(h, name="flat")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc1")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def linear(dim):
    x = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("weight", shape=(dim, 1), stype="row_sparse")
    b = mx.sym.Variable("bias", shape=(1,))
    pred = mx.sym.broadcast_add(mx.sym.sparse.dot(x, w), b)
    y = mx.sym.Variable("softmax_label")
    return mx.sym.LogisticRegressionOutput(pred, y, name="out")


def initial(sym, shapes, rng):
    mod = mx.mod.Module(sym, context=mx.cpu())
    mod.bind(data_shapes=shapes[0], label_shapes=shapes[1])
    mod.init_params(mx.init.Uniform(0.5))
    args, auxs = mod.get_params()
    args = {k: (rng.standard_normal(v.shape) * 0.3).astype(np.float32) for k, v in args.items()}
    auxs = {k: (np.ones(v.shape) if "var" in k else np.zeros(v.shape)).astype(np.float32)
            for k, v in auxs.items()}
    return args, auxs


def run(name, sym, train, val, fit_kwargs, rng, extra=None, checkpoint=None):
    args, auxs = initial(sym, (train.provide_data, train.provide_label), rng)
    rec = {}
    for k, v in args.items():
        rec["init_arg:" + k] = v
    for k, v in auxs.items():
        rec["init_aux:" + k] = v
    metrics = []

    def on_batch(p):
        metrics.append([p.epoch, p.nbatch] + [float(v) for _, v in p.eval_metric.get_name_value()])

    def on_epoch(epoch, symbol, a, x):
        for k, v in a.items():
            rec["epoch%d_arg:%s" % (epoch, k)] = v.tostype("default").asnumpy()
        for k, v in x.items():
            rec["epoch%d_aux:%s" % (epoch, k)] = v.asnumpy()

    cbs = [on_epoch]
    if checkpoint:
        cbs.append(mx.callback.do_checkpoint(os.path.join(OUT, checkpoint)))
    mod = mx.mod.Module(sym, context=mx.cpu(), **(extra or {}))
    mod.fit(train, eval_data=val, batch_end_callback=on_batch, epoch_end_callback=cbs,
            arg_params={k: mx.nd.array(v) for k, v in args.items()},
            aux_params={k: mx.nd.array(v) for k, v in auxs.items()}, **fit_kwargs)
    rec["metrics"] = np.array(metrics, dtype=np.float64)
    score = mod.score(val, fit_kwargs.get("eval_metric", "acc"))
    rec["score"] = np.array([v for _, v in score], dtype=np.float64)
    rec["predict"] = mod.predict(val).asnumpy()
    return rec


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    meta = {}

    # 1. MLP, SGD with momentum and weight decay; 70 samples in batches of 16 (the last is
    # padded from the start, as NDArrayIter's default 'pad' does).
    x = rng.standard_normal((70, 10)).astype(np.float32)
    y = rng.integers(0, 5, 70).astype(np.float32)
    vx = rng.standard_normal((24, 10)).astype(np.float32)
    vy = rng.integers(0, 5, 24).astype(np.float32)
    train = mx.io.NDArrayIter(x, y, batch_size=16, shuffle=False)
    val = mx.io.NDArrayIter(vx, vy, batch_size=16, shuffle=False)
    kw = dict(eval_metric="acc", optimizer="sgd", num_epoch=3, kvstore="local",
              optimizer_params=(("learning_rate", 0.1), ("momentum", 0.9), ("wd", 1e-3)))
    rec = run("mlp_sgd", mlp(), train, val, kw, rng, checkpoint="mlp")
    rec.update(x=x, y=y, vx=vx, vy=vy)
    np.savez_compressed(os.path.join(OUT, "mlp_sgd.npz"), **rec)
    meta["mlp_sgd"] = {"batch_size": 16, "num_epoch": 3, "metric": "acc"}

    # 2. Conv + BatchNorm + Adam; two metrics.
    x = rng.standard_normal((24, 2, 6, 6)).astype(np.float32)
    y = rng.integers(0, 3, 24).astype(np.float32)
    vx = rng.standard_normal((8, 2, 6, 6)).astype(np.float32)
    vy = rng.integers(0, 3, 8).astype(np.float32)
    train = mx.io.NDArrayIter(x, y, batch_size=8, shuffle=False)
    val = mx.io.NDArrayIter(vx, vy, batch_size=8, shuffle=False)
    kw = dict(eval_metric=["acc", "ce"], optimizer="adam", num_epoch=2,
              optimizer_params=(("learning_rate", 0.01),))
    rec = run("convbn_adam", convbn(), train, val, kw, rng)
    rec.update(x=x, y=y, vx=vx, vy=vy)
    np.savez_compressed(os.path.join(OUT, "convbn_adam.npz"), **rec)

    # 3. Sparse linear model on LibSVM data, row_sparse weight, lazy SGD with momentum.
    dim = 30
    lines = []
    for i in range(40):
        cols = np.sort(rng.choice(dim, size=int(rng.integers(1, 5)), replace=False))
        vals = rng.standard_normal(len(cols)).round(3)
        lab = int(rng.integers(0, 2))
        lines.append("%d %s" % (lab, " ".join("%d:%g" % (c, v) for c, v in zip(cols, vals))))
    path = os.path.join(OUT, "linear.libsvm")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    train = mx.io.LibSVMIter(data_libsvm=path, data_shape=(dim,), batch_size=8)
    val = mx.io.LibSVMIter(data_libsvm=path, data_shape=(dim,), batch_size=8)
    kw = dict(eval_metric="mse", optimizer="sgd", num_epoch=2,
              optimizer_params=(("learning_rate", 0.5), ("momentum", 0.9)))
    rec = run("linear_sparse", linear(dim), train, val, kw, rng)
    np.savez_compressed(os.path.join(OUT, "linear_sparse.npz"), **rec)
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump({"mxnet": mx.__version__, **meta}, f, indent=1)


main()
