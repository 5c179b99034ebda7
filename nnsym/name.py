"""``mx.name``: automatic naming of symbols (``NameManager``) and name prefixes (``Prefix``)."""

from __future__ import annotations

from nnsym.symbol.naming import NameManager, Prefix

__all__ = ["NameManager", "Prefix"]
