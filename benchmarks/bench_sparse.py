"""Sparse workloads side by side (see ../shared/BENCHMARKS.md), float32, fixed seeds:

- W4a: csr (100,000 x 10,000, 10 entries per row, 1M nnz) . dense (10,000 x 64) -> dense.
  Peers: scipy (csr @ dense), torch.sparse and MXNet when importable. Goal: nnsym <= 0.8x the
  best peer.
- W4b: csr.T . dense (100,000 x 64) -> row_sparse (10,000 x 64). Peers: scipy (csr.T @ dense),
  torch and MXNet when importable. Goal: <= 0.5x.
- W5: ``nd._contrib_quadratic(csr, a=1, b=2, c=0)`` on a 1,000,000 x 1,000,000 csr with 10M
  nnz -> csr (storage inference picks fcompute_ex: only the data array is mapped). Peers: numpy
  on the data array (``a*x*x + b*x + c``), scipy (a csr with the mapped data). Goal: <= 0.2x
  numpy (issue 15: <= 0.15x).
- W5 chain: the same csr through ``A*A*a + A*b`` (a=1, b=2) in a bound graph, which the fusion
  pass turns into one pass over the stored values (``nnsym/passes/fuse.py``); also bound with
  fusion off. Peers: numpy on the data array, scipy's sparse operators, torch on the data
  array. Goal: <= 0.2x the best peer.
- W6: lazy SGD with momentum: weight 1,000,000 x 64, row_sparse gradient of 10,000 random rows
  (lr 0.01, momentum 0.9, wd 1e-4), ``nd.sgd_mom_update(w, g, m, out=w)``. Peers: numpy fancy
  indexing of the same lazy update, MXNet ``sgd_mom_update`` when importable. Goal: <= 0.3x
  the best peer.

Every nnsym row is a call of the ``nnsym.nd`` front end on CSRNDArray / RowSparseNDArray
arguments (storage inference, dispatch, the generated kernels, the result arrays). Rows marked
``(out=)`` write into a preallocated output, as a bound graph's static memory plan does;
``(alloc)`` rows allocate it per call like the peers. Usage:
``python benchmarks/bench_sparse.py [--quick]``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "2")  # MXNet uses one core otherwise

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row

import nnsym
from nnsym import nd
from nnsym.executor.executor import Executor

W4A, W4B = "W4a csr . dense", "W4b csr.T . dense"
W5, W6 = "W5 quadratic(csr 1e6^2, 10M nnz)", "W6 lazy sgd_mom (1e6 x 64)"
W5C = "W5 chain A*A*a+A*b (bound graph)"
GOALS = {W4A: 0.8, W4B: 0.5, W5: 0.15, W5C: 0.2, W6: 0.3}


def random_csr(rng: np.random.Generator, rows: int, cols: int,
               per_row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """per_row distinct random columns in every row (sorted), standard normal float32 values."""
    idx = np.sort(rng.integers(0, cols, (rows, per_row)), axis=1)
    while True:
        dup = (np.diff(idx, axis=1) == 0).any(axis=1)
        if not dup.any():
            break
        idx[dup] = np.sort(rng.integers(0, cols, (int(dup.sum()), per_row)), axis=1)
    indptr = np.arange(0, rows * per_row + 1, per_row, dtype=np.int64)
    data = rng.standard_normal(rows * per_row).astype(np.float32)
    return data, idx.ravel().astype(np.int64), indptr


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    return torch


def _mxnet() -> Any:
    try:
        import mxnet
    except ImportError:
        return None
    return mxnet


Peers = list[tuple[str, str, Callable[[], Any]]]


def w4(rng: np.random.Generator, check: bool) -> tuple[Peers, Any]:
    rows, cols, n = 100_000, 10_000, 64
    data, indices, indptr = random_csr(rng, rows, cols, 10)
    a = sp.csr_matrix((data, indices.astype(np.int32), indptr.astype(np.int32)),
                      shape=(rows, cols))
    b = rng.standard_normal((cols, n)).astype(np.float32)
    d = rng.standard_normal((rows, n)).astype(np.float32)
    shape = (rows, cols)
    xa = nd.sparse.csr_matrix((data, indices, indptr), shape=shape)
    xb, xd = nd.array(b), nd.array(d)
    out = nd.zeros((rows, n))
    if check:
        np.testing.assert_allclose(nd.dot(xa, xb).asnumpy(), a @ b, rtol=1e-4, atol=1e-4)
        g = nd.dot(xa, xd, transpose_a=True)
        assert g.stype == "row_sparse"
        ids = g.indices.asnumpy()
        np.testing.assert_allclose(g.data.asnumpy(), (a.T @ d)[ids], rtol=1e-4, atol=1e-3)
    peers: Peers = [
        (W4A, "nnsym nd (out=)", lambda: nd.dot(xa, xb, out=out)),
        (W4A, "nnsym nd (alloc)", lambda: nd.dot(xa, xb)),
        (W4A, "scipy", lambda: a @ b),
        (W4B, "nnsym nd", lambda: nd.dot(xa, xd, transpose_a=True)),
        (W4B, "scipy", lambda: a.T @ d),
    ]
    torch = _torch()
    if torch is not None:
        ta = torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(indices),
                                     torch.from_numpy(data), size=shape)
        tb, td = torch.from_numpy(b), torch.from_numpy(d)
        peers += [(W4A, "torch.sparse", lambda: ta @ tb),
                  (W4B, "torch.sparse", lambda: ta.t() @ td)]
    mx = _mxnet()
    if mx is not None:
        ma = mx.nd.sparse.csr_matrix((data, indices, indptr), shape=shape)
        mb, md = mx.nd.array(b), mx.nd.array(d)
        peers += [(W4A, "mxnet", lambda: mx.nd.dot(ma, mb).wait_to_read()),
                  (W4B, "mxnet", lambda: mx.nd.dot(ma, md, transpose_a=True).wait_to_read())]
    return peers, (a, b, d, out)


def w5(rng: np.random.Generator, check: bool) -> tuple[Peers, Any]:
    big, per_row = 1_000_000, 10
    data, indices, indptr = random_csr(rng, big, big, per_row)
    a = sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=(big, big))
    x = nd.sparse.csr_matrix((data, indices, indptr), shape=(big, big))
    out = nd.sparse.csr_matrix((data.copy(), indices, indptr), shape=(big, big))

    def quad(v: np.ndarray) -> np.ndarray:
        return 1 * v * v + 2 * v + 0

    if check:
        got = nd._contrib_quadratic(x, a=1, b=2, c=0)
        assert got.stype == "csr"
        np.testing.assert_allclose(got.data.asnumpy(), quad(data), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got.indices.asnumpy(), indices)
    peers: Peers = [
        (W5, "nnsym nd (out=)", lambda: nd._contrib_quadratic(x, a=1, b=2, c=0, out=out)),
        (W5, "nnsym nd (alloc)", lambda: nd._contrib_quadratic(x, a=1, b=2, c=0)),
        (W5, "numpy on .data", lambda: quad(data)),
        (W5, "scipy csr (new data)",
         lambda: sp.csr_matrix((quad(a.data), a.indices, a.indptr), shape=a.shape, copy=False)),
    ]
    torch = _torch()
    if torch is not None:
        tx = torch.from_numpy(data)
        peers.append((W5, "torch on .data", lambda: 1 * tx * tx + 2 * tx + 0))

    # The chain in a bound graph (fused: one pass over the values; and with fusion off).
    s = nnsym.sym.Variable("A", stype="csr")
    net = s * s * 1.0 + s * 2.0
    fused = Executor(net, nnsym.cpu(), [x], None, "null", fusion=True)
    unfused = Executor(net, nnsym.cpu(), [x], None, "null", fusion=False)
    if check:
        for ex in (fused, unfused):
            got = ex.forward()[0]
            assert got.stype == "csr"
            np.testing.assert_allclose(got.data.asnumpy(), quad(data), rtol=1e-6, atol=1e-6)
    peers += [
        (W5C, "nnsym bound (fused)", lambda: fused.forward()),
        (W5C, "nnsym bound (fusion off)", lambda: unfused.forward()),
        (W5C, "numpy on .data", lambda: data * data * 1 + data * 2),
        (W5C, "scipy csr ops", lambda: a.multiply(a) * 1 + a * 2),
    ]
    if torch is not None:
        peers.append((W5C, "torch on .data", lambda: tx * tx * 1 + tx * 2))
    return peers, (a, x, out, fused, unfused)


def w6(rng: np.random.Generator, check: bool) -> tuple[Peers, Any]:
    rows, n, k = 1_000_000, 64, 10_000
    lr, momentum, wd = 0.01, 0.9, 1e-4
    weight = rng.standard_normal((rows, n)).astype(np.float32)
    mom = np.zeros_like(weight)
    idx = np.sort(rng.choice(rows, k, replace=False)).astype(np.int64)
    grad = rng.standard_normal((k, n)).astype(np.float32)
    w2, m2 = weight.copy(), mom.copy()

    def numpy_lazy(w: np.ndarray, m: np.ndarray) -> None:
        wr, mr = w[idx], m[idx]
        mr = momentum * mr - (lr * wd) * wr - lr * grad
        m[idx] = mr
        w[idx] = wr + mr

    xw, xm = nd.array(weight), nd.array(mom)
    xg = nd.sparse.row_sparse_array((grad, idx), shape=weight.shape)

    def nnsym_lazy() -> None:
        nd.sgd_mom_update(xw, xg, xm, lr=lr, momentum=momentum, wd=wd, out=xw)

    if check:
        nnsym_lazy()
        numpy_lazy(w2, m2)
        np.testing.assert_allclose(xw.asnumpy()[idx], w2[idx], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(xm.asnumpy()[idx], m2[idx], rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(np.delete(xw.asnumpy(), idx, axis=0),
                                      np.delete(weight, idx, axis=0))
    peers: Peers = [
        (W6, "nnsym nd", nnsym_lazy),
        (W6, "numpy fancy-index", lambda: numpy_lazy(w2, m2)),
    ]
    mx = _mxnet()
    if mx is not None:
        mw, mm = mx.nd.array(weight), mx.nd.zeros(weight.shape)
        mg = mx.nd.sparse.row_sparse_array((grad, idx), shape=weight.shape)
        peers.append((W6, "mxnet", lambda: mx.nd.sgd_mom_update(
            mw, mg, mm, out=mw, lr=lr, momentum=momentum, wd=wd,
            lazy_update=True).wait_to_read()))
    return peers, (xw, xm, xg, w2, m2)


def goals(results: list[dict[str, Any]]) -> None:
    """nnsym's best row against the best peer of each workload, next to the goal."""
    print()
    for w, goal in GOALS.items():
        rs = [r for r in results if r["workload"] == w]
        ours = [r["median_ms"] for r in rs if r["peer"].startswith("nnsym")]
        theirs = [r["median_ms"] for r in rs if not r["peer"].startswith("nnsym")]
        if ours and theirs:
            ratio = min(ours) / min(theirs)
            print(f"{w:<34} nnsym / best peer = {ratio:.2f} (goal <= {goal}) "
                  f"{'met' if ratio <= goal else 'NOT met'}")


def main() -> None:
    quick = "--quick" in sys.argv
    samples = 5 if quick else 10
    print("#", environment(), "nnsym threads:", nnsym.codegen.compiler.get_num_threads())
    results = []
    for make in (w4, w5, w6):
        peers, keep = make(np.random.default_rng(0), True)
        for w, peer, fn in peers:
            try:
                timing = measure(fn, samples=samples)
            except Exception as e:  # a peer that cannot run this workload (MXNet on W5)
                print(f"# {w} / {peer}: failed: {type(e).__name__}: {e}")
                continue
            results.append(row(w, peer, timing))
        del peers, keep
    report(results)
    goals(results)


if __name__ == "__main__":
    main()
