"""The per-node block of MXNet's ``Symbol::Print`` layout, shared by ``Symbol.debug_str`` and
``Executor.debug_str``."""

from __future__ import annotations

from collections.abc import Mapping, Set

from nnsym.ir.graph import IndexedGraph, Node


def node_block(idx: IndexedGraph, node: Node, mutated: Set[int],
               attrs: Mapping[str, str]) -> list[str]:
    """The separator, ``Op:``, ``Inputs:`` (variables with MXNet's ``version``: 1 for inputs an
    operator writes) and the sorted ``Attrs:`` lines of one operator node."""
    assert node.op is not None
    lines = ["--------------------", f"Op:{node.op.name}, Name={node.name}", "Inputs:"]
    for j, e in enumerate(node.inputs):
        ver = ""
        if e.node.op is None:
            ver = f" version={1 if idx.node_id(e.node) in mutated else 0}"
        lines.append(f"\targ[{j}]={e.node.name}({e.index}){ver}")
    if attrs:
        lines.append("Attrs:")
        lines.extend(f"\t{k}={attrs[k]}" for k in sorted(attrs))
    return lines
