"""Typed operator parameters that parse MXNet's string forms and print them back.

An operator's parameters are a frozen, keyword-only dataclass deriving from ``Params``; each
field is declared with ``field()``, which carries the default, bounds, allowed values and the
doc line. Values arrive either as Python objects (``num_hidden=128``) or as MXNet JSON strings
(``"128"``, ``"(3, 3)"``, ``"True"``, ``"None"``); both parse into the same typed value. The
string MXNet stores for a Python value is ``mx_str(value)``: JSON files keep the exact strings
they were loaded with, so a load/save round trip reproduces the file.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from nnsym.errors import OperatorParamError
from nnsym.types import INT64_MAX, INT64_MIN

_REQUIRED = dataclasses.MISSING

MAX_COUNT = 2**20
"""The documented upper bound of an operator's input or output count (``num_args`` of Concat,
add_n and UpSampling, ``num_outputs`` of SliceChannel): a larger value is rejected while the
parameters are parsed, before anything is allocated per input or output."""


def field(
    default: Any = _REQUIRED,
    *,
    doc: str = "",
    lower: float | None = None,
    upper: float | None = None,
    choices: tuple[str, ...] | None = None,
    kind: str | None = None,
) -> Any:
    """Declare a parameter. ``kind="dtype"`` marks a dtype-name parameter (accepts numpy types)."""
    meta = {"doc": doc, "lower": lower, "upper": upper, "choices": choices, "kind": kind}
    if default is _REQUIRED:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class FieldSpec:
    """What parsing needs to know about one parameter."""

    name: str
    base: str  # "int" | "float" | "bool" | "str" | "dtype" | "tuple" | "tuple_opt" | "tuple_float"
    optional: bool
    required: bool
    default: Any
    doc: str
    lower: float | None
    upper: float | None
    choices: tuple[str, ...] | None

    def type_name(self) -> str:
        t = {
            "int": "int",
            "float": "float",
            "bool": "boolean",
            "str": "string",
            "dtype": "dtype",
            "tuple": "Shape(tuple)",
            "tuple_opt": "tuple of int or None",
            "tuple_float": "tuple of <float>",
        }[self.base]
        if self.choices:
            t = "{" + ", ".join(repr(c) for c in self.choices) + "}"
        if self.optional:
            t += " or None"
        return t

    def describe(self) -> str:
        d = "required" if self.required else f"default={mx_str(self.default)!r}"
        rng = ""
        if self.lower is not None or self.upper is not None:
            lo = "-inf" if self.lower is None else self.lower
            hi = "inf" if self.upper is None else self.upper
            rng = f", range [{lo}, {hi}]"
        return f"{self.name} : {self.type_name()}, {d}{rng}"


def _classify(name: str, ann: Any, kind: str | None) -> tuple[str, bool]:
    """(base kind, optional) from a type annotation."""
    optional = False
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        optional = len(args) < len(typing.get_args(ann))
        if len(args) != 1:
            raise TypeError(f"parameter {name}: unsupported annotation {ann}")
        ann = args[0]
        origin = typing.get_origin(ann)
    if kind == "dtype":
        return "dtype", optional
    if origin is tuple:
        elem = typing.get_args(ann)[0]
        if elem is float:
            return "tuple_float", optional
        return ("tuple" if elem is int else "tuple_opt"), optional
    base = {int: "int", float: "float", bool: "bool", str: "str"}.get(ann)
    if base is None:
        raise TypeError(f"parameter {name}: unsupported annotation {ann}")
    return base, optional


_TRUE = {"true": True, "1": True, "false": False, "0": False}
_TUPLE_ITEM = re.compile(r"\s*(None|-?\d+)\s*(?:[,)\]]|$)")


def _parse_tuple_text(text: str, allow_none: bool) -> tuple[int | None, ...]:
    s = text.strip()
    if s and s[0] not in "([":
        # dmlc::Tuple reads a bare number as a one-tuple ("3" -> (3,))
        return (_parse_int_text(s),)
    if len(s) < 2 or s[-1] not in ")]" or (s[0] == "(") != (s[-1] == ")"):
        raise ValueError(text)
    body = s[1:-1].strip()
    if not body:
        return ()
    items = [t.strip() for t in body.split(",")]
    if items and items[-1] == "":
        items.pop()
    out: list[int | None] = []
    for it in items:
        if it == "None" and allow_none:
            out.append(None)
        else:
            out.append(_parse_int_text(it))
    return tuple(out)


def _parse_float_tuple_text(text: str) -> tuple[float, ...]:
    """MXNet's tuple of floats: "(0.1, 0.2)", "[1,2]", or a bare number as a one-tuple."""
    s = text.strip()
    if s and s[0] in "([":
        if len(s) < 2 or s[-1] != {"(": ")", "[": "]"}[s[0]]:
            raise ValueError(text)
        s = s[1:-1]
    items = [t.strip() for t in s.split(",")]
    if items and items[-1] == "" and len(items) > 1:
        items.pop()
    return tuple(float(t) for t in items) if items != [""] else ()


