"""ResNet-18 training bind time (issue 15: <= 3 s cold, <= 0.3 s warm): ``simple_bind(cpu(),
grad_req='write', data=(8, 3, 64, 64))`` of ``tests/golden/resnet18_v1-symbol.json``, each in a
fresh process: *cold* with an empty kernel cache (a new ``NNSYM_CACHE_DIR``: the bind compiles
every kernel), then *warm* with the cache the cold one left. Each process also times a second
bind of the same symbol (``again``). Import and JSON load are outside the timed bind.

Every row records the bind's wall time, the CPU seconds of the process and of its children (the
C compiler) during the bind, the kernel cache's compile and disk-hit counts, and the 1-minute
load average before and after: on a loaded machine wall times grow with the load (2 cores), the
CPU seconds much less.

Usage: ``python benchmarks/bench_bind.py [--rounds 3 | --quick] [--root CHECKOUT]
[--profile cold|warm]``
(``--root``: the nnsym checkout to measure, e.g. a worktree of an older commit, for A/B runs).
Prints one JSON line per process, then the medians against the goals."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"cold": 3.0, "warm": 0.3}

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    t0 = time.perf_counter()
    import nnsym
    from nnsym import cpu, sym
    from nnsym.codegen import compiler
    t_import = time.perf_counter() - t0
    net = sym.load(sys.argv[1])
    batch, side, profile = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"

    def bind():
        return net.simple_bind(cpu(), grad_req="write", data=(batch, 3, side, side))

    if profile:
        import cProfile, pstats
        prof = cProfile.Profile()
        prof.enable()
    c0, t0 = os.times(), time.perf_counter()
    bind()
    wall, c1 = time.perf_counter() - t0, os.times()
    if profile:
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    stats = dict(compiler.STATS)
    t1 = time.perf_counter()
    bind()
    again = time.perf_counter() - t1
    print(json.dumps({
        "bind_s": wall, "again_s": again, "import_s": t_import,
        "cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
        "children_cpu_s": (c1.children_user - c0.children_user)
                          + (c1.children_system - c0.children_system),
        "compiles": stats["compiles"], "disk_hits": stats["disk_hits"],
        "nnsym": os.path.dirname(os.path.dirname(nnsym.__file__))}))
    """
)


def child(root: Path, cache: str, batch: int, side: int, profile: bool) -> dict[str, object]:
    env = {**os.environ, "NNSYM_CACHE_DIR": cache, "PYTHONPATH": str(root)}
    net = root / "tests" / "golden" / "resnet18_v1-symbol.json"
    load0 = os.getloadavg()[0]
    r = subprocess.run([sys.executable, "-c", CHILD, str(net), str(batch), str(side),
                        "1" if profile else "0"], capture_output=True, text=True, env=env, cwd=root,
                       check=False)
    if profile:
        sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"bench_bind child failed:\n{r.stderr[-4000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    return {**res, "load_1m": round(load0, 2), "load_1m_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round")
    ap.add_argument("--root", type=Path, default=ROOT, help="nnsym checkout to measure")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--side", type=int, default=64)
    ap.add_argument("--profile", choices=("cold", "warm"), default=None,
                    help="print cProfile's top functions of that bind (first round) to stderr")
    a = ap.parse_args()
    if a.quick:
        a.rounds = 1
    rows: dict[str, list[dict[str, object]]] = {"cold": [], "warm": []}
    start = time.perf_counter()
    for rnd in range(a.rounds):
        with tempfile.TemporaryDirectory(prefix="nnsym-bench-bind-") as cache:
            for label in ("cold", "warm"):
                res = child(a.root.resolve(), cache, a.batch, a.side,
                            a.profile == label and rnd == 0)
                rows[label].append(res)
                print(json.dumps({"workload": f"ResNet-18 b{a.batch} training bind {label}",
                                  "round": rnd, **{k: (round(v, 4) if isinstance(v, float)
                                                       else v) for k, v in res.items()}}),
                      flush=True)
    for label, rs in rows.items():
        med = statistics.median(float(r["bind_s"]) for r in rs)  # type: ignore[arg-type]
        again = statistics.median(float(r["again_s"]) for r in rs)  # type: ignore[arg-type]
        cpu = statistics.median(float(r["cpu_s"]) + float(r["children_cpu_s"])  # type: ignore[arg-type]
                                for r in rs)
        goal = GOALS[label]
        print(f"{label}: bind {med:.3f} s median of {len(rs)} (goal <= {goal} s: "
              f"{'met' if med <= goal else 'NOT met'}), CPU {cpu:.3f} s, second bind in the "
              f"same process {again:.3f} s; load {rs[0]['load_1m']}..{rs[-1]['load_1m_after']}")
    print(f"# {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
