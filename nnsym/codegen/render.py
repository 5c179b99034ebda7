"""The one jinja2 environment: op templates live beside their operators under ``nnsym/ops``."""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from nnsym.errors import NNSymError
from nnsym.ir import spec as spec_module
from nnsym.ir.spec import CTYPES, PAR_MIN, KernelSpec, comptype, ctype

OPS_DIR = Path(__file__).resolve().parent.parent / "ops"
SHARED_DIR = Path(__file__).resolve().parent / "templates"


def c_literal(v: Any) -> str:
    """A typed value as a C literal (doubles keep every bit: repr round-trips)."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return f"INT64_C({v})" if abs(v) > 2**31 - 1 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        return repr(v) if ("e" in repr(v) or "." in repr(v)) else repr(v) + ".0"
    raise TypeError(f"no C literal for {v!r}")


def template_env(dirs: Sequence[Path]) -> jinja2.Environment:
    """A jinja2 environment for C templates: strict about undefined names, no escaping, the
    ``lit`` filter, the C type helpers and ``PAR_MIN`` (for templates whose lowering does not pass
    ``par_min``)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in dirs]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["lit"] = c_literal
    env.globals.update(ctype=ctype, comptype=comptype, CTYPES=CTYPES, PAR_MIN=PAR_MIN)
    return env


ENV = template_env([OPS_DIR, SHARED_DIR])


def render_spec(spec: KernelSpec) -> str:
    return ENV.get_template(spec.template).render(name=spec.name, **spec.context())


def signature(name: str) -> str:
    return f"void {name}(void *const *p, const int64_t *ia, const double *fa);"


def render_unit(specs: Sequence[KernelSpec], vector_math: Sequence[str],
                blas_int: str = "int") -> str:
    """One translation unit: the shared prologue, then every kernel. ``blas_int`` is the C
    type of the BLAS integer arguments (``compiler.blas().int_type``)."""
    if blas_int not in ("int", "int64_t"):
        raise ValueError(f"blas_int must be int or int64_t, not {blas_int!r}")
    parts = [ENV.get_template("prologue.c.j2").render(vector_math=vector_math,
                                                      blas_int=blas_int)]
    parts.extend(render_spec(s) for s in specs)
    return "\n".join(parts)


# A template's dependencies: every include/import/from/extends must name a literal template
# (template_info refuses any other form: a name computed at render time would be missing from
# the cache key, and a changed dependency would then load stale kernels).
_REFERENCES = re.compile(r"""\{%-?\s*(?:include|import|from|extends)\s+["']([^"']+)["']""")
_ANY_REFERENCE = re.compile(r"\{%-?\s*(?:include|import|from|extends)\b")


def template_text(name: str) -> str:
    """The source text of a template, as the environment's loader finds it."""
    loader = ENV.loader
    assert loader is not None
    return loader.get_source(ENV, name)[0]


class TemplateReferenceError(NNSymError):
    """A kernel template refers to another template by a name computed at render time."""


@functools.cache
def template_info(name: str) -> tuple[str, int]:
    """(sha256, size in characters) of a template's text together with every template it
    includes or imports, recursively: with :func:`renderer_digest`, everything a rendering
    depends on besides the spec's context. Read once per process."""
    texts: dict[str, str] = {}
    todo = [name]
    while todo:
        n = todo.pop()
        if n not in texts:
            texts[n] = template_text(n)
            names = _REFERENCES.findall(texts[n])
            if len(names) != len(_ANY_REFERENCE.findall(texts[n])):
                raise TemplateReferenceError(
                    f"template {n} includes or imports a template by a computed name; kernel "
                    "cache keys need every include/import/from/extends to name a literal "
                    "template")
            todo.extend(names)
    h = hashlib.sha256()
    for n in sorted(texts):
        data = texts[n].encode()
        h.update(f"{len(n)}:{n}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest(), sum(len(t) for t in texts.values())


def template_digest(name: str) -> str:
    """The sha256 part of :func:`template_info`."""
    return template_info(name)[0]


@functools.cache
def renderer_digest() -> str:
    """sha256 of what shapes every rendering besides the templates: this module and the spec
    module (literals, C types, ``PAR_MIN``) and jinja2's version."""
    h = hashlib.sha256(jinja2.__version__.encode())
    for f in (Path(__file__), Path(spec_module.__file__ or "")):
        h.update(f.read_bytes())
    return h.hexdigest()
