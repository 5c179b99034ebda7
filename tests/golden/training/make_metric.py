"""Writes metric_fixtures.json and lr_scheduler_fixtures.json with MXNet 1.9.1.

Run in the reference venv from the repository root (see README.md here):

    ~/mxref/bin/python tests/golden/training/make_metric.py

Inputs are drawn from a fixed seed and stored in the JSON next to MXNet's results, so the
tests (tests/training/test_metric_mxnet.py, test_lr_scheduler.py) never need MXNet.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import mxnet as mx
import numpy as np

HERE = Path(__file__).resolve().parent


def _f(x):
    x = float(x)
    return None if math.isnan(x) else x


def _result(pair):
    name, value = pair
    if isinstance(value, list):
        return [name, [_f(v) for v in value]]
    return [name, _f(value)]


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


def _batches(rng):
    """Named input sets: each a list of batches; a batch is (labels list, preds list)."""
    sets = {}

    def cls(n, c, k=2):
        return [
            (
                [rng.randint(0, c, size=n).astype(np.float32) for _ in range(k)],
                [_softmax(rng.randn(n, c)) for _ in range(k)],
            )
            for _ in range(3)
        ]

    sets["cls4"] = cls(8, 4)
    sets["cls10"] = cls(12, 10, 1)
    sets["binary"] = cls(10, 2)
    sets["pcc_multi"] = [
        ([rng.randint(0, 3, size=9).astype(np.float32)], [_softmax(rng.randn(9, 3))]),
        (
            [rng.randint(0, 5, size=9).astype(np.float32)],
            [rng.randint(0, 5, size=9).astype(np.float32)],
        ),
        ([rng.randint(0, 5, size=9).astype(np.float32)], [_softmax(rng.randn(9, 5))]),
    ]
    sets["indices"] = [
        (
            [rng.randint(0, 3, size=7).astype(np.float32)],
            [rng.randint(0, 3, size=7).astype(np.float32)],
        )
        for _ in range(3)
    ]
    sets["seq"] = [
        ([rng.randint(0, 5, size=(3, 4)).astype(np.float32)], [_softmax(rng.randn(3, 4, 5))])
        for _ in range(3)
    ]
    sets["regress1d"] = [
        ([rng.randn(6).astype(np.float32)] * 1, [rng.randn(6).astype(np.float32)]) for _ in range(3)
    ]
    sets["regress_col"] = [
        ([rng.randn(6).astype(np.float32)], [rng.randn(6, 1).astype(np.float32)]) for _ in range(3)
    ]
    sets["regress2d"] = [
        (
            [rng.randn(5, 3).astype(np.float32) for _ in range(2)],
            [rng.randn(5, 3).astype(np.float32) for _ in range(2)],
        )
        for _ in range(3)
    ]
    sets["losses"] = [
        ([], [rng.rand(4, 3).astype(np.float32), rng.rand(5).astype(np.float32)]) for _ in range(3)
    ]
    return sets


def mean_abs_error(label, pred):
    return np.abs(label - pred.reshape(label.shape)).mean()


def sum_and_count(label, pred):
    return float(np.abs(label - pred.reshape(label.shape)).sum()), int(label.size)


# (case id, input set, metric name, kwargs); 'custom:<fn>' makes an mx.metric.np metric
CASES = [
    ("acc", "cls4", "acc", {}),
    ("acc_indices", "indices", "acc", {}),
    ("acc_seq_axis2", "seq", "acc", {"axis": 2}),
    ("top_k_3", "cls10", "top_k_accuracy", {"top_k": 3}),
    ("top_k_4_multi", "cls4", "top_k_acc", {"top_k": 3}),
    ("f1_macro", "binary", "f1", {}),
    ("f1_micro", "binary", "f1", {"average": "micro"}),
    ("mcc_macro", "binary", "mcc", {}),
    ("mcc_micro", "binary", "mcc", {"average": "micro"}),
    ("perplexity", "cls4", "perplexity", {"ignore_label": None}),
    ("perplexity_ignore0", "cls4", "perplexity", {"ignore_label": 0}),
    ("perplexity_seq", "seq", "perplexity", {"ignore_label": 2}),
    ("mae_1d", "regress1d", "mae", {}),
    ("mse_col", "regress_col", "mse", {}),
    ("rmse_2d", "regress2d", "rmse", {}),
    ("mae_2d", "regress2d", "mae", {}),
    ("ce", "cls4", "ce", {}),
    ("nll", "cls10", "nll_loss", {"eps": 1e-8}),
    ("pearsonr_macro", "regress2d", "pearsonr", {}),
    ("pearsonr_micro", "regress2d", "pearsonr", {"average": "micro"}),
    ("pcc", "cls4", "pcc", {}),
    ("pcc_grow", "pcc_multi", "pcc", {}),
    ("loss", "losses", "loss", {}),
    ("torch", "losses", "torch", {}),
    ("caffe", "losses", "caffe", {}),
    ("composite", "binary", ["acc", "f1", "ce"], {}),
    ("custom_np", "regress1d", "custom:mean_abs_error", {}),
    ("custom_tuple", "regress2d", "custom:sum_and_count", {}),
]


def _make(name, kwargs):
    if isinstance(name, str) and name.startswith("custom:"):
        return mx.metric.np(globals()[name.split(":", 1)[1]])
    return mx.metric.create(name, **kwargs)


def metric_fixtures():
    rng = np.random.RandomState(20261125)
    sets = _batches(rng)
    out = {"sets": {}, "cases": []}
    for key, batches in sets.items():
        out["sets"][key] = [
            {"labels": [a.tolist() for a in labels], "preds": [a.tolist() for a in preds]}
            for labels, preds in batches
        ]
    for case_id, set_name, name, kwargs in CASES:
        m = _make(name, kwargs)
        steps = []
        # updates 0 and 1, reset_local, update 2; then reset and update 0 again
        plan = [0, 1, "reset_local", 2, "reset", 0]
        for step in plan:
            if step == "reset_local":
                m.reset_local()
                steps.append({"do": "reset_local"})
                continue
            if step == "reset":
                m.reset()
                steps.append({"do": "reset"})
                continue
            labels, preds = sets[set_name][step]
            try:
                m.update([mx.nd.array(a) for a in labels], [mx.nd.array(a) for a in preds])
            except Exception as e:  # recorded: MXNet refuses this input
                steps.append({"do": "update", "batch": step, "error": repr(e)[:200]})
                break
            steps.append(
                {
                    "do": "update",
                    "batch": step,
                    "get": _result(m.get()),
                    "get_global": _result(m.get_global()),
                }
            )
        config = None
        if not (isinstance(name, str) and name.startswith("custom:")):
            config = m.get_config()
        out["cases"].append(
            {
                "id": case_id,
                "set": set_name,
                "metric": name,
                "kwargs": kwargs,
                "steps": steps,
                "config": config,
            }
        )
    return out


SCHEDULERS = [
    ("factor", "FactorScheduler", {"step": 20, "factor": 0.5}),
    (
        "factor_stop",
        "FactorScheduler",
        {"step": 7, "factor": 0.3, "stop_factor_lr": 1e-4, "base_lr": 0.1},
    ),
    (
        "factor_warmup",
        "FactorScheduler",
        {"step": 25, "factor": 0.9, "warmup_steps": 30, "warmup_begin_lr": 0.001},
    ),
    ("multifactor", "MultiFactorScheduler", {"step": [10, 50, 120], "factor": 0.1, "base_lr": 1.0}),
    (
        "multifactor_warmup_const",
        "MultiFactorScheduler",
        {
            "step": [40, 90],
            "factor": 0.5,
            "warmup_steps": 20,
            "warmup_begin_lr": 0.002,
            "warmup_mode": "constant",
        },
    ),
    ("poly", "PolyScheduler", {"max_update": 150, "base_lr": 0.1, "pwr": 2}),
    (
        "poly_warmup",
        "PolyScheduler",
        {"max_update": 160, "base_lr": 0.5, "pwr": 1.5, "final_lr": 0.01, "warmup_steps": 15},
    ),
    ("cosine", "CosineScheduler", {"max_update": 170, "base_lr": 0.2, "final_lr": 0.001}),
    (
        "cosine_warmup_const",
        "CosineScheduler",
        {
            "max_update": 120,
            "base_lr": 0.05,
            "warmup_steps": 12,
            "warmup_begin_lr": 0.01,
            "warmup_mode": "constant",
        },
    ),
]


def scheduler_fixtures():
    out = []
    for case_id, cls, kwargs in SCHEDULERS:
        s = getattr(mx.lr_scheduler, cls)(**kwargs)
        out.append(
            {
                "id": case_id,
                "class": cls,
                "kwargs": kwargs,
                "lrs": [float(s(i)) for i in range(201)],
            }
        )
    return out


def main():
    os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
    meta = {"mxnet": mx.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}
    for fname, data in (
        ("metric_fixtures.json", metric_fixtures()),
        ("lr_scheduler_fixtures.json", scheduler_fixtures()),
    ):
        text = json.dumps({"meta": meta, "data": data}, sort_keys=True)
        (HERE / fname).write_text(text + "\n")
        print(fname, len(text), "bytes")


if __name__ == "__main__":
    main()
