"""Helpers for the table-driven operator tests (also usable by operator authors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.graph import Entry, Graph, GraphAttrs, Node, variable
from nnsym.ops.registry import Example, OpDef
from nnsym.passes.infer import infer_shape, infer_type


def make_inputs(op: OpDef, ex: Example, seed: int = 0) -> list[np.ndarray]:
    """Random inputs for an example: uniform in [low, high), integers where ``ex.ints`` says."""
    rng = np.random.default_rng(seed)
    out = []
    for i, shape in enumerate(ex.shapes):
        if i in ex.ints:
            lo, hi = ex.ints[i]
            a = rng.integers(lo, hi, size=shape).astype(ex.dtype)
        else:
            a = rng.uniform(ex.low, ex.high, size=shape)
            if np.issubdtype(np.dtype(ex.dtype), np.integer):
                a = np.round(a)
            a = a.astype(ex.dtype)
        out.append(a)
    return out


def single_node_graph(op: OpDef, params: Any, n_inputs: int, name: str = "node") -> Graph:
    ins = tuple(Entry(variable(f"in{i}")) for i in range(n_inputs))
    node = Node(op, name, params, ins)
    return Graph(tuple(Entry(node, i) for i in range(op.num_outputs(params))))


def infer_node(
    op: OpDef,
    params: Any,
    shapes: Sequence[Any],
    dtypes: Sequence[Any] | None = None,
) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """Shape and dtype inference of one node from its input shapes (and dtypes).

    Returns ``(in_shapes, out_shapes, in_dtypes, out_dtypes)`` with ``None`` where unknown.
    """
    g = single_node_graph(op, params, len(shapes))
    idx = g.index
    n = idx.num_entries
    var_eids = [idx.entry_id(e) for e in idx.nodes[-1].inputs]
    seeds_s: list[Any] = [None] * n
    seeds_t: list[Any] = [None] * n
    for k, eid in enumerate(var_eids):
        seeds_s[eid] = None if shapes[k] is None else tuple(shapes[k])
        if dtypes is not None and dtypes[k] is not None:
            seeds_t[eid] = np.dtype(dtypes[k])
    gs = infer_shape(Graph(g.outputs, GraphAttrs(shape=tuple(seeds_s))))
    gt = infer_type(Graph(g.outputs, GraphAttrs(dtype=tuple(seeds_t))))
    assert gs.attrs.shape is not None and gt.attrs.dtype is not None
    nid = idx.num_nodes - 1
    outs = list(idx.output_entries(nid))
    return (
        [gs.attrs.shape[e] for e in var_eids],
        [gs.attrs.shape[e] for e in outs],
        [gt.attrs.dtype[e] for e in var_eids],
        [gt.attrs.dtype[e] for e in outs],
    )


def reference_outputs(op: OpDef, params: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    assert op.reference is not None, f"{op.name} has no numpy reference"
    out = op.reference(params, *inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]
