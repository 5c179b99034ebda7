"""``Monitor`` (MXNet's ``mx.monitor.Monitor``): statistics of a bound graph's outputs,
arguments and auxiliary states every ``interval`` batches, e.g. to watch for exploding
activations or gradients. ``Module.fit(monitor=mon)`` installs it on the module's executor
and calls ``tic`` before and ``toc_print`` after each batch."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

from nnsym.ndarray import ndarray as _nd
from nnsym.ndarray.ndarray import NDArray

__all__ = ["Monitor"]

_log = logging.getLogger(__name__)


def _rms(x: NDArray) -> NDArray:
    """MXNet's default statistic: ``norm(x) / sqrt(x.size)``."""
    return _nd.invoke("norm", [x], {})[0] / math.sqrt(max(x.size, 1))


class Monitor:
    """Collect ``stat_func(array)`` for every array whose name matches ``pattern`` once every
    ``interval`` batches (node outputs, then the arguments and auxiliary states at ``toc``)."""

    def __init__(self, interval: int, stat_func: Callable[[NDArray], Any] | None = None,
                 pattern: str = ".*", sort: bool = False, monitor_all: bool = False) -> None:
        self.interval = int(interval)
        if self.interval < 1:
            raise ValueError(f"Monitor: interval must be >= 1, got {interval!r}")
        self.stat_func = stat_func or _rms
        self.activated = False
        self.queue: list[tuple[int, str, Any]] = []
        self.step = 0
        self.exes: list[Any] = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all

    def stat_helper(self, name: str, array: NDArray) -> None:
        """The executor's callback: queue ``stat_func(array)`` when active and matching."""
        if not self.activated or not self.re_prog.match(name):
            return
        self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe: Any) -> None:
        """Watch executor ``exe``."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all,
                                 active=lambda: self.activated)
        self.exes.append(exe)

    def tic(self) -> None:
        """Start collecting if this batch is one of every ``interval``."""
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self) -> list[tuple[int, str, str]]:
        """Stop collecting; ``(step, name, stats as text)`` for what was collected."""
        if not self.activated:
            return []
        for exe in self.exes:
            for name, arr in [*exe.arg_dict.items(), *exe.aux_dict.items()]:
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(arr)))
        self.activated = False
        queue = sorted(self.queue, key=lambda q: q[1]) if self.sort else self.queue
        out = []
        for step, name, value in queue:
            values = value if isinstance(value, (list, tuple)) else [value]
            text = "".join(f"{v.asnumpy() if isinstance(v, NDArray) else v}\t"
                           for v in values)
            out.append((step, name, text))
        self.queue = []
        return out

    def toc_print(self) -> None:
        """toc(), logged one line per statistic as MXNet does."""
        for step, name, text in self.toc():
            _log.info("Batch: %7d %30s %s", step, name, text)
