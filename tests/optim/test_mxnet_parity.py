"""Every optimizer through get_updater against MXNet 1.9.1 fixtures
(tests/golden/training/optim: make.py run in the reference venv): 5 steps on two weights,
weights and states after each step, dense and row_sparse gradients, float16 weights with
multi_precision."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import nd, optimizer
from nnsym.ndarray.sparse import RowSparseNDArray

HERE = Path(__file__).resolve().parents[1] / "golden" / "training" / "optim"
META = json.loads((HERE / "cases.json").read_text())
FIX = dict(np.load(HERE / "fixtures.npz"))
SHAPE = tuple(META["shape"])


class FactorScheduler:
    """MXNet's FactorScheduler (no warmup): lr *= factor every ``step`` updates."""

    def __init__(self, step: int, factor: float = 1.0, base_lr: float = 0.01):
        self.step, self.factor, self.base_lr, self.count = step, factor, base_lr, 0

    def __call__(self, num_update: int) -> float:
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
        return self.base_lr


def _flat(state: Any) -> list[np.ndarray]:
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [a for s in state for a in _flat(s)]
    return [state.asnumpy()]


def _grad(c: dict[str, Any], s: int, i: int) -> nd.NDArray:
    g = FIX[f"input/g{i}/{s}"]
    if c["gstype"] == "row_sparse":
        rows = META["rsp_rows"][(s + i) % META["steps"]]
        return RowSparseNDArray(g[rows].astype(c["dtype"]), np.array(rows), SHAPE)
    return nd.array(g, dtype=c["dtype"])


def make(c: dict[str, Any]) -> tuple[optimizer.Updater, list[nd.NDArray]]:
    kw = dict(c["kwargs"])
    if c["names"]:
        kw["param_idx2name"] = {int(k): v for k, v in META["idx2name"].items()}
    if c["sched"]:
        kw["lr_scheduler"] = FactorScheduler(base_lr=kw["learning_rate"], **c["sched"])
    opt = optimizer.create(c["opt"], **kw)
    if c["lr_mult"]:
        opt.set_lr_mult(c["lr_mult"])
    if c["wd_mult"]:
        opt.set_wd_mult(c["wd_mult"])
    ws = []
    for i in range(2):
        a = nd.array(FIX[f"input/w{i}"], dtype=c["dtype"])
        ws.append(a.tostype("row_sparse") if c["wstype"] == "row_sparse" else a)
    return optimizer.get_updater(opt), ws


def _tol(c: dict[str, Any]) -> tuple[float, float]:
    """(rtol, atol): float32 math; float16 weights are rounded copies of the float32 master."""
    return (2e-3, 2e-3) if c["dtype"] == "float16" else (1e-4, 1e-5)


RUNNABLE = [c for c in META["cases"] if c["error"] is None]


@pytest.mark.parametrize("c", RUNNABLE, ids=[c["name"] for c in RUNNABLE])
def test_matches_mxnet(c: dict[str, Any]) -> None:
    upd, ws = make(c)
    rtol, atol = _tol(c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(META["steps"]):
            for i in range(2):
                upd(i, _grad(c, s, i), ws[i])
                where = f"{c['name']} index {i} step {s}"
                np.testing.assert_allclose(ws[i].asnumpy().astype(np.float64),
                                           FIX[f"{c['name']}/w{i}/{s}"], rtol=rtol, atol=atol,
                                           err_msg=f"{where}: weight")
                for k, a in enumerate(_flat(upd.states[i])):
                    np.testing.assert_allclose(a, FIX[f"{c['name']}/s{i}/{s}/{k}"], rtol=rtol,
                                               atol=atol, err_msg=f"{where}: state {k}")


@pytest.mark.parametrize("c", RUNNABLE, ids=[c["name"] for c in RUNNABLE])
def test_states_round_trip_continues_like_mxnet(c: dict[str, Any]) -> None:
    """2 steps, get_states(dump_optimizer=True), a fresh updater loads them, 3 more steps: the
    weights are MXNet's uninterrupted ones."""
    upd, ws = make(c)
    rtol, atol = _tol(c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(2):
            for i in range(2):
                upd(i, _grad(c, s, i), ws[i])
        blob = upd.get_states(dump_optimizer=True)
        upd2, _ = make(c)
        upd2.set_states(blob)
        for s in range(2, META["steps"]):
            for i in range(2):
                upd2(i, _grad(c, s, i), ws[i])
    for i in range(2):
        np.testing.assert_allclose(ws[i].asnumpy().astype(np.float64),
                                   FIX[f"{c['name']}/w{i}/{META['steps'] - 1}"], rtol=rtol,
                                   atol=atol)


NUMPY_CASES = [c for c in RUNNABLE if c["opt"] not in ("sgd", "ccsgd", "lars", "adam",
                                                         "adagrad")]


@pytest.mark.parametrize("c", NUMPY_CASES, ids=[c["name"] for c in NUMPY_CASES])
def test_numpy_backend_matches_mxnet(c: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a C compiler (NNSYM_BACKEND=numpy) the same updates run in numpy."""
    from nnsym.codegen import compiler

    monkeypatch.setenv("NNSYM_BACKEND", "numpy")
    compiler.reset_backend()
    try:
        test_matches_mxnet(c)
    finally:
        monkeypatch.delenv("NNSYM_BACKEND")
        compiler.reset_backend()
