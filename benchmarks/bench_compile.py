"""Cold compile and warm load of every kernel of the foundation's MLP (forward, write and add
modes), each in a fresh process: one with an empty cache, one with the cache it left.

Usage: ``python benchmarks/bench_compile.py``; prints JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent(
    """
    import json, time
    import numpy as np
    from nnsym.cli import demo_symbols
    from nnsym.codegen import compiler
    from nnsym.ir.spec import KernelCall
    from nnsym.ir.opdef import DENSE
    from nnsym.symbol.json_io import infer_for_dump

    mlp, shapes = demo_symbols()["mlp"]
    g = infer_for_dump(mlp, shapes)
    idx, a = g.index, g.attrs
    specs = []
    for nid, node in enumerate(idx.nodes):
        if node.op is None:
            continue
        ins = idx.input_entries[nid]
        outs = list(idx.output_entries(nid))
        for req in ("write", "add"):
            call = KernelCall(node.params, tuple(a.shape[e] for e in ins),
                              tuple(a.dtype[e] for e in ins), tuple(a.shape[e] for e in outs),
                              tuple(a.dtype[e] for e in outs), req)
            specs.extend(ln.spec for ln in node.op.kernels[DENSE].lower(call).launches)
    t0 = time.perf_counter()
    compiler.functions(specs)
    dt = time.perf_counter() - t0
    print(json.dumps({"kernels": len({s.name for s in specs}), "seconds": dt,
                      "compiles": compiler.STATS["compiles"],
                      "disk_hits": compiler.STATS["disk_hits"]}))
    """
)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "NNSYM_CACHE_DIR": d}
        for label in ("cold", "warm"):
            r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                               env=env, check=True)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            print(json.dumps({"workload": f"MLP kernels {label}", **res,
                              "ms": round(res["seconds"] * 1e3, 1)}))


if __name__ == "__main__":
    main()
