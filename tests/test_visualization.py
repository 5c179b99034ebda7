"""nnsym.visualization: MXNet's ``mx.viz.print_summary`` and ``mx.viz.plot_network``.

Every expected table and DOT text below was produced by MXNet 1.9.1 (``~/mxref``, with the
``graphviz`` 0.8.4 Python package for plot_network's source) on the same networks: the MLP
and conv net built with ``mx.sym`` exactly as ``_mlp()`` / ``_convnet()`` build them with
``nnsym.sym``, the branchy net exported with ``nnsym``'s ``tojson()`` and loaded with
``mx.sym.load_json``, ResNet-18 from ``tests/golden/resnet18_v1-symbol.json``; then
``mx.viz.print_summary(sym, shape=...)`` (stdout captured, trailing spaces stripped here) and
``mx.viz.plot_network(sym, shape=...).source``. The only change to MXNet's DOT text: its labels
hold raw newlines, which nnsym writes as the DOT escape ``\\n`` (same rendering).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from nnsym import sym
from nnsym import visualization as viz
from nnsym.errors import NNSymError, ShapeError


@pytest.fixture(autouse=True)
def _nnsym_digraph(monkeypatch):
    """These tests check nnsym's own Digraph; with the graphviz package installed,
    plot_network would return a graphviz.Digraph (tests/test_visualization_graphviz.py)."""
    monkeypatch.setattr(viz, "_graphviz", lambda: None)

GOLDEN = Path(__file__).parent / "golden"
DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(DOT is None, reason="Graphviz's dot program is not on PATH")


def _mlp():
    data = sym.Variable("data")
    fc1 = sym.FullyConnected(data, num_hidden=128, name="fc1")
    act1 = sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = sym.FullyConnected(act1, num_hidden=10, name="fc2")
    return sym.SoftmaxOutput(fc2, name="softmax")


def _convnet():
    x = sym.Variable("data")
    c1 = sym.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv1")
    b1 = sym.BatchNorm(c1, fix_gamma=False, name="bn1")
    r1 = sym.Activation(b1, act_type="relu", name="relu1")
    p1 = sym.Pooling(r1, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    f = sym.Flatten(p1, name="flat")
    fc = sym.FullyConnected(f, num_hidden=10, name="fc")
    return sym.SoftmaxOutput(fc, name="softmax")


def _branchy():
    """Two branches (strided conv without bias; 1x1 conv then a grouped conv), Concat,
    BatchNorm, LeakyReLU, a global pool, FullyConnected on a 4-d input."""
    x = sym.Variable("data")
    a = sym.Convolution(x, kernel=(3, 3), num_filter=16, stride=(2, 2), no_bias=True, name="ca")
    b = sym.Convolution(x, kernel=(1, 1), num_filter=8, stride=(2, 2), pad=(0, 0), name="cb")
    b = sym.Convolution(b, kernel=(3, 3), num_filter=16, num_group=4, pad=(1, 1), name="cg")
    a = sym.Pooling(a, kernel=(2, 2), stride=(1, 1), pad=(1, 1), pool_type="avg", name="pa")
    cat = sym.Concat(a, b, dim=1, name="cat")
    bn = sym.BatchNorm(cat, name="bn")
    lr = sym.LeakyReLU(bn, act_type="leaky", slope=0.1, name="lrelu")
    gp = sym.Pooling(lr, global_pool=True, kernel=(1, 1), pool_type="max", name="gpool")
    fc = sym.FullyConnected(gp, num_hidden=5, name="fc")
    return sym.SoftmaxOutput(fc, name="softmax")


SEP, END = "_" * 120, "=" * 120
HEADER = [
    SEP,
    "Layer (type)                                        Output Shape            Param #     "
    "Previous Layer",
    END,
]


def _table(*rows: str | tuple[str, ...], total: int) -> list[str]:
    """MXNet's layout: header, rows separated by '_' lines, '=' after the last, total."""
    out = list(HEADER)
    for i, r in enumerate(rows):
        out.extend([r] if isinstance(r, str) else list(r))
        out.append(END if i == len(rows) - 1 else SEP)
    return [*out, f"Total params: {total}", SEP]


