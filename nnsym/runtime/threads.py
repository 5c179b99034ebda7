"""One thread setting for nnsym's worker pool and the BLAS libraries (docs/threads.md).

``NNSYM_NUM_THREADS`` (default: the CPUs this process may run on) sizes the pool the generated
kernels split over (``runtime/runlib.c``) and, when it is set, limits the BLAS libraries loaded
in the process (numpy's and scipy's OpenBLAS, ...) to the same count at import.
:func:`set_num_threads` changes both later. BLAS limits go through threadpoolctl where it is
installed, else through OpenBLAS's own ``openblas_set_num_threads`` in numpy's bundled copy.

Fork: a child forked after the pool started has none of its workers; runlib.c's
``pthread_atfork`` handler makes it start its own on first use, with the parent's count. The
Python locks of nnsym's caches are re-created in the child (``os.register_at_fork``), as the
logging module does with its own: a lock another thread of the parent held at the fork would
otherwise stay held in the child forever.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

from nnsym.codegen import compiler
from nnsym.errors import ThreadCountError

# OpenBLAS's setter in the spellings numpy's wheels have used (64-bit interface first).
_OPENBLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_OPENBLAS_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                     "scipy_openblas_get_num_threads", "openblas_get_num_threads")
_LIMITS: list[Any] = []  # threadpoolctl's limiter objects, kept so the limits stay
# The module-level locks of nnsym (module, attribute, reentrant), re-created in a forked child.
# Looked up in sys.modules: a module not imported yet holds no lock.
FORK_LOCKS = (
    ("nnsym.codegen.compiler", "_LOCK", True),
    ("nnsym.codegen.compiler", "_CFFI_LOCK", False),
    ("nnsym.codegen.compiler", "_RUNTIME_LOCK", False),
    ("nnsym.codegen.cache", "_ROOT_LOCK", False),
    ("nnsym.runtime.imperative", "_LOCK", False),
    ("nnsym.ndarray.ndarray", "_LOCK", False),
    ("nnsym.ndarray.fastcall", "_LOCK", True),
    ("nnsym.ops.common.stype", "_SEEN_LOCK", False),
    ("nnsym.ops.common.rng", "_LOCK", False),
    ("nnsym.ops.custom", "_LOCK", False),
    ("nnsym.cuda.runtime", "_LOCK", False),
)


def get_num_threads() -> int:
    """The threads nnsym's kernels may use (the calling thread included)."""
    return compiler.get_num_threads()


def set_num_threads(n: int) -> int:
    """Use ``n`` threads (>= 1; 1 runs serially) in nnsym's worker pool and in the BLAS
    libraries loaded now. Returns the count set (the pool holds at most 64)."""
    count = compiler.set_num_threads(n)
    _limit_blas(count)
    return count


def blas_num_threads() -> list[int]:
    """The thread count of each BLAS library loaded in the process (threadpoolctl's view, or
    numpy's OpenBLAS alone without it)."""
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError:
        lib = _numpy_openblas()
        get = _symbol(lib, _OPENBLAS_GETTERS) if lib is not None else None
        return [] if get is None else [int(get())]
    return [int(p["num_threads"]) for p in threadpool_info() if p.get("user_api") == "blas"]


def _limit_blas(n: int) -> None:
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError:
        lib = _numpy_openblas()
        setter = _symbol(lib, _OPENBLAS_SETTERS) if lib is not None else None
        if setter is not None:
            setter(ctypes.c_int(n))
        return
    _LIMITS[:] = [threadpool_limits(limits=n, user_api="blas")]


def _symbol(lib: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        if hasattr(lib, name):
            return getattr(lib, name)
    return None


def _numpy_openblas() -> Any:
    """numpy's bundled OpenBLAS (already loaded by numpy), or None."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return None
    libs = Path(spec.origin).parent.parent / "numpy.libs"
    for path in sorted(libs.glob("*openblas*.so*")) if libs.is_dir() else ():
        try:
            return ctypes.CDLL(str(path))
        except OSError:
            continue
    return None


def apply_environment() -> None:
    """At import: with ``NNSYM_NUM_THREADS`` set, the BLAS libraries follow it (the pool reads
    it when it starts). Unset, each keeps its own default (all cores for OpenBLAS). A bad
    value is reported when the pool starts (``ThreadCountError``), not at import."""
    if os.environ.get("NNSYM_NUM_THREADS", "").strip():
        try:
            n = compiler.default_num_threads()
        except ThreadCountError:
            return
        _limit_blas(n)


def _fresh_locks_in_child() -> None:
    """After ``fork()``, in the child: new, unheld locks in place of the parent's."""
    for module, attr, reentrant in FORK_LOCKS:
        mod = sys.modules.get(module)
        if mod is not None and hasattr(mod, attr):
            setattr(mod, attr, threading.RLock() if reentrant else threading.Lock())
    native_mod = sys.modules.get("nnsym.runtime.native")
    loader = getattr(native_mod, "LOADER", None)
    if loader is not None and hasattr(loader, "_lock"):
        loader._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_locks_in_child)
