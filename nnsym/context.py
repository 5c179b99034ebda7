"""Device contexts: ``nnsym.cpu()``, ``nnsym.gpu(i)``."""

from __future__ import annotations

from dataclasses import dataclass


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


def cpu(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    return Context("gpu", device_id)
