"""The issue-15 ratio table: every workload of ../shared/BENCHMARKS.md against every peer it
names, each (workload, peer) in its own fresh process, in one run.

Usage::

    python benchmarks/bench_table.py [--quick] [--only W3,W5] [--peers nnsym,numpy]
                                     [--load 1.0] [--wait 60] [--timeout 1200]

Workloads: W1 (MLP train step b64), W2 (MLP infer b1), W3 (elementwise chain, 16M float32),
W4a/W4b (csr . dense, csr.T . dense), W5q (quadratic on a 1e6 x 1e6 csr, 10M nnz), W5c (the
bound graph ``A*A*a + A*b`` on it), W6 (lazy sgd_mom on row_sparse, as bench_w6_rsp.py), W7f /
W7t (ResNet-18 b8 3x64x64 forward / training step, tests/golden/resnet18_v1-symbol.json), W8
(peak RSS and RSS growth of a W7 training step in a fresh process). ``--only W5`` selects every
id starting with W5.

Peers: nnsym, numpy, scipy (this interpreter); MXNet 1.9.1 (``$NNSYM_MXREF_PYTHON``, default
``~/mxref/bin/python``, ``OMP_NUM_THREADS=2``); torch eager and torch.compile with 2 intra-op
threads (``$NNSYM_TORCH_PYTHON``, default ``/root/benchenv/bin/python``). A peer whose
interpreter or module is missing is skipped with a one-line note. Peer processes run this file
with ``--worker`` and never import nnsym. Every peer loads the same arrays, made once from
fixed seeds and saved to a temporary directory; each process reports a digest of its result,
compared against the numpy/scipy peer's (``check`` in the JSON line).

Before each measurement the worker waits (up to ``--wait`` s) until the 1-minute load average
is below ``--load``, and records the load; rows measured on a machine that never got quiet are
marked. Timing is harness.measure (warm-up, samples >= 10 ms, median and min). Output: one JSON
line per (workload, peer), then the table: nnsym, the best other peer, the ratio, and the
issue-15 goal, met or NOT met; then each process's BLAS and threads. A full run took 19
minutes on the busy machine, plus the quiet waits (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import environment, measure  # noqa: E402

ROOT = HERE.parent
RESNET_JSON = ROOT / "tests" / "golden" / "resnet18_v1-symbol.json"

NNSYM, NUMPY, SCIPY, MXNET, TORCH, COMPILE = (
    "nnsym", "numpy", "scipy", "mxnet", "torch", "torch.compile")
NNSYM_OUT = "nnsym (out=)"


@dataclass(frozen=True)
class Workload:
    id: str
    title: str
    peers: tuple[str, ...]
    goal: float | None = None  # nnsym / reference <= goal
    goal_vs: tuple[str, ...] = ()  # reference peers; () = the best other peer
    tol: float = 1e-4  # digest agreement
    unit: str = "ms"


WORKLOADS = {w.id: w for w in (
    Workload("W1", "W1 MLP train step b64", (NNSYM, NUMPY, MXNET, TORCH, COMPILE), 0.75,
             tol=1e-3),
    Workload("W2", "W2 MLP infer b1", (NNSYM, NUMPY, MXNET, TORCH, COMPILE), 0.3),
    Workload("W3", "W3 elementwise chain 16M", (NNSYM, NUMPY, MXNET, TORCH, COMPILE), 0.3,
             (COMPILE,)),
    Workload("W4a", "W4a csr . dense", (NNSYM, NNSYM_OUT, SCIPY, MXNET, TORCH), tol=1e-3),
    Workload("W4b", "W4b csr.T . dense", (NNSYM, SCIPY, MXNET, TORCH), tol=1e-3),
    Workload("W5q", "W5 quadratic csr 10M nnz", (NNSYM, NNSYM_OUT, NUMPY, SCIPY, MXNET, TORCH),
             0.15, (NUMPY, SCIPY), tol=1e-6),
    Workload("W5c", "W5 chain A*A*a+A*b bound", (NNSYM, NUMPY, SCIPY, TORCH), 0.2,
             (NUMPY, SCIPY), tol=1e-6),
    Workload("W6", "W6 lazy sgd_mom rsp", (NNSYM, NUMPY, MXNET, TORCH), 0.2, (MXNET,)),
    Workload("W7f", "W7 ResNet-18 forward b8", (NNSYM, NUMPY, MXNET, TORCH, COMPILE), 0.9,
             (MXNET,), tol=1e-2),
    Workload("W7t", "W7 ResNet-18 train step b8", (NNSYM, NUMPY, MXNET, TORCH, COMPILE), 0.85,
             (MXNET,), tol=5e-2),
    Workload("W8", "W8 step-1 RSS growth", (NNSYM, NUMPY, MXNET, TORCH), 1.0, (MXNET,),
             unit="MiB"),
)}


@dataclass(frozen=True)
class Sizes:
    """Problem sizes; FULL is BENCHMARKS.md's, TINY is for the test."""

    mlp_batch: int = 64
    w3_n: int = 16_777_216
    w4: tuple[int, int, int, int] = (100_000, 10_000, 10, 64)  # rows, cols, nnz/row, n
    w5: tuple[int, int] = (1_000_000, 10)  # square side, nnz/row
    w6_rows: int = 1000
    resnet: tuple[int, int] = (8, 64)  # batch, image side