def _row(name: str, shape: str, params: int | str, prev: str = "") -> str:
    return f"{name:<52}{shape:<24}{params!s:<12}{prev}".rstrip()


def _more(prev: str) -> str:
    return " " * 88 + prev


MLP_TABLE = _table(
    _row("data(null)", "784", 0),
    _row("fc1(FullyConnected)", "128", 100480, "data"),
    _row("relu1(Activation)", "128", 0, "fc1"),
    _row("fc2(FullyConnected)", "10", 1290, "relu1"),
    _row("softmax(SoftmaxOutput)", "10", 0, "fc2"),
    total=101770,
)

CONVNET_TABLE = _table(
    _row("data(null)", "3x32x32", 0),
    _row("conv1(Convolution)", "8x32x32", 224, "data"),
    _row("bn1(BatchNorm)", "8x32x32", 16, "conv1"),
    _row("relu1(Activation)", "8x32x32", 0, "bn1"),
    _row("pool1(Pooling)", "8x16x16", 0, "relu1"),
    _row("flat(Flatten)", "2048", 0, "pool1"),
    _row("fc(FullyConnected)", "10", 20490, "flat"),
    _row("softmax(SoftmaxOutput)", "10", 0, "fc"),
    total=20730,
)

BRANCHY_TABLE = _table(
    _row("data(null)", "3x17x17", 0),
    _row("ca(Convolution)", "16x8x8", 432, "data"),
    _row("pa(Pooling)", "16x9x9", 0, "ca"),
    _row("cb(Convolution)", "8x9x9", 32, "data"),
    _row("cg(Convolution)", "16x9x9", 304, "cb"),
    (_row("cat(Concat)", "32x9x9", 0, "pa"), _more("cg")),
    _row("bn(BatchNorm)", "32x9x9", 64, "cat"),
    _row("lrelu(LeakyReLU)", "32x9x9", 0, "bn"),
    _row("gpool(Pooling)", "32x1x1", 0, "lrelu"),
    _row("fc(FullyConnected)", "5", 165, "gpool"),
    _row("softmax(SoftmaxOutput)", "5", 0, "fc"),
    total=997,
)


def _summary(capsys, *args, **kw) -> list[str]:
    text = viz.print_summary(*args, **kw)
    assert capsys.readouterr().out == text + "\n"
    lines = text.split("\n")
    # MXNet pads every table row (not the total line) to the last column
    width = kw.get("line_length", 120)
    assert all(len(ln) == width for ln in lines if not ln.startswith("Total params"))
    return [ln.rstrip() for ln in lines]


@pytest.mark.parametrize(
    ("build", "shape", "expected"),
    [
        (_mlp, {"data": (64, 784)}, MLP_TABLE),
        (_convnet, {"data": (8, 3, 32, 32)}, CONVNET_TABLE),
        (_branchy, {"data": (2, 3, 17, 17)}, BRANCHY_TABLE),
    ],
    ids=["mlp", "convnet", "branchy"],
)
def test_print_summary_matches_mxnet(capsys, build, shape, expected):
    assert _summary(capsys, build(), shape=shape) == expected


def test_print_summary_resnet18_matches_mxnet(capsys):
    s = sym.load(GOLDEN / "resnet18_v1-symbol.json")
    text = viz.print_summary(s, shape={"data": (1, 3, 224, 224)})
    capsys.readouterr()
    lines = [ln.rstrip() for ln in text.split("\n")]
    assert lines[-2] == "Total params: 11689512"
    assert _row("resnetv10_conv0_fwd(Convolution)", "64x112x112", 9408, "data") in lines
    assert (
        _row("resnetv10_stage2_conv2_fwd(Convolution)", "128x28x28", 8192,
             "resnetv10_stage1_activation1") in lines
    )
    i = lines.index(
        _row("resnetv10_stage4__plus0(elemwise_add)", "512x7x7", 0,
             "resnetv10_stage4_batchnorm2_fwd")
    )
    assert lines[i + 1] == _more("resnetv10_stage4_batchnorm1_fwd")
    assert _row("resnetv10_dense0_fwd(FullyConnected)", "1000", 513000,
                "resnetv10_pool1_fwd") in lines
    assert sum(1 for ln in lines if ln and ln[0] not in "_= " and "Total" not in ln) == 70
    # sha256 of MXNet 1.9.1's whole printed table (trailing newline dropped)
    digest = "164bbe7d1179e5c821055e6a2b250d4ee0b9d9b6c0a641133f891e6b36d4a602"
    assert hashlib.sha256(text.encode()).hexdigest() == digest


