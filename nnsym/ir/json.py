"""MXNet 1.x symbol JSON, written: dmlc::JSONWriter's exact layout, byte for byte (MXNET-FACTS
1.4), so a file MXNet wrote loads and saves back identically. ``inferred`` adds what the passes
decided to each node. Loading (the string boundary) lives in ``nnsym.symbol.json_io``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from nnsym.ir.graph import Graph
from nnsym.types import shape_str

MXNET_VERSION = 10901  # files are written as MXNet 1.9.1 writes them
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")
INFERRED_PREFIX = "__inferred_"

# ---------------------------------------------------------------------------------------------
# Writing


def _q(s: str) -> str:
    """dmlc's string escaping: only \\r \\n \\\\ \\t \\" are escaped; other bytes go out raw."""
    out = s.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + out.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t") + '"'


def _ind(depth: int) -> str:
    return "  " * depth


def _obj(items: Sequence[tuple[str, str]], depth: int) -> str:
    """A multi-line object whose values are already rendered."""
    body = ", \n".join(f"{_ind(depth + 1)}{_q(k)}: {v}" for k, v in items)
    return "{\n" + body + "\n" + _ind(depth) + "}"


def _list(items: Sequence[str], depth: int, multi: bool) -> str:
    if not items:
        return "[]"
    if not multi:
        return "[" + ", ".join(items) + "]"
    return "[\n" + ", \n".join(_ind(depth + 1) + it for it in items) + "\n" + _ind(depth) + "]"


def _str_map(m: Mapping[str, str], depth: int) -> str:
    keys = sorted(m)
    if len(keys) <= 1:
        return "{" + ", ".join(f"{_q(k)}: {_q(m[k])}" for k in keys) + "}"
    body = ", \n".join(f"{_ind(depth + 1)}{_q(k)}: {_q(m[k])}" for k in keys)
    return "{\n" + body + "\n" + _ind(depth) + "}"


def _triple(a: int, b: int, c: int) -> str:
    return f"[{a}, {b}, {c}]"


def graph_to_json(g: Graph, inferred: bool = False) -> str:
    """The graph as MXNet writes it; ``inferred`` adds what the passes decided to each node."""
    idx = g.index
    extra = _inferred_attrs(g) if inferred else None
    nodes_txt = []
    for nid, node in enumerate(idx.nodes):
        items = [("op", _q(node.op_name)), ("name", _q(node.name))]
        attrs: Mapping[str, str] = node.attrs
        if extra is not None and extra[nid]:
            attrs = {**attrs, **extra[nid]}
        if attrs:
            items.append(("attrs", _str_map(attrs, 3)))
        ins = [_triple(idx.node_id(e.node), e.index, e.version) for e in node.inputs]
        items.append(("inputs", _list(ins, 3, len(ins) > 10)))
        if node.control_deps:
            deps = [str(idx.node_id(d)) for d in node.control_deps]
            items.append(("control_deps", _list(deps, 3, len(deps) > 10)))
        nodes_txt.append(_obj(items, 2))
    arg_nodes = [str(i) for i in idx.input_nodes]
    rptr = [str(r) for r in idx.row_ptr]
    heads = [_triple(idx.node_id(e.node), e.index, e.version) for e in g.outputs]
    top = [
        ("nodes", _list(nodes_txt, 1, True)),
        ("arg_nodes", _list(arg_nodes, 1, len(arg_nodes) > 10)),
        ("node_row_ptr", _list(rptr, 1, len(rptr) > 10)),
        ("heads", _list(heads, 1, len(heads) > 10)),
        ("attrs", '{"mxnet_version": ["int", ' + str(MXNET_VERSION) + "]}"),
    ]
    return _obj(top, 0)


def _fmt_list(vals: Sequence[str]) -> str:
    return "[" + ", ".join(vals) + "]"


def _inferred_attrs(g: Graph) -> list[dict[str, str]]:
    """Per node: ``__inferred_<attr>__`` strings with one value per output entry."""
    idx, a = g.index, g.attrs
    out: list[dict[str, str]] = []
    for nid in range(idx.num_nodes):
        eids = idx.output_entries(nid)
        d: dict[str, str] = {}
        if a.shape is not None:
            d["__inferred_shape__"] = _fmt_list([shape_str(a.shape[e]) for e in eids])
        if a.dtype is not None:
            d["__inferred_dtype__"] = _fmt_list(
                ["?" if a.dtype[e] is None else np.dtype(a.dtype[e]).name for e in eids]
            )
        if a.stype is not None:
            d["__inferred_storage_type__"] = _fmt_list(
                ["?" if a.stype[e] is None else a.stype[e].label for e in eids]  # type: ignore[union-attr]
            )
        if a.dispatch is not None and a.dispatch[nid] is not None:
            d["__inferred_dispatch_mode__"] = a.dispatch[nid].value  # type: ignore[union-attr]
        if a.storage_id is not None:
            d["__inferred_storage_id__"] = _fmt_list([str(a.storage_id[e]) for e in eids])
        if a.inplace is not None:
            d["__inferred_inplace__"] = _fmt_list([str(a.inplace[e]) for e in eids])
        out.append(d)
    return out