FULL = Sizes()
TINY = Sizes(mlp_batch=4, w3_n=1000, w4=(300, 50, 3, 4), w5=(1000, 3), resnet=(2, 32))


# ---------------------------------------------------------------- shared data (fixed seeds)

def _save(path: Path, **arrays: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.npz")
    np.savez(tmp, **cast(dict[str, Any], arrays))
    tmp.replace(path)


def prepare(wid: str, sizes: Sizes, data: Path) -> None:
    """Write the arrays every peer of ``wid`` loads (once per run)."""
    key = {"W1": "mlp", "W2": "mlp", "W3": "w3", "W4a": "w4", "W4b": "w4", "W5q": "w5",
           "W5c": "w5", "W7f": "w7", "W7t": "w7", "W8": "w7"}.get(wid)
    if key is None or (data / f"{key}.npz").exists():
        return
    rng = np.random.default_rng(0)
    if key == "mlp":
        from bench_executor import make_params

        params = make_params(rng)
        x = rng.standard_normal((sizes.mlp_batch, 784)).astype(np.float32)
        y = rng.integers(0, 10, sizes.mlp_batch).astype(np.int64)
        _save(data / "mlp.npz", x=x, y=y, **params)
    elif key == "w3":
        _save(data / "w3.npz", x=rng.standard_normal(sizes.w3_n).astype(np.float32))
    elif key in ("w4", "w5"):
        from bench_sparse import random_csr

        if key == "w4":
            rows, cols, per_row, n = sizes.w4
            d, i, p = random_csr(rng, rows, cols, per_row)
            b = rng.standard_normal((cols, n)).astype(np.float32)
            dd = rng.standard_normal((rows, n)).astype(np.float32)
            _save(data / "w4.npz", data=d, indices=i, indptr=p, b=b, d=dd,
                  shape=np.array([rows, cols]))
        else:
            side, per_row = sizes.w5
            d, i, p = random_csr(rng, side, side, per_row)
            _save(data / "w5.npz", data=d, indices=i, indptr=p, shape=np.array([side, side]))
    else:
        _save(data / "w7.npz", **resnet_arrays(*sizes.resnet, rng))


def resnet_arrays(batch: int, side: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """ResNet-18's parameters (N(0, 0.05)), BatchNorm statistics (mean 0, var 1), data and head
    gradient, float32, drawn from ``rng`` (also used by bench_gpu.py)."""
    from nnsym import sym

    net = sym.load(str(RESNET_JSON))
    dshape = (batch, 3, side, side)
    arg_shapes, out_shapes, aux_shapes = net.infer_shape(data=dshape)
    arrays: dict[str, np.ndarray] = {}
    for name, shape in zip(net.list_arguments(), arg_shapes):
        if name != "data":
            arrays[name] = (rng.standard_normal(shape) * 0.05).astype(np.float32)
    for name, shape in zip(net.list_auxiliary_states(), aux_shapes):
        arrays[name] = np.full(shape, 1.0 if "var" in name else 0.0, np.float32)
    arrays["data"] = rng.standard_normal(dshape).astype(np.float32)
    arrays["head_grad"] = rng.standard_normal(out_shapes[0]).astype(np.float32)
    return arrays


def load(data: Path, key: str) -> dict[str, np.ndarray]:
    with np.load(data / f"{key}.npz") as f:
        return {k: f[k] for k in f.files}


def digest(a: Any) -> dict[str, Any]:
    """A small fingerprint of a result: size, L2 norm, 64 evenly spaced values."""
    v = np.ascontiguousarray(a, dtype=np.float64).ravel()
    pick = np.linspace(0, max(v.size - 1, 0), min(64, v.size)).astype(np.int64)
    return {"n": int(v.size), "l2": float(np.sqrt(np.dot(v, v))), "sample": v[pick].tolist()}


def digests_agree(a: dict[str, Any], b: dict[str, Any], tol: float) -> bool:
    if a["n"] != b["n"]:
        return False
    sa, sb = np.array(a["sample"]), np.array(b["sample"])
    rms = b["l2"] / max(b["n"], 1) ** 0.5
    return bool(abs(a["l2"] - b["l2"]) <= tol * max(b["l2"], 1e-30)
                and np.allclose(sa, sb, rtol=tol, atol=tol * rms))


# ---------------------------------------------------------------- timing inside a worker

@dataclass(frozen=True)
class Ctx:
    data: Path
    sizes: Sizes = FULL
    samples: int = 10
    load_limit: float = 1.0
    max_wait: float = 60.0


def wait_quiet(limit: float, max_wait: float) -> dict[str, Any]:
    """Sleep until the 1-minute load average is below ``limit`` (at most ``max_wait`` s)."""
    t0 = time.monotonic()
    while True:
        load1 = os.getloadavg()[0]
        waited = time.monotonic() - t0
        if load1 < limit or waited >= max_wait:
            return {"load_1m": round(load1, 2), "waited_s": round(waited, 1),
                    "quiet": load1 < limit}
        time.sleep(min(2.0, max_wait - waited))


def timed(ctx: Ctx, fn: Callable[[], Any], min_sample: float = 0.01) -> dict[str, Any]:
    """Compile/JIT warm-up, the quiet wait, then harness.measure; the load at measurement."""
    for _ in range(3):  # first calls compile (torch.compile, nnsym kernels): keep them out
        fn()
    info = wait_quiet(ctx.load_limit, ctx.max_wait)
    med, best = measure(fn, min_sample=min_sample, samples=ctx.samples)
    info["load_1m_after"] = round(os.getloadavg()[0], 2)
    return {"median_ms": med * 1e3, "min_ms": best * 1e3, "value": med * 1e3, **info}


def _torch() -> Any:
    import torch

    torch.set_num_threads(2)
    return torch


def _mx() -> Any:
    import mxnet

    return mxnet


def _rss() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024.0
    return out


def _step1_rss(step: Callable[[], Any]) -> dict[str, Any]:
    """RSS before a first training step, its peak during the step (VmHWM reset first)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark
        reset = True
    except OSError:
        reset = False
    before = _rss()["VmRSS"]
    step()
    after = _rss()
    growth = after["VmHWM"] - before
    return {"value": growth, "step1_growth_mib": round(growth, 1),
            "rss_before_mib": round(before, 1), "rss_after_mib": round(after["VmRSS"], 1),
            "peak_rss_mib": round(after["VmHWM"], 1), "hwm_reset": reset,
            "load_1m": round(os.getloadavg()[0], 2)}


# ---------------------------------------------------------------- W1, W2: the MLP

def torch_mlp(torch: Any, tp: dict[str, Any]) -> Callable[[Any], Any]:
    """The MLP's forward in torch over the parameters ``tp`` (``fc{i}_weight``/``_bias``;
    also used by bench_gpu.py)."""
    from bench_executor import LAYERS

    def fwd(x: Any) -> Any:
        h = x
        for i in range(1, len(LAYERS) + 1):
            h = torch.nn.functional.linear(h, tp[f"fc{i}_weight"], tp[f"fc{i}_bias"])
            if i < len(LAYERS):
                h = torch.relu(h)
        return h
    return fwd


def _mlp_torch(ctx: Ctx, train: bool, compiled: bool) -> tuple[Any, dict[str, Any]]:
    torch = _torch()
    f = load(ctx.data, "mlp")
    tp = {k: torch.tensor(v, requires_grad=train) for k, v in f.items() if k.startswith("fc")}
    x = torch.from_numpy(f["x"] if train else f["x"][:1].copy())
    y = torch.from_numpy(f["y"])
    fwd = torch_mlp(torch, tp)
    net = torch.compile(fwd) if compiled else fwd
    names = [k for k in sorted(tp) if k.startswith("fc")]

    def w1() -> None:
        for v in tp.values():
            v.grad = None
        torch.nn.functional.cross_entropy(net(x), y, reduction="sum").backward()

    def w2() -> Any:
        with torch.no_grad():
            return torch.softmax(net(x), 1)

    if train:
        w1()
        return w1, digest(np.concatenate([tp[k].grad.numpy().ravel() for k in names]))
    return w2, digest(w2().numpy())


def run_mlp(peer: str, ctx: Ctx, train: bool) -> dict[str, Any]:
    from bench_executor import mlp_symbol, numpy_forward, numpy_train_step

    f = load(ctx.data, "mlp")
    params = {k: v for k, v in f.items() if k.startswith("fc")}
    names = sorted(params)
    x = f["x"] if train else f["x"][:1].copy()
    y = f["y"][:len(x)]
    fn: Callable[[], Any]
    if peer == NUMPY:
        fn = (lambda: numpy_train_step(params, x, y)) if train else (
            lambda: numpy_forward(params, x))
        res = numpy_train_step(params, x, y) if train else numpy_forward(params, x)
        out = np.concatenate([res[k].ravel() for k in names]) if train else res
    elif peer in (TORCH, COMPILE):
        fn, d = _mlp_torch(ctx, train, peer == COMPILE)
        return {"check": d, **timed(ctx, fn)}
    else:
        if peer == NNSYM:
            from bench_executor import bind

            exe = bind(len(x), params, "write" if train else "null")
            exe.arg_dict["data"][:] = x
            if train:
                exe.arg_dict["softmax_label"][:] = y

            def sync() -> None:
                pass
        else:
            mx = _mx()
            net = mlp_symbol(mx.sym)
            reqs = {k: ("write" if (train and k in params) else "null")
                    for k in net.list_arguments()}
            exe = net.simple_bind(mx.cpu(), data=x.shape, softmax_label=(len(x),),
                                  grad_req=reqs)
            for k, v in params.items():
                exe.arg_dict[k][:] = v
            exe.arg_dict["data"][:] = x
            exe.arg_dict["softmax_label"][:] = y.astype(np.float32)
            sync = mx.nd.waitall

        def step() -> None:
            exe.forward(is_train=True)
            exe.backward()
            sync()

        def infer() -> None:
            exe.forward(is_train=False)
            sync()

        fn = step if train else infer
        fn()
        out = (np.concatenate([exe.grad_dict[k].asnumpy().ravel() for k in names]) if train
               else exe.outputs[0].asnumpy())
    return {"check": digest(out), **timed(ctx, fn)}


# ---------------------------------------------------------------- W3

def run_w3(peer: str, ctx: Ctx) -> dict[str, Any]:
    from bench_fusion import A, B, C, w3_symbol

    x = load(ctx.data, "w3")["x"]
    fn: Callable[[], Any]
    if peer == NUMPY:
        out, tmp = np.empty_like(x), np.empty_like(x)

        def fn(out: np.ndarray = out, tmp: np.ndarray = tmp) -> Any:  # numpy's fastest form
            np.multiply(x, A, out=out)
            out *= x
            np.multiply(x, B, out=tmp)
            out += tmp
            out += C
            np.maximum(out, 0, out=out)
            out *= 0.5
            np.tanh(x, out=tmp)
            out += tmp
            return out

        res = fn()
    elif peer in (TORCH, COMPILE):
        torch = _torch()
        t = torch.from_numpy(x)

        def chain(t: Any) -> Any:
            return torch.relu(A * t * t + B * t + C) * 0.5 + torch.tanh(t)

        f = torch.compile(chain) if peer == COMPILE else chain

        def fn() -> Any:
            return f(t)

        res = fn().numpy()
    elif peer == NNSYM:
        from nnsym import cpu, nd
        from nnsym.executor.executor import Executor

        ex = Executor(w3_symbol(), cpu(), [nd.array(x)], None, "null", fusion=True)
        fn = ex.forward
        res = fn()[0].asnumpy()
    else:
        mx = _mx()
        exe = w3_symbol(mx.sym).simple_bind(mx.cpu(), x=x.shape, grad_req="null")
        exe.arg_dict["x"][:] = x

        def fn() -> Any:
            exe.forward(is_train=False)
            exe.outputs[0].wait_to_read()

        fn()
        res = exe.outputs[0].asnumpy()
    return {"check": digest(res), **timed(ctx, fn)}


# ---------------------------------------------------------------- W4a, W4b

def run_w4(peer: str, ctx: Ctx, transpose: bool) -> dict[str, Any]:
    f = load(ctx.data, "w4")
    data, indices, indptr, b, d = f["data"], f["indices"], f["indptr"], f["b"], f["d"]
    shape = tuple(int(v) for v in f["shape"])
    fn: Callable[[], Any]
    to_np: Callable[[Any], np.ndarray]
    if peer == SCIPY:
        import scipy.sparse as sp

        a = sp.csr_matrix((data, indices.astype(np.int32), indptr.astype(np.int32)),
                          shape=shape)
        fn = (lambda: a.T @ d) if transpose else (lambda: a @ b)
        to_np = np.asarray
    elif peer == TORCH:
        torch = _torch()
        ta = torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(indices),
                                     torch.from_numpy(data), size=shape)
        tb, td = torch.from_numpy(b), torch.from_numpy(d)
        fn = (lambda: ta.t() @ td) if transpose else (lambda: ta @ tb)

        def to_np(r: Any) -> np.ndarray:
            return np.asarray(r.to_dense().numpy() if r.layout != torch.strided else r.numpy())
    elif peer in (NNSYM, NNSYM_OUT):
        from nnsym import nd

        xa = nd.sparse.csr_matrix((data, indices, indptr), shape=shape)
        xb, xd = nd.array(b), nd.array(d)
        out = nd.zeros((shape[0], b.shape[1]))
        if transpose:
            fn = lambda: nd.dot(xa, xd, transpose_a=True)
        elif peer == NNSYM_OUT:
            fn = lambda: nd.dot(xa, xb, out=out)
        else:
            fn = lambda: nd.dot(xa, xb)

        def to_np(r: Any) -> np.ndarray:
            return np.asarray(r.tostype("default").asnumpy())
    else:
        mx = _mx()
        ma = mx.nd.sparse.csr_matrix((data, indices, indptr), shape=shape)
        mb, md = mx.nd.array(b), mx.nd.array(d)
        if transpose:
            fn = lambda: mx.nd.dot(ma, md, transpose_a=True).wait_to_read()
            res = mx.nd.dot(ma, md, transpose_a=True).tostype("default").asnumpy()
        else:
            fn = lambda: mx.nd.dot(ma, mb).wait_to_read()
            res = mx.nd.dot(ma, mb).asnumpy()
        return {"check": digest(res), **timed(ctx, fn)}
    return {"check": digest(to_np(fn())), **timed(ctx, fn)}


# ---------------------------------------------------------------- W5 quadratic and chain

def run_w5(peer: str, ctx: Ctx, chain: bool) -> dict[str, Any]:
    f = load(ctx.data, "w5")
    data, indices, indptr = f["data"], f["indices"], f["indptr"]
    shape = tuple(int(v) for v in f["shape"])
    fn: Callable[[], Any]
    to_np: Callable[[Any], np.ndarray] = np.asarray
    if peer == NUMPY:
        fn = (lambda: data * data * 1 + data * 2) if chain else (
            lambda: 1 * data * data + 2 * data + 0)
    elif peer == SCIPY:
        import scipy.sparse as sp

        a = sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=shape)
        if chain:
            fn = lambda: a.multiply(a) * 1 + a * 2
        else:
            fn = lambda: sp.csr_matrix(
                (1 * a.data * a.data + 2 * a.data + 0, a.indices, a.indptr), shape=a.shape,
                copy=False)

        def to_np(r: Any) -> np.ndarray:
            r = r.tocsr()
            r.sort_indices()
            return np.asarray(r.data)
    elif peer in (TORCH, COMPILE):
        torch = _torch()
        tx = torch.from_numpy(data)

        def ch(t: Any) -> Any:
            return t * t * 1 + t * 2

        def quad(t: Any) -> Any:
            return 1 * t * t + 2 * t + 0

        g = ch if chain else quad
        g = torch.compile(g) if peer == COMPILE else g
        fn = lambda: g(tx)

        def to_np(r: Any) -> np.ndarray:
            return np.asarray(r.numpy())
    elif peer in (NNSYM, NNSYM_OUT):
        import nnsym
        from nnsym import nd

        x = nd.sparse.csr_matrix((data, indices, indptr), shape=shape)
        if chain:
            from nnsym.executor.executor import Executor

            s = nnsym.sym.Variable("A", stype="csr")
            ex = Executor(s * s * 1.0 + s * 2.0, nnsym.cpu(), [x], None, "null", fusion=True)
            fn = lambda: ex.forward()[0]
        elif peer == NNSYM_OUT:
            out = nd.sparse.csr_matrix((data.copy(), indices, indptr), shape=shape)
            fn = lambda: nd._contrib_quadratic(x, a=1, b=2, c=0, out=out)
        else:
            fn = lambda: nd._contrib_quadratic(x, a=1, b=2, c=0)

        def to_np(r: Any) -> np.ndarray:
            assert r.stype == "csr", r.stype
            return np.asarray(r.data.asnumpy())
    else:
        mx = _mx()
        ma = mx.nd.sparse.csr_matrix((data, indices, indptr), shape=shape)
        fn = lambda: mx.nd.contrib.quadratic(ma, a=1, b=2, c=0).wait_to_read()
        res = mx.nd.contrib.quadratic(ma, a=1, b=2, c=0)
        return {"check": digest(res.data.asnumpy()), **timed(ctx, fn)}
    return {"check": digest(to_np(fn())), **timed(ctx, fn)}


# ---------------------------------------------------------------- W6 (bench_w6_rsp.py's setup)

def run_w6(peer: str, ctx: Ctx) -> dict[str, Any]:
    import bench_w6_rsp as w6

    k = ctx.sizes.w6_rows
    timing: dict[str, Any] = {}

    def measure_hook(fn: Callable[[], Any], samples: int = 10, **kw: Any) -> tuple[float, float]:
        timing.update(timed(replace(ctx, samples=samples), fn, **kw))
        return timing["median_ms"] / 1e3, timing["min_ms"] / 1e3

    if peer in (NNSYM, MXNET):  # bench_w6_rsp checks one step against numpy itself
        w6.measure = measure_hook  # type: ignore[attr-defined,assignment]
        (w6.run_nnsym if peer == NNSYM else w6.run_mxnet)(k, ctx.samples)
        return {"check": "in-process vs numpy reference_step", "rows": k, **timing}
    weight, grads = w6.data(k)
    lr, momentum, wd = w6.LR, w6.MOMENTUM, w6.WD
    it = [0]
    step: Callable[[], Any]
    if peer == NUMPY:
        w, m = weight.copy(), np.zeros_like(weight)

        def step() -> None:
            idx, g = grads[it[0]]
            it[0] = (it[0] + 1) % w6.SETS
            wr, mr = w[idx], m[idx]
            mr = momentum * mr - (lr * wd) * wr - lr * g
            m[idx] = mr
            w[idx] = wr + mr

        step()
        got = w[grads[0][0]]
    else:
        torch = _torch()
        tw, tm = torch.from_numpy(weight.copy()), torch.zeros(weight.shape)
        tg = [(torch.from_numpy(i), torch.from_numpy(g)) for i, g in grads]

        def step() -> None:
            idx, g = tg[it[0]]
            it[0] = (it[0] + 1) % w6.SETS
            wr, mr = tw.index_select(0, idx), tm.index_select(0, idx)
            mr = momentum * mr - (lr * wd) * wr - lr * g
            tm.index_copy_(0, idx, mr)
            tw.index_copy_(0, idx, wr + mr)

        step()
        got = tw.numpy()[grads[0][0]]
    np.testing.assert_allclose(got, w6.reference_step(weight, *grads[0]), rtol=1e-6, atol=1e-7)
    return {"check": "in-process vs numpy reference_step", "rows": k, **timed(ctx, step)}


# ---------------------------------------------------------------- W7, W8: ResNet-18

class TorchResNet:
    """The symbol JSON walked node by node with torch.nn.functional (ResNet-18 v1's ops), as
    numpy_resnet.NumpyNet walks it with numpy: the same graph and parameter names as MXNet."""

    def __init__(self, torch: Any, arrays: dict[str, np.ndarray], train: bool):
        self.torch = torch
        doc = json.loads(RESNET_JSON.read_text())
        self.nodes, self.head = doc["nodes"], doc["heads"][0][0]
        self.t = {}
        for k, v in arrays.items():
            aux = k.endswith(("_running_mean", "_running_var"))
            grad = train and not aux and k not in ("data", "head_grad")
            self.t[k] = torch.tensor(v, requires_grad=grad)

    def __call__(self, x: Any, train: bool) -> Any:
        from numpy_resnet import _tuple as _tup

        F = self.torch.nn.functional
        vals: list[Any] = [None] * len(self.nodes)
        for i, n in enumerate(self.nodes):
            op, a = n["op"], n.get("attrs", {})
            if op == "null":
                vals[i] = x if n["name"] == "data" else self.t[n["name"]]
                continue
            ins = [vals[e[0]] for e in n["inputs"]]
            if op == "Convolution":
                vals[i] = F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                                   stride=_tup(a.get("stride", "(1,1)")),
                                   padding=_tup(a.get("pad", "(0,0)")))
            elif op == "BatchNorm":
                vals[i] = F.batch_norm(ins[0], ins[3], ins[4], ins[1], ins[2], training=train,
                                       momentum=1 - float(a.get("momentum", "0.9")),
                                       eps=float(a.get("eps", "1e-3")))
            elif op == "Activation":
                vals[i] = F.relu(ins[0])
            elif op == "Pooling" and a.get("global_pool") == "True":
                vals[i] = ins[0].mean(dim=(2, 3), keepdim=True)
            elif op == "Pooling":
                vals[i] = F.max_pool2d(ins[0], _tup(a["kernel"]), _tup(a["stride"]),
                                       _tup(a["pad"]))
            elif op == "elemwise_add":
                vals[i] = ins[0] + ins[1]
            elif op == "Flatten":
                vals[i] = ins[0].flatten(1)
            elif op == "FullyConnected":
                vals[i] = F.linear(ins[0].flatten(1), ins[1], ins[2])
            else:
                raise NotImplementedError(op)
        return vals[self.head]


CHECK_GRADS = ("resnetv10_conv0_weight", "resnetv10_dense0_weight")


Steps = tuple[Callable[[], Any], Callable[[], Any]]


def _resnet(peer: str, ctx: Ctx, train: bool) -> Steps:
    """(step, result) for one peer: step runs the forward or training step, result gives the
    output (forward) or the checked gradients (training) after it."""
    arrays = load(ctx.data, "w7")
    if peer == NUMPY:
        return _resnet_numpy(arrays, train)
    if peer in (TORCH, COMPILE):
        return _resnet_torch(arrays, train, peer == COMPILE)
    return _resnet_bound(arrays, train, peer == NNSYM)


def _resnet_numpy(arrays: dict[str, np.ndarray], train: bool) -> Steps:
    from numpy_resnet import NumpyNet

    head = arrays["head_grad"]
    ref = NumpyNet(RESNET_JSON, {k: v for k, v in arrays.items() if k != "head_grad"})
    grads: dict[str, np.ndarray] = {}

    def step() -> Any:
        out = ref.forward(is_train=train)
        if train:
            grads.update(ref.backward(head))
        return out

    def result() -> Any:
        return (np.concatenate([grads[k].ravel() for k in CHECK_GRADS]) if train
                else ref.forward(is_train=False))
    return step, result


def _resnet_torch(arrays: dict[str, np.ndarray], train: bool, compiled: bool) -> Steps:
    torch = _torch()
    net = TorchResNet(torch, arrays, train)
    x, th = net.t["data"], torch.from_numpy(arrays["head_grad"])
    f = torch.compile(net.__call__) if compiled else net.__call__

    def step() -> Any:
        if not train:
            with torch.no_grad():
                return f(x, False)
        for v in net.t.values():
            v.grad = None
        out = f(x, True)
        out.backward(th)
        return out

    def result() -> Any:
        if train:
            return np.concatenate([net.t[k].grad.numpy().ravel() for k in CHECK_GRADS])
        with torch.no_grad():
            return f(x, False).numpy()
    return step, result


def _resnet_bound(arrays: dict[str, np.ndarray], train: bool, nnsym: bool) -> Steps:
    """nnsym's or MXNet's simple_bind of the same JSON."""
    sync: Callable[[], Any]
    if nnsym:
        from nnsym import nd, sym

        net, mk, kw = sym.load(str(RESNET_JSON)), nd.array, {}
        sync = lambda: None
    else:
        mx = _mx()
        net, mk, kw = mx.sym.load(str(RESNET_JSON)), mx.nd.array, {"ctx": mx.cpu()}
        sync = mx.nd.waitall
    reqs = {n: ("write" if train and n != "data" else "null") for n in net.list_arguments()}
    exe = net.simple_bind(data=arrays["data"].shape, grad_req=reqs, **kw)
    for k, a in {**exe.arg_dict, **exe.aux_dict}.items():
        a[:] = arrays[k]
    hd = mk(arrays["head_grad"])

    def step() -> Any:
        exe.forward(is_train=train)
        if train:
            exe.backward(hd)
        sync()

    def result() -> Any:
        if train:
            return np.concatenate([exe.grad_dict[k].asnumpy().ravel() for k in CHECK_GRADS])
        return exe.outputs[0].asnumpy()
    return step, result


def run_w7(peer: str, ctx: Ctx, train: bool) -> dict[str, Any]:
    step, result = _resnet(peer, ctx, train)
    step()
    d = digest(result())
    return {"check": d, **timed(ctx, step, min_sample=0.05)}


def run_w8(peer: str, ctx: Ctx) -> dict[str, Any]:
    step, _ = _resnet(peer, ctx, True)
    return _step1_rss(step)


RUNNERS: dict[str, Callable[[str, Ctx], dict[str, Any]]] = {
    "W1": lambda p, c: run_mlp(p, c, True),
    "W2": lambda p, c: run_mlp(p, c, False),
    "W3": run_w3,
    "W4a": lambda p, c: run_w4(p, c, False),
    "W4b": lambda p, c: run_w4(p, c, True),
    "W5q": lambda p, c: run_w5(p, c, False),
    "W5c": lambda p, c: run_w5(p, c, True),
    "W6": run_w6,
    "W7f": lambda p, c: run_w7(p, c, False),
    "W7t": lambda p, c: run_w7(p, c, True),
    "W8": run_w8,
}


def process_info(peer: str) -> dict[str, Any]:
    """BLAS and thread settings of this process."""
    info = environment()
    info["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS")
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        info["torch_blas"] = "mkl" if torch.backends.mkl.is_available() else "other"
    if "mxnet" in sys.modules:
        mx = sys.modules["mxnet"]
        info["mxnet"] = mx.__version__
        feats = mx.runtime.Features()
        info["mxnet_features"] = [f for f in ("MKLDNN", "OPENMP", "BLAS_OPEN", "BLAS_MKL")
                                  if feats.is_enabled(f)]
    if "nnsym" in sys.modules:
        from nnsym.codegen import compiler

        info["nnsym_threads"] = compiler.get_num_threads()
    info["nnsym_imported"] = "nnsym" in sys.modules
    return info


def run_case(wid: str, peer: str, ctx: Ctx) -> dict[str, Any]:
    """One (workload, peer) measured in this process: its JSON row."""
    t0 = time.perf_counter()
    res = RUNNERS[wid](peer, ctx)
    wl = WORKLOADS[wid]
    return {"workload": wid, "title": wl.title, "peer": peer, "unit": wl.unit, **res,
            "process_s": round(time.perf_counter() - t0, 2), "env": process_info(peer)}


# ---------------------------------------------------------------- the orchestrator

def interpreter(peer: str) -> str:
    if peer == MXNET:
        return os.environ.get("NNSYM_MXREF_PYTHON",
                              str(Path("~/mxref/bin/python").expanduser()))
    if peer in (TORCH, COMPILE):
        return os.environ.get("NNSYM_TORCH_PYTHON", "/root/benchenv/bin/python")
    return sys.executable


_AVAILABLE: dict[str, str | None] = {}


def unavailable(peer: str) -> str | None:
    """Why ``peer`` cannot run here (None when it can); probed once per run."""
    if peer not in _AVAILABLE:
        py = interpreter(peer)
        module = {MXNET: "mxnet", TORCH: "torch", COMPILE: "torch", SCIPY: "scipy",
                  NNSYM: "nnsym", NNSYM_OUT: "nnsym"}.get(peer, "numpy")
        if not Path(py).exists():
            _AVAILABLE[peer] = f"no interpreter {py}"
        else:
            r = subprocess.run([py, "-c", f"import {module}"], capture_output=True, text=True,
                               env=_env(peer), check=False, timeout=300)
            _AVAILABLE[peer] = (None if r.returncode == 0 else
                                f"{py} cannot import {module}")
    return _AVAILABLE[peer]


def _env(peer: str) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="2", MXNET_STORAGE_FALLBACK_LOG_VERBOSE="0")
    if peer not in (NNSYM, NNSYM_OUT):
        env.pop("PYTHONPATH", None)  # peers never see nnsym
    return env


def run_one(wid: str, peer: str, args: argparse.Namespace, data: Path) -> dict[str, Any] | None:
    """Run (wid, peer) in a fresh process; None with a one-line note when it cannot run."""
    why = unavailable(peer)
    if why is not None:
        print(f"# {wid} / {peer}: skipped ({why})", flush=True)
        return None
    cmd = [interpreter(peer), str(Path(__file__).resolve()), "--worker", wid, "--peer", peer,
           "--data", str(data), "--samples", str(args.samples), "--load", str(args.load),
           "--wait", str(args.wait)] + (["--tiny"] if args.tiny else [])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(peer), check=False,
                           timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"# {wid} / {peer}: failed (timeout after {args.timeout} s)", flush=True)
        return None
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith('{"workload"')]
    if r.returncode != 0 or not rows:
        err = r.stderr.strip().splitlines() or ["no output"]
        last = next((ln for ln in reversed(err) if "Error" in ln or "Exception" in ln), err[-1])
        print(f"# {wid} / {peer}: failed ({last[:300]})", flush=True)
        return None
    return dict(json.loads(rows[-1]))


def check_rows(rows: list[dict[str, Any]]) -> None:
    """Compare every row's result digest with the reference peer's (numpy/scipy, else nnsym)."""
    for wid in {r["workload"] for r in rows}:
        rs = [r for r in rows if r["workload"] == wid and isinstance(r.get("check"), dict)]
        ref = next((r for p in (NUMPY, SCIPY, NNSYM) for r in rs if r["peer"] == p), None)
        if ref is None:
            continue
        for r in rs:
            if r is not ref:
                ok = digests_agree(r["check"], ref["check"], WORKLOADS[wid].tol)
                r["agrees_with"] = f"{ref['peer']}: {'yes' if ok else 'NO'}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The ratio table, one line per workload (W8 also reports peak RSS)."""
    lines = [f"{'workload':<30} {'nnsym':>18} {'best other peer':<28} {'ratio':>6}  goal"]
    items = [(w, "value") for w in WORKLOADS] + [("W8", "peak_rss_mib")]
    for wid, key in items:
        rs = [r for r in rows if r["workload"] == wid and key in r]
        if not rs:
            continue
        wl = WORKLOADS[wid]
        title = wl.title if key == "value" else "W8 peak RSS of step 1"
        ours = [r for r in rs if r["peer"].startswith(NNSYM)]
        theirs = [r for r in rs if not r["peer"].startswith(NNSYM)]
        mine = min(ours, key=lambda r: r[key]) if ours else None
        best = min(theirs, key=lambda r: r[key]) if theirs else None
        u = wl.unit
        a = f"{mine[key]:.4g} {u}" if mine else "—"
        if mine and mine["peer"] != NNSYM:  # a variant row was the fastest: say which
            a += mine["peer"][len(NNSYM):]
        b = f"{best['peer']} {best[key]:.4g} {u}" if best else "—"
        ratio = f"{mine[key] / best[key]:.2f}" if mine and best and best[key] > 0 else "—"
        goal = "—"
        if wl.goal is not None and key == "value" and mine:
            refs = [r for r in theirs if not wl.goal_vs or r["peer"] in wl.goal_vs]
            if refs:
                ref = min(refs, key=lambda r: r[key])
                g = mine[key] / ref[key] if ref[key] > 0 else float("inf")
                goal = (f"<= {wl.goal} x {ref['peer']}: {g:.2f} "
                        f"{'met' if g <= wl.goal else 'NOT met'}")
            else:
                goal = f"<= {wl.goal} x {'/'.join(wl.goal_vs)}: no reference row"
        lines.append(f"{title:<30} {a:>18} {b:<28} {ratio:>6}  {goal}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 samples instead of 10")
    ap.add_argument("--only", default="", help="comma-separated workload id prefixes")
    ap.add_argument("--peers", default="", help="comma-separated peers (default: all)")
    ap.add_argument("--load", type=float, default=1.0, help="quiet: 1-min load below this")
    ap.add_argument("--wait", type=float, default=60.0, help="longest quiet wait, s")
    ap.add_argument("--timeout", type=float, default=1200.0, help="per process, s")
    ap.add_argument("--samples", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.samples = args.samples or (5 if args.quick else 10)
    sizes = TINY if args.tiny else FULL
    if args.worker:
        ctx = Ctx(Path(args.data), sizes, args.samples, args.load, args.wait)
        print(json.dumps(run_case(args.worker, args.peer, ctx)), flush=True)
        return
    only = [s for s in args.only.split(",") if s]
    wids = [w for w in WORKLOADS if not only or any(w.startswith(o) for o in only)]
    peers = [s for s in args.peers.split(",") if s]
    if not wids:
        ap.error(f"--only {args.only}: no workload id starts with that; "
                 f"ids: {', '.join(WORKLOADS)}")
    known = {p.split(" ")[0] for w in WORKLOADS.values() for p in w.peers}
    if unknown := sorted(set(peers) - known):
        ap.error(f"--peers: unknown {', '.join(unknown)}; peers: {', '.join(sorted(known))}")
    t0 = time.perf_counter()
    data = Path(tempfile.mkdtemp(prefix="nnsym-bench-"))
    rows: list[dict[str, Any]] = []
    try:
        for wid in wids:
            prepare(wid, sizes, data)
            for peer in WORKLOADS[wid].peers:
                if peers and peer.split(" ")[0] not in peers:
                    continue
                r = run_one(wid, peer, args, data)
                if r is not None:
                    rows.append(r)
                    print(f"# {wid} / {peer}: {r['value']:.4g} {r['unit']} "
                          f"(load {r['load_1m']}, {r['process_s']} s)", flush=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    check_rows(rows)
    print()
    for r in rows:
        if isinstance(r.get("check"), dict):  # the digest's samples served check_rows
            r["check"] = {k: r["check"][k] for k in ("n", "l2")}
        print(json.dumps(r))
    print()
    bad = [f"{r['workload']}/{r['peer']}" for r in rows if r.get("agrees_with", "").endswith("NO")]
    print("# results agree with the numpy/scipy peer" if not bad else
          f"# RESULTS DIFFER from the reference peer: {', '.join(bad)}")
    noisy = [f"{r['workload']}/{r['peer']} (load {r['load_1m']})" for r in rows
             if r.get("quiet") is False]
    if noisy:
        print(f"# NOT quiet (1-min load >= {args.load} after {args.wait:g} s): "
              + ", ".join(noisy))
    print("\n".join(table(rows)))
    print("\nprocesses:")
    for r in rows:
        e = r["env"]
        blas = e.get("blas")
        blas_s = (", ".join(f"{b.get('internal_api')} {b.get('num_threads')}t" for b in blas)
                  if isinstance(blas, list) else blas)
        extra = {k: e[k] for k in ("torch_threads", "torch_blas", "mxnet_features",
                                   "nnsym_threads") if k in e}
        print(f"  {r['workload']:<4} {r['peer']:<14} blas: {blas_s}; "
              f"OMP_NUM_THREADS={e.get('OMP_NUM_THREADS')} {extra}")
    print(f"\n# wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