def test_print_summary_line_length_and_positions_match_mxnet(capsys):
    # mx.viz.print_summary(mlp, shape=..., line_length=80, positions=[30, 50, 60, 80])
    lines = _summary(capsys, _mlp(), shape={"data": (64, 784)}, line_length=80,
                     positions=[30, 50, 60, 80])
    assert lines[:6] == [
        "_" * 80,
        "Layer (type)                  Output Shape        Param #   Previous Layer",
        "=" * 80,
        "data(null)                    784                 0",
        "_" * 80,
        "fc1(FullyConnected)           128                 100480    data",
    ]
    # line_length=60 with the default fractions: MXNet truncates each field at its column
    lines = _summary(capsys, _mlp(), shape={"data": (64, 784)}, line_length=60)
    assert lines[1] == "Layer (type)              Output ShapeParam Previous Layer"
    assert lines[5] == "fc1(FullyConnected)       128         100480data"


def test_print_summary_counts_parameters_from_their_shapes(capsys):
    """Where MXNet's per-operator guesses are wrong, nnsym counts the parameter inputs.

    MXNet 1.9.1 prints 32 for fc3 ((7 + 1) * 4: it takes the input's second dim, 7, as the
    number of features although flatten=False makes it 16) and a blank shape for the
    two-output SliceChannel; nnsym counts weight 4x16 + bias 4 = 68 and shows both outputs.
    """
    t = sym.Variable("data")
    e = sym.Embedding(t, input_dim=100, output_dim=16, name="emb")
    f = sym.FullyConnected(e, num_hidden=4, flatten=False, name="fc3")
    sp = sym.SliceChannel(f, num_outputs=2, axis=2, name="split")
    s2 = sym.elemwise_add(sp[0], sp[1], name="add")
    out = sym.LinearRegressionOutput(sym.Flatten(s2, name="flat"), name="lro")
    lines = _summary(capsys, out, shape={"data": (4, 7)})
    assert _row("emb(Embedding)", "7x16", 1600, "data") in lines  # = MXNet
    assert _row("fc3(FullyConnected)", "7x4", 68, "emb") in lines
    assert _row("split(SliceChannel)", "7x2, 7x2", 0, "fc3") in lines
    i = lines.index(_row("add(elemwise_add)", "7x2", 0, "split"))
    assert lines[i + 1] == _more("split")
    assert lines[-2] == "Total params: 1668"


def test_print_summary_shared_weight_counted_once_in_total(capsys):
    x = sym.Variable("data")
    w, b = sym.Variable("shared_weight"), sym.Variable("shared_bias")
    h = sym.FullyConnected(x, weight=w, bias=b, num_hidden=6, name="l1")
    h = sym.FullyConnected(h, weight=w, bias=b, num_hidden=6, name="l2")
    lines = _summary(capsys, h, shape={"data": (2, 6)})
    assert _row("l1(FullyConnected)", "6", 42, "data") in lines
    assert _row("l2(FullyConnected)", "6", 42, "l1") in lines
    assert lines[-2] == "Total params: 42"


def test_print_summary_without_shapes(capsys):
    # MXNet prints bias-only counts here (128, 10; total 138); nnsym says it does not know.
    lines = _summary(capsys, _mlp())
    assert _row("data(null)", "", 0) in lines
    assert _row("fc1(FullyConnected)", "", "?", "data") in lines
    assert _row("relu1(Activation)", "", 0, "fc1") in lines
    assert lines[-2].startswith("Total params: 0 (not counting 4 parameter(s) of unknown shape")
    # __shape__ attributes are enough where they decide the parameters
    x = sym.Variable("data", shape=(5, 3))
    lines = _summary(capsys, sym.FullyConnected(x, num_hidden=2, name="fc"))
    assert _row("fc(FullyConnected)", "", 8, "data") in lines
    assert lines[-2] == "Total params: 8"


