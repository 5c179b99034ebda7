"""MXNet 1.x symbol JSON, written and read.

The writer reproduces dmlc::JSONWriter's exact layout, byte for byte (MXNET-FACTS 1.4), so a file
MXNet wrote loads and saves back identically; ``inferred`` adds what the passes decided to each
node. The reader validates everything it reads and raises ``GraphFormatError`` naming the node
index and field; operator parameters are parsed into typed ``Params`` (``OperatorParamError`` on
bad ones) while the node keeps the exact attribute strings. ``nnsym.symbol`` wraps the heads it
returns in a ``Symbol``.
"""

from __future__ import annotations

import json
import logging
import reprlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from nnsym.errors import GraphFormatError, NNSymError, OperatorParamError
from nnsym.ir.graph import Entry, Graph, Node, variable
from nnsym.ir.opdef import OpDef, get_op, unknown_operator
from nnsym.types import shape_str

MXNET_VERSION = 10901  # files are written as MXNet 1.9.1 writes them
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")
INFERRED_PREFIX = "__inferred_"

# ---------------------------------------------------------------------------------------------
# Writing


def _q(s: str) -> str:
    """dmlc's string escaping: only \\r \\n \\\\ \\t \\" are escaped; other bytes go out raw."""
    out = s.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + out.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t") + '"'


def _ind(depth: int) -> str:
    return "  " * depth


def _obj(items: Sequence[tuple[str, str]], depth: int) -> str:
    """A multi-line object whose values are already rendered."""
    body = ", \n".join(f"{_ind(depth + 1)}{_q(k)}: {v}" for k, v in items)
    return "{\n" + body + "\n" + _ind(depth) + "}"


def _list(items: Sequence[str], depth: int, multi: bool) -> str:
    if not items:
        return "[]"
    if not multi:
        return "[" + ", ".join(items) + "]"
    return "[\n" + ", \n".join(_ind(depth + 1) + it for it in items) + "\n" + _ind(depth) + "]"


def _str_map(m: Mapping[str, str], depth: int) -> str:
    keys = sorted(m)
    if len(keys) <= 1:
        return "{" + ", ".join(f"{_q(k)}: {_q(m[k])}" for k in keys) + "}"
    body = ", \n".join(f"{_ind(depth + 1)}{_q(k)}: {_q(m[k])}" for k in keys)
    return "{\n" + body + "\n" + _ind(depth) + "}"


def _triple(a: int, b: int, c: int) -> str:
    return f"[{a}, {b}, {c}]"


def graph_to_json(g: Graph, inferred: bool = False) -> str:
    """The graph as MXNet writes it; ``inferred`` adds what the passes decided to each node."""
    idx = g.index
    extra = _inferred_attrs(g) if inferred else None
    nodes_txt = []
    for nid, node in enumerate(idx.nodes):
        items = [("op", _q(node.op_name)), ("name", _q(node.name))]
        attrs: Mapping[str, str] = node.attrs
        if extra is not None and extra[nid]:
            attrs = {**attrs, **extra[nid]}
        if attrs:
            items.append(("attrs", _str_map(attrs, 3)))
        ins = [_triple(idx.node_id(e.node), e.index, e.version) for e in node.inputs]
        items.append(("inputs", _list(ins, 3, len(ins) > 10)))
        if node.control_deps:
            deps = [str(idx.node_id(d)) for d in node.control_deps]
            items.append(("control_deps", _list(deps, 3, len(deps) > 10)))
        nodes_txt.append(_obj(items, 2))
    arg_nodes = [str(i) for i in idx.input_nodes]
    rptr = [str(r) for r in idx.row_ptr]
    heads = [_triple(idx.node_id(e.node), e.index, e.version) for e in g.outputs]
    top = [
        ("nodes", _list(nodes_txt, 1, True)),
        ("arg_nodes", _list(arg_nodes, 1, len(arg_nodes) > 10)),
        ("node_row_ptr", _list(rptr, 1, len(rptr) > 10)),
        ("heads", _list(heads, 1, len(heads) > 10)),
        ("attrs", '{"mxnet_version": ["int", ' + str(MXNET_VERSION) + "]}"),
    ]
    return _obj(top, 0)


def _fmt_list(vals: Sequence[str]) -> str:
    return "[" + ", ".join(vals) + "]"


