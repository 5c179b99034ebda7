"""Time shape and dtype inference of the MXNet-exported ResNet-50 (tests/golden).

Prints one JSON line per measurement. Usage: ``python benchmarks/bench_infer.py``.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from pathlib import Path

from nnsym import sym

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"


def timeit(fn, min_time=0.2, samples=15):
    for _ in range(2):
        fn()
    out = []
    gc.disable()
    try:
        for _ in range(samples):
            n, t0 = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                dt = time.perf_counter() - t0
                if dt >= min_time / samples:
                    break
            out.append(dt / n)
    finally:
        gc.enable()
    return statistics.median(out), min(out)


def main() -> None:
    for name in ("resnet18_v1", "resnet50_v1"):
        path = GOLDEN / f"{name}-symbol.json"
        text = path.read_text()
        t_load = timeit(lambda t=text: sym.load_json(t))
        s = sym.load_json(text)
        nodes = s.index.num_nodes

        def fresh_infer(t=text):
            # a fresh symbol each time: no cached index, the whole cost a user pays
            sym.load_json(t).infer_shape(data=(1, 3, 224, 224))

        t_shape = timeit(lambda s=s: s.infer_shape(data=(1, 3, 224, 224)))
        t_type = timeit(lambda s=s: s.infer_type(data="float32"))
        t_fresh = timeit(fresh_infer)
        for what, (med, best) in (
            ("load_json", t_load),
            ("infer_shape", t_shape),
            ("infer_type", t_type),
            ("load_json+infer_shape", t_fresh),
        ):
            print(
                json.dumps(
                    {
                        "workload": f"{name}/{what}",
                        "nodes": nodes,
                        "median_ms": round(med * 1e3, 3),
                        "min_ms": round(best * 1e3, 3),
                    }
                )
            )


if __name__ == "__main__":
    main()
