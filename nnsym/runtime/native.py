"""The runtime's native kernel loader (installed into ``nnsym.ir.native`` on import): a family
template under ``nnsym/ops`` rendered with trusted values (dtype names, expressions from nnsym's
own operator tables, never user text), prefixed with ``sparse_prologue.c.j2`` (the worker-pool
hooks), compiled once into the disk cache with the dense kernels' flags and loaded through
cffi's ABI mode. ``library`` memoises per (template, cdef, context).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from nnsym.codegen import compiler
from nnsym.codegen.render import ENV
from nnsym.ir import native

INIT_CDEF = "void nnsym_sparse_init(void *par, void *thr);"


def render(template: str, **context: Any) -> str:
    """The C source of one library: the shared prologue, then the template."""
    return (ENV.get_template("sparse_prologue.c.j2").render()
            + ENV.get_template(template).render(**context))


class CLoader:
    """Libraries built by the C compiler of ``nnsym.codegen.compiler``."""

    NULL: Any = compiler.FFI.NULL

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._libs: dict[Any, Any] = {}

    def available(self) -> bool:
        return compiler.backend() == "c"

    def library(self, template: str, cdef: str, **context: Any) -> Any:
        key = (template, cdef, tuple(sorted(context.items())))
        lib = self._libs.get(key)
        if lib is not None:
            return lib
        with self._lock:
            lib = self._libs.get(key)
            if lib is not None:
                return lib
            source = render(template, **context)
            full_cdef = cdef + "\n" + INIT_CDEF
            fl, lf = compiler.flags(), compiler.link_flags()
            lkey = compiler.library_key(source, fl, lf, cdef=full_cdef)
            entry = compiler.build_library(lkey, source, fl, lf, cdef=full_cdef)
            rt = compiler.runtime()
            with compiler._CFFI_LOCK:
                compiler.FFI.cdef(full_cdef, override=True)
                lib = compiler.FFI.dlopen(str(entry / "lib.so"))
            lib.nnsym_sparse_init(compiler.FFI.cast("void *", rt.nnsym_parallel),
                                  compiler.FFI.cast("void *", rt.nnsym_get_threads))
            self._libs[key] = lib
            return lib

    def ptr(self, a: np.ndarray, ctype_name: str = "void *") -> Any:
        return compiler.FFI.cast(ctype_name, a.ctypes.data)

    def num_threads(self) -> int:
        return int(compiler.get_num_threads())


LOADER = CLoader()
native.install(LOADER)
