"""Data-parallel MLP training over the MPI kvstore: samples/s with 1 and 2 ranks, the share
of step time spent in the kvstore's collectives, and a projection for N machines.

    python benchmarks/bench_dist.py [--steps 30] [--batch 64] [--bandwidth-gbit 10] [--threads 1]

runs ``mpiexec -n 1`` and ``-n 2`` of itself (``--worker``) and prints a table. The
projection assumes every rank computes as fast as the measured 1-rank step, and a ring
allreduce of the measured message size over a link of the stated bandwidth:
t_comm(N) = 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def worker(steps: int, batch: int, hidden: int) -> None:
    import nnsym as mx
    from nnsym import io as mio
    from nnsym import kvstore
    from nnsym import module as mmod

    kv = kvstore.create("dist_sync")
    data = mx.sym.Variable("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=hidden, name="fc1"),
                          act_type="relu")
    h = mx.sym.Activation(mx.sym.FullyConnected(h, num_hidden=hidden, name="fc2"),
                          act_type="relu")
    out = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=10, name="fc3"),
                               name="softmax")
    rng = np.random.default_rng(kv.rank)
    x = rng.standard_normal((batch * 4, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch * 4).astype(np.float32)
    it = mio.NDArrayIter(x, y, batch_size=batch)
    mod = mmod.Module(out)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(kvstore=kv, optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01), ("momentum", 0.9)))
    batches = list(it)

    def step(b):
        mod.forward(b, is_train=True)
        mod.backward()
        mod.update()

    for b in batches[:3]:  # warm-up: kernels compiled, buffers allocated
        step(b)
    kv.barrier()
    kv.stats.update(bytes=0, seconds=0.0, calls=0)
    t0 = time.perf_counter()
    for i in range(steps):
        step(batches[i % len(batches)])
    mod.get_params()  # waits for the last update
    kv.barrier()
    wall = time.perf_counter() - t0
    # the same bytes reduced alone (after a barrier: no waiting for a slower rank's compute)
    buf = np.ones(int(kv.stats["bytes"] / steps) // 4, np.float32)
    mpi = kv._MPI
    kv.barrier()
    t1 = time.perf_counter()
    for _ in range(steps):
        kv._wait([kv._comm.Iallreduce(mpi.IN_PLACE, buf, op=mpi.SUM)], "bench")
    alone = (time.perf_counter() - t1) / steps
    res = {"allreduce_alone_s": alone, "rank": kv.rank, "ranks": kv.num_workers,
           "steps": steps, "batch": batch,
           "wall_s": wall, "kv_s": kv.stats["seconds"], "bytes_per_step":
           kv.stats["bytes"] / steps,
           "params": sum(int(np.prod(v.shape)) for v in mod.get_params()[0].values())}
    line = json.dumps(res)
    if kv.rank == 0:
        sys.stdout.write(f"RESULT {line}\n")
        sys.stdout.flush()


def run(n: int, args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if args.threads:
        env["NNSYM_NUM_THREADS"] = str(args.threads)
    cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(n), sys.executable, __file__,
           "--worker", "--steps", str(args.steps), "--batch", str(args.batch),
           "--hidden", str(args.hidden)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(next(s for s in out.splitlines() if s.startswith("RESULT "))[7:])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--bandwidth-gbit", type=float, default=10.0)
    p.add_argument("--latency-us", type=float, default=20.0)
    p.add_argument("--threads", type=int, default=0,
                   help="NNSYM_NUM_THREADS per rank (default: every CPU, in every rank)")
    args = p.parse_args()
    if args.worker:
        worker(args.steps, args.batch, args.hidden)
        return
    one, two = run(1, args), run(2, args)
    print(f"MLP 784-{args.hidden}-{args.hidden}-10, {one['params']} parameters, "
          f"batch {args.batch} per rank, {args.steps} steps")
    for r in (one, two):
        step = r["wall_s"] / r["steps"]
        sps = r["ranks"] * r["batch"] / step
        print(f"  {r['ranks']} rank(s): {sps:8.1f} samples/s, step {1e3 * step:7.2f} ms, "
              f"kvstore collectives {1e3 * r['kv_s'] / r['steps']:6.2f} ms "
              f"({100 * r['kv_s'] / r['wall_s']:4.1f}% of step), "
              f"{r['bytes_per_step'] / 1e6:.2f} MB reduced per step; that allreduce alone "
              f"{1e3 * r['allreduce_alone_s']:.2f} ms")
    compute = one["wall_s"] / one["steps"]
    nbytes = two["bytes_per_step"]
    bw = args.bandwidth_gbit * 1e9 / 8
    print(f"projection: compute {1e3 * compute:.2f} ms/step per rank (1-rank run), ring "
          f"allreduce of {nbytes / 1e6:.2f} MB at {args.bandwidth_gbit:g} Gbit/s, "
          f"{args.latency_us:g} us latency")
    for n in (2, 4, 8, 16, 32, 64):
        comm = 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * args.latency_us * 1e-6
        sps = n * args.batch / (compute + comm)
        print(f"  N={n:3d}: comm {1e3 * comm:6.2f} ms/step ({100 * comm / (compute + comm):4.1f}%"
              f"), {sps:9.1f} samples/s, scaling efficiency "
              f"{100 * compute / (compute + comm):4.1f}%")


if __name__ == "__main__":
    main()
