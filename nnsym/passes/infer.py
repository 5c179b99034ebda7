"""One fixed-point inference engine (NNVM's InferAttr) used for shapes and dtypes.

The engine alternates forward and backward sweeps over the nodes. At each node it hands the
operator's rule what is known about every input and output, merges what the rule returns back
into the per-entry state (inputs too: that is how weights get their shapes from the data), and
stops when a forward and a backward sweep in a row learn nothing. Values already present in
``g.attrs`` (the caller's seeds) and variables' ``__shape__``/``__dtype__`` attributes seed it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import DTypeError, NNSymError, ShapeError, ValueShapedError, node_error
from nnsym.ir.graph import Graph, Node
from nnsym.ir.opdef import OpDef, Rule, RuleError, merge_shape, same_dtype
from nnsym.ir.params import _parse_tuple_text
from nnsym.passes.manager import graph_pass
from nnsym.types import check_bytes, check_dims, dtype_of, from_mx_shape, shape_str


@dataclass(frozen=True)
class AttrKind:
    """What differs between the shape and dtype passes."""

    name: str
    rule: Callable[[OpDef], Rule | None]
    merge: Callable[[Any, Any], Any]
    unknown: Callable[[Any], int]
    var_key: str
    parse_var: Callable[[str], Any]
    error: type[NNSymError]
    fmt: Callable[[Any], str]


def _unknown_dims(s: Any) -> int:
    if s is None:
        return 1
    return sum(1 for d in s if d is None)


def _merge_dtype(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise RuleError(f"expected {a}, got {b}")


def _parse_var_shape(text: str) -> Any:
    return from_mx_shape(_parse_tuple_text(text, allow_none=False))


SHAPE = AttrKind(
    name="shape",
    rule=lambda op: op.infer_shape,
    merge=merge_shape,
    unknown=_unknown_dims,
    var_key="__shape__",
    parse_var=_parse_var_shape,
    error=ShapeError,
    fmt=shape_str,
)

DTYPE = AttrKind(
    name="dtype",
    rule=lambda op: op.infer_type or same_dtype,
    merge=_merge_dtype,
    unknown=lambda t: 1 if t is None else 0,
    var_key="__dtype__",
    parse_var=lambda s: dtype_of(int(s)),
    error=DTypeError,
    fmt=lambda t: "?" if t is None else np.dtype(t).name,
)


def infer_attr(g: Graph, kind: AttrKind) -> list[Any]:
    """Run the fixed point; returns one value per entry (``None`` where still unknown)."""
    idx = g.index
    nodes, rptr, in_entries = idx.nodes, idx.row_ptr, idx.input_entries
    seeded = getattr(g.attrs, kind.name)
    vals: list[Any] = list(seeded) if seeded is not None else [None] * idx.num_entries
    n = len(nodes)
    finished = [False] * n

    for nid in idx.input_nodes:
        node = nodes[nid]
        text = node.attrs.get(kind.var_key)
        if text is not None:
            eid = rptr[nid]
            try:
                hint = kind.parse_var(text)
            except (ValueError, NNSymError) as e:
                raise node_error(
                    kind.error, node.name, "null", f"bad {kind.var_key} attribute {text!r}: {e}"
                ) from None
            try:
                vals[eid] = kind.merge(vals[eid], hint)  # NOTE: np.dtype(x) == None is True
            except RuleError:
                pass  # a given value that contradicts the attribute wins, as in MXNet

    def step(nid: int) -> None:
        node = nodes[nid]
        if node.op is None:
            finished[nid] = kind.unknown(vals[rptr[nid]]) == 0
            return
        rule = kind.rule(node.op)
        if rule is None:
            return
        ins_e = in_entries[nid]
        outs_e = range(rptr[nid], rptr[nid + 1])
        ins = [vals[e] for e in ins_e]
        outs = [vals[e] for e in outs_e]
        try:
            new_ins, new_outs = rule(node.params, ins, outs)
        except RuleError as err:
            raise _error(kind, node, ins, str(err)) from err.__cause__  # a user's exception
        for pos, (eid, new) in enumerate(zip(ins_e, new_ins)):
            if new is not None and (vals[eid] is None or new != vals[eid]):
                try:
                    vals[eid] = kind.merge(vals[eid], new)
                except RuleError:
                    nm = _input_name(node, pos)
                    raise _error(
                        kind,
                        node,
                        ins,
                        f"input '{nm}' has {kind.name} {kind.fmt(vals[eid])} but the operator "
                        f"needs {kind.fmt(new)}",
                    ) from None
        for pos, (eid, new) in enumerate(zip(outs_e, new_outs)):
            if new is not None and (vals[eid] is None or new != vals[eid]):
                try:
                    vals[eid] = kind.merge(vals[eid], new)
                except RuleError:
                    raise _error(
                        kind,
                        node,
                        ins,
                        f"output {pos} has {kind.name} {kind.fmt(vals[eid])} but the inputs give "
                        f"{kind.fmt(new)}",
                    ) from None
        finished[nid] = all(kind.unknown(vals[x]) == 0 for x in (*ins_e, *outs_e))

    # At least one full sweep even when everything is seeded: it checks consistency.
    prev = sum(kind.unknown(v) for v in vals)
    stale = 0
    sweep = 0
    while True:
        order = range(n) if sweep % 2 == 0 else range(n - 1, -1, -1)
        for nid in order:
            if not finished[nid]:
                step(nid)
        sweep += 1
        count = sum(kind.unknown(v) for v in vals)
        stale = stale + 1 if count >= prev else 0
        prev = count
        if count == 0 or stale >= 2:
            return vals


def _input_name(node: Node, pos: int) -> str:
    names = node.input_names()
    return names[pos] if pos < len(names) else f"#{pos}"


def _source(node: Node, pos: int) -> str:
    """What feeds input ``pos``: ``variable 'x'`` or ``output 0 of 'fc1'``."""
    if pos >= len(node.inputs):
        return ""
    e = node.inputs[pos]
    if e.node.op is None:
        return f" (variable '{e.node.name}')"
    return f" (output {e.index} of '{e.node.name}')"


def _error(kind: AttrKind, node: Node, ins: list[Any], msg: str) -> NNSymError:
    op_name = node.op.name if node.op is not None else "null"
    return node_error(
        kind.error,
        node.name,
        op_name,
        msg,
        [(_input_name(node, i), f"{kind.fmt(v)}{_source(node, i)}") for i, v in enumerate(ins)],
    )


def _check_sizes(g: Graph, shapes: Sequence[Any], dtypes: Sequence[Any] | None) -> None:
    """Every entry's dims and element count fit in int64, and so does its byte size where its
    dtype is known: a ShapeError naming the node that produces it otherwise (no array or
    kernel index could hold it)."""
    idx = g.index
    for nid, node in enumerate(idx.nodes):
        for k, eid in enumerate(range(idx.row_ptr[nid], idx.row_ptr[nid + 1])):
            try:
                check_dims(shapes[eid])
                if dtypes is not None:
                    check_bytes(shapes[eid], dtypes[eid])
            except ShapeError as e:
                op_name = node.op.name if node.op is not None else "null"
                what = f"output {k}" if node.op is not None else "variable"
                raise node_error(ShapeError, node.name, op_name, f"{what}: {e}") from None


@graph_pass(provides=("shape",))
def infer_shape(g: Graph) -> Graph:
    """Shapes of every entry, as far as they can be decided (``None`` = unknown)."""
    shapes = infer_attr(g, SHAPE)
    _check_sizes(g, shapes, g.attrs.dtype)
    return g.with_attrs(shape=tuple(shapes))


@graph_pass(provides=("dtype",))
def infer_type(g: Graph) -> Graph:
    """Dtypes of every entry, as far as they can be decided (``None`` = unknown)."""
    dtypes = infer_attr(g, DTYPE)
    if g.attrs.shape is not None:
        _check_sizes(g, g.attrs.shape, dtypes)
    return g.with_attrs(dtype=tuple(dtypes))


@graph_pass()
def require_static_shapes(g: Graph) -> Graph:
    """Refuse a graph with a value-shaped operator (``OpDef.value_shaped``): the plan sizes every
    buffer before any value exists, so such a node can run only imperatively (``nd``)."""
    for node in g.index.nodes:
        if node.op is not None and node.op.value_shaped:
            raise node_error(
                ValueShapedError, node.name, node.op.name,
                "its outputs' sizes depend on the values of its inputs, so a bound graph cannot "
                "plan them; call it imperatively (nd.contrib.*) on concrete arrays instead")
    return g
