"""Device contexts: ``nnsym.cpu()``, ``nnsym.gpu(i)``; ``with ctx:`` makes ``ctx`` the default
of array creation in this thread (``current_context()``), as in MXNet."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Context:
    """Where arrays live and kernels run. ``device_type`` is ``'cpu'`` or ``'gpu'``."""

    device_type: str = "cpu"
    device_id: int = 0

    def __post_init__(self) -> None:
        if self.device_type not in ("cpu", "gpu", "cpu_pinned"):
            raise ValueError(f"unknown device type {self.device_type!r}; expected 'cpu' or 'gpu'")

    def __str__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __repr__ = __str__

    @property
    def device_typeid(self) -> int:
        """MXNet's device type code: 1 cpu, 2 gpu, 3 cpu_pinned."""
        return {"cpu": 1, "gpu": 2, "cpu_pinned": 3}[self.device_type]

    def __enter__(self) -> Context:
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()

    def empty_cache(self) -> None:
        """Frees cached device memory (gpu contexts, through cupy's pool); nothing on the CPU."""


_LOCAL = threading.local()


def _stack() -> list[Context]:
    st: list[Context] | None = getattr(_LOCAL, "stack", None)
    if st is None:
        st = _LOCAL.stack = []
    return st


def current_context() -> Context:
    """The innermost ``with ctx:`` of this thread, else the thread's default (``cpu(0)``)."""
    st = _stack()
    if st:
        return st[-1]
    default: Context | None = getattr(_LOCAL, "default", None)
    return default if default is not None else Context("cpu", 0)


def set_thread_default(ctx: Context | None) -> None:
    """Make ``ctx`` what this thread uses outside any ``with ctx:`` (MXNet's
    ``Context._default_ctx.value``); ``None`` restores ``cpu(0)``."""
    _LOCAL.default = ctx


def cpu(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    return Context("gpu", device_id)
