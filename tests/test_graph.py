"""The IR: post-order node numbering, entry ids equal to node_row_ptr offsets, immutability."""

from __future__ import annotations

import dataclasses
import json

import networkx as nx
import pytest

from nnsym import sym
from nnsym.errors import GraphFormatError
from nnsym.ir.graph import Entry, Graph, IndexedGraph, Node, dfs_post_order, variable
from nnsym.ops import get_op


def test_entry_ids_follow_node_row_ptr_of_json():
    data = sym.Variable("data")
    bn = sym.BatchNorm(data, name="bn")
    parts = sym.SliceChannel(bn, num_outputs=2, name="sp")
    out = sym.Group([parts[0], sym.Dropout(parts[1], name="drop")])
    idx = out.index
    doc = json.loads(out.tojson())
    assert idx.row_ptr == doc["node_row_ptr"]
    for nid, node in enumerate(idx.nodes):
        assert [idx.entry_id(nid, i) for i in range(node.num_outputs())] == list(
            range(doc["node_row_ptr"][nid], doc["node_row_ptr"][nid + 1])
        )
    assert idx.input_nodes == doc["arg_nodes"]


def test_nodes_are_immutable_and_hash_by_identity():
    a, b = variable("x"), variable("x")
    assert a != b and len({a, b}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "y"  # type: ignore[misc]


def test_post_order_visits_inputs_first_and_each_node_once():
    x = variable("x")
    op = get_op("FullyConnected")
    p, _ = op.parse_params({"num_hidden": 2})
    w = variable("w")
    n1 = Node(op, "a", p, (Entry(x), Entry(w)), {})
    n2 = Node(op, "b", p, (Entry(n1), Entry(w)), {})
    order = dfs_post_order([Entry(n2), Entry(n1)])
    assert [n.name for n in order] == ["x", "w", "a", "b"]


def test_reader_counts_include_graph_outputs():
    x = sym.Variable("x")
    y = x + x
    idx = sym.Group([y, x]).index
    counts = idx.reader_counts()
    assert counts[idx.entry_id(idx.input_nodes[0])] == 3


def test_cycle_is_reported():
    # Immutable nodes cannot form a cycle by construction; control deps checked the same way.
    x = variable("x")
    g = Graph((Entry(x),))
    assert g.index.num_nodes == 1
    with pytest.raises(GraphFormatError):
        bad = json.dumps(
            {
                "nodes": [
                    {"op": "null", "name": "x", "inputs": []},
                    {"op": "relu", "name": "r", "inputs": [[1, 0, 0]]},
                ],
                "arg_nodes": [0],
                "heads": [[1, 0, 0]],
            }
        )
        sym.load_json(bad)


def to_networkx(idx: IndexedGraph) -> nx.DiGraph:
    """A networkx DiGraph of an indexed graph (node ids, with op and name)."""
    g = nx.DiGraph()
    for i, n in enumerate(idx.nodes):
        g.add_node(i, op=n.op_name, name=n.name)
        for e in n.inputs:
            g.add_edge(idx.node_id(e.node), i, index=e.index)
    return g


def test_networkx_export():
    s = sym.FullyConnected(sym.Variable("data"), num_hidden=3, name="fc")
    g = to_networkx(s.index)
    assert g.number_of_nodes() == 4 and g.number_of_edges() == 3