def test_print_summary_errors():
    with pytest.raises(ShapeError, match="Input shape is incomplete"):
        viz.print_summary(_mlp(), shape={"softmax_label": (64,)})
    with pytest.raises(ValueError, match="incomplete"):  # ShapeError is a ValueError, as MXNet's
        viz.plot_network(_mlp(), shape={"softmax_label": (64,)})
    with pytest.raises(TypeError, match="Symbol"):
        viz.print_summary("not a symbol")  # type: ignore[arg-type]
    with pytest.raises(NNSymError, match="not found"):
        viz.print_summary(_mlp(), shape={"nope": (1, 2)})


# ---------------------------------------------------------------------------------------------
# A DOT reader: the lexer rules of Graphviz's scan.l for quoted strings (only \" is unescaped,
# \\ is kept as a pair, backslash-newline is dropped) and the statement forms nnsym emits.

_TOKEN = re.compile(
    r'\s*(?:(?P<q>"(?:[^"\\]|\\.|\\\n)*")|(?P<id>[A-Za-z_][A-Za-z0-9_]*|-?(?:\.\d+|\d+(?:\.\d*)?))'
    r"|(?P<op>->|[{}\[\]=;,]))",
    re.S,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        assert m, f"DOT lexer stuck at {text[pos:pos + 40]!r}"
        pos = m.end()
        if m["q"] is not None:
            body = m["q"][1:-1]
            value = re.sub(r'\\(["\\\n])', lambda x: {'"': '"', "\\": "\\\\", "\n": ""}[x[1]],
                           body)
            out.append(("id", value))
        elif m["id"] is not None:
            out.append(("id", m["id"]))
        else:
            out.append(("op", m["op"]))
    return out


def parse_dot(text: str):
    """-> (graph name, {node id: attrs}, [(tail, head, attrs)]); asserts the grammar."""
    toks = _tokens(text)
    assert toks[0] == ("id", "digraph") and toks[2] == ("op", "{") and toks[-1] == ("op", "}")
    name, i = toks[1][1], 3
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []

    def attrs(j: int) -> tuple[dict[str, str], int]:
        assert toks[j] == ("op", "["), toks[j]
        d, j = {}, j + 1
        while toks[j] != ("op", "]"):
            assert toks[j][0] == "id" and toks[j + 1] == ("op", "=") and toks[j + 2][0] == "id"
            assert toks[j][1] not in d
            d[toks[j][1]] = toks[j + 2][1]
            j += 3
        return d, j + 1

    while i < len(toks) - 1:
        kind, first = toks[i]
        assert kind == "id", toks[i]
        if toks[i + 1] == ("op", "->"):
            kind, head = toks[i + 2]
            assert kind == "id"
            a, i = attrs(i + 3)
            edges.append((first, head, a))
        else:
            assert first not in nodes, f"node {first!r} declared twice"
            nodes[first], i = attrs(i + 1)
    for t, h, _ in edges:
        assert t in nodes and h in nodes, (t, h)
    return name, nodes, edges


def label_text(value: str) -> str:
    """What Graphviz shows for a label value: \\\\ -> \\, \\n -> a line break."""
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] in "nlr" else m[1], value, flags=re.S)


MLP_DOT = r"""digraph plot {
	data [label=data fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]
	fc1 [label="FullyConnected\n128" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	relu1 [label="Activation\nrelu" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	fc2 [label="FullyConnected\n10" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	softmax_label [label=softmax_label fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]
	softmax [label=softmax fillcolor="#fccde5" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	fc1 -> data [label="784(float32)" arrowtail=open dir=back]
	relu1 -> fc1 [label="128(float32)" arrowtail=open dir=back]
	fc2 -> relu1 [label="128(float32)" arrowtail=open dir=back]
	softmax -> fc2 [label="10(float32)" arrowtail=open dir=back]
	softmax -> softmax_label [label="(float32)" arrowtail=open dir=back]
}
"""  # noqa: E501