def _inferred_attrs(g: Graph) -> list[dict[str, str]]:
    """Per node: ``__inferred_<attr>__`` strings with one value per output entry."""
    idx, a = g.index, g.attrs
    out: list[dict[str, str]] = []
    for nid in range(idx.num_nodes):
        eids = idx.output_entries(nid)
        d: dict[str, str] = {}
        if a.shape is not None:
            d["__inferred_shape__"] = _fmt_list([shape_str(a.shape[e]) for e in eids])
        if a.dtype is not None:
            d["__inferred_dtype__"] = _fmt_list(
                ["?" if a.dtype[e] is None else np.dtype(a.dtype[e]).name for e in eids]
            )
        if a.stype is not None:
            d["__inferred_storage_type__"] = _fmt_list(
                ["?" if a.stype[e] is None else a.stype[e].label for e in eids]  # type: ignore[union-attr]
            )
        if a.dispatch is not None and a.dispatch[nid] is not None:
            d["__inferred_dispatch_mode__"] = a.dispatch[nid].value  # type: ignore[union-attr]
        if a.storage_id is not None:
            d["__inferred_storage_id__"] = _fmt_list([str(a.storage_id[e]) for e in eids])
        if a.inplace is not None:
            d["__inferred_inplace__"] = _fmt_list([str(a.inplace[e]) for e in eids])
        out.append(d)
    return out


log = logging.getLogger("nnsym.json")

# ---------------------------------------------------------------------------------------------
# Loading

_TOP_KEYS = {"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs"}
_NODE_KEYS = {
    "op",
    "name",
    "attrs",
    "attr",
    "param",
    "inputs",
    "control_deps",
    "backward_source_id",
}


# A variable node takes at least this many bytes of a file (``{"op":"null","name":"","inputs":[]}``
# is 36): a legacy file (before 0.9.0) may leave an operator's inputs out and have the loader
# create their variables, but never more of them than the file could have held as nodes.
_MIN_NODE_BYTES = 32

_short_repr = reprlib.Repr()
_short_repr.maxlevel = 3
_short_repr.maxstring = 60
_short_repr.maxother = 60


def _show(v: Any) -> str:
    """A file's value for a message: shortened, and safe on deeply nested lists."""
    return _short_repr.repr(v)


def _err(msg: str, nid: int | None = None, field: str | None = None) -> GraphFormatError:
    where = ""
    if nid is not None:
        where = f"node {nid}"
        if field:
            where += f" field '{field}'"
        where += ": "
    elif field:
        where = f"field '{field}': "
    return GraphFormatError(f"invalid symbol JSON: {where}{msg}")


def _entry_list(v: Any, nid: int | None, field: str) -> list[tuple[int, int, int]]:
    if not isinstance(v, list):
        raise _err(f"expected a list of [node, index, version], got {type(v).__name__}", nid, field)
    out = []
    for k, e in enumerate(v):
        if (
            not isinstance(e, list)
            or len(e) not in (2, 3)
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in e)
        ):
            raise _err(
                f"entry {k} is {_show(e)}; expected [node, index] or [node, index, version]",
                nid,
                field,
            )
        out.append((e[0], e[1], e[2] if len(e) == 3 else 0))
    return out


def _str_dict(v: Any, nid: int, field: str) -> dict[str, str]:
    if not isinstance(v, dict):
        raise _err(f"expected an object of strings, got {type(v).__name__}", nid, field)
    for k, x in v.items():
        if not isinstance(x, str):
            raise _err(
                f"attribute {_show(k)} has a {type(x).__name__} value; values must be strings",
                nid,
                field,
            )
    return dict(v)


