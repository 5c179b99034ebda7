"""nnsym.lr_scheduler: learning rates over updates 0..200 against MXNet 1.9.1 (fixtures in
tests/golden/training, make_metric.py), and MXNet's argument checks."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from nnsym import lr_scheduler
from nnsym.errors import NNSymError

GOLDEN = json.loads(
    (Path(__file__).parents[1] / "golden" / "training" / "lr_scheduler_fixtures.json").read_text()
)["data"]


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: c["id"])
def test_schedule_matches_mxnet(case):
    sched = getattr(lr_scheduler, case["class"])(**case["kwargs"])
    got = [sched(i) for i in range(len(case["lrs"]))]
    assert got == pytest.approx(case["lrs"], rel=1e-12, abs=1e-15)


def test_fixtures_cover_every_scheduler_with_and_without_warmup():
    classes = {c["class"] for c in GOLDEN}
    assert classes == {
        "FactorScheduler",
        "MultiFactorScheduler",
        "PolyScheduler",
        "CosineScheduler",
    }
    warm = {c["class"] for c in GOLDEN if c["kwargs"].get("warmup_steps", 0) > 0}
    assert warm == classes
    assert {c["kwargs"].get("warmup_mode", "linear") for c in GOLDEN} == {"linear", "constant"}


def test_warmup_by_hand():
    s = lr_scheduler.LRScheduler(base_lr=0.1, warmup_steps=4, warmup_begin_lr=0.02)
    assert [s.get_warmup_lr(i) for i in range(4)] == pytest.approx([0.02, 0.04, 0.06, 0.08])
    c = lr_scheduler.LRScheduler(
        base_lr=0.1, warmup_steps=4, warmup_begin_lr=0.02, warmup_mode="constant"
    )
    assert c.get_warmup_lr(3) == 0.02
    with pytest.raises(lr_scheduler.LRSchedulerError, match="past the 4 warm-up"):
        s.get_warmup_lr(4)
    with pytest.raises(NotImplementedError):
        s(5)


def test_factor_scheduler_logs_changes(caplog):
    s = lr_scheduler.FactorScheduler(step=2, factor=0.5, stop_factor_lr=0.003, base_lr=0.01)
    with caplog.at_level(logging.INFO, logger="nnsym.lr_scheduler"):
        assert [s(i) for i in range(8)] == [0.01, 0.01, 0.01, 0.005, 0.005, 0.003, 0.003, 0.003]
    assert "Update[3]: Change learning rate to 5.00000e-03" in caplog.text
    assert "Update[5]: now learning rate arrived at 3.00000e-03" in caplog.text


def test_poly_and_cosine_when_warmup_reaches_max_update():
    # MXNet divides by zero at num_update == max_update == warmup_steps; nnsym holds base_lr
    for cls in (lr_scheduler.PolyScheduler, lr_scheduler.CosineScheduler):
        s = cls(max_update=5, base_lr=0.1, warmup_steps=5)
        assert [s(i) for i in (0, 4, 5, 6)] == pytest.approx([0.0, 0.08, 0.1, 0.1])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: lr_scheduler.LRScheduler(base_lr=0.1, warmup_begin_lr=0.2), "warmup_begin_lr"),
        (lambda: lr_scheduler.LRScheduler(warmup_steps=-1), "warmup_steps"),
        (lambda: lr_scheduler.LRScheduler(warmup_steps=2.0), "warmup_steps must be an int"),
        (lambda: lr_scheduler.LRScheduler(warmup_mode="cosine"), "warmup_mode"),
        (lambda: lr_scheduler.FactorScheduler(step=0), "step must be at least 1"),
        (lambda: lr_scheduler.FactorScheduler(step=3, factor=1.5), "factor"),
        (lambda: lr_scheduler.MultiFactorScheduler(step=[5, 5]), "increasing"),
        (lambda: lr_scheduler.MultiFactorScheduler(step=[0, 5]), "at least 1"),
        (lambda: lr_scheduler.MultiFactorScheduler(step=[]), "non-empty list"),
        (lambda: lr_scheduler.MultiFactorScheduler(step=5), "non-empty list"),
        (lambda: lr_scheduler.MultiFactorScheduler(step=[5], factor=2), "factor"),
        (lambda: lr_scheduler.PolyScheduler(max_update=0), "max_update must be strictly"),
        (lambda: lr_scheduler.CosineScheduler(max_update=10.0), "max_update must be an int"),
    ],
)
def test_bad_arguments_raise(make, match):
    with pytest.raises(lr_scheduler.LRSchedulerError, match=match) as info:
        make()
    assert isinstance(info.value, NNSymError) and isinstance(info.value, ValueError)
