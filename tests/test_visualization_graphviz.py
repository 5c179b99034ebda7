"""plot_network returns a graphviz.Digraph where the graphviz package (nnsym[viz]) is
installed, as MXNet does, with the same DOT source as nnsym's own Digraph."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from nnsym import sym
from nnsym import visualization as viz
from nnsym.cli import main

GOLDEN = Path(__file__).parent / "golden"


def _cases():
    odd = sym.Variable('da"ta\\x')
    net = sym.FullyConnected(sym.relu(odd, name="graph"), num_hidden=4, name="fc\nline")
    return [
        (sym.load(GOLDEN / "resnet18_v1-symbol.json"), "plot", {"data": (1, 3, 32, 32)}, "svg"),
        (sym.load(GOLDEN / "mlp-symbol.json"), "my net", None, "png"),
        (net, "graph", {'da"ta\\x': (2, 3)}, "pdf"),
        (net, 'a "quoted" title', None, "svg"),
    ]


def _clone_source(monkeypatch, *args, **kwargs) -> str:
    with monkeypatch.context() as m:
        m.setattr(viz, "_graphviz", lambda: None)
        d = viz.plot_network(*args, **kwargs)
    assert isinstance(d, viz.Digraph)
    return d.source


@pytest.mark.parametrize("case", range(4))
def test_graphviz_digraph_has_nnsyms_dot_source(case, monkeypatch):
    graphviz = pytest.importorskip("graphviz")
    s, title, shape, fmt = _cases()[case]
    d = viz.plot_network(s, title=title, shape=shape, save_format=fmt)
    assert isinstance(d, graphviz.Digraph) and d.format == fmt
    assert d.source == _clone_source(monkeypatch, s, title=title, shape=shape, save_format=fmt)
    d.node("extra", label="added by the user")  # the package's API, as on MXNet's result
    assert d.source.endswith('\textra [label="added by the user"]\n}\n')


class _FakeDigraph:
    """graphviz.Digraph's text layout: header, the body lines, a closing brace."""

    def __init__(self, name: str, format: str, extra: str = "") -> None:
        self.name, self.format, self.body, self.extra = name, format, [], extra

    @property
    def source(self) -> str:
        return f"digraph {viz.quote(self.name)} {{\n{self.extra}" + "".join(self.body) + "}\n"


def _fake_graphviz(extra: str = "") -> types.SimpleNamespace:
    return types.SimpleNamespace(Digraph=lambda name, format: _FakeDigraph(name, format, extra))


def test_graphviz_is_used_only_where_it_gives_the_same_source(monkeypatch):
    s = sym.load(GOLDEN / "mlp-symbol.json")
    want = _clone_source(monkeypatch, s, shape={"data": (2, 5)})
    monkeypatch.setattr(viz, "_graphviz", _fake_graphviz)
    d = viz.plot_network(s, shape={"data": (2, 5)})
    assert isinstance(d, _FakeDigraph) and d.source == want
    # a version laying the text out differently: nnsym's own Digraph, same source as ever
    monkeypatch.setattr(viz, "_graphviz", lambda: _fake_graphviz(extra="\tgraph [dpi=72]\n"))
    d = viz.plot_network(s, shape={"data": (2, 5)})
    assert isinstance(d, viz.Digraph) and d.source == want


def test_cli_plot_renders_a_graphviz_digraph_through_nnsym(tmp_path, monkeypatch, capsys):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)  # no dot: the DOT source
    monkeypatch.setattr(viz, "_graphviz", _fake_graphviz)
    model = GOLDEN / "mlp-symbol.json"
    assert main(["plot", str(model), "--shape", "data=2,5", "-o", str(tmp_path / "m.svg")]) == 0
    assert "render it with: dot -Tsvg" in capsys.readouterr().out
    want = _clone_source(monkeypatch, sym.load(model), title="mlp", shape={"data": (2, 5)})
    assert (tmp_path / "m.dot").read_text() == want
