"""Where a bound graph spends its time: every kernel call of W7 (ResNet-18 b8 3x64x64, the
MXNet model-zoo export in tests/golden) or W1 (the MLP at batch 64) timed in place by
``Executor.profile``, summed by operator and listed by node.

Usage::

    python benchmarks/profile_kernels.py [--net resnet|mlp] [--train] [--runs 7] [--top 15]

Each kernel's time is the minimum over ``--runs`` profiled runs (after one warm-up run), so
the per-operator sums are a lower bound of one run; the line ``run`` is the minimum of the
whole profiled runs, including what the kernels' own timing adds (two clock reads per call).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import environment  # noqa: E402


def bind_resnet(train: bool):
    from bench_resnet import bind

    return bind(train)


def bind_mlp(train: bool):
    from bench_executor import bind, make_params

    exe = bind(64, make_params(np.random.default_rng(0)), "write" if train else "null")
    exe.arg_dict["data"][:] = np.random.default_rng(1).random((64, 784))
    return exe, None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", choices=("resnet", "mlp"), default="resnet")
    ap.add_argument("--train", action="store_true", help="forward(train) + backward")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    print("#", environment())
    exe, head = (bind_resnet if a.net == "resnet" else bind_mlp)(a.train)

    def once() -> list[tuple[str, str, float]]:
        prof: list[tuple[str, str, float]] = exe.profile(is_train=a.train, backward=a.train,
                                                         out_grads=head)
        return prof

    once()
    runs = [once() for _ in range(a.runs)]
    best = [min(r[i][2] for r in runs) for i in range(len(runs[0]))]
    total = min(sum(t for _, _, t in r) for r in runs)
    by_op: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_node: dict[str, float] = defaultdict(float)
    for (name, op, _), t in zip(runs[0], best):
        by_op[op][0] += t
        by_op[op][1] += 1
        by_node[f"{name} ({op})"] += t
    print(f"{a.net} {'training step' if a.train else 'forward'}: run {total * 1e3:.2f} ms, "
          f"sum of per-kernel minima {sum(best) * 1e3:.2f} ms, {len(best)} calls")
    print("\nby operator (ms, calls, share):")
    for op, (t, n) in sorted(by_op.items(), key=lambda kv: -kv[1][0]):
        print(f"  {t * 1e3:8.3f}  {n:4d}  {100 * t / sum(best):5.1f}%  {op}")
    print(f"\ntop {a.top} nodes (ms):")
    for node, t in sorted(by_node.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"  {t * 1e3:8.3f}  {node}")


if __name__ == "__main__":
    main()
