"""``Executor.debug_str()``: the bound graph in MXNet's ``Symbol::Print`` layout, then the memory
plan's total (MXNet's ``Total N MB allocated`` line, plus the exact byte count)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from nnsym.ir.graph import IndexedGraph
from nnsym.ir.printing import node_block
from nnsym.passes.memory import MemoryPlan
from nnsym.types import DispatchMode, SType


def debug_str(idx: IndexedGraph, plan: MemoryPlan, stypes: Sequence[SType] | None = None,
              modes: Sequence[DispatchMode | None] | None = None) -> str:
    """MXNet's layout; nodes with sparse storage or a dispatch other than the dense kernel add a
    ``Storage:`` block (inputs' and outputs' storage types, dispatch mode), which MXNet's
    printout lacks."""
    lines = ["Symbol Outputs:"]
    for i, eid in enumerate(idx.outputs):
        nid = _node_of(idx, eid)
        lines.append(f"\toutput[{i}]={idx.nodes[nid].name}({eid - idx.row_ptr[nid]})")
    mutated = idx.mutable_input_nodes
    printed: set[int] = set()
    for node in idx.nodes:
        if node.op is None:
            continue
        for e in node.inputs:
            vid = idx.node_id(e.node)
            if e.node.op is None and vid not in printed:
                printed.add(vid)
                lines.append(f"Variable:{e.node.name}")
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("__")}
        lines.extend(node_block(idx, node, mutated, attrs))
        nid = idx.node_id(node)
        if stypes is not None and modes is not None:
            ins = [stypes[idx.entry_id(e)] for e in node.inputs]
            outs = [stypes[o] for o in idx.output_entries(nid)]
            if modes[nid] != DispatchMode.FCOMPUTE or any(
                    s != SType.DEFAULT for s in ins + outs):
                mode = modes[nid]
                lines.append("Storage:")
                lines.append(f"\tinputs=[{', '.join(s.label for s in ins)}]")
                lines.append(f"\toutputs=[{', '.join(s.label for s in outs)}]")
                lines.append(f"\tdispatch={mode.value if mode is not None else '?'}")
        if node.control_deps:
            lines.append("Control deps:")
            lines.extend(f"\tcdep[{k}]={d.name}" for k, d in enumerate(node.control_deps))
    total = plan.total_bytes
    lines.append(f"Total {total >> 20} MB allocated")
    lines.append(f"Total {total} bytes allocated in {len(plan.block_bytes)} blocks")
    return "\n".join(lines) + "\n"


def _node_of(idx: IndexedGraph, eid: int) -> int:
    return bisect.bisect_right(idx.row_ptr, eid) - 1
