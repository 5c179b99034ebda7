"""``nnsym.nd.random``: MXNet's samplers over NDArrays (see ``nnsym.ir.random_api``)."""

from __future__ import annotations

import sys

from nnsym.ir.random_api import make_random_namespace
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.ops import make_function


def install(functions: dict[str, object]) -> None:
    """Fill this module with the samplers over the ``nd`` operator ``functions``."""
    mod = make_random_namespace("nnsym.ndarray", functions, NDArray, imperative=True,
                                make=make_function)
    here = sys.modules[__name__]
    for name in mod.__all__:  # type: ignore[attr-defined]
        setattr(here, name, getattr(mod, name))
    here.__all__ = list(mod.__all__)  # type: ignore[attr-defined]
