"""The thread setting (nnsym.runtime.threads): one count for the worker pool and the BLAS,
results that do not depend on it, and kernels in forked children (docs/threads.md)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import cpu, nd, sym
from nnsym.errors import NNSymError, ThreadCountError
from nnsym.ndarray.sparse import RowSparseNDArray, csr_matrix
from nnsym.runtime import threads


@pytest.fixture
def restore() -> Iterator[None]:
    before = threads.get_num_threads()
    yield
    threads.set_num_threads(before)


def test_one_setting_for_pool_and_blas(restore: None) -> None:
    for n in (1, 3, 2):
        assert threads.set_num_threads(n) == n
        assert threads.get_num_threads() == n
        assert all(b == n for b in threads.blas_num_threads())
    assert threads.blas_num_threads(), "numpy's OpenBLAS should be visible"


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_bad_counts_are_refused(restore: None, bad: Any) -> None:
    with pytest.raises(ThreadCountError, match="positive integer"):
        threads.set_num_threads(bad)
    assert issubclass(ThreadCountError, ValueError) and issubclass(ThreadCountError, NNSymError)


ENV_SNIPPET = """
import json, nnsym
from nnsym.runtime import threads
print(json.dumps([threads.get_num_threads(), threads.blas_num_threads()]))
"""


def test_environment_sets_pool_and_blas() -> None:
    env = dict(os.environ, NNSYM_NUM_THREADS="1", OPENBLAS_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", ENV_SNIPPET], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    pool, blas = json.loads(out.stdout.strip().splitlines()[-1])
    assert pool == 1 and blas and all(b == 1 for b in blas)


def _workloads() -> list[tuple[str, Callable[[], np.ndarray]]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1 << 21).astype(np.float32)
    m = rng.standard_normal((2000, 1000)).astype(np.float32)
    v = rng.standard_normal((1, 1000)).astype(np.float32)
    wmat = rng.standard_normal((3000, 1000)).astype(np.float32)
    dense = (rng.random((3000, 400)) < 0.02) * rng.standard_normal((3000, 400))
    csr = csr_matrix(dense.astype(np.float32))
    rhs = rng.standard_normal((400, 64)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    rows = np.sort(rng.choice(4000, 1500, replace=False))
    grows = rng.standard_normal((1500, 256)).astype(np.float32)
    w0 = rng.standard_normal((4000, 256)).astype(np.float32)

    def sgd_mom() -> np.ndarray:
        w, mom = nd.array(x), nd.zeros(x.shape)
        for _ in range(2):
            nd.sgd_mom_update(w, nd.array(g), mom, lr=0.1, momentum=0.9, wd=1e-3, out=w)
        return np.concatenate([w.asnumpy(), mom.asnumpy()])

    def adam() -> np.ndarray:
        w, a, b = nd.array(x), nd.zeros(x.shape), nd.zeros(x.shape)
        nd.adam_update(w, nd.array(g), a, b, lr=0.01, wd=1e-3, clip_gradient=1.0, out=w)
        return w.asnumpy()

    def lazy_rsp() -> np.ndarray:
        w = nd.array(w0).tostype("row_sparse")
        mom = nd.sparse.zeros("row_sparse", w0.shape)
        grad = RowSparseNDArray(grows, rows, w0.shape)
        nd.sgd_mom_update(w, grad, mom, lr=0.1, momentum=0.9, wd=1e-3, out=w)
        return w.asnumpy()

    bx = rng.standard_normal((4, 24, 30, 30)).astype(np.float32)
    bhead = rng.standard_normal(bx.shape).astype(np.float32)
    bgamma = rng.uniform(0.5, 1.5, 24).astype(np.float32)

    def batch_norm(train: bool) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            net = sym.BatchNorm(sym.Variable("x"), fix_gamma=False, name="bn")
            ex = net.simple_bind(cpu(), x=bx.shape)
            ex.arg_dict["x"][:] = bx
            ex.arg_dict["bn_gamma"][:] = bgamma
            ex.arg_dict["bn_beta"][:] = 0.25
            ex.aux_dict["bn_moving_var"][:] = 1.5
            out = ex.forward(is_train=train)[0].asnumpy()
            ex.backward([nd.array(bhead)])
            parts = [out] + [ex.grad_dict[k].asnumpy() for k in ("x", "bn_gamma", "bn_beta")]
            parts += [a.asnumpy() for a in ex.aux_dict.values()]
            return np.concatenate([a.reshape(-1) for a in parts])
        return run

    cx = rng.standard_normal((8, 16, 8, 8)).astype(np.float32)
    cw = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    chead = rng.standard_normal((8, 32, 8, 8)).astype(np.float32)

    def conv() -> np.ndarray:
        # P = 64 outputs per image: the batched kernels, whose column passes split by rows /
        # channels above PAR_MIN elements (K * L = 144 * 512)
        net = sym.Convolution(sym.Variable("x"), kernel=(3, 3), pad=(1, 1), num_filter=32,
                              name="c")
        ex = net.simple_bind(cpu(), x=cx.shape)
        ex.arg_dict["x"][:] = cx
        ex.arg_dict["c_weight"][:] = cw
        out = ex.forward(is_train=True)[0].asnumpy()
        ex.backward([nd.array(chead)])
        parts = [out] + [ex.grad_dict[k].asnumpy() for k in ("x", "c_weight", "c_bias")]
        return np.concatenate([a.reshape(-1) for a in parts])

    px = rng.standard_normal((4, 16, 40, 40)).astype(np.float32)
    px[0, 0, :2, :2] = 7.0  # ties: the max gradient goes to the first maximum
    px_cl = np.ascontiguousarray(px.transpose(0, 2, 3, 1))
    wide = rng.standard_normal((4, 8, 6, 600)).astype(np.float32)
    wide_cl = rng.standard_normal((2, 12, 12, 300)).astype(np.float32)

    def graph(net: Any, data: np.ndarray, **attrs: Any) -> np.ndarray:
        """Forward and backward of a one-input graph (its head gradient fixed)."""
        ex = net.simple_bind(cpu(), x=data.shape)
        ex.arg_dict["x"][:] = data
        out = ex.forward(is_train=True)[0]
        head = np.cos(np.arange(out.size, dtype=np.float32)).reshape(out.shape)
        ex.backward([nd.array(head)])
        return np.concatenate([out.asnumpy().reshape(-1), ex.grad_dict["x"].asnumpy().reshape(-1)])

    def pool(data: np.ndarray, **kw: Any) -> Callable[[], np.ndarray]:
        return lambda: graph(sym.Pooling(sym.Variable("x"), name="p", **kw), data)

    sx = rng.standard_normal((512, 300)).astype(np.float32)
    sx4 = rng.standard_normal((16, 10, 24, 24)).astype(np.float32)
    labels = rng.integers(0, 300, 512).astype(np.float32)
    labels[::7] = 5  # ignored below
    labels4 = rng.integers(0, 10, (16, 24, 24)).astype(np.float32)

    def softmax_output(data: np.ndarray, lab: np.ndarray, **kw: Any) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            net = sym.SoftmaxOutput(sym.Variable("x"), sym.Variable("label"), name="so", **kw)
            ex = net.simple_bind(cpu(), x=data.shape, label=lab.shape)
            ex.arg_dict["x"][:] = data
            ex.arg_dict["label"][:] = lab
            out = ex.forward(is_train=True)[0].asnumpy()
            ex.backward()
            return np.concatenate([out.reshape(-1), ex.grad_dict["x"].asnumpy().reshape(-1)])
        return run

    def in_place() -> np.ndarray:
        a = nd.array(x)
        nd.elemwise_add(a, nd.array(g), out=a)
        return a.asnumpy()

    return [
        ("softmax rows", lambda: graph(sym.softmax(sym.Variable("x"), axis=-1), sx)),
        ("softmax axis 1", lambda: graph(sym.softmax(sym.Variable("x"), axis=1), sx4)),
        ("softmax axis 0", lambda: graph(sym.softmax(sym.Variable("x"), axis=0), sx)),
        ("log_softmax rows", lambda: graph(sym.log_softmax(sym.Variable("x"), temperature=2.0),
                                           sx)),
        ("softmax nd", lambda: nd.softmax(nd.array(sx4), axis=1).asnumpy()),
        ("softmax_output ignore valid", softmax_output(sx, labels, use_ignore=True,
                                                       ignore_label=5, normalization="valid")),
        ("softmax_output multi", softmax_output(sx4, labels4, multi_output=True)),
        ("pool max 3x3 s2", pool(px, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")),
        ("pool avg 2x2", pool(px, kernel=(2, 2), stride=(1, 1), pool_type="avg")),
        ("pool lp2 global", pool(px, kernel=(1, 1), global_pool=True, pool_type="lp", p_value=2)),
        # rows wider than the forward's 256-output accumulator block (NCHW: OW 600; NHWC: C 300)
        ("pool max wide rows", pool(wide, kernel=(1, 3), stride=(1, 1), pad=(0, 1),
                                    pool_type="max")),
        ("pool avg wide rows", pool(wide, kernel=(2, 3), stride=(1, 2), pool_type="avg")),
        ("pool max NHWC 300 channels", pool(wide_cl, kernel=(3, 3), stride=(1, 1), pad=(1, 1),
                                           pool_type="max", layout="NHWC")),
        ("pool max NHWC", pool(px_cl, kernel=(3, 3), stride=(1, 1), pool_type="max",
                               layout="NHWC")),
        ("convolution", conv),
        ("batch_norm train", batch_norm(True)),
        ("batch_norm inference", batch_norm(False)),
        ("map tanh", lambda: nd.tanh(nd.array(x)).asnumpy()),
        ("map scalar", lambda: (nd.array(x) * 0.75 + 1.5).asnumpy()),
        ("map binary", lambda: nd.elemwise_mul(nd.array(x), nd.array(g)).asnumpy()),
        ("map broadcast rows", lambda: nd.broadcast_mul(nd.array(m), nd.array(v)).asnumpy()),
        ("map broadcast cols",
         lambda: nd.broadcast_sub(nd.array(m), nd.array(m[:, :1])).asnumpy()),
        ("map in place", in_place),
        ("map chain", lambda: (nd.array(x) * 2.5 + nd.array(g) * nd.array(x)).asnumpy()),
        ("sum all", lambda: nd.sum(nd.array(m)).asnumpy()),
        ("sum axis 1", lambda: nd.sum(nd.array(m), axis=1).asnumpy()),
        ("mean axis 0", lambda: nd.mean(nd.array(m), axis=0).asnumpy()),
        ("max axis 1", lambda: nd.max(nd.array(m), axis=1).asnumpy()),
        ("argmax axis 0", lambda: nd.argmax(nd.array(m), axis=0).asnumpy()),
        ("sum axes 0 2", lambda: nd.sum(nd.array(sx4), axis=(0, 2)).asnumpy()),
        ("prod axis 1 keep 3d", lambda: nd.prod(nd.array(sx4 * 0.1 + 1), axis=1).asnumpy()),
        ("norm axis 1", lambda: nd.norm(nd.array(m), axis=1).asnumpy()),
        ("gemv", lambda: nd.dot(nd.array(v), nd.array(wmat), transpose_b=True).asnumpy()),
        # 7 rows: the skinny product (prologue.c.j2), split over the pool by rows of wmat
        ("skinny gemm", lambda: nd.dot(nd.array(m[:7]), nd.array(wmat),
                                       transpose_b=True).asnumpy()),
        ("csr dot", lambda: nd.dot(csr, nd.array(rhs)).asnumpy()),
        ("sgd_mom dense", sgd_mom),
        ("adam dense", adam),
        ("sgd_mom lazy row_sparse", lazy_rsp),
    ]


def test_results_do_not_depend_on_the_thread_count(restore: None) -> None:
    work = _workloads()
    threads.set_num_threads(1)
    serial = {name: fn() for name, fn in work}
    for n in (2, 3, 5):
        threads.set_num_threads(n)
        for name, fn in work:
            np.testing.assert_array_equal(fn(), serial[name], err_msg=f"{name}, {n} threads")


def _max_pool_ref(x: np.ndarray, head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3x3 stride-2 pad-1 max pooling of NCHW ``x`` and its gradient (the first maximum of each
    window takes the head gradient), by loops over the output."""
    n, c, h, w = x.shape
    oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    out = np.empty((n, c, oh, ow), x.dtype)
    dx = np.zeros(x.shape, x.dtype)  # float32 additions, in the kernel's (output) order
    for i in range(oh):
        for j in range(ow):
            h0, w0 = max(2 * i - 1, 0), max(2 * j - 1, 0)
            win = x[:, :, h0:2 * i + 2, w0:2 * j + 2].reshape(n, c, -1)
            k = win.argmax(axis=2)
            out[:, :, i, j] = win.max(axis=2)
            ww = min(2 * j + 2, w) - w0
            for a in range(n):
                for b in range(c):
                    dx[a, b, h0 + k[a, b] // ww, w0 + k[a, b] % ww] += head[a, b, i, j]
    return out, dx


def test_split_kernels_match_numpy(restore: None) -> None:
    """At 2 threads the newly split kernels (sizes above PAR_MIN) give numpy's results."""
    threads.set_num_threads(2)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 40, 40)).astype(np.float32)
    head = rng.standard_normal((2, 16, 20, 20)).astype(np.float32)
    ex = sym.Pooling(sym.Variable("x"), kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                     pool_type="max").simple_bind(cpu(), x=x.shape)
    ex.arg_dict["x"][:] = x
    out = ex.forward(is_train=True)[0].asnumpy()
    ex.backward([nd.array(head)])
    want, dx = _max_pool_ref(x, head)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(ex.grad_dict["x"].asnumpy(), dx)

    m = rng.standard_normal((700, 300)).astype(np.float32)
    e = np.exp(m.astype(np.float64) - m.max(axis=1, keepdims=True))
    np.testing.assert_allclose(nd.softmax(nd.array(m)).asnumpy(),
                               e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    e0 = np.exp(m.astype(np.float64) - m.max(axis=0))  # one row of positions: split by columns
    np.testing.assert_allclose(nd.softmax(nd.array(m), axis=0).asnumpy(), e0 / e0.sum(axis=0),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(nd.sum(nd.array(m), axis=0).asnumpy(),
                                  m.astype(np.float64).sum(axis=0).astype(np.float32))
    np.testing.assert_array_equal(nd.max(nd.array(m), axis=1).asnumpy(), m.max(axis=1))
    col = m[:, :1].copy()
    np.testing.assert_array_equal(nd.broadcast_sub(nd.array(col), nd.array(m)).asnumpy(),
                                  col - m)
    np.testing.assert_array_equal(nd.abs(nd.array(m)).asnumpy(), np.abs(m))


def _child(queue: Any) -> None:
    """In a forked child: a dense update big enough to split over the pool."""
    x = np.linspace(-1, 1, 1 << 20, dtype=np.float32)
    w, mom = nd.array(x), nd.zeros(x.shape)
    nd.sgd_mom_update(w, nd.array(x), mom, lr=0.5, momentum=0.9, out=w)
    want = x + (-0.5 * x)
    queue.put((threads.get_num_threads(), bool(np.allclose(w.asnumpy(), want, rtol=1e-6))))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_children_run_pool_kernels(restore: None) -> None:
    threads.set_num_threads(2)
    x = np.ones(1 << 20, np.float32)
    w, mom = nd.array(x), nd.zeros(x.shape)
    nd.sgd_mom_update(w, nd.array(x), mom, lr=0.5, out=w)  # the parent's workers exist now
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(queue,)) for _ in range(2)]
    for p in procs:
        p.start()
    try:
        got = [queue.get(timeout=60) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():  # a deadlocked child: fail rather than hang the suite
                p.kill()
    assert got == [(2, True), (2, True)]
    assert all(p.exitcode == 0 for p in procs)


LOCK_LINE = re.compile(r"^(_\w+) = threading\.(R?Lock)\(\)", re.M)


def test_every_module_lock_is_renewed_after_fork() -> None:
    """FORK_LOCKS lists every module-level lock of nnsym, with its kind."""
    root = Path(threads.__file__).resolve().parents[1]
    found = set()
    for path in root.rglob("*.py"):
        if "devtools" in path.parts:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for name, kind in LOCK_LINE.findall(path.read_text()):
            found.add((module, name, kind == "RLock"))
    assert found == set(threads.FORK_LOCKS)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_child_forked_while_a_thread_holds_locks_can_take_them(restore: None) -> None:
    """Another thread of the parent holds every nnsym lock at the fork (as while compiling):
    the child still gets them, and runs a kernel."""
    import importlib

    mods = {m for m, _, _ in threads.FORK_LOCKS if not m.startswith("nnsym.cuda")}
    for m in mods:
        importlib.import_module(m)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        locks = [getattr(sys.modules[m], a) for m, a, _ in threads.FORK_LOCKS if m in mods]
        for lock in locks:
            lock.acquire()
        held.set()
        release.wait(60)
        for lock in reversed(locks):
            lock.release()

    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(30)
    r, w = os.pipe()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:
            code = 1
            try:
                ok = True
                for m, a, _ in threads.FORK_LOCKS:
                    lock = getattr(sys.modules[m], a) if m in mods else None
                    if lock is not None:
                        got = lock.acquire(timeout=5)
                        ok = ok and got
                        if got:
                            lock.release()
                x = np.arange(1 << 18, dtype=np.float32)
                ok = ok and bool(np.array_equal((nd.array(x) * 2).asnumpy(), x * 2))
                os.write(w, json.dumps({"ok": ok}).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            report = f.read()
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        t.join(30)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert json.loads(report) == {"ok": True}


def _pool_ref(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
              pad: tuple[int, int], kind: str) -> np.ndarray:
    """NCHW max pooling (padding never wins) or avg pooling counting the padding, by windows."""
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])),
                constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, kernel, axis=(2, 3))
    win = win[:, :, ::stride[0], ::stride[1]]
    out = win.max(axis=(4, 5)) if kind == "max" else win.mean(axis=(4, 5))
    return out.astype(x.dtype)


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_pooling_blocks_match_numpy(restore: None, nthreads: int) -> None:
    """Rows wider than the pooling forward's accumulator block (256) give numpy's results."""
    threads.set_num_threads(nthreads)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 8, 6, 600)).astype(np.float32)
    for kw in ({"kernel": (1, 3), "stride": (1, 1), "pad": (0, 1), "pool_type": "max"},
               {"kernel": (2, 3), "stride": (1, 2), "pad": (0, 0), "pool_type": "avg"}):
        got = nd.Pooling(nd.array(x), **kw).asnumpy()
        want = _pool_ref(x, kw["kernel"], kw["stride"], kw["pad"], kw["pool_type"])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=str(kw))
    # rows wider than the two-pass max pooling's stack rows (POOL_SEP_MAX = 2048): row-major
    xw = rng.standard_normal((1, 3, 4, 2100)).astype(np.float32)
    kw = {"kernel": (2, 3), "stride": (1, 2), "pad": (0, 1), "pool_type": "max"}
    got = nd.Pooling(nd.array(xw), **kw).asnumpy()
    np.testing.assert_array_equal(got, _pool_ref(xw, (2, 3), (1, 2), (0, 1), "max"))
    xc = rng.standard_normal((2, 12, 12, 300)).astype(np.float32)  # NHWC, 300 channels
    got = nd.Pooling(nd.array(xc), kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="max",
                     layout="NHWC").asnumpy()
    want = _pool_ref(xc.transpose(0, 3, 1, 2), (3, 3), (1, 1), (1, 1), "max")
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))
