"""The kernels that split over the worker pool (issue 15 item 3: maps, broadcasts, axis
reductions, softmax, pooling) at 1 and 2 threads: the median time per call (outputs preallocated
where the operator takes ``out=``, so page faults do not dominate), and the share of the
process's CPU time spent on threads other than the caller, which shows that the work split.
On a machine loaded by other work the times mean little: the load average is printed with them.

Usage: ``python benchmarks/bench_split_kernels.py``"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nnsym import cpu, nd, sym
from nnsym.runtime import threads


def _ticks() -> dict[int, int]:
    """CPU ticks (user + system) of each thread of this process."""
    out = {}
    for t in Path("/proc/self/task").iterdir():
        fields = (t / "stat").read_text().rsplit(")", 1)[1].split()
        out[int(t.name)] = int(fields[11]) + int(fields[12])
    return out


def _cases() -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    x = nd.array(rng.standard_normal(1 << 22).astype(np.float32))
    y = nd.zeros(x.shape)
    m = nd.array(rng.standard_normal((4096, 1024)).astype(np.float32))
    mo = nd.zeros(m.shape)
    p = rng.standard_normal((8, 64, 64, 64)).astype(np.float32)
    ex = sym.Pooling(sym.Variable("x"), kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                     pool_type="max").simple_bind(cpu(), x=p.shape)
    ex.arg_dict["x"][:] = p
    head = nd.array(np.ones((8, 64, 32, 32), np.float32))

    def pool() -> object:
        ex.forward(is_train=True)
        ex.backward([head])
        return ex.grad_dict["x"]

    return {
        "tanh 4M (out=)": lambda: nd.tanh(x, out=y),
        "elemwise_mul 4M (out=)": lambda: nd.elemwise_mul(x, x, out=y),
        "broadcast_sub 4096x1024 - col (out=)": lambda: nd.broadcast_sub(m, m[:, 0:1], out=mo),
        "sum axis 0, 4096x1024": lambda: nd.sum(m, axis=0),
        "max axis 1, 4096x1024": lambda: nd.max(m, axis=1),
        "softmax 4096x1024 (out=)": lambda: nd.softmax(m, out=mo),
        "Pooling max 3x3/2 fwd+bwd 8x64x64x64": pool,
    }


def main() -> None:
    cases = _cases()
    before = threads.get_num_threads()
    me = os.getpid()
    print(f"# load average {os.getloadavg()}, {os.cpu_count()} cpus")
    print(f"{'kernel':40s} {'threads':>7s} {'median ms':>10s} {'min ms':>8s}"
          f" {'other threads':>13s}")
    try:
        for name, fn in cases.items():
            for n in (1, 2):
                threads.set_num_threads(n)
                fn().wait_to_read()  # type: ignore[attr-defined]
                a, ts = _ticks(), []
                for _ in range(30):
                    t = time.perf_counter()
                    fn().wait_to_read()  # type: ignore[attr-defined]
                    ts.append(time.perf_counter() - t)
                b = _ticks()
                d = {k: b[k] - a.get(k, 0) for k in b}
                total = max(sum(d.values()), 1)
                share = 1 - d.get(me, 0) / total
                print(f"{name:40s} {n:7d} {np.median(ts) * 1e3:10.2f} {min(ts) * 1e3:8.2f}"
                      f" {share:13.0%}")
    finally:
        threads.set_num_threads(before)
    print(f"# load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
