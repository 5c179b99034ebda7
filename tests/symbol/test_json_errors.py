"""Malformed symbol JSON is rejected with GraphFormatError naming the node index and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnsym import sym
from nnsym.errors import GraphFormatError, OperatorParamError

GOOD = json.loads((Path(__file__).parent.parent / "golden" / "mlp-symbol.json").read_text())


def mutated(fn):
    obj = json.loads(json.dumps(GOOD))
    fn(obj)
    return json.dumps(obj)


def _set(path, value):
    def fn(obj):
        cur = obj
        for k in path[:-1]:
            cur = cur[k]
        cur[path[-1]] = value

    return fn


def _del(path):
    def fn(obj):
        cur = obj
        for k in path[:-1]:
            cur = cur[k]
        del cur[path[-1]]

    return fn


BAD = [
    ("not json", "{nodes: ", "not valid JSON"),
    ("top not object", "[1, 2]", "top level"),
    ("missing nodes", mutated(_del(["nodes"])), "'nodes'"),
    ("missing heads", mutated(_del(["heads"])), "'heads'"),
    ("unknown top key", mutated(_set(["extra"], 1)), "unknown top-level"),
    ("missing op", mutated(_del(["nodes", 3, "op"])), "node 3 field 'op'"),
    ("missing name", mutated(_del(["nodes", 3, "name"])), "node 3 field 'name'"),
    ("missing inputs", mutated(_del(["nodes", 3, "inputs"])), "node 3 field 'inputs'"),
    ("unknown node key", mutated(_set(["nodes", 3, "shape"], "x")), "node 3"),
    (
        "forward reference",
        mutated(_set(["nodes", 3, "inputs", 0], [5, 0, 0])),
        "node 3 field 'inputs'",
    ),
    (
        "self reference",
        mutated(_set(["nodes", 3, "inputs", 0], [3, 0, 0])),
        "node 3 field 'inputs'",
    ),
    ("negative reference", mutated(_set(["nodes", 3, "inputs", 0], [-1, 0, 0])), "node 3"),
    ("bad output index", mutated(_set(["nodes", 3, "inputs", 0], [0, 1, 0])), "no output 1"),
    ("input not a triple", mutated(_set(["nodes", 3, "inputs", 0], "a")), "node 3 field 'inputs'"),
    ("op not a string", mutated(_set(["nodes", 3, "op"], 7)), "node 3 field 'op'"),
    ("unknown op", mutated(_set(["nodes", 3, "op"], "NoSuchOp")), "node 3 field 'op'"),
    (
        "attr value not string",
        mutated(_set(["nodes", 3, "attrs", "num_hidden"], 128)),
        "node 3 field 'attrs'",
    ),
    ("too few inputs", mutated(_set(["nodes", 3, "inputs"], [[0, 0, 0]])), "node 3 field 'inputs'"),
    ("variable with inputs", mutated(_set(["nodes", 1, "inputs"], [[0, 0, 0]])), "node 1"),
    ("head out of range", mutated(_set(["heads"], [[99, 0, 0]])), "heads"),
    ("head bad index", mutated(_set(["heads"], [[9, 5, 0]])), "heads"),
    ("nodes not a list", mutated(_set(["nodes"], {})), "nodes"),
    ("node not an object", mutated(_set(["nodes", 2], 5)), "node 2"),
    ("bad version", mutated(_set(["attrs", "mxnet_version"], "x")), "mxnet_version"),
]


@pytest.mark.parametrize(("text", "needle"), [pytest.param(t, n, id=i) for i, t, n in BAD])
def test_malformed_json_is_rejected_clearly(text, needle):
    with pytest.raises(GraphFormatError) as info:
        sym.load_json(text)
    assert needle in str(info.value)


def test_bad_parameter_in_json_names_node_and_parameter():
    text = mutated(_set(["nodes", 3, "attrs", "num_hidden"], "many"))
    with pytest.raises(OperatorParamError) as info:
        sym.load_json(text)
    msg = str(info.value)
    assert "fc1" in msg and "num_hidden" in msg and "FullyConnected" in msg


def test_unknown_parameter_in_json_lists_allowed_ones():
    text = mutated(_set(["nodes", 3, "attrs", "num_hiden"], "3"))
    with pytest.raises(OperatorParamError) as info:
        sym.load_json(text)
    assert "num_hiden" in str(info.value) and "num_hidden" in str(info.value)


def test_two_element_entries_and_missing_optional_keys_load():
    def fn(obj):
        for n in obj["nodes"]:
            n["inputs"] = [e[:2] for e in n["inputs"]]
        del obj["node_row_ptr"]
        del obj["arg_nodes"]

    s = sym.load_json(mutated(fn))
    assert s.list_arguments() == [
        "data",
        "fc1_weight",
        "fc1_bias",
        "fc2_weight",
        "fc2_bias",
        "softmax_label",
    ]


def test_load_reports_file_name(tmp_path):
    p = tmp_path / "bad-symbol.json"
    p.write_text("[]")
    with pytest.raises(GraphFormatError) as info:
        sym.load(p)
    assert "bad-symbol.json" in str(info.value)