CONVNET_DOT = r"""digraph plot {
	data [label=data fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]
	conv1 [label="Convolution\n3x3/1, 8" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	bn1 [label=bn1 fillcolor="#bebada" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	relu1 [label="Activation\nrelu" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	pool1 [label="Pooling\nmax, 2x2/2x2" fillcolor="#80b1d3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	flat [label=flat fillcolor="#fdb462" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	fc [label="FullyConnected\n10" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	softmax_label [label=softmax_label fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]
	softmax [label=softmax fillcolor="#fccde5" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	conv1 -> data [label="3x32x32" arrowtail=open dir=back]
	bn1 -> conv1 [label="8x32x32" arrowtail=open dir=back]
	relu1 -> bn1 [label="8x32x32" arrowtail=open dir=back]
	pool1 -> relu1 [label="8x32x32" arrowtail=open dir=back]
	flat -> pool1 [label="8x16x16" arrowtail=open dir=back]
	fc -> flat [label=2048 arrowtail=open dir=back]
	softmax -> fc [label=10 arrowtail=open dir=back]
	softmax -> softmax_label [label="" arrowtail=open dir=back]
}
"""  # noqa: E501

BRANCHY_DOT = r"""digraph plot {
	data [label=data fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]
	ca [label="Convolution\n3x3/2x2, 16" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	pa [label="Pooling\navg, 2x2/1x1" fillcolor="#80b1d3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	cb [label="Convolution\n1x1/2x2, 8" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	cg [label="Convolution\n3x3/1, 16" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	cat [label=cat fillcolor="#fdb462" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	bn [label=bn fillcolor="#bebada" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	lrelu [label="LeakyReLU\nleaky" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	gpool [label="Pooling\nmax, 1x1/1" fillcolor="#80b1d3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	fc [label="FullyConnected\n5" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	softmax_label [label=softmax_label fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]
	softmax [label=softmax fillcolor="#fccde5" fixedsize=true height=0.8034 shape=box style=filled width=1.3]
	ca -> data [label="3x17x17" arrowtail=open dir=back]
	pa -> ca [label="16x8x8" arrowtail=open dir=back]
	cb -> data [label="3x17x17" arrowtail=open dir=back]
	cg -> cb [label="8x9x9" arrowtail=open dir=back]
	cat -> pa [label="16x9x9" arrowtail=open dir=back]
	cat -> cg [label="16x9x9" arrowtail=open dir=back]
	bn -> cat [label="32x9x9" arrowtail=open dir=back]
	lrelu -> bn [label="32x9x9" arrowtail=open dir=back]
	gpool -> lrelu [label="32x9x9" arrowtail=open dir=back]
	fc -> gpool [label="32x1x1" arrowtail=open dir=back]
	softmax -> fc [label=5 arrowtail=open dir=back]
	softmax -> softmax_label [label="" arrowtail=open dir=back]
}
"""  # noqa: E501


def test_plot_network_source_matches_mxnet():
    d = viz.plot_network(_mlp(), shape={"data": (64, 784)}, dtype={"data": "float32"})
    assert d.source == MLP_DOT
    assert viz.plot_network(_convnet(), shape={"data": (8, 3, 32, 32)}).source == CONVNET_DOT
    assert viz.plot_network(_branchy(), shape={"data": (2, 3, 17, 17)}).source == BRANCHY_DOT
    # and as parsed
    name, nodes, edges = parse_dot(CONVNET_DOT)
    assert name == "plot" and len(nodes) == 9 and len(edges) == 8
    assert label_text(nodes["pool1"]["label"]) == "Pooling\nmax, 2x2/2x2"
    assert ("fc", "flat", {"label": "2048", "arrowtail": "open", "dir": "back"}) in edges


