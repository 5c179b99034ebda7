"""W3 (``y = relu(a*x*x + b*x + c) * 0.5 + tanh(x)``, 16M float32) as a bound graph with
elementwise fusion on and off, against numpy (and torch eager / torch.compile where torch is
importable); ratios to the best peer, and each executor's planned bytes.

Usage: ``python benchmarks/bench_fusion.py [--quick] [--n N]``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row

A, B, C = 1.5, -0.5, 0.25


def w3_symbol(S: Any = None) -> Any:
    """W3's graph, built with ``S`` (a symbol module: nnsym's by default, or MXNet's)."""
    if S is None:
        from nnsym import sym as S
    x = S.var("x")
    return S.relu(A * x * x + B * x + C) * 0.5 + S.tanh(x)


def main() -> None:
    from nnsym import cpu, nd
    from nnsym.codegen import compiler
    from nnsym.executor.executor import Executor

    samples = 5 if "--quick" in sys.argv else 10
    n = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 16_777_216
    print("#", environment(), "nnsym threads:", compiler.get_num_threads())
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    want = np.maximum(A * x * x + B * x + C, 0) * 0.5 + np.tanh(x)
    w = f"W3 bound graph ({n / 2**20:g}M f32)"
    results = []
    for fusion in (True, False):
        ex = Executor(w3_symbol(), cpu(), [nd.array(x)], None, "null", fusion=fusion)
        got = ex.forward()[0].asnumpy()
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
        kernels = ex.debug_str().count("Op:")
        results.append(row(w, f"nnsym {'fused' if fusion else 'unfused'}",
                           measure(ex.forward, samples=samples),
                           planned_bytes=ex.plan.total_bytes, kernels=kernels))

    out = np.empty_like(x)
    tmp = np.empty_like(x)

    def w3_numpy(out=out, tmp=tmp):  # in place where numpy allows: the fastest numpy form
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

    np.testing.assert_allclose(w3_numpy(), want, rtol=2e-5, atol=1e-5)
    results.append(row(w, "numpy (out=)", measure(w3_numpy, samples=samples)))
    try:
        import torch
    except ImportError:
        print("# torch not importable: no torch rows")
    else:
        xt = torch.from_numpy(x)

        def w3_torch(t=xt):
            return torch.relu(A * t * t + B * t + C) * 0.5 + torch.tanh(t)

        results.append(row(w, "torch eager", measure(w3_torch, samples=samples)))
        try:
            compiled = torch.compile(w3_torch)
            compiled()
            results.append(row(w, "torch.compile", measure(compiled, samples=samples)))
        except Exception as e:
            print(f"# torch.compile failed: {type(e).__name__}: {e}")
    report(results)
    fused = next(r for r in results if r["peer"] == "nnsym fused")
    unfused = next(r for r in results if r["peer"] == "nnsym unfused")
    print(f"\nfused / unfused: {fused['median_ms'] / unfused['median_ms']:.2f}; planned bytes "
          f"{fused['planned_bytes']} vs {unfused['planned_bytes']}; kernels "
          f"{fused['kernels']} vs {unfused['kernels']}")


if __name__ == "__main__":
    main()
