"""W7: ResNet-18 v1 (ImageNet layout, the MXNet 1.9.1 model-zoo export in tests/golden), batch
8, 3x64x64: inference forward and a training step (forward + backward to every parameter),
plus W8's planned bytes. nnsym only for now (no hand-written numpy ResNet peer yet);
../shared/BENCHMARKS.md has anchor numbers from other runs (compare ratios only within a run).

Usage: ``python benchmarks/bench_resnet.py [--quick]``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row

from nnsym import nd, sym

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    samples = 3 if "--quick" in sys.argv else 10
    print("#", environment())
    net = sym.load(ROOT / "tests" / "golden" / "resnet18_v1-symbol.json")
    reqs = {n: ("null" if n == "data" else "write") for n in net.list_arguments()}
    exe = net.simple_bind(data=(8, 3, 64, 64), grad_req=reqs)
    rng = np.random.default_rng(0)
    for a in exe.arg_dict.values():
        a[:] = rng.standard_normal(a.shape) * 0.05
    for k, a in exe.aux_dict.items():
        a[:] = 1.0 if "var" in k else 0.0
    head = nd.array(rng.standard_normal(exe.outputs[0].shape).astype(np.float32))

    def train_step():
        exe.forward(is_train=True)
        exe.backward(head)

    results = [
        row("W7 ResNet-18 forward (8x3x64x64)", "nnsym executor",
            measure(lambda: exe.forward(is_train=False), samples=samples, min_sample=0.05),
            planned_bytes=exe.plan.total_bytes),
        row("W7 ResNet-18 train step (8x3x64x64)", "nnsym executor",
            measure(train_step, samples=samples, min_sample=0.05),
            planned_bytes=exe.plan.total_bytes),
    ]
    report(results)


if __name__ == "__main__":
    main()
