"""nnsym.callback: MXNet 1.9.1's log formats and checkpoint naming (written from
mxnet/callback.py's behaviour; checked against hand-written expectations)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from nnsym import callback, metric
from nnsym import ndarray as nd
from nnsym import symbol as sym
from nnsym.model import load_checkpoint


class _Clock:
    """Stands in for the time module inside nnsym.callback (logging keeps the real one)."""

    def __init__(self, *ticks):
        self._ticks = iter(ticks)

    def time(self):
        return next(self._ticks)


def _acc(correct, total):
    m = metric.Accuracy()
    m.sum_metric, m.num_inst = correct, total
    m.global_sum_metric, m.global_num_inst = correct, total
    return m


def test_batch_end_param_fields():
    p = callback.BatchEndParam(epoch=1, nbatch=2, eval_metric=None, locals=None)
    assert p._fields == ("epoch", "nbatch", "eval_metric", "locals")
    assert (p.epoch, p.nbatch) == (1, 2)


def test_speedometer_message_and_auto_reset(caplog, monkeypatch):
    monkeypatch.setattr(callback, "time", _Clock(100.0, 102.0, 102.0))
    speed = callback.Speedometer(batch_size=10, frequent=2)
    m = _acc(3, 4)
    with caplog.at_level(logging.INFO, logger="nnsym.callback"):
        speed(callback.BatchEndParam(0, 0, m, None))  # starts the clock (t=100)
        speed(callback.BatchEndParam(0, 1, m, None))  # not a multiple of frequent
        speed(callback.BatchEndParam(0, 2, m, None))  # t=102: 2 batches * 10 / 2 s
    assert caplog.messages == ["Epoch[0] Batch [0-2]\tSpeed: 10.00 samples/sec\taccuracy=0.750000"]
    assert m.num_inst == 0 and m.global_num_inst == 4  # reset_local only


def test_speedometer_without_auto_reset_and_without_metric(caplog, monkeypatch):
    monkeypatch.setattr(callback, "time", _Clock(0.0, 4.0, 4.0, 5.0, 9.0, 9.0))
    speed = callback.Speedometer(batch_size=8, frequent=1, auto_reset=False)
    comp = metric.CompositeEvalMetric([_acc(1, 2), _acc(1, 4)])
    with caplog.at_level(logging.INFO, logger="nnsym.callback"):
        speed(callback.BatchEndParam(3, 0, comp, None))
        speed(callback.BatchEndParam(3, 1, comp, None))
        speed(callback.BatchEndParam(3, 0, None, None))  # nbatch went back: new epoch, restart
        speed(callback.BatchEndParam(3, 1, None, None))
    assert caplog.messages == [
        "Epoch[3] Batch [0-1]\tSpeed: 2.00 samples/sec\taccuracy=0.500000\taccuracy=0.250000",
        "Iter[3] Batch [1]\tSpeed: 2.00 samples/sec",
    ]
    assert comp.metrics[0].num_inst == 2


def test_log_train_metric(caplog):
    m = _acc(1, 4)
    cb = callback.log_train_metric(period=2, auto_reset=True)
    with caplog.at_level(logging.INFO, logger="nnsym.callback"):
        cb(callback.BatchEndParam(5, 1, m, None))
        cb(callback.BatchEndParam(5, 2, m, None))
    assert caplog.messages == ["Iter[5] Batch[2] Train-accuracy=0.250000"]
    assert m.num_inst == 0


def test_progress_bar_and_validation_log(caplog):
    with caplog.at_level(logging.INFO, logger="nnsym.callback"):
        callback.ProgressBar(total=4, length=8)(callback.BatchEndParam(0, 1, None, None))
        callback.LogValidationMetricsCallback()(callback.BatchEndParam(2, 0, _acc(1, 2), None))
    assert caplog.messages == ["[==------] 25%\r", "Epoch[2] Validation-accuracy=0.500000"]
    with pytest.raises(callback.CallbackError, match="positive total"):
        callback.ProgressBar(total=0)


def test_do_checkpoint_saves_every_period(tmp_path):
    prefix = str(tmp_path / "net")
    data = sym.Variable("data")
    net = sym.FullyConnected(data, num_hidden=2, name="fc")
    arg = {"fc_weight": nd.array(np.ones((2, 3))), "fc_bias": nd.array(np.zeros(2))}
    cb = callback.do_checkpoint(prefix, period=2)
    for epoch in range(4):
        cb(epoch, net, arg, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "net-0002.params",
        "net-0004.params",
        "net-symbol.json",
    ]
    _, args, auxs = load_checkpoint(prefix, 4)
    np.testing.assert_array_equal(args["fc_weight"].asnumpy(), np.ones((2, 3)))
    assert auxs == {}


def test_module_checkpoint_calls_the_module():
    calls = []

    class FakeModule:
        def save_checkpoint(self, prefix, epoch, save_optimizer_states):
            calls.append((prefix, epoch, save_optimizer_states))

    cb = callback.module_checkpoint(FakeModule(), "pre", period=0, save_optimizer_states=True)
    cb(0)
    cb(1, None, None, None)
    assert calls == [("pre", 1, True), ("pre", 2, True)]
