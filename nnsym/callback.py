"""Training callbacks (``mx.callback``), following MXNet 1.9.1's ``callback.py``.

Batch-end callbacks receive a ``BatchEndParam`` (``epoch``, ``nbatch``, ``eval_metric``,
``locals``), as MXNet's ``Module.fit`` passes them; epoch-end callbacks made by
``do_checkpoint`` receive ``(iter_no, sym, arg, aux)``. Messages are logged through ``logging``
at INFO level with MXNet's formats (logger ``nnsym.callback``, which propagates to the root
logger MXNet logs to).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

from nnsym.errors import NNSymError
from nnsym.model import BatchEndParam, save_checkpoint

__all__ = [
    "BatchEndParam",
    "CallbackError",
    "LogValidationMetricsCallback",
    "ProgressBar",
    "Speedometer",
    "do_checkpoint",
    "log_train_metric",
    "module_checkpoint",
]

log = logging.getLogger(__name__)


class CallbackError(NNSymError, ValueError):
    """A callback argument out of range."""


def module_checkpoint(
    mod: Any, prefix: str | os.PathLike[str], period: int = 1, save_optimizer_states: bool = False
) -> Callable[..., None]:
    """An epoch-end callback calling ``mod.save_checkpoint(prefix, epoch + 1, ...)`` every
    ``period`` epochs (``period`` below 1 counts as 1)."""
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)

    return _callback


def do_checkpoint(prefix: str | os.PathLike[str], period: int = 1) -> Callable[..., None]:
    """An epoch-end callback ``(iter_no, sym, arg, aux)`` saving ``<prefix>-symbol.json`` and
    ``<prefix>-<iter_no + 1:04d>.params`` every ``period`` epochs (``model.save_checkpoint``)."""
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any, arg: Any, aux: Any) -> None:
        if (iter_no + 1) % period == 0:
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)

    return _callback


def log_train_metric(period: int, auto_reset: bool = False) -> Callable[[Any], None]:
    """A batch-end callback logging the training metric every ``period`` batches (and then
    calling ``reset_local`` when ``auto_reset``)."""
    if period < 1:
        raise CallbackError(f"log_train_metric needs period >= 1 batch, got {period}")

    def _callback(param: Any) -> None:
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                log.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name, value)
            if auto_reset:
                param.eval_metric.reset_local()

    return _callback


class Speedometer:
    """Logs samples per second and the metric every ``frequent`` batches.

    Args:
        batch_size: samples per batch.
        frequent: batches between two log lines.
        auto_reset: call ``eval_metric.reset_local()`` after each log line, so each line shows
            the metric over the last ``frequent`` batches.
    """

    def __init__(self, batch_size: int, frequent: int = 50, auto_reset: bool = True) -> None:
        if frequent < 1:
            raise CallbackError(f"Speedometer needs frequent >= 1 batch, got {frequent}")
        self.batch_size = batch_size
        self.frequent = frequent
        self.init = False
        self.tic = 0.0
        self.last_count = 0
        self.auto_reset = auto_reset

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        if self.last_count > count:  # a new epoch began
            self.init = False
        self.last_count = count
        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        elapsed = time.time() - self.tic
        speed = self.frequent * self.batch_size / elapsed if elapsed > 0 else float("inf")
        if param.eval_metric is not None:
            name_value = param.eval_metric.get_name_value()
            flat = [x for pair in name_value for x in pair]
            if self.auto_reset:
                param.eval_metric.reset_local()
                msg = "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * len(
                    name_value
                )
                log.info(msg, param.epoch, count - self.frequent, count, speed, *flat)
            else:
                msg = "Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * len(
                    name_value
                )
                log.info(msg, param.epoch, count, speed, *flat)
        else:
            log.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count, speed)
        self.tic = time.time()


class ProgressBar:
    """Logs a text progress bar ``[====----] 50%`` of ``nbatch`` out of ``total`` batches."""

    def __init__(self, total: int, length: int = 80) -> None:
        if total <= 0:
            raise CallbackError(f"ProgressBar needs a positive total of batches, got {total}")
        self.bar_len = length
        self.total = total

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        filled_len = round(self.bar_len * count / float(self.total))
        percents = math.ceil(100.0 * count / float(self.total))
        prog_bar = "=" * filled_len + "-" * (self.bar_len - filled_len)
        log.info("[%s] %s%s\r", prog_bar, percents, "%")


class LogValidationMetricsCallback:
    """Logs each validation metric at the end of an epoch."""

    def __call__(self, param: Any) -> None:
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_name_value():
            log.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)
