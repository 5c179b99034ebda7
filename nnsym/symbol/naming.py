"""MXNet's automatic naming (NameManager, Prefix) and attribute scopes (AttrScope)."""

from __future__ import annotations

import threading
from typing import Any


class NameManager:
    """Names unnamed nodes ``<hint><counter>`` with one counter per hint (per thread)."""

    _local = threading.local()

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}
        self._old: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return f"{hint}{n}"

    def __enter__(self) -> NameManager:
        self._old = NameManager.current()
        NameManager._local.value = self
        return self

    def __exit__(self, *exc: Any) -> None:
        NameManager._local.value = self._old

    @staticmethod
    def current() -> NameManager:
        cur = getattr(NameManager._local, "value", None)
        if cur is None:
            cur = NameManager._local.value = NameManager()
        return cur


class Prefix(NameManager):
    """Prepends ``prefix`` to every name made inside it (given names too), with its own counters."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


class AttrScope:
    """Attributes added to every symbol created inside ``with AttrScope(ctx_group='a'):``."""

    _local = threading.local()

    def __init__(self, **kwargs: Any) -> None:
        self._old: AttrScope | None = None
        for v in kwargs.values():
            if not isinstance(v, str):
                raise ValueError("Attributes need to be string")
        self._attr = dict(kwargs)

    def get(self, attr: dict[str, str] | None) -> dict[str, str]:
        if not self._attr:
            return dict(attr or {})
        out = dict(self._attr)
        out.update(attr or {})
        return out

    def __enter__(self) -> AttrScope:
        self._old = AttrScope.current()
        merged = dict(self._old._attr)
        merged.update(self._attr)
        self._attr = merged
        AttrScope._local.value = self
        return self

    def __exit__(self, *exc: Any) -> None:
        AttrScope._local.value = self._old

    @staticmethod
    def current() -> AttrScope:
        cur = getattr(AttrScope._local, "value", None)
        if cur is None:
            cur = AttrScope._local.value = AttrScope()
        return cur
