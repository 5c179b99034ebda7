"""Custom operators: ``Custom`` (and its ``_backward_Custom``) run a registered Python prop's
operator, as MXNet's CustomOp does.

A prop class is registered under an ``op_type`` (``nnsym.operator.register``); a ``Custom`` node
holds ``op_type`` plus the user's other attributes as strings (MXNet's JSON form) and makes one
prop instance from them (``prop_cls(**strings)``). Shape, dtype and storage-type rules ask that
prop; the storage decision is the ``PythonCompute`` below, which bound graphs and ``nd`` calls run
as a Python step over NDArrays.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NNSymError, OperatorParamError, StorageTypeError, warn
from nnsym.ir.graph import Entry, Node, zeros_like
from nnsym.ir.opdef import OpDef, PythonCompute, RuleError, known, register
from nnsym.ir.params import Params, field
from nnsym.ops.common.grad import backward_node
from nnsym.types import DispatchMode, Shape, SType, dtype_flag


class CustomOpError(NNSymError, RuntimeError):
    """A custom operator's Python code failed (or answered wrongly); names the node, the
    op_type and the original exception (chained)."""


_PROPS: dict[str, type] = {}
_LOCK = threading.Lock()


def register_prop(op_type: str, prop_cls: type) -> None:
    """Register ``prop_cls`` under ``op_type``; registering a name again replaces it (with a
    warning), as MXNet does."""
    if not isinstance(op_type, str) or not op_type:
        raise OperatorParamError(f"custom operator: op_type must be a non-empty string, got "
                                 f"{op_type!r}")
    if not isinstance(prop_cls, type):
        raise TypeError(f"custom operator {op_type!r}: register a CustomOpProp subclass, got "
                        f"{prop_cls!r}")
    with _LOCK:
        if op_type in _PROPS and _PROPS[op_type] is not prop_cls:
            warn(f"New registration is overriding existing custom operator {op_type}")
        _PROPS[op_type] = prop_cls
        _INSTANCES.clear()


def registered_op_types() -> list[str]:
    """Every registered op_type, sorted."""
    return sorted(_PROPS)


def prop_class(op_type: str) -> type:
    """The prop class registered as ``op_type``; OperatorParamError naming the registered ones."""
    cls = _PROPS.get(op_type)
    if cls is None:
        have = ", ".join(repr(n) for n in registered_op_types()) or "none"
        raise OperatorParamError(
            f"Custom: cannot find custom operator op_type={op_type!r}; registered op_types: "
            f"{have} (register one with @nnsym.operator.register({op_type!r}))")
    return cls


@dataclass(frozen=True, kw_only=True)
class _CustomFields(Params):
    op_type: str = field(doc="The name a CustomOpProp was registered under.")


_INSTANCES: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}


@dataclass(frozen=True)
class CustomParams(Params):
    """``op_type`` and the user's other attributes, kept as MXNet's strings (sorted by key)."""

    op_type: str
    kwargs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def specs(cls) -> dict[str, Any]:
        return _CustomFields.specs()

    @classmethod
    def parse(cls, op_name: str, values: Mapping[str, Any],
              node_name: str = "") -> tuple[Params, dict[str, str]]:
        where = f"operator {op_name}" + (f" (node '{node_name}')" if node_name else "")
        if "op_type" not in values:
            raise OperatorParamError(f"{where}: required parameter 'op_type' is missing (the "
                                     "name a CustomOpProp was registered under)")
        op_type = values["op_type"]
        if not isinstance(op_type, str):
            raise OperatorParamError(f"{where}: op_type must be a string, got {op_type!r}")
        strings = {k: v if isinstance(v, str) else str(v) for k, v in values.items()}
        kw = tuple(sorted((k, v) for k, v in strings.items() if k != "op_type"))
        p = cls(op_type, kw)
        p.prop  # noqa: B018  # NOTE: made now, so an unknown op_type or a bad attribute fails here
        return p, strings

    def to_attrs(self) -> dict[str, str]:
        return {"op_type": self.op_type, **dict(self.kwargs)}

    @property
    def prop(self) -> Any:
        """The prop instance for these attributes (one per distinct attribute set)."""
        key = (self.op_type, self.kwargs)
        hit = _INSTANCES.get(key)
        if hit is None:
            cls = prop_class(self.op_type)
            try:
                hit = cls(**dict(self.kwargs))
            except Exception as e:
                raise OperatorParamError(
                    f"Custom op_type {self.op_type!r}: {cls.__name__}(**{dict(self.kwargs)}) "
                    f"raised {type(e).__name__}: {e}") from e
            with _LOCK:
                _INSTANCES[key] = hit
        return hit


# ---------------------------------------------------------------------------------------------
# Names and counts, from the prop


def _ask(p: CustomParams, method: str, *args: Any) -> Any:
    """Call the prop's ``method``; a failure is a CustomOpError naming the op_type."""
    prop = p.prop
    try:
        return getattr(prop, method)(*args)
    except NNSymError:
        raise
    except Exception as e:
        raise CustomOpError(f"Custom op_type {p.op_type!r}: {type(prop).__name__}.{method} "
                            f"raised {type(e).__name__}: {e}") from e


