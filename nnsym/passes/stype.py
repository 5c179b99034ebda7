"""Storage-type inference: every entry's storage type and every node's dispatch mode.

Variables take the storage type given for them (``infer_storage_type(**stypes)``, an executor's
``stype_dict``), else their ``__storage_type__`` attribute, else ``default``; they dispatch as
``variable``. Operator nodes, in topological order, take their operator's rule
(``nnsym.ops.common.stype.infer_storage``): every input is known by then, so one walk decides.
"""

from __future__ import annotations

from nnsym.errors import StorageTypeError, node_error
from nnsym.ir.graph import Graph
from nnsym.ir.opdef import PythonCompute
from nnsym.ir.storage import StorageKernel
from nnsym.ops.common.stype import infer_storage
from nnsym.passes.manager import graph_pass
from nnsym.types import DispatchMode, SType


@graph_pass(provides=("stype", "dispatch", "stype_kernel"))
def infer_storage_type(g: Graph) -> Graph:
    idx = g.index
    nodes, rptr = idx.nodes, idx.row_ptr
    seeded = g.attrs.stype
    vals: list[SType | None] = list(seeded) if seeded is not None else [None] * idx.num_entries
    modes: list[DispatchMode | None] = [None] * len(nodes)
    kernels: list[StorageKernel | PythonCompute | None] = [None] * len(nodes)
    for nid, node in enumerate(nodes):
        if node.op is None:
            eid = rptr[nid]
            text = node.attrs.get("__storage_type__")
            if text is not None:
                try:
                    hint = SType.parse(int(text) if text.lstrip("-").isdigit() else text)
                except ValueError as e:
                    raise node_error(StorageTypeError, node.name, "null",
                                     f"bad __storage_type__ attribute {text!r}: {e}") from None
                if vals[eid] is None:
                    vals[eid] = hint
            if vals[eid] is None:
                vals[eid] = SType.DEFAULT
            modes[nid] = DispatchMode.VARIABLE
            continue
        ins = tuple(vals[e] or SType.DEFAULT for e in idx.input_entries[nid])
        dec = infer_storage(node.op, node.params, ins)
        for k, st in enumerate(dec.outs):
            vals[rptr[nid] + k] = st
        modes[nid] = dec.dispatch
        kernels[nid] = dec.kernel
    return g.with_attrs(stype=tuple(vals), dispatch=tuple(modes), stype_kernel=tuple(kernels))
