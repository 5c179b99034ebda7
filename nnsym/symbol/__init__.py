"""``nnsym.sym``: Symbol, Variable, Group, JSON load/save and one function per operator.

Every registered operator name and alias becomes a function here; names starting with
``_contrib_`` also appear in ``nnsym.sym.contrib``, names starting with ``_`` in
``nnsym.sym._internal``, and operators with sparse implementations in ``nnsym.sym.sparse``.
"""

# NOTE: type checkers read the generated __init__.pyi (and the sub-namespaces' _ns_*.pyi) instead
# of this file; after changing its public names run `python -m nnsym.devtools.stubs`.
from __future__ import annotations

import sys as _sys
from typing import Any

from nnsym import ops as _ops
from nnsym.ir import fluent as _fluent
from nnsym.ir.namespace import populate_namespaces as _populate_namespaces
from nnsym.ops.shape.join import split_v2_params as _split_v2_params
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


def split_v2(ary: Symbol, indices_or_sections: Any, axis: int = 0, squeeze_axis: bool = False,
             name: str | None = None) -> Symbol:
    """Splits ``ary`` along ``axis`` into N near-equal pieces (an int: the sizes follow
    ``numpy.array_split``, as MXNet's shape rule does) or at the given indices (a tuple)."""
    params = _split_v2_params(indices_or_sections, axis, squeeze_axis, None)
    # MXNet's frontend passes all four, the indices as a list: its JSON reads "[0, 1, 3]"
    params["indices"] = list(params["indices"])
    params.setdefault("sections", 0)
    return _internal._split_v2(ary, name=name, **params)  # type: ignore[no-any-return]


def _split_v2_method(self: Symbol, *args: Any, **kwargs: Any) -> Symbol:
    """Fluent form of :func:`split_v2` with this symbol as ``ary``."""
    return split_v2(self, *args, **kwargs)


Symbol.split_v2 = _split_v2_method  # type: ignore[attr-defined]


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
    "split_v2",
    "var",
]