def _nested_deeper(value: Any, limit: int) -> bool:
    """Whether lists/objects in ``value`` nest more than ``limit`` levels (iterative)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d >= limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def _file_version(attrs: Any) -> int:
    if attrs is None:
        return 800  # no version: MXNet assumes 0.8.0
    if not isinstance(attrs, dict):
        raise _err("expected an object", field="attrs")
    for k, a in attrs.items():
        # nnvm writes graph attributes as [type, value] pairs; refuse deep nesting here too,
        # for the parser's own limit follows the interpreter's recursion limit, which other
        # code in the process may have raised
        if _nested_deeper(a, 8):
            raise _err(f"graph attribute {k!r} is nested too deeply", field="attrs")
    v = attrs.get("mxnet_version")
    if v is None:
        return 800
    if not (isinstance(v, list) and len(v) == 2 and isinstance(v[1], int)):
        raise _err(f'mxnet_version must be ["int", N], got {_show(v)}', field="attrs")
    return int(v[1])


class _Proto:
    """A node being loaded (mutable until every upgrade has run)."""

    __slots__ = ("attrs", "deps", "inputs", "name", "op", "params")

    def __init__(self, op: OpDef | None, name: str, attrs: dict[str, str]):
        self.op = op
        self.name = name
        self.attrs = attrs
        self.params: Any = None
        self.inputs: list[tuple[int, int, int]] = []
        self.deps: list[int] = []


def load_entries(text: str | bytes) -> list[Entry]:
    """The head entries of MXNet symbol JSON (any 0.8+ version); validated, legacy forms
    upgraded. ``GraphFormatError`` names the node index and field."""
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GraphFormatError(f"invalid symbol JSON: not valid JSON: {e}") from None
    except RecursionError:
        raise GraphFormatError(
            "invalid symbol JSON: nested too deeply to parse (symbol JSON nests 5 levels)"
        ) from None
    if not isinstance(obj, dict):
        raise _err(f"top level must be an object, got {type(obj).__name__}")
    unknown = set(obj) - _TOP_KEYS
    if unknown:
        raise _err(f"unknown top-level field(s) {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    for k in ("nodes", "heads"):
        if k not in obj:
            raise _err(f"missing required top-level field '{k}'")
    nodes_raw = obj["nodes"]
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise _err("expected a non-empty list of nodes", field="nodes")
    version = _file_version(obj.get("attrs"))
    if version > MXNET_VERSION:
        log.warning(
            "loading a symbol saved by MXNet version %d with lower version %d",
            version,
            MXNET_VERSION,
        )
    protos: list[_Proto] = []
    # legacy files: variables the loader may create for left-out inputs (see _MIN_NODE_BYTES)
    budget = len(text) // _MIN_NODE_BYTES
    for nid, nd in enumerate(nodes_raw):
        protos.append(_read_node(nid, nd, protos))
    heads = _entry_list(obj["heads"], None, "heads")
    if not heads:
        raise _err("a symbol needs at least one head", field="heads")

    # Upgrades (MXNET-FACTS 1.8), in MXNet's order.
    if version < MXNET_VERSION:
        _fix_hidden_keys(protos)
    for nid, p in enumerate(list(protos)):
        if p.op is None:
            continue
        if version < 905 and p.op.name in ("argmax", "argmin") and p.attrs.get("axis") == "-1":
            del p.attrs["axis"]  # MXNet's 0.9.5 upgrader: axis -1 meant "all axes" back then
        plain = {k: v for k, v in p.attrs.items() if not (k.startswith("__") and k.endswith("__"))}
        try:
            p.params, _ = p.op.parse_params(plain, node_name=p.name)
        except OperatorParamError as e:
            raise OperatorParamError(f"symbol JSON node {nid} ('{p.name}'): {e}") from None
        need = p.op.num_inputs(p.params)
        if version < 900 and len(p.inputs) < need:
            missing = need - len(p.inputs)
            if missing > budget:
                raise _err(
                    f"operator {p.op.name} ('{p.name}') takes {need} inputs and the file gives "
                    f"{len(p.inputs)}; a file of version {version} (before 0.9.0) may leave "
                    f"inputs out, but creating {missing} variables is more than the "
                    f"{len(text)}-byte file could describe (at most {budget} more)",
                    nid,
                    "inputs",
                )
            budget -= missing
            names = p.op.input_names(p.params)
            for pos in range(len(p.inputs), need):
                v = _Proto(None, f"{p.name}_{names[pos]}", dict(p.attrs))
                protos.append(v)
                p.inputs.append((len(protos) - 1, 0, 0))
        if len(p.inputs) != need:
            raise _err(
                f"operator {p.op.name} ('{p.name}') takes {need} inputs "
                f"{list(p.op.input_names(p.params))}, the file gives {len(p.inputs)}",
                nid,
                "inputs",
            )
        if version < 904:
            names = p.op.input_names(p.params)
            for pos, (src, _, _) in enumerate(p.inputs):
                extra = p.op.input_var_attrs.get(names[pos])
                tgt = protos[src]
                if extra and tgt.op is None and "__init__" not in tgt.attrs:
                    tgt.attrs.update(extra)

    # Build immutable nodes: variables first (no inputs), then operators in file order.
    built: list[Node | None] = [None] * len(protos)
    for i, p in enumerate(protos):
        if p.op is None:
            built[i] = variable(p.name, p.attrs)
    for i, p in enumerate(protos):
        if p.op is None:
            continue
        ins = []
        for src, idx_, ver in p.inputs:
            n = built[src]
            assert n is not None
            ins.append(Entry(n, idx_, ver))
        deps = tuple(built[d] for d in p.deps)
        built[i] = Node(p.op, p.name, p.params, tuple(ins), MappingProxyType(p.attrs), deps)  # type: ignore[arg-type]
    outs = []
    for hid, hidx, hver in heads:
        if not 0 <= hid < len(nodes_raw):
            raise _err(f"head [{hid}, {hidx}] refers to a missing node", field="heads")
        n = built[hid]
        assert n is not None
        if not 0 <= hidx < n.num_outputs():
            raise _err(
                f"head [{hid}, {hidx}]: node '{n.name}' has {n.num_outputs()} outputs",
                field="heads",
            )
        outs.append(Entry(n, hidx, hver))
    return outs

def _read_node(nid: int, nd: Any, protos: list[_Proto]) -> _Proto:
    if not isinstance(nd, dict):
        raise _err(f"expected an object, got {type(nd).__name__}", nid)
    unknown = set(nd) - _NODE_KEYS
    if unknown:
        raise _err(f"unknown field(s) {sorted(unknown)}; allowed: {sorted(_NODE_KEYS)}", nid)
    for k in ("op", "name", "inputs"):
        if k not in nd:
            raise _err("missing required field", nid, k)
    op_name, name = nd["op"], nd["name"]
    if not isinstance(op_name, str):
        raise _err(f"expected a string, got {_show(op_name)}", nid, "op")
    if not isinstance(name, str):
        raise _err(f"expected a string, got {_show(name)}", nid, "name")
    attrs: dict[str, str] = {}
    for k in ("param", "attr", "attrs"):
        if k in nd:
            attrs.update(_str_dict(nd[k], nid, k))
    attrs = {k: v for k, v in attrs.items() if not k.startswith(INFERRED_PREFIX)}
    op: OpDef | None = None
    if op_name != "null":
        try:
            op = get_op(op_name)
        except NNSymError:
            raise _err(f"node '{name}': {unknown_operator(op_name)}", nid, "op") from None
    p = _Proto(op, name, attrs)
    ins = _entry_list(nd["inputs"], nid, "inputs")
    if op is None and ins:
        raise _err("a variable ('null' op) cannot have inputs", nid, "inputs")
    for src, idx, _ in ins:
        if not 0 <= src < nid:
            raise _err(
                f"input [{src}, {idx}] must refer to an earlier node (0..{nid - 1}); "
                "the graph would have a forward reference or a cycle",
                nid,
                "inputs",
            )
        srcp = protos[src]
        n_out = 1 if srcp.op is None else None
        if idx < 0 or (n_out is not None and idx >= n_out):
            raise _err(
                f"input [{src}, {idx}]: node '{srcp.name}' has no output {idx}", nid, "inputs"
            )
    p.inputs = ins
    deps = nd.get("control_deps", [])
    if not isinstance(deps, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d < nid for d in deps
    ):
        raise _err(
            f"expected a list of earlier node ids, got {_show(deps)}", nid, "control_deps"
        )
    p.deps = list(deps)
    return p


def _fix_hidden_keys(protos: list[_Proto]) -> None:
    """MXNet's FixParsing upgrade: ``lr_mult`` -> ``__lr_mult__``; ``weight_lr_mult`` on an op node
    -> ``__lr_mult__`` on the variable feeding input ``weight``."""
    for p in protos:
        moved: dict[str, str] = {}
        for k in list(p.attrs):
            if k.startswith("__"):
                continue
            for h in HIDDEN_KEYS:
                if k == h:
                    moved[k] = p.attrs.pop(k)
                    p.attrs[f"__{h}__"] = moved[k]
                elif k.endswith("_" + h) and p.op is not None:
                    arg = k[: -len(h) - 1]
                    v = p.attrs.pop(k)
                    names = p.op.input_names(_params_for_names(p))
                    if arg in names and names.index(arg) < len(p.inputs):
                        src = protos[p.inputs[names.index(arg)][0]]
                        src.attrs[f"__{h}__"] = v


def _params_for_names(p: _Proto) -> Any:
    assert p.op is not None
    plain = {k: v for k, v in p.attrs.items() if not (k.startswith("__") and k.endswith("__"))}
    plain = {k: v for k, v in plain.items() if not any(k.endswith("_" + h) for h in HIDDEN_KEYS)}
    params, _ = p.op.parse_params(plain, node_name=p.name)
    return params
