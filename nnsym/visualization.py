"""Network visualization: MXNet's ``mx.viz.plot_network`` and ``mx.viz.print_summary``.

``plot_network`` returns Graphviz DOT source that nnsym writes itself. Where the ``graphviz``
Python package is installed (the ``nnsym[viz]`` extra) it comes as a ``graphviz.Digraph``, the
type MXNet returns, with its whole API (``node``, ``edge``, ``attr``, ``view``, ``render``...);
without it, as nnsym's :class:`Digraph`, the part of that API MXNet scripts call, with no
dependency. The DOT source is the same text either way. Its labels, colours, node attributes and
edge layout follow MXNet 1.9.1: one node per operator and per input variable, an edge from
each consumer to its producer drawn backwards (``dir=back``) so that the data sits at the
bottom, and, given input shapes, each edge labelled with the producer's shape without the batch
dimension ("64x56x56"). Every name and attribute value is written as a quoted DOT string with
``\\`` and ``"`` escaped and control characters made visible, so names read from a JSON file
cannot break out of their quotes. :meth:`Digraph.render` runs Graphviz's ``dot`` program
when it is on ``PATH``; otherwise it writes the ``.dot`` file and warns with the command that
renders it.

``print_summary`` prints MXNet's table (Layer (type), Output Shape, Param #, Previous Layer)
and returns it as text. Where MXNet guesses from operator attributes, nnsym reads the graph:

* a layer's parameter count is the size of its parameter inputs (variables in a ``weight``,
  ``bias``, ``gamma`` or ``beta`` slot, or named like MXNet's weights), so it is right for a
  FullyConnected layer on a 4-d input, a grouped or bias-free convolution, or PReLU's gamma;
  for the layers MXNet counts (Convolution, FullyConnected, BatchNorm, Embedding) the numbers
  are MXNet's. Auxiliary states (BatchNorm's moving mean/var) are not parameters, as in MXNet.
  The total counts a shared parameter once.
* rows are printed for every operator and every data input (a variable that is not a
  parameter, auxiliary state or loss label); MXNet prints only the graph's first variable.
* a node with several visible outputs shows each output's shape; edges and "Previous Layer"
  use the output actually consumed (MXNet always looks up the last one).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnsym import fileio
from nnsym.errors import NNSymError, ShapeError, warn
from nnsym.ir.graph import Graph, IndexedGraph
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.symbol.symbol import Symbol, _user_shape
from nnsym.types import dtype_of, shape_known

__all__ = [
    "Digraph",
    "DotNotFoundWarning",
    "RenderError",
    "VisualizationError",
    "dot_program",
    "plot_network",
    "print_summary",
    "render_command",
]


class VisualizationError(NNSymError, ValueError):
    """Bad arguments to a visualization function (incomplete dtypes, bad format...)."""


class RenderError(NNSymError, RuntimeError):
    """Graphviz's ``dot`` program ran and failed."""


class DotNotFoundWarning(UserWarning):
    """``dot`` is not on PATH: the DOT source was written, not rendered."""


# MXNet's colour map: inputs, layers with weights, activations, batch norm, pooling,
# concat/flatten/reshape, softmax, everything else.
COLORS = ("#8dd3c7", "#fb8072", "#ffffb3", "#bebada", "#80b1d3", "#fdb462", "#b3de69", "#fccde5")
NODE_DEFAULTS: Mapping[str, str] = {
    "shape": "box",
    "fixedsize": "true",
    "width": "1.3",
    "height": "0.8034",
    "style": "filled",
}
# Names MXNet's plot_network treats as weights (hidden with hide_weights).
WEIGHT_SUFFIXES = (
    "_weight",
    "_bias",
    "_beta",
    "_gamma",
    "_moving_var",
    "_moving_mean",
    "_running_var",
    "_running_mean",
)
PARAM_SLOTS = frozenset({"weight", "bias", "gamma", "beta"})
# Output formats inferred from a render() file name's suffix.
KNOWN_FORMATS = frozenset(
    "bmp canon dot eps gif gv jpe jpeg jpg json pdf plain png ps svg svgz tif tiff webp xdot"
    .split()
)
_DOT_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMERAL = re.compile(r"-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)")
_FORMAT = re.compile(r"[A-Za-z0-9_]+(?::[A-Za-z0-9_]+)*")


