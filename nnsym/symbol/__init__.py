"""``nnsym.sym``: Symbol, Variable, Group, JSON load/save and one function per operator.

Every registered operator name and alias becomes a function here; names starting with
``_contrib_`` also appear in ``nnsym.sym.contrib``, names starting with ``_`` in
``nnsym.sym._internal``, and operators with sparse implementations in ``nnsym.sym.sparse``.
"""

from __future__ import annotations

import types
from typing import Any

from nnsym import ops as _ops
from nnsym.ops.registry import all_names as _all_names
from nnsym.symbol.json_io import load, load_json
from nnsym.symbol.naming import AttrScope, NameManager, Prefix
from nnsym.symbol.ops import make_function as _make_function
from nnsym.symbol.symbol import Group, Symbol, Variable, var

contrib = types.ModuleType(
    "nnsym.symbol.contrib", "Contributed operators (MXNet's mx.sym.contrib)."
)
_internal = types.ModuleType("nnsym.symbol._internal", "Internal operators (mx.sym._internal).")
sparse = types.ModuleType("nnsym.symbol.sparse", "Operators with sparse implementations.")


def _populate() -> dict[str, Any]:
    made: dict[str, Any] = {}
    for fname, op in sorted(_all_names().items()):
        fn = _make_function(op, fname)
        if fname.startswith("_contrib_"):
            setattr(contrib, fname[len("_contrib_") :], fn)
        if fname.startswith("_"):
            setattr(_internal, fname, fn)
        if op.sparse:
            setattr(sparse, fname, fn)
        made[fname] = fn
    return made


globals().update(_populate())


def __getattr__(name: str) -> Any:
    """Operator functions are generated above; anything else is a clear AttributeError."""
    raise AttributeError(f"nnsym.sym has no operator or attribute {name!r}")


del _ops

__all__ = [
    "AttrScope",
    "Group",
    "NameManager",
    "Prefix",
    "Symbol",
    "Variable",
    "contrib",
    "load",
    "load_json",
    "sparse",
    "var",
]
