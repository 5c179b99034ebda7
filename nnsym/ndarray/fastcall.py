"""The C fast path of imperative calls (``fastcall.c``): built once per (Python, numpy,
compiler) into the kernel cache and loaded as an extension module.

``nnsym.nd.<op>`` functions become ``FastOp`` objects wrapping the Python implementation: a
call whose arguments are NDArrays of a signature registered before runs the prebound kernel
without entering Python (about the cost of a numpy ufunc call); any other call runs the Python
function, which registers what it compiled. ``import nnsym`` builds and loads nothing: the
functions start as the Python implementations, and the first call that compiles a kernel loads
the extension (building it into the cache on a miss) and replaces every function in the
``nnsym.nd`` namespaces by its FastOp (a reference taken before that keeps working, through
Python). Where the extension cannot be built because this Python has no development headers,
the Python path serves every call and one warning says so.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import logging
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nnsym.codegen import compiler
from nnsym.errors import warn
from nnsym.ndarray.ndarray import NDArray

log = logging.getLogger("nnsym.runtime")

SOURCE = Path(__file__).with_name("fastcall.c")
MODULE_NAME = "_nnsym_fast"
# Kernels on at least this many elements run with the GIL released (numpy's threshold is 500;
# below it releasing and taking back the GIL costs more than the kernel).
GIL_RELEASE_ELEMENTS = 512


_LOCK = threading.RLock()
_PENDING: list[tuple[Any, Callable[[Any], None]]] = []  # (Python function, its upgrade hook)
_NAMESPACES: list[Any] = []  # modules holding the functions, patched on upgrade


def module() -> Any | None:
    """The loaded extension, or None (numpy backend, or no Python headers: one warning). The
    first call loads it (building on a cache miss) and upgrades every function ``wrap`` saw."""
    with _LOCK:
        mod = _load()
        if mod is not None and _PENDING:
            _upgrade(mod)
        return mod


def add_namespaces(*modules: Any) -> None:
    """Modules whose attributes name wrapped functions: on upgrade they get the FastOps."""
    _NAMESPACES.extend(modules)


def _upgrade(mod: Any) -> None:
    made: dict[int, tuple[Any, Any]] = {}
    for slow, hook in _PENDING:
        fast = _fast_op(mod, slow)
        hook(fast)
        made[id(slow)] = (slow, fast)
    _PENDING.clear()
    for ns in _NAMESPACES:
        for k, v in list(vars(ns).items()):
            hit = made.get(id(v))
            if hit is not None and hit[0] is v:
                setattr(ns, k, hit[1])


@functools.lru_cache(maxsize=1)
def _load() -> Any | None:
    if compiler.backend() != "c":
        return None
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        warn(
            f"nnsym: Python's development headers are missing ({include}/Python.h); imperative "
            "calls use the slower Python dispatcher (install python3-dev to fix)",
            RuntimeWarning,
        )
        return None
    source = SOURCE.read_text()
    fl = ["-O2", "-fPIC", "-shared", "-fno-strict-aliasing", "-std=gnu11",
          f"-I{include}", f"-I{np.get_include()}"]
    abi = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = compiler.library_key(source, fl, [], python=abi, numpy=np.__version__)
    entry = compiler.build_library(key, source, fl, [], python=abi, numpy=np.__version__)
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(entry / "lib.so"))
    spec = importlib.util.spec_from_loader(MODULE_NAME, loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    mod.setup(NDArray)
    return mod


_ALL: list[Any] = []  # every FastOp made (they live as long as nnsym.nd)


def _forget_all() -> None:
    """The backend changed: every registered kernel is forgotten (the Python path decides)."""
    for fast in _ALL:
        fast.clear()


compiler.RESET_HOOKS.append(_forget_all)


def wrap(slow: Any, on_upgrade: Callable[[Any], None]) -> Any:
    """``slow`` as a FastOp where the extension is loaded already; else ``slow`` itself, to be
    upgraded when it loads (``on_upgrade(fast_op)`` is called then)."""
    with _LOCK:
        mod = _load() if _load.cache_info().currsize else None
        if mod is None:
            _PENDING.append((slow, on_upgrade))
            return slow
        return _fast_op(mod, slow)


def _fast_op(mod: Any, slow: Any) -> Any:
    fast = mod.FastOp(slow)
    _ALL.append(fast)
    fast.__wrapped__ = slow
    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(fast, attr, getattr(slow, attr))
    return fast


def register(fast: Any, call: Any, in_shapes: Any, in_dtypes: Any) -> bool:
    """Register a compiled single-kernel call with ``fast``; False where it does not qualify
    (several launches or a workspace, views, several outputs, not a FastOp)."""
    if not hasattr(fast, "add") or call.single is None or call.views or len(call.out_specs) != 1:
        return False
    fn, ia, fa = call.single
    ffi = compiler.FFI
    (shape, dtype), = call.out_specs
    n = max([int(np.prod(shape, dtype=np.int64))] +
            [int(np.prod(s, dtype=np.int64)) for s in in_shapes])
    sigs = tuple((tuple(s), np.dtype(t).num) for s, t in zip(in_shapes, in_dtypes))
    return bool(fast.add(sigs, tuple(shape), np.dtype(dtype).num,
                         int(ffi.cast("uintptr_t", fn)), int(ffi.cast("uintptr_t", ia)),
                         int(ffi.cast("uintptr_t", fa)), n >= GIL_RELEASE_ELEMENTS, call))
