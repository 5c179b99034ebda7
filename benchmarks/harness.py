"""Side-by-side timing (see ../shared/BENCHMARKS.md): warm-up excluded, each sample >= ~10 ms
of looped calls, >= 10 samples, GC off during samples; median and min; JSON lines; ratios to
the best peer in the same run."""

from __future__ import annotations

import gc
import json
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any


def measure(fn: Callable[[], Any], min_sample: float = 0.01, samples: int = 10,
            warmup: float = 0.2) -> tuple[float, float]:
    """(median, min) seconds per call."""
    t0 = time.perf_counter()
    n_warm = 0
    while n_warm < 2 or time.perf_counter() - t0 < warmup:
        fn()
        n_warm += 1
    per = (time.perf_counter() - t0) / n_warm
    loops = max(1, int(min_sample / max(per, 1e-9)))
    out = []
    gc.disable()
    try:
        for _ in range(samples):
            s = time.perf_counter()
            for _ in range(loops):
                fn()
            out.append((time.perf_counter() - s) / loops)
    finally:
        gc.enable()
    return statistics.median(out), min(out)


def environment() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine()}
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            {k: p.get(k) for k in ("internal_api", "num_threads", "version")}
            for p in threadpool_info()
        ]
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    return info


def report(results: list[dict[str, Any]]) -> None:
    """Print one JSON line per (workload, peer) and a table of ratios to the best peer."""
    for r in results:
        print(json.dumps(r))
    print()
    by_w: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_w.setdefault(r["workload"], []).append(r)
    print(f"{'workload':<34} {'peer':<22} {'median ms':>10} {'min ms':>10} {'ratio':>7}")
    for w, rs in by_w.items():
        best = min(r["median_ms"] for r in rs)
        for r in sorted(rs, key=lambda r: r["median_ms"]):
            print(f"{w:<34} {r['peer']:<22} {r['median_ms']:>10.4g} {r['min_ms']:>10.4g} "
                  f"{r['median_ms'] / best:>7.2f}")


def row(workload: str, peer: str, timing: tuple[float, float], **extra: Any) -> dict[str, Any]:
    med, best = timing
    return {"workload": workload, "peer": peer, "median_ms": med * 1e3, "min_ms": best * 1e3,
            **extra}