def _parse_int_text(s: str) -> int:
    s = s.strip()
    if s.endswith("L"):
        s = s[:-1]
    return int(s)


def mx_str(v: Any) -> str:
    """The string MXNet's Python front end stores for a parameter value (``str(value)``)."""
    if isinstance(v, np.dtype):
        return str(v.name)
    if isinstance(v, type) and issubclass(v, np.generic):
        return str(np.dtype(v).name)
    return str(v)


def _as_dtype_name(v: Any) -> str:
    if isinstance(v, str):
        name = v
    else:
        try:
            name = np.dtype(v).name
        except TypeError as e:
            raise ValueError(repr(v)) from e
    try:
        return str(np.dtype(name).name)
    except TypeError as e:
        raise ValueError(name) from e


class Params:
    """Base of every operator's parameter dataclass. Subclasses use ``@params_class``."""

    __fields: ClassVar[dict[type, dict[str, FieldSpec]]] = {}

    @classmethod
    def specs(cls) -> dict[str, FieldSpec]:
        cache = Params.__fields
        if cls not in cache:
            hints = typing.get_type_hints(cls)
            specs: dict[str, FieldSpec] = {}
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                meta = f.metadata
                base, optional = _classify(f.name, hints[f.name], meta.get("kind"))
                specs[f.name] = FieldSpec(
                    name=f.name,
                    base=base,
                    optional=optional,
                    required=f.default is dataclasses.MISSING,
                    default=None if f.default is dataclasses.MISSING else f.default,
                    doc=meta.get("doc", ""),
                    lower=meta.get("lower"),
                    upper=meta.get("upper"),
                    choices=meta.get("choices"),
                )
            cache[cls] = specs
        return cache[cls]

    @classmethod
    def parse(
        cls, op_name: str, values: Mapping[str, Any], node_name: str = ""
    ) -> tuple[Params, dict[str, str]]:
        """Parse Python values or MXNet strings; returns the params and the given keys' strings.

        Keys of the form ``__x__`` are attributes, not parameters, and must be removed first.
        """
        specs = cls.specs()
        parsed: dict[str, Any] = {}
        strings: dict[str, str] = {}
        for key, raw in values.items():
            spec = specs.get(key)
            if spec is None:
                allowed = "; ".join(s.describe() for s in specs.values()) or "(none)"
                raise OperatorParamError(
                    f"operator {op_name}{_node_part(node_name)}: unknown parameter '{key}'; "
                    f"parameters of {op_name}: {allowed}"
                )
            parsed[key] = _parse_value(op_name, node_name, spec, raw)
            strings[key] = raw if isinstance(raw, str) else mx_str(raw)
        for name, spec in specs.items():
            if spec.required and name not in parsed:
                raise OperatorParamError(
                    f"operator {op_name}{_node_part(node_name)}: required parameter '{name}' "
                    f"is missing ({spec.describe()})"
                )
        try:
            obj = cls(**parsed)
        except OperatorParamError:
            raise
        except (TypeError, ValueError) as e:  # __post_init__ cross-field checks
            raise OperatorParamError(f"operator {op_name}{_node_part(node_name)}: {e}") from e
        return obj, strings

    def to_attrs(self) -> dict[str, str]:
        """Every parameter that differs from its default, in MXNet's string form."""
        out = {}
        for name, spec in self.specs().items():
            v = getattr(self, name)
            if spec.required or v != spec.default:
                out[name] = mx_str(v)
        return out

    @classmethod
    def doc_lines(cls) -> list[str]:
        return [f"{s.describe()}\n    {s.doc}" for s in cls.specs().values()]


