"""The two models of the distributed tests (a dense MLP and the sparse LibSVM linear model),
their data and initial parameters, shared by the MPI scripts and the single-process
references in tests/distributed/test_dist.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import nnsym as mx
from nnsym import io as mio
from nnsym import module as mmod

LIBSVM = Path(__file__).resolve().parents[2] / "golden" / "training" / "module" / "linear.libsvm"
MLP_BATCH, SPARSE_BATCH, EPOCHS = 8, 4, 2


def mlp_symbol() -> Any:
    data = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="relu", name="relu1")
    h = mx.sym.FullyConnected(h, num_hidden=5, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def mlp_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 10)).astype(np.float32)
    y = rng.integers(0, 5, 64).astype(np.float32)
    return x, y


def mlp_init() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    shapes = {"fc1_weight": (16, 10), "fc1_bias": (16,), "fc2_weight": (5, 16),
              "fc2_bias": (5,)}
    return {k: mx.nd.array(0.3 * rng.standard_normal(s).astype(np.float32))
            for k, s in shapes.items()}


def linear_symbol(dim: int = 30) -> Any:
    x = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("weight", shape=(dim, 1), stype="row_sparse")
    b = mx.sym.Variable("bias", shape=(1,))
    pred = mx.sym.broadcast_add(mx.sym.sparse.dot(x, w), b)
    y = mx.sym.Variable("softmax_label")
    return mx.sym.LogisticRegressionOutput(pred, y, name="out")


def linear_init() -> dict[str, Any]:
    rng = np.random.default_rng(2)
    w = 0.1 * rng.standard_normal((30, 1)).astype(np.float32)
    return {"weight": mx.nd.array(w).tostype("row_sparse"), "bias": mx.nd.zeros((1,))}


def rows(batch: Any) -> dict[str, Any]:
    ids = np.unique(batch.data[0].indices.asnumpy()).astype(np.int64)
    return {"weight": mx.nd.array(ids, dtype="int64")}


def fit(model: str, train: Any, kvstore: Any) -> dict[str, np.ndarray]:
    """Trains ``model`` ('mlp' or 'sparse') on ``train``; the final parameters, dense."""
    if model == "mlp":
        sym, args = mlp_symbol(), mlp_init()
        opt = (("learning_rate", 0.1), ("momentum", 0.9), ("wd", 1e-3))
        kw: dict[str, Any] = {"eval_metric": "acc"}
    else:
        sym, args = linear_symbol(), linear_init()
        opt = (("learning_rate", 0.5), ("momentum", 0.9))
        kw = {"eval_metric": "mse", "sparse_row_id_fn": rows}
    mod = mmod.Module(sym, context=mx.cpu())
    mod.fit(train, arg_params=args, optimizer="sgd", optimizer_params=opt,
            num_epoch=EPOCHS, kvstore=kvstore, **kw)
    if model == "sparse":  # pull every row: the module holds only the last batch's rows
        kv = mod._kvstore
        w = mx.nd.sparse.zeros("row_sparse", (30, 1))
        kv.row_sparse_pull("weight", out=w, row_ids=mx.nd.arange(30, dtype="int64"))
        return {"weight": w.tostype("default").asnumpy(),
                "bias": mod.get_params()[0]["bias"].asnumpy()}
    return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}


def part_iter(model: str, num_parts: int, part_index: int) -> Any:
    """This worker's part of the training data."""
    if model == "mlp":
        x, y = mlp_data()
        return mio.NDArrayIter(x, y, batch_size=MLP_BATCH, num_parts=num_parts,
                               part_index=part_index)
    return mio.LibSVMIter(data_libsvm=str(LIBSVM), data_shape=(30,), batch_size=SPARSE_BATCH,
                          num_parts=num_parts, part_index=part_index)


def union_iter(model: str, num_parts: int) -> Any:
    """One iterator whose batch i joins batch i of every part: what ``num_parts`` workers
    together train on in step i."""
    parts = [[(b.data[0].asnumpy() if model == "mlp" else b.data[0].tostype("default")
               .asnumpy(), b.label[0].asnumpy()) for b in part_iter(model, num_parts, p)]
             for p in range(num_parts)]
    assert len({len(p) for p in parts}) == 1
    xs = np.concatenate([np.concatenate([p[i][0] for p in parts]) for i in range(len(parts[0]))])
    ys = np.concatenate([np.concatenate([p[i][1] for p in parts]) for i in range(len(parts[0]))])
    bs = (MLP_BATCH if model == "mlp" else SPARSE_BATCH) * num_parts
    if model == "mlp":
        return mio.NDArrayIter(xs, ys, batch_size=bs)
    return mio.NDArrayIter(mx.nd.array(xs).tostype("csr"), ys, batch_size=bs,
                           last_batch_handle="discard")
