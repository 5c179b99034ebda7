"""``nnsym.sym.random``: MXNet's samplers over Symbols (see ``nnsym.ir.random_api``)."""

from __future__ import annotations

import sys

from nnsym.ir.random_api import make_random_namespace
from nnsym.symbol.ops import make_function
from nnsym.symbol.symbol import Symbol


def install(functions: dict[str, object]) -> None:
    """Fill this module with the samplers over the ``sym`` operator ``functions``."""
    mod = make_random_namespace("nnsym.symbol", functions, Symbol, imperative=False,
                                make=make_function)
    here = sys.modules[__name__]
    for name in mod.__all__:  # type: ignore[attr-defined]
        setattr(here, name, getattr(mod, name))
    here.__all__ = list(mod.__all__)  # type: ignore[attr-defined]
