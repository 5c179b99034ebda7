"""Bound-graph workloads side by side (see ../shared/BENCHMARKS.md):

- W1: MLP training step, data (64, 784) -> FC512 -> relu -> FC256 -> relu -> FC10 ->
  SoftmaxOutput; forward (train) + backward to all weights, no optimizer.
- W2: the same MLP at batch 1, forward only (framework overhead).
- W8 (part): planned bytes of W1's bound graph.

Peers: hand-written numpy (always), torch eager when importable. Goals (issue 4): W2 <= 0.5x
numpy, W1 <= 1.0x numpy. Usage: ``python benchmarks/bench_executor.py [--quick]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row

LAYERS = (512, 256, 10)


def mlp_symbol(sym: Any = None) -> Any:
    """W1/W2's MLP, built with ``sym`` (a symbol module: nnsym's by default, or MXNet's)."""
    if sym is None:
        from nnsym import sym
    x = sym.Variable("data")
    for i, h in enumerate(LAYERS, 1):
        x = sym.FullyConnected(x, num_hidden=h, name=f"fc{i}")
        if i < len(LAYERS):
            x = sym.Activation(x, act_type="relu", name=f"relu{i}")
    return sym.SoftmaxOutput(x, name="softmax")


def make_params(rng):
    params, fan_in = {}, 784
    for i, h in enumerate(LAYERS, 1):
        params[f"fc{i}_weight"] = (rng.standard_normal((h, fan_in)) * np.sqrt(2 / fan_in)).astype(
            np.float32)
        params[f"fc{i}_bias"] = np.zeros(h, np.float32)
        fan_in = h
    return params


def numpy_forward(params, x):
    h = x
    for i in range(1, len(LAYERS) + 1):
        h = h @ params[f"fc{i}_weight"].T + params[f"fc{i}_bias"]
        if i < len(LAYERS):
            h = np.maximum(h, 0)
    e = np.exp(h - h.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def numpy_train_step(params, x, y):
    acts = [x]
    h = x
    for i in range(1, len(LAYERS) + 1):
        h = h @ params[f"fc{i}_weight"].T + params[f"fc{i}_bias"]
        if i < len(LAYERS):
            h = np.maximum(h, 0)
        acts.append(h)
    e = np.exp(h - h.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    d = p
    d[np.arange(len(y)), y] -= 1
    grads = {}
    for i in range(len(LAYERS), 0, -1):
        grads[f"fc{i}_weight"] = d.T @ acts[i - 1]
        grads[f"fc{i}_bias"] = d.sum(0)
        if i > 1:
            d = (d @ params[f"fc{i}_weight"]) * (acts[i - 1] > 0)
    return grads


def bind(batch, params, grad_req):
    net = mlp_symbol()
    reqs = {k: (grad_req if k in params else "null") for k in net.list_arguments()}
    exe = net.simple_bind(data=(batch, 784), grad_req=reqs)
    for k, v in params.items():
        exe.arg_dict[k][:] = v
    return exe


def torch_peers(params, x1, x64, y64):
    try:
        import torch
    except ImportError:
        return []
    torch.set_num_threads(2)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    tx1, tx64, ty = torch.tensor(x1), torch.tensor(x64), torch.tensor(y64)

    def fwd(x):
        h = x
        for i in range(1, len(LAYERS) + 1):
            h = torch.nn.functional.linear(h, tp[f"fc{i}_weight"], tp[f"fc{i}_bias"])
            if i < len(LAYERS):
                h = torch.relu(h)
        return h

    def w1():
        for v in tp.values():
            v.grad = None
        torch.nn.functional.cross_entropy(fwd(tx64), ty, reduction="sum").backward()

    def w2():
        with torch.no_grad():
            return torch.softmax(fwd(tx1), 1)

    return [("W1 MLP train step (64)", "torch eager", w1), ("W2 MLP forward (1)", "torch eager",
                                                            w2)]


def main() -> None:
    samples = 5 if "--quick" in sys.argv else 10
    rng = np.random.default_rng(0)
    print("#", environment())
    params = make_params(rng)
    x64 = rng.standard_normal((64, 784)).astype(np.float32)
    y64 = rng.integers(0, 10, 64)
    x1 = x64[:1].copy()
    results = []

    # W1
    exe = bind(64, params, "write")
    exe.arg_dict["data"][:] = x64
    exe.arg_dict["softmax_label"][:] = y64

    def w1_nnsym():
        exe.forward(is_train=True)
        exe.backward()

    w1_nnsym()
    want = numpy_train_step(params, x64, y64)
    for k, v in want.items():
        np.testing.assert_allclose(exe.grad_dict[k].asnumpy(), v, rtol=1e-4,
                                   atol=1e-4 * np.abs(v).max())
    results.append(row("W1 MLP train step (64)", "nnsym executor", measure(w1_nnsym,
                                                                            samples=samples),
                       planned_bytes=exe.plan.total_bytes))
    results.append(row("W1 MLP train step (64)", "numpy hand-written",
                       measure(lambda: numpy_train_step(params, x64, y64), samples=samples)))

    # W2
    exe1 = bind(1, params, "null")
    exe1.arg_dict["data"][:] = x1

    def w2_nnsym():
        return exe1.forward(is_train=False)

    np.testing.assert_allclose(w2_nnsym()[0].asnumpy(), numpy_forward(params, x1), rtol=1e-4,
                               atol=1e-6)
    results.append(row("W2 MLP forward (1)", "nnsym executor", measure(w2_nnsym,
                                                                        samples=samples),
                       planned_bytes=exe1.plan.total_bytes))
    results.append(row("W2 MLP forward (1)", "numpy hand-written",
                       measure(lambda: numpy_forward(params, x1), samples=samples)))
    for w, peer, fn in torch_peers(params, x1, x64, y64):
        results.append(row(w, peer, measure(fn, samples=samples)))
    report(results)


if __name__ == "__main__":
    main()