def test_plot_network_without_shapes_and_with_dtypes():
    _, nodes, edges = parse_dot(viz.plot_network(_convnet()).source)
    assert all(a["label"] == "" for _, _, a in edges)
    assert set(nodes) == {"data", "conv1", "bn1", "relu1", "pool1", "flat", "fc", "softmax_label",
                          "softmax"}
    _, _, edges = parse_dot(
        viz.plot_network(_mlp(), shape={"data": (2, 5)}, dtype={"data": "float16"}).source
    )
    assert ("fc1", "data", {"label": "5(float16)", "arrowtail": "open", "dir": "back"}) in edges
    with pytest.raises(viz.VisualizationError, match="type is incomplete"):
        viz.plot_network(_mlp(), dtype={"softmax_label": "float32"})


def test_plot_network_hide_weights_false_draws_parameters():
    d = viz.plot_network(_convnet(), shape={"data": (8, 3, 32, 32)}, hide_weights=False)
    _, nodes, edges = parse_dot(d.source)
    for w in ("conv1_weight", "conv1_bias", "bn1_gamma", "bn1_beta", "bn1_moving_mean",
              "bn1_moving_var", "fc_weight", "fc_bias"):
        assert nodes[w] == {"label": w, "shape": "oval"}  # MXNet: Graphviz's default oval
    labels = {(t, h): a["label"] for t, h, a in edges}
    # MXNet drops the first dim of parameters too ("3x3x3", "" for the bias); nnsym shows the
    # parameter's whole shape
    assert labels["conv1", "conv1_weight"] == "8x3x3x3"
    assert labels["conv1", "conv1_bias"] == "8"
    assert labels["fc", "fc_weight"] == "10x2048"
    assert labels["bn1", "bn1_moving_var"] == "8"
    assert labels["conv1", "data"] == "3x32x32"
    # weights recognised by operator slot, not only by name
    x = sym.Variable("x")
    h = sym.FullyConnected(x, weight=sym.Variable("w"), bias=sym.Variable("b"), num_hidden=3,
                           name="fc")
    _, nodes, _ = parse_dot(viz.plot_network(h).source)
    assert set(nodes) == {"x", "fc"}


def test_plot_network_node_attrs_and_title():
    d = viz.plot_network(_mlp(), title="my net", save_format="png",
                         node_attrs={"shape": "oval", "fixedsize": "false", "penwidth": 2})
    name, nodes, _ = parse_dot(d.source)
    assert name == "my net" and d.name == "my net" and d.format == "png"
    assert nodes["fc1"]["shape"] == "oval" and nodes["fc1"]["fixedsize"] == "false"
    assert nodes["fc1"]["penwidth"] == "2"
    with pytest.raises(viz.VisualizationError, match="label"):
        viz.plot_network(_mlp(), node_attrs={"label": "x"})
    with pytest.raises(viz.VisualizationError, match="format"):
        viz.plot_network(_mlp(), save_format="svg -o /tmp/x")


# ---------------------------------------------------------------------------------------------
# Escaping: names come from JSON files

EVIL = 'a"b\\n]; evil'
HOSTILE = [
    EVIL,
    "x\\",
    'q"\\"',
    "multi\nline",
    "nul\x00ctl\r\x7f",
    '"; digraph x { y }; "',
    "node",
    "Edge",
    "ü → 名",
    "-1",
    "",
    "\\N \\G",
]


def _hostile_json() -> str:
    """A symbol JSON whose variable and operator names are all hostile."""
    nodes = []
    heads = 0
    for i, name in enumerate(HOSTILE):
        nodes.append({"op": "null", "name": name, "inputs": []})
        var = len(nodes) - 1
        if i == 0:
            heads = var
            continue
        nodes.append({"op": "elemwise_add", "name": name + "\n]op", "attrs": {},
                      "inputs": [[heads, 0, 0], [var, 0, 0]]})
        heads = len(nodes) - 1
    return json.dumps({
        "nodes": nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
        "node_row_ptr": list(range(len(nodes) + 1)),
        "heads": [[heads, 0, 0]],
        "attrs": {"mxnet_version": ["int", 10901]},
    })