# ---------------------------------------------------------------------------------------------
# DOT text


def escape(text: str) -> str:
    """``text`` for the inside of a DOT quoted string, shown literally in a label.

    ``\\`` -> ``\\\\`` and ``"`` -> ``\\"`` (the only escapes DOT's lexer knows; Graphviz's
    label processing turns ``\\\\`` back into one backslash), a newline -> ``\\n`` (a line
    break), any other control character or lone surrogate -> visible ``\\xNN``/``\\uNNNN``
    text. The result never contains a raw newline or an unescaped quote.
    """
    out: list[str] = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif unicodedata.category(ch) in ("Cc", "Cs"):
            code = ord(ch)
            out.append(f"\\\\x{code:02x}" if code < 0x100 else f"\\\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def quote(text: str) -> str:
    """A DOT ID for ``text``: bare when it is a plain identifier, else a quoted string."""
    if _IDENT.fullmatch(text) and text.lower() not in _DOT_KEYWORDS:
        return text
    return '"' + escape(text) + '"'


def _value(text: str) -> str:
    """An attribute value: bare identifiers and numerals as they are, else quoted."""
    if _NUMERAL.fullmatch(text):
        return text
    return quote(text)


def _attr_list(attrs: Mapping[str, str]) -> str:
    return " ".join(f"{quote(k)}={_value(v)}" for k, v in attrs.items())


def _str2tuple(text: str) -> list[str]:
    return re.findall(r"\d+", text)


# ---------------------------------------------------------------------------------------------
# Rendering


def dot_program() -> str | None:
    """Path of Graphviz's ``dot`` program, or None when it is not on PATH."""
    return shutil.which("dot")


def _shell_path(p: Path) -> str:
    s = os.fspath(p)
    return shlex.quote("./" + s if s.startswith("-") else s)


def render_command(source: str | Path, output: str | Path, format: str = "svg") -> str:
    """The shell command that renders ``source`` (a .dot file) to ``output``."""
    return f"dot -T{format} {_shell_path(Path(source))} -o {_shell_path(Path(output))}"


def _check_format(fmt: str) -> str:
    if not isinstance(fmt, str) or not _FORMAT.fullmatch(fmt):
        raise VisualizationError(
            f"bad output format {fmt!r}; expected a Graphviz format such as svg, png or pdf"
        )
    return fmt


class Digraph:
    """DOT source of a network plot (the part of ``graphviz.Digraph`` MXNet users call).

    ``source`` is the DOT text; ``save(path)`` writes it; ``render(filename)`` writes it and
    runs ``dot`` to make the picture (or, without ``dot``, warns how to run it); ``pipe()``
    returns the rendered bytes.
    """

    def __init__(self, name: str, source: str, format: str = "svg"):
        self.name = name
        self.format = _check_format(format)
        self._source = source

    @property
    def source(self) -> str:
        return self._source

    def __str__(self) -> str:
        return self._source

    def __repr__(self) -> str:
        return f"<nnsym.visualization.Digraph {self.name!r}: {self._source.count(chr(10))} lines>"

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the DOT source to ``path`` (default ``<name>.dot``); returns the path."""
        p = Path(path) if path is not None else Path(self._default_stem() + ".dot")
        fileio.write_text(p, self._source)
        return p

    def _default_stem(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", self.name).lstrip(".-") or "plot"

    def _paths(self, filename: str | os.PathLike[str] | None, fmt: str) -> tuple[Path, Path]:
        p = Path(filename) if filename is not None else Path(self._default_stem())
        ext = fmt.split(":")[0]
        suffix = p.suffix.lower()
        if suffix == "." + ext:
            return p.with_suffix(".dot"), p
        if suffix in (".dot", ".gv"):
            return p, p.with_suffix("." + ext)
        return Path(f"{p}.dot"), Path(f"{p}.{ext}")

    def render(
        self,
        filename: str | os.PathLike[str] | None = None,
        format: str | None = None,
        cleanup: bool = False,
    ) -> Path:
        """Write the DOT source and render it with ``dot``; returns the rendered file's path.

        ``render("net.svg")`` writes ``net.dot`` and ``net.svg``; ``render("net")`` or
        ``render("net.dot")`` writes ``net.dot`` and ``net.<format>``. Without ``format`` a
        file name ending in a Graphviz format (``.png``, ``.pdf``...) picks it, else the
        ``save_format`` given to ``plot_network``. ``cleanup`` removes the .dot file after a
        successful render. When ``dot`` is not on PATH the .dot file is written, a
        :class:`DotNotFoundWarning` says how to render it, and its path is returned.
        """
        if format is None:
            ext = Path(filename).suffix.lower().lstrip(".") if filename is not None else ""
            format = ext if ext in KNOWN_FORMATS and ext not in ("dot", "gv") else self.format
        fmt = _check_format(format)
        src, out = self._paths(filename, fmt)
        src.parent.mkdir(parents=True, exist_ok=True)
        self.save(src)
        dot = dot_program()
        if dot is None:
            warn(
                DotNotFoundWarning(
                    f"Graphviz's `dot` program is not on PATH, so the plot was not rendered; "
                    f"the DOT source is in {src}. Install Graphviz (https://graphviz.org, e.g. "
                    f"`apt install graphviz`) and run:\n    {render_command(src, out, fmt)}"
                ),
            )
            return src
        # dot writes to a pipe and the picture replaces `out` whole: a failed render keeps the
        # previous picture
        res = subprocess.run(
            [dot, f"-T{fmt}", os.fspath(src.absolute())],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        if res.returncode != 0:
            err = res.stderr.decode("utf-8", "replace").strip()
            raise RenderError(f"`dot -T{fmt}` failed (exit status {res.returncode}): {err}")
        fileio.write_bytes(out, res.stdout)
        if cleanup:
            src.unlink()
        return out

    def pipe(self, format: str | None = None) -> bytes:
        """The rendered picture as bytes (needs ``dot`` on PATH)."""
        fmt = _check_format(format or self.format)
        dot = dot_program()
        if dot is None:
            raise RenderError("Graphviz's `dot` program is not on PATH; use save() instead")
        res = subprocess.run(
            [dot, f"-T{fmt}"], input=self._source.encode("utf-8"), capture_output=True, check=False
        )
        if res.returncode != 0:
            err = res.stderr.decode("utf-8", "replace").strip()
            raise RenderError(f"`dot -T{fmt}` failed (exit status {res.returncode}): {err}")
        return res.stdout

    def _repr_svg_(self) -> str | None:  # Jupyter display
        if dot_program() is None:
            return None
        return self.pipe("svg").decode("utf-8")


# ---------------------------------------------------------------------------------------------
# Graph facts


def _infer_shapes(symbol: Symbol, shape: Mapping[str, Any] | None, strict: bool) -> Graph:
    """Shapes of every entry from the given input shapes (and ``__shape__`` attributes)."""
    seeds = symbol._seed("infer_shape", (), dict(shape or {}), _user_shape)
    g = infer_shape(symbol.graph(shape=tuple(seeds)))
    if strict:
        idx, shapes = g.index, g.attrs.shape
        assert shapes is not None
        unknown = [
            idx.nodes[n].name for n in idx.input_nodes if not shape_known(shapes[idx.row_ptr[n]])
        ]
        if unknown:
            raise ShapeError(
                "Input shape is incomplete: cannot decide the shapes of "
                + ", ".join(unknown[:10])
                + (" ..." if len(unknown) > 10 else "")
                + "; give them in shape={...}"
            )
    return g


def _infer_types(symbol: Symbol, dtype: Mapping[str, Any]) -> Graph:
    seeds = symbol._seed("infer_type", (), dict(dtype), dtype_of)
    g = infer_type(symbol.graph(dtype=tuple(seeds)))
    idx, types = g.index, g.attrs.dtype
    assert types is not None
    unknown = [idx.nodes[n].name for n in idx.input_nodes if types[idx.row_ptr[n]] is None]
    if unknown:
        raise VisualizationError(
            "Input type is incomplete: cannot decide the types of "
            + ", ".join(unknown[:10])
            + (" ..." if len(unknown) > 10 else "")
            + "; give them in dtype={...}"
        )
    return g


_RANK = {"data": 0, "label": 1, "param": 2, "aux": 3}


def variable_roles(idx: IndexedGraph) -> dict[int, str]:
    """Per variable node id: ``data``, ``label``, ``param`` or ``aux``.

    From the operator input slots that read it (``weight``/``bias``/``gamma``/``beta`` ->
    param, auxiliary slots -> aux, ``label`` -> label), else from MXNet's weight-like names.
    """
    roles: dict[int, str] = {}
    for node in idx.nodes:
        if node.op is None:
            continue
        slots = node.input_names()
        aux = set(node.op.aux_indices(node.params))
        for pos, e in enumerate(node.inputs):
            if e.node.op is not None:
                continue
            slot = slots[pos] if pos < len(slots) else ""
            if pos in aux:
                role = "aux"
            elif slot in PARAM_SLOTS:
                role = "param"
            elif slot == "label":
                role = "label"
            else:
                role = "data"
            nid = idx.node_id(e.node)
            if _RANK[role] > _RANK[roles.get(nid, "data")]:
                roles[nid] = role
    for nid in idx.input_nodes:
        role = roles.get(nid, "data")
        if nid in idx.mutable_input_nodes:
            role = "aux"
        elif role == "data" and idx.nodes[nid].name.endswith(WEIGHT_SUFFIXES):
            role = "param"
        roles[nid] = role
    return roles


def _dims(shape: Sequence[int | None] | None, drop_batch: bool) -> str:
    if shape is None:
        return "?"
    dims = shape[1:] if drop_batch else shape
    return "x".join("?" if d is None else str(d) for d in dims)


# ---------------------------------------------------------------------------------------------
# plot_network


def _unique_ids(names: Sequence[str]) -> list[str]:
    used: set[str] = set()
    ids: list[str] = []
    for name in names:
        cand, k = quote(name), 1
        while cand in used:
            cand, k = quote(f"{name}#{k}"), k + 1
        used.add(cand)
        ids.append(cand)
    return ids


def plot_network(
    symbol: Symbol,
    title: str = "plot",
    save_format: str = "svg",
    shape: Mapping[str, Any] | None = None,
    dtype: Mapping[str, Any] | None = None,
    node_attrs: Mapping[str, Any] | None = None,
    hide_weights: bool = True,
) -> Any:
    """A Graphviz plot of the graph computing ``symbol`` (MXNet's ``mx.viz.plot_network``).

    ``shape``: input shapes by name; edges are then labelled with the shape flowing along
    them, without the batch dimension (a parameter's edge shows its whole shape).
    ``dtype``: input dtypes by name; edges then also show the dtype, as in "784(float32)".
    ``node_attrs``: Graphviz node attributes overriding the defaults (e.g.
    ``{"shape": "oval", "fixedsize": "false"}``); every key and value is written as literal
    text. ``hide_weights``: leave out parameter and auxiliary-state inputs (variables named
    ``*_weight``, ``*_bias``, ``*_gamma``, ``*_beta``, ``*_moving_mean``... or read in such an
    operator slot); when False they are drawn as plain ovals. ``save_format``: the format
    ``render`` uses by default. Returns a ``graphviz.Digraph`` where the ``graphviz`` package
    is installed (as MXNet does), else nnsym's :class:`Digraph`; the DOT source is the same.
    """
    if not isinstance(symbol, Symbol):
        raise TypeError("symbol must be a Symbol")
    fmt = _check_format(save_format)
    idx = symbol.index
    shapes = _infer_shapes(symbol, shape, strict=True).attrs.shape if shape is not None else None
    types = _infer_types(symbol, dtype).attrs.dtype if dtype is not None else None
    roles = variable_roles(idx)

    names = [n.name for n in idx.nodes]
    if len(set(names)) != len(names):
        seen: set[str] = set()
        repeated = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
        warn(
            "There are multiple nodes with the same name in your graph; they are drawn as "
            "separate nodes (ids suffixed '#1', '#2'...). Repeated names: " + ",".join(repeated),
            RuntimeWarning,
        )
    ids = _unique_ids(names)

    base = dict(NODE_DEFAULTS)
    for k, v in (node_attrs or {}).items():
        if str(k) == "label":
            raise VisualizationError("node_attrs cannot set 'label': nnsym labels each node")
        base[str(k)] = str(v)

    lines = [f"digraph {quote(str(title))} {{"]
    hidden: set[int] = set()
    for nid, node in enumerate(idx.nodes):
        a = dict(base)
        label = node.name
        op = node.op_name
        at = node.attrs
        if node.op is None:
            if roles[nid] in ("param", "aux"):
                if hide_weights:
                    hidden.add(nid)
                else:  # MXNet leaves these to Graphviz's defaults: a plain oval named as the node
                    lines.append(f"\t{ids[nid]} [{_attr_list({'label': label, 'shape': 'oval'})}]")
                continue
            a["shape"] = "oval"
            a["fillcolor"] = COLORS[0]
        elif op == "Convolution":
            kernel = "x".join(_str2tuple(at.get("kernel", "")))
            stride = "x".join(_str2tuple(at["stride"])) if "stride" in at else "1"
            label = f"Convolution\n{kernel}/{stride}, {at.get('num_filter', '?')}"
            a["fillcolor"] = COLORS[1]
        elif op == "FullyConnected":
            label = f"FullyConnected\n{at.get('num_hidden', '?')}"
            a["fillcolor"] = COLORS[1]
        elif op == "BatchNorm":
            a["fillcolor"] = COLORS[3]
        elif op in ("Activation", "LeakyReLU"):
            default = "Leaky" if op == "LeakyReLU" else "?"
            label = f"{op}\n{at.get('act_type', default)}"
            a["fillcolor"] = COLORS[2]
        elif op == "Pooling":
            kernel = "x".join(_str2tuple(at["kernel"])) if "kernel" in at else "[]"
            stride = "x".join(_str2tuple(at["stride"])) if "stride" in at else "1"
            label = f"Pooling\n{at.get('pool_type', 'max')}, {kernel}/{stride}"
            a["fillcolor"] = COLORS[4]
        elif op in ("Concat", "Flatten", "Reshape"):
            a["fillcolor"] = COLORS[5]
        elif op == "Softmax":
            a["fillcolor"] = COLORS[6]
        else:
            a["fillcolor"] = COLORS[7]
            if op == "Custom" and "op_type" in at:
                label = at["op_type"]
        lines.append(f"\t{ids[nid]} [{_attr_list({'label': label, **dict(sorted(a.items()))})}]")

    for nid, node in enumerate(idx.nodes):
        if node.op is None:
            continue
        in_eids = idx.input_entries[nid]
        inputs = list(zip(node.inputs, in_eids))
        if node.op_name == "_contrib_BilinearResize2D":
            inputs = inputs[:1]
        for e, eid in inputs:
            src = idx.node_id(e.node)
            if src in hidden:
                continue
            label = ""
            if shapes is not None:
                label = _dims(shapes[eid], drop_batch=roles.get(src) not in ("param", "aux"))
            if types is not None:
                t = types[eid]
                label += "(" + ("?" if t is None else np.dtype(t).name) + ")"
            attrs = {"label": label, "arrowtail": "open", "dir": "back"}
            lines.append(f"\t{ids[nid]} -> {ids[src]} [{_attr_list(attrs)}]")
    lines.append("}")
    source = "\n".join(lines) + "\n"
    gv = _graphviz()
    if gv is not None:
        d = _graphviz_digraph(gv, str(title), lines[1:-1], fmt, source)
        if d is not None:
            return d
    return Digraph(str(title), source, fmt)


def _graphviz() -> Any:
    """The ``graphviz`` package (the ``nnsym[viz]`` extra), or None where it is not installed.
    Imported on the first plot only (about 20 ms measured), never by ``import nnsym``."""
    try:
        import graphviz  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: PLC0415
    except ImportError:
        return None
    return graphviz


def _graphviz_digraph(gv: Any, title: str, body: Sequence[str], fmt: str, source: str) -> Any:
    """A ``graphviz.Digraph`` whose ``source`` is exactly ``source``; None where this version
    of the package lays the text out differently or refuses the format."""
    try:
        d = gv.Digraph(name=title, format=fmt)
        d.body = [line + "\n" for line in body]
        same = d.source == source
    except (ValueError, TypeError, AttributeError):
        return None
    return d if same else None


# ---------------------------------------------------------------------------------------------
# print_summary


def print_summary(
    symbol: Symbol,
    shape: Mapping[str, Any] | None = None,
    line_length: int = 120,
    positions: Sequence[float] = (0.44, 0.64, 0.74, 1.0),
) -> str:
    """Print a layer table (MXNet's ``mx.viz.print_summary``) and return its text.

    One row per operator and per data input: its name and operator, its output shape without
    the batch dimension (given ``shape``, the input shapes by name), its parameter count and
    the layers it reads. ``positions``: where each column ends, as fractions of
    ``line_length`` (when the last is <= 1) or as absolute columns.
    """
    if not isinstance(symbol, Symbol):
        raise TypeError("symbol must be a Symbol")
    show_shape = shape is not None
    idx = symbol.index
    shapes = _infer_shapes(symbol, shape, strict=show_shape).attrs.shape
    assert shapes is not None
    roles = variable_roles(idx)
    if positions[-1] <= 1:
        cols = [int(line_length * p) for p in positions]
    else:
        cols = [int(p) for p in positions]

    lines: list[str] = []

    def row(fields: Sequence[Any]) -> None:
        line = ""
        for field, end in zip(fields, cols):
            line = (line + str(field))[:end]
            line += " " * (end - len(line))
        lines.append(line)

    def size(nid: int) -> int | None:
        s = shapes[idx.row_ptr[nid]]
        if s is None:
            return None
        n = 1
        for d in s:
            if d is None:
                return None
            n *= d
        return n

    lines.append("_" * line_length)
    row(["Layer (type)", "Output Shape", "Param #", "Previous Layer"])
    lines.append("=" * line_length)
    shown = [
        nid for nid, n in enumerate(idx.nodes) if n.op is not None or roles[nid] == "data"
    ]
    for k, nid in enumerate(shown):
        node = idx.nodes[nid]
        out_shape = ""
        if show_shape:
            visible = range(idx.row_ptr[nid], idx.row_ptr[nid] + node.num_visible())
            out_shape = ", ".join(_dims(shapes[e], drop_batch=True) for e in visible)
        params: int | str = 0
        previous: list[str] = []
        for e in node.inputs:
            src = idx.node_id(e.node)
            if e.node.op is not None or roles[src] == "data":
                previous.append(e.node.name)
            elif roles[src] == "param":
                n = size(src)
                params = "?" if n is None or params == "?" else int(params) + n
        row([f"{node.name}({node.op_name})", out_shape, params, previous[0] if previous else ""])
        for name in previous[1:]:
            row(["", "", "", name])
        lines.append(("=" if k == len(shown) - 1 else "_") * line_length)

    param_nids = [nid for nid in idx.input_nodes if roles[nid] == "param"]
    sizes = [size(nid) for nid in param_nids]
    total = sum(n for n in sizes if n is not None)
    missing = sum(n is None for n in sizes)
    note = ""
    if missing:
        note = (
            f" (not counting {missing} parameter(s) of unknown shape; give the input shapes "
            "to count them)"
        )
    lines.append(f"Total params: {total}{note}")
    lines.append("_" * line_length)
    text = "\n".join(lines)
    print(text)
    return text
