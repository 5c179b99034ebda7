"""Native kernel libraries for the operator families' storage kernels (csr and row_sparse casts,
merges, reductions and products, optimizer updates).

A family's kernel module says *what* to build: a template under ``nnsym/ops`` (a family path
such as ``"dot/dot_csr.c.j2"``), the C declarations it calls and the typed values to render it
with (dtype names, expressions from nnsym's own operator tables, never user text). *How* it is
built and loaded belongs to the runtime, which installs a :class:`Loader` here when it is
imported (``nnsym.runtime.native``). The operator library thus never imports a compiler.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from nnsym.errors import NNSymError


class Loader(Protocol):
    """What the runtime provides to build and call native kernels."""

    NULL: Any

    def available(self) -> bool:
        """Whether native kernels run here (the C backend is active)."""
        ...

    def library(self, template: str, cdef: str, **context: Any) -> Any:
        """The loaded library of ``template`` rendered with ``context`` (memoised);
        ``cdef`` declares the functions to call (cffi syntax)."""
        ...

    def ptr(self, a: np.ndarray, ctype_name: str = "void *") -> Any:
        """A pointer to an array's first element (the array must stay alive)."""
        ...

    def num_threads(self) -> int:
        """Threads of the runtime's worker pool."""
        ...


class _Missing:
    NULL: Any = None

    def _fail(self) -> Any:
        raise NNSymError("no native kernel loader is installed: import nnsym (the runtime "
                         "installs it) before running a storage kernel")

    def available(self) -> bool:
        return False

    def library(self, template: str, cdef: str, **context: Any) -> Any:
        return self._fail()

    def ptr(self, a: np.ndarray, ctype_name: str = "void *") -> Any:
        return self._fail()

    def num_threads(self) -> int:
        return 1


_LOADER: Loader = _Missing()


def install(loader: Loader) -> None:
    """Called once by the runtime."""
    global _LOADER
    _LOADER = loader


def loader() -> Loader:
    return _LOADER
