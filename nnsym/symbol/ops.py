"""``nnsym.sym.<op>`` functions, generated from the registry with signatures and docstrings."""

from __future__ import annotations

from typing import Any

from nnsym.ir.fluent import split_positional
from nnsym.ir.namespace import op_docstring, signature
from nnsym.ir.opdef import OpDef
from nnsym.symbol.symbol import Symbol, apply_op


def make_function(op: OpDef, func_name: str) -> Any:
    """A Python function that builds an ``op`` node; the naming hint is the lower-cased name."""
    hint = func_name.lower()

    def fn(*args: Symbol, **kwargs: Any) -> Symbol:
        if any(not isinstance(a, Symbol) for a in args):  # MXNet's positional parameters
            pos, kwargs = split_positional((func_name, op.name), args, kwargs,
                                           lambda v: isinstance(v, Symbol))
            args = tuple(pos)
        return apply_op(op, hint, args, kwargs)

    fn.__name__ = fn.__qualname__ = func_name
    fn.__module__ = "nnsym.symbol"
    fn.__doc__ = op_docstring(op, func_name)
    fn.__signature__ = signature(op)  # type: ignore[attr-defined]
    return fn