def _shown(name: str) -> str:
    """How nnsym shows a name: control characters other than newline as visible \\xNN."""
    return "".join(
        f"\\x{ord(c):02x}" if (ord(c) < 32 and c != "\n") or ord(c) == 127 else c for c in name
    )


def test_escape_round_trips_through_the_dot_lexer():
    for text in [*HOSTILE, "\\", '\\"', '"', "\\\\\n", "\ud800"]:
        q = '"' + viz.escape(text) + '"'
        assert "\n" not in q
        toks = _tokens(q)
        assert len(toks) == 1, (text, q)
        if "\ud800" not in text:
            assert label_text(toks[0][1]) == _shown(text)
    assert viz.quote("fc1") == "fc1" and viz.quote("node") == '"node"'
    assert viz.quote("1x2") == '"1x2"' and viz.quote("") == '""'


def test_hostile_names_stay_inside_their_quotes():
    s = sym.load_json(_hostile_json())
    assert set(s.list_arguments()) == set(HOSTILE)
    shape = {n: (2, 3) for n in HOSTILE}
    d = viz.plot_network(s, title=EVIL, shape=shape, node_attrs={EVIL: EVIL})
    src = d.source
    # one statement per line: no raw newline inside any string
    stmts = src.split("\n")[1:-2]
    assert len(stmts) == 2 * len(HOSTILE) - 1 + 2 * (len(HOSTILE) - 1)
    name, nodes, edges = parse_dot(src)
    # IDs and plain attribute values keep DOT's "\\" pair (the lexer does not undo it); labels
    # turn it back into one backslash
    lexed = viz.escape(EVIL).replace('\\"', '"')
    assert name == lexed and label_text(name) == EVIL
    assert len(nodes) == 2 * len(HOSTILE) - 1 and len(edges) == 2 * (len(HOSTILE) - 1)
    by_label = {}
    for nid, a in nodes.items():
        assert a[lexed] == lexed
        by_label[label_text(a["label"])] = nid
    # every variable's label shows its name, and each node id is distinct
    for n in HOSTILE:
        assert _shown(n) in by_label
    assert len(set(nodes)) == len(nodes)
    # edges connect each add to its two inputs
    assert all(a["label"] == "3" for _, _, a in edges)
    # print_summary takes the same names as they are
    text = viz.print_summary(s, shape=shape)
    assert "Total params: 0" in text


@needs_dot
def test_hostile_names_through_graphviz(tmp_path):
    s = sym.load_json(_hostile_json())
    d = viz.plot_network(s, title=EVIL, shape={n: (2, 3) for n in HOSTILE})
    res = subprocess.run([DOT, "-Tjson"], input=d.source.encode(), capture_output=True,
                         check=True)
    doc = json.loads(res.stdout)
    assert label_text(doc["name"]) == EVIL
    objects = doc["objects"]
    assert len(objects) == 2 * len(HOSTILE) - 1 and len(doc["edges"]) == 2 * (len(HOSTILE) - 1)
    labels = {label_text(o["label"]) for o in objects}
    assert {_shown(n) for n in HOSTILE} <= labels
    out = d.render(tmp_path / "evil.svg")
    assert out == tmp_path / "evil.svg" and "<svg" in out.read_text()


def test_duplicate_names_get_distinct_ids():
    a, b = sym.Variable("x"), sym.Variable("x")
    s = sym.elemwise_add(a, b, name="x")
    with pytest.warns(RuntimeWarning, match="Repeated names: x"):
        d = viz.plot_network(s)
    _, nodes, edges = parse_dot(d.source)
    assert set(nodes) == {"x", "x#1", "x#2"}
    assert {(t, h) for t, h, _ in edges} == {("x#2", "x"), ("x#2", "x#1")}


# ---------------------------------------------------------------------------------------------
# Rendering