def _node_part(node_name: str) -> str:
    return f" (node '{node_name}')" if node_name else ""


def _parse_value(op_name: str, node_name: str, spec: FieldSpec, raw: Any) -> Any:
    def bad(expect: str) -> OperatorParamError:
        return OperatorParamError(
            f"operator {op_name}{_node_part(node_name)}: invalid value {raw!r} for parameter "
            f"'{spec.name}': expected {expect} ({spec.describe()})"
        )

    if raw is None or (isinstance(raw, str) and raw.strip() == "None"):
        if spec.optional:
            return None
        raise bad(spec.type_name())
    try:
        v = _convert(spec, raw)
    except (ValueError, TypeError, OverflowError):
        raise bad(spec.type_name()) from None
    if spec.base == "int":
        if not INT64_MIN <= v <= INT64_MAX:
            raise bad("an integer that fits in int64")
    elif spec.base in ("tuple", "tuple_opt"):
        if any(d is not None and not INT64_MIN <= d <= INT64_MAX for d in v):
            raise bad("integers that fit in int64")
    if spec.choices is not None and v not in spec.choices:
        raise bad("one of " + ", ".join(repr(c) for c in spec.choices))
    if spec.base in ("int", "float"):
        if spec.lower is not None and v < spec.lower:
            raise bad(f"a value >= {spec.lower}")
        if spec.upper is not None and v > spec.upper:
            raise bad(f"a value <= {spec.upper}")
    if (
        spec.base == "tuple"
        and spec.lower is not None
        and any(d is not None and d < spec.lower for d in v)
    ):
        raise bad(f"every entry >= {spec.lower}")
    return v


def _convert(spec: FieldSpec, raw: Any) -> Any:
    base = spec.base
    if isinstance(raw, str):
        s = raw.strip()
        if base == "bool":
            return _TRUE[s.lower()] if s.lower() in _TRUE else _fail(s)
        if base == "int":
            return _parse_int_text(s)
        if base == "float":
            v = float(s)
            return v
        if base == "str":
            return raw
        if base == "dtype":
            return _as_dtype_name(s)
        if base == "tuple_float":
            return _parse_float_tuple_text(s)
        return _parse_tuple_text(s, allow_none=base == "tuple_opt")
    if base == "bool":
        if isinstance(raw, (bool, np.bool_)):
            return bool(raw)
        if isinstance(raw, (int, np.integer)) and int(raw) in (0, 1):
            return bool(raw)
        return _fail(raw)
    if base == "int":
        if isinstance(raw, (bool, np.bool_)):
            return _fail(raw)  # MXNet would see "True" and reject it
        if isinstance(raw, (int, np.integer)):
            return int(raw)
        if isinstance(raw, (float, np.floating)) and float(raw).is_integer():
            return int(raw)
        return _fail(raw)
    if base == "float":
        if isinstance(raw, (bool, np.bool_)):
            return _fail(raw)
        if isinstance(raw, (int, float, np.integer, np.floating)):
            v = float(raw)
            if math.isnan(v) and not isinstance(raw, (float, np.floating)):
                return _fail(raw)
            return v
        return _fail(raw)
    if base == "str":
        return raw if isinstance(raw, str) else _fail(raw)
    if base == "dtype":
        return _as_dtype_name(raw)
    if base == "tuple_float":
        items = list(raw) if isinstance(raw, (tuple, list)) else [raw]
        if any(isinstance(d, (bool, np.bool_)) or not isinstance(
                d, (int, float, np.integer, np.floating)) for d in items):
            return _fail(raw)
        return tuple(float(d) for d in items)
    if isinstance(raw, (int, np.integer)) and not isinstance(raw, bool):
        return (int(raw),)
    if isinstance(raw, (tuple, list)):
        out: list[int | None] = []
        for d in raw:
            if d is None and base == "tuple_opt":
                out.append(None)
            elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
                out.append(int(d))
            else:
                return _fail(raw)
        return tuple(out)
    return _fail(raw)


def _fail(raw: Any) -> Any:
    raise ValueError(repr(raw))


@dataclass(frozen=True, kw_only=True)
class NoParams(Params):
    """Operators without parameters."""
