"""W6 as MXNet's optimizers run it (issue 15 item 6): lazy SGD with momentum on a row_sparse
weight (1,000,000 x 64 float32, every row stored) and a row_sparse momentum created empty
(``sparse.zeros('row_sparse', shape)``), row_sparse gradients of ``--rows`` rows (default
1,000), a new row set every step (16 sets, cycled; lr 0.01, momentum 0.9, wd 1e-4).

nnsym runs in this process; MXNet 1.9.1 in its reference venv (``~/mxref/bin/python``, or
``$NNSYM_MXREF_PYTHON``) as a subprocess running this file with ``--peer mxnet``. Both build
the same data from one seed and check one step against numpy. Prints JSON lines, the table
and the ratio nnsym / MXNet. Usage: ``python benchmarks/bench_w6_rsp.py [--rows K] [--quick]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row

W6 = "W6 lazy sgd_mom, rsp weight+state"
SHAPE = (1_000_000, 64)
LR, MOMENTUM, WD = 0.01, 0.9, 1e-4
SETS = 16


def data(k: int) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The weight and SETS (row ids, gradient rows), the same in every numpy version."""
    rng = np.random.RandomState(0)
    weight = rng.standard_normal(SHAPE).astype(np.float32)
    grads = []
    for _ in range(SETS):
        idx = np.sort(rng.choice(SHAPE[0], k, replace=False)).astype(np.int64)
        grads.append((idx, rng.standard_normal((k, SHAPE[1])).astype(np.float32)))
    return weight, grads


def reference_step(weight: np.ndarray, idx: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The weight's rows ``idx`` after one lazy step from zero momentum."""
    m = -(LR * WD) * weight[idx] - LR * g
    return weight[idx] + m


def run_nnsym(k: int, samples: int) -> tuple[float, float]:
    from nnsym import nd
    from nnsym.ndarray.sparse import RowSparseNDArray, zeros

    weight, grads = data(k)
    w = RowSparseNDArray._make(weight.copy(), np.arange(SHAPE[0], dtype=np.int64), SHAPE)
    m = zeros("row_sparse", SHAPE)
    gs = [RowSparseNDArray(g, idx, SHAPE) for idx, g in grads]
    nd.sgd_mom_update(w, gs[0], m, lr=LR, momentum=MOMENTUM, wd=WD, out=w)
    np.testing.assert_allclose(w._values[grads[0][0]], reference_step(weight, *grads[0]),
                               rtol=1e-6, atol=1e-7)
    it = [0]

    def step() -> None:
        it[0] = (it[0] + 1) % SETS
        nd.sgd_mom_update(w, gs[it[0]], m, lr=LR, momentum=MOMENTUM, wd=WD, out=w)

    return measure(step, samples=samples)


def run_mxnet(k: int, samples: int) -> tuple[float, float]:
    import mxnet as mx

    weight, grads = data(k)
    w = mx.nd.array(weight).tostype("row_sparse")
    m = mx.nd.sparse.zeros("row_sparse", SHAPE)
    gs = [mx.nd.sparse.row_sparse_array((g, idx), shape=SHAPE) for idx, g in grads]
    mx.nd.sgd_mom_update(w, gs[0], m, lr=LR, momentum=MOMENTUM, wd=WD, out=w,
                         lazy_update=True)
    got = w.data.asnumpy()[grads[0][0]]
    np.testing.assert_allclose(got, reference_step(weight, *grads[0]), rtol=1e-6, atol=1e-7)
    it = [0]

    def step() -> None:
        it[0] = (it[0] + 1) % SETS
        mx.nd.sgd_mom_update(w, gs[it[0]], m, lr=LR, momentum=MOMENTUM, wd=WD, out=w,
                             lazy_update=True).wait_to_read()

    return measure(step, samples=samples)


def mxnet_peer(k: int, samples: int) -> dict[str, Any] | None:
    """MXNet's row, timed in a subprocess of its reference venv (None where it is absent)."""
    py = os.environ.get("NNSYM_MXREF_PYTHON", str(Path("~/mxref/bin/python").expanduser()))
    if not Path(py).exists():
        print(f"# MXNet peer skipped: no {py}")
        return None
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"),
               MXNET_STORAGE_FALLBACK_LOG_VERBOSE="0")
    env.pop("PYTHONPATH", None)
    res = subprocess.run([py, __file__, "--peer", "mxnet", "--rows", str(k),
                          "--samples", str(samples)], capture_output=True, text=True, env=env,
                         timeout=600, check=False)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        print(f"# MXNet peer failed: {res.stderr[-500:]}")
        return None
    return dict(json.loads(lines[-1]))


def main() -> None:
    args = sys.argv[1:]
    k = int(args[args.index("--rows") + 1]) if "--rows" in args else 1000
    samples = int(args[args.index("--samples") + 1]) if "--samples" in args else (
        5 if "--quick" in args else 10)
    if "--peer" in args:  # the MXNet side, in its own venv
        print(json.dumps(row(W6, "mxnet 1.9.1", run_mxnet(k, samples), rows=k)))
        return
    from nnsym.codegen import compiler

    print("#", environment(), "nnsym threads:", compiler.get_num_threads())
    results = [row(W6, "nnsym nd", run_nnsym(k, samples), rows=k)]
    mx_row = mxnet_peer(k, samples)
    if mx_row is not None:
        results.append(mx_row)
    report(results)
    if mx_row is not None:
        print(f"\n{W6} ({k} rows/step): nnsym / MXNet = "
              f"{results[0]['median_ms'] / mx_row['median_ms']:.3f} (goal <= 0.2)")


if __name__ == "__main__":
    main()
