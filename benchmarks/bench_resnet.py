"""W7: ResNet-18 v1 (ImageNet layout, the MXNet 1.9.1 model-zoo export in tests/golden), batch
8, 3x64x64: inference forward and a training step (forward + backward to every parameter),
plus W8's planned bytes. Peer: the hand-written numpy forward/backward of numpy_resnet.py on
the same arrays (checked against nnsym's results first); ../shared/BENCHMARKS.md has anchor
numbers from other runs (compare ratios only within a run).

Usage: ``python benchmarks/bench_resnet.py [--quick]``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import environment, measure, report, row
from numpy_resnet import NumpyNet

from nnsym import nd, sym

ROOT = Path(__file__).resolve().parents[1]


def bind(train: bool = True) -> tuple[Any, Any]:
    """W7's executor (parameters N(0, 0.05), BatchNorm statistics 0 / 1, data N(0, 1); every
    parameter's gradient with ``train``) and a head gradient for its output."""
    net = sym.load(ROOT / "tests" / "golden" / "resnet18_v1-symbol.json")
    reqs = {n: ("null" if n == "data" or not train else "write") for n in net.list_arguments()}
    exe = net.simple_bind(data=(8, 3, 64, 64), grad_req=reqs)
    rng = np.random.default_rng(0)
    for a in exe.arg_dict.values():
        a[:] = rng.standard_normal(a.shape) * 0.05
    for k, a in exe.aux_dict.items():
        a[:] = 1.0 if "var" in k else 0.0
    head = nd.array(rng.standard_normal(exe.outputs[0].shape).astype(np.float32))
    exe.arg_dict["data"][:] = rng.standard_normal((8, 3, 64, 64))
    return exe, head


def main() -> None:
    samples = 3 if "--quick" in sys.argv else 10
    print("#", environment())
    exe, head = bind()

    def train_step():
        exe.forward(is_train=True)
        exe.backward(head)

    arrays = {k: v.asnumpy() for k, v in {**exe.arg_dict, **exe.aux_dict}.items()}
    ref = NumpyNet(ROOT / "tests" / "golden" / "resnet18_v1-symbol.json", arrays)
    np.testing.assert_allclose(exe.forward(is_train=False)[0].asnumpy(),
                               ref.forward(is_train=False), rtol=1e-3, atol=1e-4)
    train_step()
    ref.forward(is_train=True)
    ref_grads = ref.backward(head.asnumpy())
    for k in ("resnetv10_conv0_weight", "resnetv10_dense0_weight",
              "resnetv10_stage4_batchnorm4_gamma"):
        g = exe.grad_dict[k]
        assert g is not None
        np.testing.assert_allclose(g.asnumpy(), ref_grads[k], rtol=2e-2,
                                   atol=2e-3 * float(np.abs(ref_grads[k]).max()))

    def numpy_train() -> None:
        ref.forward(is_train=True)
        ref.backward(head.asnumpy())

    results = [
        row("W7 ResNet-18 forward (8x3x64x64)", "nnsym executor",
            measure(lambda: exe.forward(is_train=False), samples=samples, min_sample=0.05),
            planned_bytes=exe.plan.total_bytes),
        row("W7 ResNet-18 forward (8x3x64x64)", "numpy",
            measure(lambda: ref.forward(is_train=False), samples=samples, min_sample=0.05)),
        row("W7 ResNet-18 train step (8x3x64x64)", "nnsym executor",
            measure(train_step, samples=samples, min_sample=0.05),
            planned_bytes=exe.plan.total_bytes),
        row("W7 ResNet-18 train step (8x3x64x64)", "numpy",
            measure(numpy_train, samples=samples, min_sample=0.05)),
    ]
    report(results)


if __name__ == "__main__":
    main()
