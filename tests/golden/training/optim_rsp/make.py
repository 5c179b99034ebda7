"""Writes fixtures.npz: lazy row_sparse updates by MXNet 1.9.1 (run in ~/mxref, see README.md).

Weights are row_sparse storing every row (MXNet requires that); states are created as MXNet's
optimizers create them, ``mx.nd.sparse.zeros('row_sparse', shape)`` (no stored rows). Each case
runs STEPS lazy steps with row_sparse gradients over varying row sets (one step has no rows).
Keys, per case C and step t: ``C/w0`` (initial weight), ``grad_rows``/``grad_data`` per step,
``C/w{t}`` the weight after step t, ``C/s{i}_{t}`` state i (dense values) and
``C/s{i}_{t}_rows`` its stored row ids.
"""

import json
from pathlib import Path

import mxnet as mx
import numpy as np

SHAPE = (20, 3)
ROWS = [[1, 4, 7], [0, 4, 19], [], [2, 3, 4, 5, 6, 18], [7, 19]]
OUT = Path(__file__).resolve().parent

# name: (operator or optimizer, number of states, keyword arguments)
OPS = {
    "sgd": ("sgd_update", 0, dict(lr=0.1, wd=0.01, rescale_grad=0.5, lazy_update=True)),
    "sgd_mom": ("sgd_mom_update", 1, dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5,
                                          clip_gradient=0.8, lazy_update=True)),
    "adam": ("adam_update", 2, dict(lr=0.05, beta1=0.9, beta2=0.99, epsilon=1e-6, wd=0.02,
                                    lazy_update=True)),
    "ftrl": ("ftrl_update", 2, dict(lr=0.1, lamda1=0.01, beta=1.0, wd=0.01)),
    "adagrad": ("adagrad_update", 1, dict(lr=0.1, epsilon=1e-7, rescale_grad=0.9)),
}
OPTIMIZERS = {
    "opt_sgd_mom": ("sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01, lazy_update=True)),
    "opt_adam": ("adam", dict(learning_rate=0.05, wd=0.01, lazy_update=True)),
    "opt_adagrad": ("adagrad", dict(learning_rate=0.1)),
    "opt_ftrl": ("ftrl", dict(learning_rate=0.1, lamda1=0.01, wd=0.01)),
}


def main() -> None:
    rng = np.random.RandomState(7)
    out = {}
    grads = []
    for t, rows in enumerate(ROWS):
        data = rng.uniform(-1, 1, (len(rows), SHAPE[1])).astype(np.float32)
        out[f"grad_rows_{t}"] = np.array(rows, np.int64)
        out[f"grad_data_{t}"] = data
        grads.append((data, rows))
    w0 = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    out["w0"] = w0

    def grad(t):
        data, rows = grads[t]
        return mx.nd.sparse.row_sparse_array((data, np.array(rows, np.int64)), shape=SHAPE)

    for name, (op, nstates, kw) in OPS.items():
        w = mx.nd.array(w0).tostype("row_sparse")
        states = [mx.nd.sparse.zeros("row_sparse", SHAPE) for _ in range(nstates)]
        fn = getattr(mx.nd.sparse, op)
        for t in range(len(ROWS)):
            fn(w, grad(t), *states, out=w, **kw)
            out[f"{name}/w{t}"] = w.asnumpy()
            for i, s in enumerate(states):
                out[f"{name}/s{i}_{t}"] = s.asnumpy()
                out[f"{name}/s{i}_{t}_rows"] = s.indices.asnumpy().astype(np.int64)
    for name, (opt_name, kw) in OPTIMIZERS.items():
        opt = mx.optimizer.create(opt_name, **kw)
        w = mx.nd.array(w0).tostype("row_sparse")
        state = opt.create_state(0, w)
        for t in range(len(ROWS)):
            opt.update(0, w, grad(t), state)
            out[f"{name}/w{t}"] = w.asnumpy()
    np.savez_compressed(OUT / "fixtures.npz", **out)
    meta = {"shape": SHAPE, "rows": ROWS, "ops": {k: [v[0], v[1], v[2]] for k, v in OPS.items()},
            "optimizers": {k: list(v) for k, v in OPTIMIZERS.items()}, "mxnet": mx.__version__}
    (OUT / "cases.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
