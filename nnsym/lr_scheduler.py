"""Learning-rate schedules (``mx.lr_scheduler``), following MXNet 1.9.1's ``lr_scheduler.py``.

A scheduler is called with the number of updates done so far and returns the learning rate.
Every schedule may start with ``warmup_steps`` updates of warm-up, rising linearly from
``warmup_begin_lr`` to ``base_lr`` (``warmup_mode='linear'``) or held at ``warmup_begin_lr``
(``'constant'``). As in MXNet, ``FactorScheduler`` and ``MultiFactorScheduler`` keep state
(they expect non-decreasing ``num_update``). Where warm-up lasts ``max_update`` updates or
more, ``PolyScheduler`` and ``CosineScheduler`` give ``base_lr`` after it (MXNet divides by
zero at ``num_update == max_update == warmup_steps``). Arguments MXNet rejects raise an
``LRSchedulerError`` (an ``NNSymError`` and a ``ValueError``) that names the argument.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from nnsym.errors import NNSymError

__all__ = [
    "CosineScheduler",
    "FactorScheduler",
    "LRScheduler",
    "LRSchedulerError",
    "MultiFactorScheduler",
    "PolyScheduler",
]

log = logging.getLogger(__name__)


class LRSchedulerError(NNSymError, ValueError):
    """A scheduler argument out of range or of the wrong type."""


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LRSchedulerError(f"{name} must be an int, got {value!r}")
    return value


class LRScheduler:
    """Base class: warm-up handling; subclasses define ``__call__(num_update)``.

    Args:
        base_lr: the learning rate after warm-up.
        warmup_steps: number of warm-up updates (0: none).
        warmup_begin_lr: the learning rate at update 0 of the warm-up.
        warmup_mode: 'linear' (rise to ``base_lr``) or 'constant' (stay at ``warmup_begin_lr``).
    """

    def __init__(
        self,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        self.base_lr = base_lr
        self.warmup_steps = _check_int("warmup_steps", warmup_steps)
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        if self.warmup_begin_lr > self.warmup_final_lr:
            raise LRSchedulerError(
                f"base_lr ({base_lr}) has to be at least warmup_begin_lr ({warmup_begin_lr})"
            )
        if self.warmup_steps < 0:
            raise LRSchedulerError(f"warmup_steps has to be positive or 0, got {warmup_steps}")
        if warmup_mode not in ("linear", "constant"):
            raise LRSchedulerError(
                f"warmup_mode must be 'linear' or 'constant', got {warmup_mode!r}"
            )
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        """The learning rate at update ``num_update`` (< ``warmup_steps``) of the warm-up."""
        if not num_update < self.warmup_steps:
            raise LRSchedulerError(
                f"update {num_update} is past the {self.warmup_steps} warm-up steps"
            )
        if self.warmup_mode == "linear":
            increase = (
                (self.warmup_final_lr - self.warmup_begin_lr)
                * float(num_update)
                / float(self.warmup_steps)
            )
            return self.warmup_begin_lr + increase
        return self.warmup_begin_lr

    def __call__(self, num_update: int) -> float:
        """The learning rate after ``num_update`` updates."""
        raise NotImplementedError(f"{type(self).__name__} must define __call__")


class FactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` every ``step`` updates, never below ``stop_factor_lr``."""

    def __init__(
        self,
        step: int,
        factor: float = 1,
        stop_factor_lr: float = 1e-8,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise LRSchedulerError(f"step must be at least 1 update, got {step}")
        _check_factor(factor)
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
                log.info(
                    "Update[%d]: now learning rate arrived at %0.5e, will not change in the future",
                    num_update,
                    self.base_lr,
                )
            else:
                log.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` once past each update count in ``step`` (increasing)."""

    def __init__(
        self,
        step: Sequence[int],
        factor: float = 1,
        base_lr: float = 0.01,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, (list, tuple)) or len(step) < 1:
            raise LRSchedulerError(f"step must be a non-empty list of update counts, got {step!r}")
        for i, s in enumerate(step):
            if i != 0 and step[i] <= step[i - 1]:
                raise LRSchedulerError(f"step must be an increasing list, got {list(step)}")
            if s < 1:
                raise LRSchedulerError(f"every step must be at least 1 update, got {list(step)}")
        _check_factor(factor)
        self.step = list(step)
        self.cur_step_ind = 0
        self.factor = factor
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
            log.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr


class PolyScheduler(LRScheduler):
    """Polynomial decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates:
    ``final_lr + (base_lr - final_lr) * (1 - t / T) ** pwr`` after warm-up."""

    def __init__(
        self,
        max_update: int,
        base_lr: float = 0.01,
        pwr: float = 2,
        final_lr: float = 0,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = _check_max_update(max_update)
        self.power = pwr
        self.base_lr_orig = self.base_lr
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update and self.max_steps > 0:
            frac = 1 - float(num_update - self.warmup_steps) / float(self.max_steps)
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * pow(
                frac, self.power
            )
        return self.base_lr


class CosineScheduler(LRScheduler):
    """Cosine decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates after warm-up."""

    def __init__(
        self,
        max_update: int,
        base_lr: float = 0.01,
        final_lr: float = 0,
        warmup_steps: int = 0,
        warmup_begin_lr: float = 0,
        warmup_mode: str = "linear",
    ) -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = _check_max_update(max_update)
        self.base_lr_orig = base_lr
        self.final_lr = final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update and self.max_steps > 0:
            angle = math.pi * (num_update - self.warmup_steps) / self.max_steps
            self.base_lr = (
                self.final_lr + (self.base_lr_orig - self.final_lr) * (1 + math.cos(angle)) / 2
            )
        return self.base_lr


def _check_factor(factor: float) -> None:
    if factor > 1.0:
        raise LRSchedulerError(f"factor must be no more than 1 to reduce the rate, got {factor}")


def _check_max_update(max_update: object) -> int:
    value = _check_int("max_update", max_update)
    if value < 1:
        raise LRSchedulerError(f"max_update must be strictly positive, got {value}")
    return value
