"""Module.fit against MXNet 1.9.1: the same initial parameters and unshuffled data give the
same metric values after every batch, the same parameters after every epoch, the same
validation score and predictions (fixtures from tests/golden/training/module/make.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import nnsym as mx
from nnsym import io as mio
from nnsym import module as mmod

GOLD = Path(__file__).resolve().parents[1] / "golden" / "training" / "module"


def _mlp():
    data = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="relu", name="relu1")
    h = mx.sym.FullyConnected(h, num_hidden=5, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def _convbn():
    data = mx.sym.Variable("data")
    h = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), no_bias=True,
                              name="conv1")
    h = mx.sym.BatchNorm(h, name="bn1")
    h = mx.sym.Activation(h, act_type="relu", name="relu1")
    h = mx.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    h = mx.sym.Flatten(h, name="flat")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc1")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def _linear(dim):
    x = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("weight", shape=(dim, 1), stype="row_sparse")
    b = mx.sym.Variable("bias", shape=(1,))
    pred = mx.sym.broadcast_add(mx.sym.sparse.dot(x, w), b)
    y = mx.sym.Variable("softmax_label")
    return mx.sym.LogisticRegressionOutput(pred, y, name="out")


def _fit(sym, fix, train, val, **kw):
    args = {k[len("init_arg:"):]: mx.nd.array(fix[k]) for k in fix.files
            if k.startswith("init_arg:")}
    auxs = {k[len("init_aux:"):]: mx.nd.array(fix[k]) for k in fix.files
            if k.startswith("init_aux:")}
    metrics, params = [], {}

    def on_batch(p):
        metrics.append([p.epoch, p.nbatch] + [v for _, v in p.eval_metric.get_name_value()])

    def on_epoch(epoch, symbol, a, x):
        for k, v in a.items():
            params[f"epoch{epoch}_arg:{k}"] = v.tostype("default").asnumpy().copy()
        for k, v in x.items():
            params[f"epoch{epoch}_aux:{k}"] = v.asnumpy().copy()

    mod = mmod.Module(sym, context=mx.cpu())
    mod.fit(train, eval_data=val, batch_end_callback=on_batch, epoch_end_callback=on_epoch,
            arg_params=args, aux_params=auxs, **kw)
    return mod, np.array(metrics), params


def _check(fix, mod, metrics, params, val, metric, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(metrics, fix["metrics"], rtol=rtol, atol=atol)
    want = {k for k in fix.files if k.startswith("epoch")}
    assert set(params) == want
    for k in sorted(want):
        np.testing.assert_allclose(params[k], fix[k], rtol=rtol, atol=atol, err_msg=k)
    score = mod.score(val, metric)
    np.testing.assert_allclose([v for _, v in score], fix["score"], rtol=rtol, atol=atol)
    np.testing.assert_allclose(mod.predict(val).asnumpy(), fix["predict"], rtol=rtol,
                               atol=atol)


def test_mlp_sgd_momentum_wd_matches_mxnet():
    fix = np.load(GOLD / "mlp_sgd.npz")
    train = mio.NDArrayIter(fix["x"], fix["y"], batch_size=16, shuffle=False)
    val = mio.NDArrayIter(fix["vx"], fix["vy"], batch_size=16, shuffle=False)
    mod, metrics, params = _fit(
        _mlp(), fix, train, val, eval_metric="acc", optimizer="sgd", num_epoch=3,
        optimizer_params=(("learning_rate", 0.1), ("momentum", 0.9), ("wd", 1e-3)))
    _check(fix, mod, metrics, params, val, "acc")


def test_convbn_adam_two_metrics_matches_mxnet():
    fix = np.load(GOLD / "convbn_adam.npz")
    train = mio.NDArrayIter(fix["x"], fix["y"], batch_size=8, shuffle=False)
    val = mio.NDArrayIter(fix["vx"], fix["vy"], batch_size=8, shuffle=False)
    mod, metrics, params = _fit(_convbn(), fix, train, val, eval_metric=["acc", "ce"],
                                optimizer="adam", num_epoch=2,
                                optimizer_params=(("learning_rate", 0.01),))
    _check(fix, mod, metrics, params, val, ["acc", "ce"], rtol=2e-4, atol=2e-5)


def test_sparse_linear_lazy_sgd_matches_mxnet():
    fix = np.load(GOLD / "linear_sparse.npz")
    path = str(GOLD / "linear.libsvm")
    train = mio.LibSVMIter(data_libsvm=path, data_shape=(30,), batch_size=8)
    val = mio.LibSVMIter(data_libsvm=path, data_shape=(30,), batch_size=8)
    mod, metrics, params = _fit(_linear(30), fix, train, val, eval_metric="mse",
                                optimizer="sgd", num_epoch=2,
                                optimizer_params=(("learning_rate", 0.5), ("momentum", 0.9)))
    _check(fix, mod, metrics, params, val, "mse")


def test_mxnet_checkpoint_loads_and_predicts(tmp_path):
    fix = np.load(GOLD / "mlp_sgd.npz")
    mod = mmod.Module.load(str(GOLD / "mlp"), 3)
    val = mio.NDArrayIter(fix["vx"], fix["vy"], batch_size=16, shuffle=False)
    mod.bind(data_shapes=val.provide_data, label_shapes=val.provide_label, for_training=False)
    np.testing.assert_allclose(mod.predict(val).asnumpy(), fix["predict"], rtol=1e-5,
                               atol=1e-6)
    # ... and what nnsym writes reads back to the same parameters.
    mod.save_checkpoint(str(tmp_path / "again"), 3)
    sym, args, _ = mx.model.load_checkpoint(str(tmp_path / "again"), 3)
    for k in args:
        np.testing.assert_array_equal(args[k].asnumpy(), fix[f"epoch2_arg:{k}"])
    assert sym.tojson() == mod.symbol.tojson()


def test_sparse_linear_on_a_kvstore_with_row_pulls_matches_mxnet():
    """The same model with the optimizer on a kvstore: each batch's weight rows are pulled
    by ``prepare(batch, sparse_row_id_fn)``, as MXNet's sparse example does."""
    fix = np.load(GOLD / "linear_sparse.npz")
    path = str(GOLD / "linear.libsvm")
    train = mio.LibSVMIter(data_libsvm=path, data_shape=(30,), batch_size=8)
    val = mio.LibSVMIter(data_libsvm=path, data_shape=(30,), batch_size=8)
    pulled = []

    def rows(batch):
        ids = np.unique(batch.data[0].indices.asnumpy()).astype(np.int64)
        pulled.append(len(ids))
        return {"weight": mx.nd.array(ids, dtype="int64")}

    mod, metrics, params = _fit(_linear(30), fix, train, val, eval_metric="mse",
                                optimizer="sgd", num_epoch=2, kvstore=mx.kv.create("local"),
                                sparse_row_id_fn=rows,
                                optimizer_params=(("learning_rate", 0.5), ("momentum", 0.9)))
    assert pulled and max(pulled) < 30  # only the batch's rows were pulled
    _check(fix, mod, metrics, params, val, "mse")