def _fake_dot(tmp_path: Path, rc: int = 0) -> Path:
    """A stand-in ``dot`` that records its argv and renders its input file (or stdin) to stdout
    (or the -o file)."""
    script = tmp_path / "bin" / "dot"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, json, pathlib\n"
        "args = sys.argv[1:]\n"
        f"pathlib.Path({str(tmp_path / 'argv.json')!r}).write_text(json.dumps(args))\n"
        f"if {rc}:\n    sys.stderr.write('Error: syntax error in line 1')\n    sys.exit({rc})\n"
        "if len(args) == 2:\n"
        "    sys.stdout.write('RENDERED ' + args[0] + '\\n' + pathlib.Path(args[1]).read_text())\n"
        "    sys.exit(0)\n"
        "if '-o' not in args:\n"
        "    sys.stdout.write('PIPED ' + args[0] + '\\n' + sys.stdin.read())\n"
        "    sys.exit(0)\n"
        "out = args[args.index('-o') + 1]\n"
        "pathlib.Path(out).write_text('RENDERED ' + args[0] + '\\n' + "
        "pathlib.Path(args[-1]).read_text())\n"
    )
    script.chmod(0o755)
    return script


def test_render_runs_dot(tmp_path, monkeypatch):
    fake = _fake_dot(tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: str(fake) if name == "dot" else None)
    d = viz.plot_network(_mlp(), shape={"data": (1, 4)})
    out = d.render(tmp_path / "out" / "net.svg")
    assert out == tmp_path / "out" / "net.svg"
    argv = json.loads((tmp_path / "argv.json").read_text())
    src = tmp_path / "out" / "net.dot"
    # dot renders to a pipe; the picture replaces the file whole (nnsym.fileio)
    assert argv == ["-Tsvg", str(src.absolute())]
    assert out.read_text() == "RENDERED -Tsvg\n" + d.source
    assert (tmp_path / "out" / "net.dot").read_text() == d.source
    # the suffix picks the format; a bare stem gets .dot and .<save_format>; cleanup
    assert d.render(tmp_path / "n2.png", cleanup=True) == tmp_path / "n2.png"
    assert json.loads((tmp_path / "argv.json").read_text())[0] == "-Tpng"
    assert not (tmp_path / "n2.dot").exists()
    assert d.render(tmp_path / "n3") == tmp_path / "n3.svg" and (tmp_path / "n3.dot").exists()
    assert d.render(tmp_path / "n4.dot", format="pdf") == tmp_path / "n4.pdf"
    assert d.pipe() == ("PIPED -Tsvg\n" + d.source).encode()
    assert json.loads((tmp_path / "argv.json").read_text()) == ["-Tsvg"]


def test_render_reports_dot_failure(tmp_path, monkeypatch):
    fake = _fake_dot(tmp_path, rc=1)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: str(fake))
    with pytest.raises(viz.RenderError, match="syntax error"):
        viz.plot_network(_mlp()).render(tmp_path / "net.svg")


def test_render_without_dot_writes_source_and_says_how(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)

    def no_subprocess(*a, **k):
        raise AssertionError("must not run anything")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    d = viz.plot_network(_mlp(), shape={"data": (1, 4)})
    target = tmp_path / "my net.svg"
    with pytest.warns(viz.DotNotFoundWarning) as rec:
        got = d.render(target)
    assert got == tmp_path / "my net.dot"
    assert got.read_text() == d.source and not target.exists()
    msg = str(rec[0].message)
    assert f"dot -Tsvg '{tmp_path}/my net.dot' -o '{tmp_path}/my net.svg'" in msg
    assert viz.render_command("-x.dot", "o.png", "png") == "dot -Tpng ./-x.dot -o o.png"
    with pytest.raises(viz.RenderError, match="not on PATH"):
        d.pipe()
    assert d._repr_svg_() is None
    # save() needs nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert d.save(tmp_path / "s.gv").read_text() == d.source


@needs_dot
def test_render_with_graphviz(tmp_path):
    d = viz.plot_network(_convnet(), shape={"data": (8, 3, 32, 32)})
    out = d.render(tmp_path / "net")
    assert out == tmp_path / "net.svg"
    svg = out.read_text()
    assert "<svg" in svg and "Convolution" in svg and "3x32x32" in svg
    assert d.pipe("png").startswith(b"\x89PNG")
    assert "<svg" in (d._repr_svg_() or "")
