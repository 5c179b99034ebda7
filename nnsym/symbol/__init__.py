"""``nnsym.sym``: Symbol, Variable, Group, JSON load/save and one function per operator.

Every registered operator name and alias becomes a function here; names starting with
``_contrib_`` also appear in ``nnsym.sym.contrib``, names starting with ``_`` in
``nnsym.sym._internal``, and operators with sparse implementations in ``nnsym.sym.sparse``.
"""

from __future__ import annotations

import sys as _sys
from typing import Any

from nnsym import ops as _ops
from nnsym.ir import fluent as _fluent
from nnsym.ir.namespace import populate_namespaces as _populate_namespaces
from nnsym.symbol.json_io import load, load_json
from nnsym.symbol.naming import AttrScope, NameManager, Prefix
from nnsym.symbol.ops import make_function as _make_function
from nnsym.symbol.symbol import Group, Symbol, Variable, var

_functions, _subs = _populate_namespaces("nnsym.symbol", _make_function)
globals().update(_functions)
contrib, _internal, sparse = _subs["contrib"], _subs["_internal"], _subs["sparse"]
linalg = _subs["linalg"]
image = _subs["image"]
_fluent.install(Symbol, _fluent.SYMBOL_FLUENT, _functions, _sys.modules[__name__])
from nnsym.symbol import random  # noqa: E402

random.install(_functions)


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
    "image",
    "linalg",
    "load",
    "load_json",
    "random",
    "sparse",
    "var",
]
