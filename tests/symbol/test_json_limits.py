"""Counts and nesting a file or a call can claim are bounded before anything is allocated:
``num_outputs``/``num_args`` <= 2**20 on every path (JSON, ``sym.*``, ``nd.*``), a legacy file
creates no more variables than it could describe, and deep nesting is a GraphFormatError."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import nnsym as mx
from nnsym.errors import GraphFormatError, OperatorParamError
from nnsym.ir.params import MAX_COUNT

HUGE = 2**31


def _graph(op, params, n_inputs=1, version=True):
    nodes = [{"op": "null", "name": f"x{i}", "inputs": []} for i in range(n_inputs)]
    nodes.append({"op": op, "name": "big", "attrs": params,
                  "inputs": [[i, 0, 0] for i in range(n_inputs)]})
    doc = {"nodes": nodes, "arg_nodes": list(range(n_inputs)), "heads": [[n_inputs, 0, 0]]}
    if version:
        doc["attrs"] = {"mxnet_version": ["int", 10901]}
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("op", "params"),
    [
        ("SliceChannel", {"num_outputs": "2147483648"}),
        ("split", {"num_outputs": "2147483648"}),
        ("Concat", {"num_args": "2147483648"}),
        ("add_n", {"num_args": "2147483648"}),
        ("ElementWiseSum", {"num_args": "2147483648"}),
        ("UpSampling", {"num_args": "2147483648", "sample_type": "nearest", "scale": "2"}),
    ],
)
def test_json_huge_counts_rejected(op, params):
    with pytest.raises(OperatorParamError) as ei:
        mx.sym.load_json(_graph(op, params))
    msg = str(ei.value)
    assert "'big'" in msg and "2147483648" in msg and str(MAX_COUNT) in msg


def test_json_huge_count_without_version_rejected():
    # no mxnet_version: the loader would otherwise create 2**31 - 1 variables
    with pytest.raises(OperatorParamError, match="2147483648"):
        mx.sym.load_json(_graph("add_n", {"num_args": "2147483648"}, version=False))


def test_json_million_variables_not_invented():
    text = _graph("add_n", {"num_args": "1000000"}, version=False)
    assert len(text) < 300
    with pytest.raises(GraphFormatError, match=r"node 1 field 'inputs'.*add_n \('big'\)"):
        mx.sym.load_json(text)


def test_json_legacy_missing_inputs_still_created():
    text = _graph("FullyConnected", {"num_hidden": "3"}, version=False)
    s = mx.sym.load_json(text)
    assert s.list_arguments() == ["x0", "big_weight", "big_bias"]


def test_json_count_at_limit_accepted():
    doc = json.loads(_graph("SliceChannel", {"num_outputs": str(MAX_COUNT)}))
    doc["heads"] = [[1, MAX_COUNT - 1, 0]]
    s = mx.sym.load_json(json.dumps(doc))
    assert s.list_outputs() == [f"big_output{MAX_COUNT - 1}"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: mx.sym.SliceChannel(mx.sym.var("x"), num_outputs=HUGE, name="sc"),
        lambda: mx.sym.split(mx.sym.var("x"), num_outputs=HUGE),
        lambda: mx.sym.Concat(mx.sym.var("x"), num_args=HUGE),
        lambda: mx.sym.add_n(mx.sym.var("x"), num_args=HUGE),
        lambda: mx.sym.ElementWiseSum(mx.sym.var("x"), num_args=HUGE),
        lambda: mx.sym.UpSampling(mx.sym.var("x"), num_args=HUGE, sample_type="nearest",
                                  scale=2),
    ],
)
def test_sym_huge_counts_rejected(make):
    with pytest.raises(OperatorParamError, match=f"{HUGE}.*<= {MAX_COUNT}"):
        make()


def test_sym_huge_count_error_names_the_node():
    with pytest.raises(OperatorParamError, match=r"SliceChannel \(node 'sc'\).*num_outputs"):
        mx.sym.SliceChannel(mx.sym.var("x"), num_outputs=HUGE, name="sc")


@pytest.mark.parametrize(
    "make",
    [
        lambda x: mx.nd.SliceChannel(x, num_outputs=HUGE),
        lambda x: mx.nd.split(x, num_outputs=HUGE),
        lambda x: mx.nd.Concat(x, num_args=HUGE),
        lambda x: mx.nd.add_n(x, num_args=HUGE),
        lambda x: mx.nd.ElementWiseSum(x, num_args=HUGE),
        lambda x: mx.nd.UpSampling(x, num_args=HUGE, sample_type="nearest", scale=2),
    ],
)
def test_nd_huge_counts_rejected(make):
    x = mx.nd.array(np.ones((1, 2, 2, 2), np.float32))
    with pytest.raises(OperatorParamError, match=f"{HUGE}.*<= {MAX_COUNT}"):
        make(x)


def _with_nodes(inputs_value: str) -> str:
    return ('{"nodes": [{"op": "null", "name": "x", "inputs": ' + inputs_value
            + '}], "heads": [[0, 0, 0]]}')


@pytest.mark.parametrize(
    "text",
    [
        "[" * 2000 + "]" * 2000,
        '{"nodes": ' + "[" * 100_000,
        _with_nodes("[" * 2000 + "]" * 2000),
        '{"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": [[0, 0, 0]], '
        '"attrs": {"deep": ' + "{\"a\": " * 3000 + "1" + "}" * 3000 + "}}",
        '{"nodes": [{"op": "null", "name": "x", "inputs": [], "attrs": {"a": '
        + "[" * 5000 + "]" * 5000 + '}}], "heads": [[0, 0, 0]]}',
    ],
)
@pytest.mark.parametrize("recursion_limit", [None, 2**14])
def test_deep_nesting_is_graph_format_error(text, recursion_limit):
    # 2**14: what mypy (and other tools run in-process) leave behind; the loader must not
    # depend on the parser's recursion guard to refuse deep nesting
    old = sys.getrecursionlimit()
    if recursion_limit is not None:
        sys.setrecursionlimit(recursion_limit)
    try:
        with pytest.raises(GraphFormatError):
            mx.sym.load_json(text)
    finally:
        sys.setrecursionlimit(old)


def test_nesting_just_below_parser_limit_is_graph_format_error():
    # parses, then the error message must not recurse through the nested value
    for depth in (50, 500, 900):
        with pytest.raises(GraphFormatError):
            mx.sym.load_json(_with_nodes("[" + "[" * depth + "]" * depth + "]"))
        with pytest.raises(GraphFormatError):
            mx.sym.load_json('{"nodes": [{"op": "null", "name": ' + "[" * depth + "]" * depth
                             + ', "inputs": []}], "heads": [[0, 0, 0]]}')


def test_deep_nesting_file(tmp_path):
    p = tmp_path / "deep-symbol.json"
    p.write_text("[" * 2000 + "]" * 2000)
    with pytest.raises(GraphFormatError, match=r"deep-symbol\.json"):
        mx.sym.load(p)