def _names(p: CustomParams) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    return (tuple(_ask(p, "list_arguments")), tuple(_ask(p, "list_outputs")),
            tuple(_ask(p, "list_auxiliary_states")))


def _counts(p: CustomParams) -> tuple[int, int, int]:
    a, o, x = _names(p)
    return len(a), len(o), len(x)


def _need_top_grad(p: CustomParams) -> bool:
    return bool(_ask(p, "need_top_grad"))


# ---------------------------------------------------------------------------------------------
# Rules


def _unpack(p: CustomParams, method: str, ret: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """(inputs, outputs, aux) from a prop's answer of 2 or 3 lists, counts checked."""
    na, no, nx = _counts(p)
    if not isinstance(ret, (list, tuple)) or len(ret) not in (2, 3):
        raise RuleError(f"Custom op_type {p.op_type!r}: {type(p.prop).__name__}.{method} must "
                        f"return 2 or 3 lists (inputs, outputs[, aux]), got {ret!r}")
    ins, outs = list(ret[0]), list(ret[1])
    aux = list(ret[2]) if len(ret) == 3 else []
    for what, got, want in (("input", ins, na), ("output", outs, no), ("aux", aux, nx)):
        if len(got) != want:
            raise RuleError(f"Custom op_type {p.op_type!r}: {type(p.prop).__name__}.{method} "
                            f"returned {len(got)} {what} values, expected {want}")
    return ins, outs, aux


def _call_rule(p: CustomParams, method: str, args: list[Any], complete: bool) -> Any:
    """The prop's rule; while inputs are still unknown, its failure means 'not yet'."""
    try:
        return getattr(p.prop, method)(args)
    except Exception as e:
        if not complete:
            return None
        raise RuleError(f"Custom op_type {p.op_type!r}: {type(p.prop).__name__}.{method} "
                        f"raised {type(e).__name__}: {e}") from e


def _as_shape(s: Any) -> Shape | None:
    if s is None:
        return None
    t = tuple(int(d) for d in s)
    return t if t else None  # MXNet's () is 'unknown' in the legacy shape semantics


def custom_shape(p: CustomParams, ins: list[Any], outs: list[Any]) -> tuple[list, list]:
    na, _, _ = _counts(p)
    args = ins[:na]
    if args and not any(known(s) for s in args):
        return ins, outs
    ret = _call_rule(p, "infer_shape", [list(s) if known(s) else [] for s in args],
                     all(known(s) for s in args))
    if ret is None:
        return ins, outs
    i, o, x = _unpack(p, "infer_shape", ret)
    return [_as_shape(s) for s in i + x], [_as_shape(s) for s in o]


def _as_dtype(t: Any) -> np.dtype | None:
    return None if t is None else np.dtype(t)


def custom_type(p: CustomParams, ins: list[Any], outs: list[Any]) -> tuple[list, list]:
    na, _, _ = _counts(p)
    args = ins[:na]
    if args and all(t is None for t in args):
        return ins, outs
    ret = _call_rule(p, "infer_type", [None if t is None else np.dtype(t).type for t in args],
                     all(t is not None for t in args))
    if ret is None:
        return ins, outs
    try:
        i, o, x = _unpack(p, "infer_type", ret)
        return [_as_dtype(t) for t in i + x], [_as_dtype(t) for t in o]
    except TypeError as e:
        raise RuleError(f"Custom op_type {p.op_type!r}: infer_type returned a value that is "
                        f"not a dtype: {e}") from e


def _stypes(p: CustomParams, labels: Sequence[Any], what: str) -> tuple[SType, ...]:
    try:
        return tuple(SType.DEFAULT if s in (None, "undefined") else SType.parse(s)
                     for s in labels)
    except ValueError as e:
        raise StorageTypeError(f"Custom op_type {p.op_type!r}: {what} returned a storage type "
                               f"that is not one of default, row_sparse, csr: {e}") from None


def _stype_call(p: CustomParams, method: str, *args: Any) -> Any:
    try:
        return getattr(p.prop, method)(*args)
    except Exception as e:
        raise StorageTypeError(f"Custom op_type {p.op_type!r}: {type(p.prop).__name__}."
                               f"{method} raised {type(e).__name__}: {e}") from e


def custom_stype(p: CustomParams, ins: tuple[SType, ...]
                 ) -> tuple[tuple[SType, ...], DispatchMode, Any]:
    na, _no, _nx = _counts(p)
    ret = _stype_call(p, "infer_storage_type", [s.label for s in ins[:na]])
    try:
        _, o, _ = _unpack(p, "infer_storage_type", ret)
    except RuleError as e:
        raise StorageTypeError(str(e)) from None
    return _stypes(p, o, "infer_storage_type"), DispatchMode.FCOMPUTE_EX, FORWARD


def backward_stype(p: CustomParams, ins: tuple[SType, ...]
                   ) -> tuple[tuple[SType, ...], DispatchMode, Any]:
    na, no, _nx = _counts(p)
    lab = [s.label for s in ins]
    og, ind, od, ax = lab[:no], lab[no:no + na], lab[no + na:2 * no + na], lab[2 * no + na:]
    ret = _stype_call(p, "infer_storage_type_backward", og, ind, od, ["undefined"] * na, ax)
    if not isinstance(ret, (list, tuple)) or len(ret) != 5 or len(ret[3]) != na:
        raise StorageTypeError(f"Custom op_type {p.op_type!r}: infer_storage_type_backward must "
                               f"return 5 lists, the fourth with {na} input-gradient storage "
                               f"types; got {ret!r}")
    return _stypes(p, ret[3], "infer_storage_type_backward"), DispatchMode.FCOMPUTE_EX, BACKWARD


def _split_backward(p: CustomParams, vals: list[Any]) -> tuple[list, list, list, list]:
    na, no, _ = _counts(p)
    return (vals[:no], vals[no:no + na], vals[no + na:2 * no + na], vals[2 * no + na:])


def backward_shape(p: CustomParams, ins: list[Any], outs: list[Any]) -> tuple[list, list]:
    """Input gradients take the forward inputs' shapes; output gradients the outputs'."""
    og, ind, od, ax = _split_backward(p, ins)
    fin, fout = custom_shape(p, ind + ax, [a if a is not None else b for a, b in zip(od, og)])
    na = len(ind)
    return [*fout, *fin[:na], *fout, *fin[na:]], list(fin[:na])


def backward_type(p: CustomParams, ins: list[Any], outs: list[Any]) -> tuple[list, list]:
    og, ind, od, ax = _split_backward(p, ins)
    fin, fout = custom_type(p, ind + ax, [a if a is not None else b for a, b in zip(od, og)])
    na = len(ind)
    return [*fout, *fin[:na], *fout, *fin[na:]], list(fin[:na])


def custom_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """One ``_backward_Custom`` node fed the output gradients (zeros where none flows or the
    prop's declare_backward_dependency leaves them out), the inputs and the outputs."""
    p = node.params
    na, no, nx = _counts(p)
    ids = list(range(no)), list(range(no, no + na)), list(range(no + na, 2 * no + na))
    deps = set(_ask(p, "declare_backward_dependency", *ids))
    og = [g if g is not None and k in deps else zeros_like(Entry(node, k))
          for k, g in enumerate(ograds)]
    outs = [Entry(node, k) for k in range(no)]
    b = backward_node(BACKWARD_CUSTOM, node, [*og, *node.inputs[:na], *outs, *node.inputs[na:]])
    return [Entry(b, k) for k in range(na)] + [None] * nx


# ---------------------------------------------------------------------------------------------
# Running the user's operator


def _failure(node: str, p: CustomParams, state: Any, method: str, e: Exception) -> CustomOpError:
    return CustomOpError(f"node {node!r} (Custom, op_type {p.op_type!r}): "
                         f"{type(state).__name__}.{method} raised {type(e).__name__}: {e}")


class _CustomForward(PythonCompute):
    def create_state(self, node: str, params: Any, ctx: Any, in_shapes: Sequence[Shape],
                     in_dtypes: Sequence[np.dtype]) -> Any:
        shapes = [[int(d or 0) for d in s] for s in in_shapes]
        flags = [dtype_flag(t) for t in in_dtypes]
        try:
            return params.prop.create_operator(ctx, shapes, flags)
        except Exception as e:
            raise _failure(node, params, params.prop, "create_operator", e) from e

    def run(self, node: str, params: Any, state: Any, is_train: bool, reqs: Sequence[str],
            ins: Sequence[Any], outs: Sequence[Any]) -> None:
        na = _counts(params)[0]
        try:
            state.forward(is_train=is_train, req=list(reqs), in_data=list(ins[:na]),
                          out_data=list(outs), aux=list(ins[na:]))
        except Exception as e:
            raise _failure(node, params, state, "forward", e) from e


class _CustomBackward(PythonCompute):
    uses_forward_state = True

    def run(self, node: str, params: Any, state: Any, is_train: bool, reqs: Sequence[str],
            ins: Sequence[Any], outs: Sequence[Any]) -> None:
        og, ind, od, ax = _split_backward(params, list(ins))
        try:
            state.backward(req=list(reqs), out_grad=og, in_data=ind, out_data=od,
                           in_grad=list(outs), aux=ax)
        except Exception as e:
            raise _failure(node, params, state, "backward", e) from e


FORWARD = _CustomForward()
BACKWARD = _CustomBackward()


def _forward_inputs(p: CustomParams) -> tuple[str, ...]:
    a, _, x = _names(p)
    return a + x


def _backward_inputs(p: CustomParams) -> tuple[str, ...]:
    a, o, x = _names(p)
    return (tuple(f"ograd_{n}" for n in o) + tuple(f"in_{n}" for n in a)
            + tuple(f"out_{n}" for n in o) + tuple(f"aux_{n}" for n in x))


BACKWARD_CUSTOM = register(OpDef(
    name="_backward_Custom",
    params=CustomParams,
    inputs=_backward_inputs,
    outputs=lambda p: tuple(f"{n}_grad" for n in _names(p)[0]),
    infer_shape=backward_shape,
    infer_type=backward_type,
    infer_stype=backward_stype,
    python=BACKWARD,
    differentiable=False,
    doc="The gradient of a custom operator: its prop's operator's backward.",
))

CUSTOM = register(OpDef(
    name="Custom",
    params=CustomParams,
    inputs=_forward_inputs,
    aux=lambda p: _names(p)[2],
    outputs=lambda p: _names(p)[1],
    infer_shape=custom_shape,
    infer_type=custom_type,
    infer_stype=custom_stype,
    grad=custom_grad,
    loss=lambda p: not _need_top_grad(p),
    python=FORWARD,
    doc="Applies a custom operator written in Python (``op_type``: its registered name; other "
        "keyword arguments go to the prop's constructor as strings).",
))

__all__ = ["CUSTOM", "CustomOpError", "CustomParams", "prop_class", "register_prop",
           "registered_op_types"]
