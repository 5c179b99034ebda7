"""Module.fit overhead: a 10-epoch MLP fit (784-128-64-10, SGD with momentum, batch 100) on
60k x 784 synthetic data, timed per epoch three ways in one run:

* ``nnsym Module.fit``: ``mod.fit(NDArrayIter(...), eval_metric='acc', ...)``, one epoch per
  call;
* ``nnsym bare executor``: the same loop by hand on ``simple_bind`` (copy the batch in,
  forward, backward, the same updater per parameter, the same Accuracy metric);
  the two alternate epoch by epoch in one process, so machine noise falls on both alike;
* ``MXNet Module.fit`` (1.9.1, in the reference venv, when ``~/mxref/bin/python`` exists).

Usage: ``python benchmarks/bench_module.py [--epochs N]``; prints JSON lines and a table
(the median epoch; the first epoch, which compiles, is excluded)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

N, D, CLASSES, BATCH = 60000, 784, 10, 100

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import {mx} as mx

    N, D, C, B, EPOCHS = {n}, {d}, {c}, {b}, {epochs}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, D)).astype(np.float32)
    y = rng.integers(0, C, N).astype(np.float32)
    data = mx.sym.Variable("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=128, name="fc1"),
                          act_type="relu")
    h = mx.sym.Activation(mx.sym.FullyConnected(h, num_hidden=64, name="fc2"),
                          act_type="relu")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=C, name="fc3"),
                               name="softmax")
    opt = (("learning_rate", 0.01), ("momentum", 0.9))
    times = []

    def fit_module():
        it = mx.io.NDArrayIter(x, y, batch_size=B)
        mod = mx.mod.Module(net, context=mx.cpu())
        last = [time.perf_counter()]

        def epoch_end(*a):
            now = time.perf_counter()
            times.append(now - last[0])
            last[0] = now

        mod.fit(it, eval_metric="acc", optimizer="sgd", optimizer_params=opt,
                initializer=mx.init.Xavier(), num_epoch=EPOCHS, epoch_end_callback=epoch_end)

    def interleaved():
        # Module.fit and the bare loop alternate epoch by epoch in one process, so machine
        # noise falls on both alike.
        import logging
        logging.disable(logging.WARNING)
        it = mx.io.NDArrayIter(x, y, batch_size=B)
        mod = mx.mod.Module(net, context=mx.cpu())
        ex = net.simple_bind(mx.cpu(), data=(B, D), softmax_label=(B,),
                             grad_req=dict((n, "null" if n in ("data", "softmax_label")
                                            else "write") for n in net.list_arguments()))
        init = mx.init.Xavier()
        for name, arr in ex.arg_dict.items():
            if name not in ("data", "softmax_label"):
                init(mx.init.InitDesc(name), arr)
        updater = mx.optimizer.get_updater(
            mx.optimizer.create("sgd", rescale_grad=1.0 / B, **dict(opt)))
        names = [n for n in net.list_arguments() if n not in ("data", "softmax_label")]
        pairs = [(k, ex.grad_dict[n], ex.arg_dict[n]) for k, n in enumerate(names)]
        metric = mx.metric.Accuracy()
        data_arr, label_arr = ex.arg_dict["data"], ex.arg_dict["softmax_label"]
        mod_t, bare_t = [], []
        for epoch in range(EPOCHS):
            it.reset()
            t0 = time.perf_counter()
            mod.fit(it, eval_metric="acc", optimizer="sgd", optimizer_params=opt,
                    initializer=mx.init.Xavier(), begin_epoch=epoch, num_epoch=epoch + 1)
            mod_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            metric.reset()
            for i in range(0, N, B):
                data_arr[:] = x[i:i + B]
                label_arr[:] = y[i:i + B]
                outs = ex.forward(is_train=True)
                ex.backward()
                for k, g, w in pairs:
                    updater(k, g, w)
                metric.update([label_arr], outs)
            bare_t.append(time.perf_counter() - t0)
        times.extend([mod_t, bare_t])

    {{"module": fit_module, "interleaved": interleaved}}[sys.argv[1]]()
    print(json.dumps(times))
    """
)


def run(python: str, mx: str, mode: str, epochs: int) -> Any:
    src = SCRIPT.format(mx=mx, n=N, d=D, c=CLASSES, b=BATCH, epochs=epochs)
    out = subprocess.run([python, "-c", src, mode], capture_output=True, text=True, check=True,
                         env={"OMP_NUM_THREADS": "2", "MXNET_SUBGRAPH_BACKEND": "NONE",
                              "PATH": "/usr/bin:/bin",
                              **{k: v for k, v in __import__("os").environ.items()
                                 if k.startswith(("NNSYM", "HOME", "PYTHON"))}})
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()
    rows = []
    peers = []
    # nnsym's Module.fit and bare loop alternate epoch by epoch in one process.
    t = time.perf_counter()
    mod_t, bare_t = run(sys.executable, "nnsym", "interleaved", args.epochs)
    for name, times in (("nnsym Module.fit", mod_t), ("nnsym bare executor", bare_t)):
        rows.append({"workload": "W9 MLP fit epoch 60k", "peer": name,
                     "median_s": statistics.median(times[1:] or times),
                     "min_s": min(times[1:] or times), "first_s": times[0],
                     "epochs": len(times), "wall_s": time.perf_counter() - t})
        print(json.dumps(rows[-1]), flush=True)
    mxref = Path.home() / "mxref" / "bin" / "python"
    if mxref.exists():
        peers.append(("MXNet 1.9.1 Module.fit", str(mxref), "mxnet", "module"))
    for name, py, mx, mode in peers:
        t = time.perf_counter()
        times = run(py, mx, mode, args.epochs)
        rows.append({"workload": "W9 MLP fit epoch 60k", "peer": name,
                     "median_s": statistics.median(times[1:] or times),
                     "min_s": min(times[1:] or times), "first_s": times[0],
                     "epochs": len(times), "wall_s": time.perf_counter() - t})
        print(json.dumps(rows[-1]), flush=True)
    base = next(r for r in rows if r["peer"] == "nnsym bare executor")["median_s"]
    print()
    for r in rows:
        print(f"{r['peer']:<26} median {r['median_s'] * 1e3:8.1f} ms/epoch "
              f"(min {r['min_s'] * 1e3:8.1f})   {r['median_s'] / base:5.3f}x bare")


if __name__ == "__main__":
    main()
