"""The graph IR: immutable nodes and entries, a graph of output entries, and its indexed form.

``Node`` hashes by identity (NNVM's NodePtr). ``Graph.index`` orders nodes as MXNet's JSON does
(iterative post-order DFS from the heads, inputs then control deps) and numbers entries so that
``entry_id(nid, i) == node_row_ptr[nid] + i``. Inferred attributes live in ``GraphAttrs`` as
tuples indexed by entry id (shape, dtype, stype, inplace, storage id) or node id (dispatch).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from nnsym.errors import GraphFormatError
from nnsym.ir.opdef import OpDef, PythonCompute, get_op
from nnsym.ir.storage import StorageKernel
from nnsym.types import DispatchMode, Shape, SType

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, eq=False, slots=True)
class Node:
    """An operator application, or a variable when ``op`` is None.

    ``attrs`` holds MXNet's string attributes: the explicitly given parameters in the exact
    strings they were given in, plus hidden and user keys (``__shape__``, ``__lr_mult__``...).
    ``params`` is the typed, parsed form that everything past the JSON boundary reads.
    """

    op: OpDef | None
    name: str
    params: Any = None
    inputs: tuple[Entry, ...] = ()
    attrs: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    control_deps: tuple[Node, ...] = ()

    @property
    def is_variable(self) -> bool:
        return self.op is None

    @property
    def op_name(self) -> str:
        return "null" if self.op is None else self.op.name

    def num_outputs(self) -> int:
        return 1 if self.op is None else self.op.num_outputs(self.params)

    def num_visible(self) -> int:
        return 1 if self.op is None else self.op.num_visible(self.params)

    def input_names(self) -> tuple[str, ...]:
        return () if self.op is None else self.op.input_names(self.params)

    def output_names(self) -> tuple[str, ...]:
        return ("output",) if self.op is None else self.op.output_names(self.params)

    def __repr__(self) -> str:
        return f"Node({self.op_name}, {self.name!r})"


class Entry(NamedTuple):
    """Output ``index`` of ``node``; ``version`` counts mutations (aux states), as in NNVM."""

    node: Node
    index: int = 0  # type: ignore[assignment]  # NOTE: shadows tuple.index, as NNVM names it
    version: int = 0


def variable(name: str, attrs: Mapping[str, str] | None = None) -> Node:
    return Node(None, name, None, (), MappingProxyType(dict(attrs or {})))


@dataclass(frozen=True)
class GraphAttrs:
    """Typed inferred attributes; a field is None until the pass that provides it has run."""

    shape: tuple[Shape | None, ...] | None = None
    dtype: tuple[np.dtype | None, ...] | None = None
    stype: tuple[SType | None, ...] | None = None
    dispatch: tuple[DispatchMode | None, ...] | None = None
    # per node: the storage kernel of an fcompute_ex decision, or the PythonCompute of an
    # operator that is Python code (None otherwise)
    stype_kernel: tuple[StorageKernel | PythonCompute | None, ...] | None = None
    inplace: tuple[int, ...] | None = None
    storage_id: tuple[int, ...] | None = None

    def present(self) -> frozenset[str]:
        return frozenset(
            f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None
        )


FIELDS = frozenset(f.name for f in dataclasses.fields(GraphAttrs))


@dataclass(frozen=True, eq=False)
class Graph:
    """Output entries plus inferred attributes; structural changes make a new Graph."""

    outputs: tuple[Entry, ...]
    attrs: GraphAttrs = GraphAttrs()

    @property
    def index(self) -> IndexedGraph:
        idx = self.__dict__.get("_index")
        if idx is None:
            idx = IndexedGraph(self.outputs)
            object.__setattr__(self, "_index", idx)
        return idx

    def with_attrs(self, **kw: Any) -> Graph:
        g = Graph(self.outputs, dataclasses.replace(self.attrs, **kw))
        object.__setattr__(g, "_index", self.index)
        return g


def dfs_post_order(heads: Sequence[Entry]) -> list[Node]:
    """Iterative post-order DFS over inputs then control deps; each node once (by identity)."""
    order: list[Node] = []
    state: dict[int, int] = {}  # id(node) -> 1 visiting, 2 done
    for head in heads:
        if state.get(id(head.node)) == 2:
            continue
        stack: list[tuple[Node, Iterator[Node]]] = [(head.node, _children(head.node))]
        state[id(head.node)] = 1
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                state[id(node)] = 2
                order.append(node)
                continue
            st = state.get(id(child))
            if st == 2:
                continue
            if st == 1:
                raise GraphFormatError(f"graph has a cycle through node '{child.name}'")
            state[id(child)] = 1
            stack.append((child, _children(child)))
    return order


def _children(node: Node) -> Iterator[Node]:
    for e in node.inputs:
        yield e.node
    yield from node.control_deps


class IndexedGraph:
    """Nodes in JSON order, entry ids by ``row_ptr``, and the lookups passes need."""

    def __init__(self, outputs: Sequence[Entry]):
        self.nodes: list[Node] = dfs_post_order(outputs)
        self._nid = {id(n): i for i, n in enumerate(self.nodes)}
        rptr = [0]
        for n in self.nodes:
            rptr.append(rptr[-1] + n.num_outputs())
        self.row_ptr: list[int] = rptr
        self.outputs: list[int] = [self.entry_id(e) for e in outputs]
        self.input_nodes: list[int] = [i for i, n in enumerate(self.nodes) if n.op is None]
        # node id -> entry ids of its inputs, precomputed for the passes' inner loops
        self.input_entries: list[list[int]] = [
            [rptr[self._nid[id(e.node)]] + e.index for e in n.inputs] for n in self.nodes
        ]
        mutable: set[int] = set()
        for n in self.nodes:
            if n.op is not None and n.op.aux:
                for i in n.op.aux_indices(n.params):
                    if i < len(n.inputs) and n.inputs[i].node.op is None:
                        mutable.add(self._nid[id(n.inputs[i].node)])
        self.mutable_input_nodes: frozenset[int] = frozenset(mutable)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_entries(self) -> int:
        return self.row_ptr[-1]

    def node_id(self, node: Node) -> int:
        return self._nid[id(node)]

    def entry_id(self, e: Entry | int, index: int = 0) -> int:
        if isinstance(e, int):
            return self.row_ptr[e] + index
        return self.row_ptr[self._nid[id(e.node)]] + e.index

    def output_entries(self, nid: int) -> range:
        return range(self.row_ptr[nid], self.row_ptr[nid + 1])

    def reader_counts(self) -> list[int]:
        """How many node inputs (and graph outputs) read each entry."""
        counts = [0] * self.num_entries
        for ins in self.input_entries:
            for eid in ins:
                counts[eid] += 1
        for eid in self.outputs:
            counts[eid] += 1
        return counts

    def is_variable_entry(self, eid: int) -> bool:
        nid = bisect.bisect_right(self.row_ptr, eid) - 1
        return self.nodes[nid].op is None



def zeros_like(x: Entry) -> Entry:
    """A ``zeros_like`` node of ``x`` (a gradient where none flows)."""
    op = get_op("zeros_like")
    params, _ = op.parse_params({})
    return Entry(Node(op, f"{x.node.name}_zeros_like", params, (x,)), 0)
