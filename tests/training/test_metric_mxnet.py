"""nnsym.metric against MXNet 1.9.1: every metric on fixed label/prediction sets (several
outputs per batch where the set has them), get() and get_global() after each update,
reset_local and reset; plus get_config. Fixtures: tests/golden/training (make_metric.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nnsym import metric
from nnsym import ndarray as nd

GOLDEN = json.loads(
    (Path(__file__).parents[1] / "golden" / "training" / "metric_fixtures.json").read_text()
)["data"]
CASES = {c["id"]: c for c in GOLDEN["cases"]}
# MXNet refuses these inputs; nnsym accepts them (checked against numpy in test_metric_more.py)
MXNET_REFUSES = {"perplexity_seq"}
# PearsonCorrelation(average='micro').get_global() is 0.0 in MXNet (it never fills the global
# sums); nnsym gives the micro correlation, the same as get() until reset_local
GLOBAL_IS_GET = {"pearsonr_micro"}


def mean_abs_error(label, pred):
    return np.abs(label - pred.reshape(label.shape)).mean()


def sum_and_count(label, pred):
    return float(np.abs(label - pred.reshape(label.shape)).sum()), int(label.size)


def _make(name, kwargs):
    if isinstance(name, str) and name.startswith("custom:"):
        return metric.np(globals()[name.split(":", 1)[1]])
    return metric.create(name, **kwargs)


def _approx(want):
    name, value = want
    if isinstance(value, list):
        return [name, [math.nan if v is None else pytest.approx(v, rel=1e-5) for v in value]]
    return [name, math.nan if value is None else pytest.approx(value, rel=1e-5, abs=1e-7)]


def _same(got, want):
    name, value = got
    got_l = [name, list(value) if isinstance(value, list) else value]
    want_l = _approx(want)
    if isinstance(want_l[1], list):
        assert got_l[0] == want_l[0]
        for g, w in zip(got_l[1], want_l[1], strict=True):
            assert (math.isnan(g) and isinstance(w, float) and math.isnan(w)) or g == w
    elif isinstance(want_l[1], float) and math.isnan(want_l[1]):
        assert got_l[0] == want_l[0] and math.isnan(got_l[1])
    else:
        assert got_l == want_l


@pytest.mark.parametrize("case_id", sorted(set(CASES) - MXNET_REFUSES))
@pytest.mark.parametrize("as_ndarray", [True, False], ids=["nd", "numpy"])
def test_metric_matches_mxnet(case_id, as_ndarray):
    case = CASES[case_id]
    batches = GOLDEN["sets"][case["set"]]
    m = _make(case["metric"], case["kwargs"])
    wrap = nd.array if as_ndarray else (lambda a: np.asarray(a, dtype=np.float32))
    for step in case["steps"]:
        if step["do"] == "reset_local":
            m.reset_local()
            continue
        if step["do"] == "reset":
            m.reset()
            continue
        batch = batches[step["batch"]]
        m.update([wrap(a) for a in batch["labels"]], [wrap(a) for a in batch["preds"]])
        _same(m.get(), step["get"])
        _same(m.get_global(), step["get"] if case_id in GLOBAL_IS_GET else step["get_global"])


def test_mxnet_refused_cases_are_recorded():
    for case_id in MXNET_REFUSES:
        assert "error" in CASES[case_id]["steps"][0]


def _without_binary_average(config):
    """F1/MCC children of a composite carry 'average' in nnsym only (see below)."""
    if "metrics" in config:
        config = dict(
            config,
            metrics=[
                {
                    k: v
                    for k, v in c.items()
                    if not (k == "average" and c["metric"] in ("F1", "MCC"))
                }
                for c in config["metrics"]
            ],
        )
    return config


@pytest.mark.parametrize(
    "case_id",
    [
        "acc",
        "acc_seq_axis2",
        "top_k_3",
        "perplexity",
        "ce",
        "nll",
        "mae_1d",
        "pcc",
        "loss",
        "pearsonr_macro",
        "composite",
    ],
)
def test_get_config_matches_mxnet(case_id):
    case = CASES[case_id]
    config = _make(case["metric"], case["kwargs"]).get_config()
    assert _without_binary_average(config) == case["config"]
    again = metric.create(**config).get_config()
    if case_id == "top_k_3":
        # as in MXNet, the config's name already ends in _3 and the new metric appends it again
        assert again == dict(config, name="top_k_accuracy_3_3")
    else:
        assert again == config


@pytest.mark.parametrize("case_id", ["f1_micro", "mcc_macro"])
def test_binary_get_config_keeps_average(case_id):
    # MXNet drops average from the config; nnsym keeps it so create(**config) round-trips
    case = CASES[case_id]
    config = _make(case["metric"], case["kwargs"]).get_config()
    want = dict(case["config"], average=case["kwargs"].get("average", "macro"))
    assert config == want
    assert metric.create(**config).average == want["average"]
