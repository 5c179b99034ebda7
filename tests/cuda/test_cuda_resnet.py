"""ResNet-18's training step on a gpu context against the CPU: every gradient as accurate as the
CPU's float32 result, measured against a float64 run of the same step: no gradient's error
exceeds twice the CPU's largest (batch 2 at 32x32, where stage 4's BatchNorm normalises two
values and float32 error grows to a few percent on either device). On a real device
(``gpu``); the emulated run takes about 30 s and is ``slow``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nnsym
from nnsym import nd, sym
from nnsym.codegen import compiler
from nnsym.cuda import runtime
from nnsym.devtools.cuda import shim

pytestmark = pytest.mark.skipif(
    shim.cxx() is None or compiler.compiler() is None, reason="needs gcc and g++")

NET = Path(__file__).parents[1] / "golden" / "resnet18_v1-symbol.json"


def _step(ctx, dtype: str = "float32") -> dict[str, np.ndarray]:
    net = sym.load(str(NET))
    types = {n: dtype for n in net.list_arguments() + net.list_auxiliary_states()}
    ex = net.simple_bind(ctx=ctx, grad_req="write", type_dict=types, data=(2, 3, 32, 32))
    rng = np.random.default_rng(0)
    for name in sorted(ex.arg_dict):
        arr = ex.arg_dict[name]
        arr[:] = (rng.standard_normal(arr.shape) * (1.0 if name == "data" else 0.1)
                  ).astype(np.float32)  # the same values at both precisions
    for name in sorted(ex.aux_dict):
        ex.aux_dict[name][:] = 1.0 if "var" in name else 0.0
    ex.forward(is_train=True)
    head = rng.standard_normal(ex.outputs[0].shape).astype(np.float32)
    ex.backward([nd.array(head, ctx=ctx, dtype=dtype)])
    out = {"out": ex.outputs[0].asnumpy()}
    out.update({k: v.asnumpy() for k, v in ex.grad_dict.items() if v is not None})
    return out


@pytest.mark.parametrize("gpu_backend", [
    pytest.param("emulate", marks=pytest.mark.slow),
    pytest.param("cupy", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not runtime.available(), reason="needs cupy and a CUDA device")]),
], indirect=True)
def test_resnet18_training_step_matches_the_cpu(gpu_backend):
    exact = _step(nnsym.cpu(), "float64")
    cpu, gpu = _step(nnsym.cpu()), _step(nnsym.gpu(0))
    assert exact.keys() == cpu.keys() == gpu.keys() and len(cpu) > 60

    def errors(got: dict[str, np.ndarray]) -> dict[str, float]:  # max error / max magnitude
        return {k: float(np.abs(got[k] - exact[k]).max()) / (float(np.abs(exact[k]).max())
                                                             or 1.0) for k in exact}

    err_cpu, err_gpu = errors(cpu), errors(gpu)
    level = max(err_cpu.values())  # float32's error on this step, on the CPU
    assert 0 < level < 0.1
    worst = {k: e for k, e in err_gpu.items() if e > 2 * level}
    assert not worst, (level, worst)
