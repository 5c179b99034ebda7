"""Compiling the sparse kernel libraries: a jinja2 template under ``nnsym/sparse/templates``
rendered with trusted values (dtype names, expressions from nnsym's own operator tables, never
user text), prefixed with ``common.c.j2``, compiled once into the disk cache (the compiler
flags of the dense kernels) and loaded through cffi's ABI mode. ``library`` memoises per
(template, cdef, context).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from nnsym.codegen import compiler
from nnsym.codegen.render import template_env

TEMPLATES = Path(__file__).resolve().parent / "templates"
ENV = template_env([TEMPLATES])

_LOCK = threading.Lock()
_LIBS: dict[Any, Any] = {}
INIT_CDEF = "void nnsym_sparse_init(void *par, void *thr);"


def library(template: str, cdef: str, **context: Any) -> Any:
    """The loaded library of ``template`` rendered with ``context``; ``cdef`` declares the
    functions to call (C declarations, cffi syntax)."""
    key = (template, cdef, tuple(sorted(context.items())))
    lib = _LIBS.get(key)
    if lib is not None:
        return lib
    with _LOCK:
        lib = _LIBS.get(key)
        if lib is not None:
            return lib
        source = (ENV.get_template("common.c.j2").render()
                  + ENV.get_template(template).render(**context))
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
        _LIBS[key] = lib
        return lib


def ptr(a: Any, ctype_name: str = "void *") -> Any:
    """A cffi pointer to a numpy array's first element (the array must stay alive)."""
    return compiler.FFI.cast(ctype_name, a.ctypes.data)
