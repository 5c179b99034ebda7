"""MXNet 1.x symbol JSON: writing in dmlc's exact layout, and validated loading with upgrades.

The writer reproduces dmlc::JSONWriter byte for byte (MXNET-FACTS 1.4), so a file MXNet wrote
loads and saves back identically. The loader validates everything it reads and raises
``GraphFormatError`` naming the node index and field; operator parameters are parsed into typed
``Params`` (``OperatorParamError`` on bad ones) while the node keeps the exact attribute strings.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from nnsym.errors import GraphFormatError, NNSymError, OperatorParamError
from nnsym.ir.graph import Entry, Graph, Node, variable
from nnsym.ir.json import HIDDEN_KEYS, INFERRED_PREFIX, MXNET_VERSION
from nnsym.ir.opdef import OpDef, get_op

if TYPE_CHECKING:
    from nnsym.symbol.symbol import Symbol

log = logging.getLogger("nnsym.json")

def infer_for_dump(sym: Symbol, shapes: Mapping[str, Any]) -> Graph:
    """Shape, dtype and storage-type inference for a dump: input shapes by name, dtypes by
    ``type_dict`` (without one, inputs lacking ``__dtype__`` are float32, as in MXNet's
    simple_bind), storage types from ``__storage_type__`` attributes (else default)."""
    from nnsym.passes.infer import infer_shape, infer_type
    from nnsym.passes.manager import run_passes
    from nnsym.passes.stype import infer_storage_type
    from nnsym.types import dtype_of

    kw = dict(shapes)
    type_dict = kw.pop("type_dict", None) or {}
    shape_seed = sym._seed("tojson", (), kw, _shape_arg)
    if type_dict:
        type_seed = sym._seed(
            "tojson", (), {k: dtype_of(v) for k, v in type_dict.items()}, lambda t: t
        )
    else:
        # As simple_bind without type_dict: inputs lacking __dtype__ default to float32.
        idx = sym.index
        type_seed = [None] * idx.num_entries
        for nid in idx.input_nodes:
            if "__dtype__" not in idx.nodes[nid].attrs:
                type_seed[idx.row_ptr[nid]] = np.dtype(np.float32)
    g = sym.graph(shape=tuple(shape_seed), dtype=tuple(type_seed))
    return run_passes(g, [infer_shape, infer_type, infer_storage_type])


def _shape_arg(v: Any) -> Any:
    from nnsym.symbol.symbol import _user_shape

    return _user_shape(v)


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
                f"entry {k} is {e!r}; expected [node, index] or [node, index, version]", nid, field
            )
        out.append((e[0], e[1], e[2] if len(e) == 3 else 0))
    return out


def _str_dict(v: Any, nid: int, field: str) -> dict[str, str]:
    if not isinstance(v, dict):
        raise _err(f"expected an object of strings, got {type(v).__name__}", nid, field)
    for k, x in v.items():
        if not isinstance(x, str):
            raise _err(
                f"attribute {k!r} has a {type(x).__name__} value; values must be strings",
                nid,
                field,
            )
    return dict(v)


def _file_version(attrs: Any) -> int:
    if attrs is None:
        return 800  # no version: MXNet assumes 0.8.0
    if not isinstance(attrs, dict):
        raise _err("expected an object", field="attrs")
    v = attrs.get("mxnet_version")
    if v is None:
        return 800
    if not (isinstance(v, list) and len(v) == 2 and isinstance(v[1], int)):
        raise _err(f'mxnet_version must be ["int", N], got {v!r}', field="attrs")
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


def load_json(text: str | bytes) -> Symbol:
    """Load MXNet symbol JSON (any 0.8+ version); validated, legacy forms upgraded."""
    from nnsym.symbol.symbol import Symbol

    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GraphFormatError(f"invalid symbol JSON: not valid JSON: {e}") from None
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
    sym = Symbol(outs)
    _ = sym.index  # detect cycles (impossible with backward-only references) early
    return sym


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
        raise _err(f"expected a string, got {op_name!r}", nid, "op")
    if not isinstance(name, str):
        raise _err(f"expected a string, got {name!r}", nid, "name")
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
            raise _err(
                f"operator '{op_name}' (node '{name}') is not registered", nid, "op"
            ) from None
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
        raise _err(f"expected a list of earlier node ids, got {deps!r}", nid, "control_deps")
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


def load(fname: str | Path) -> Symbol:
    """Load a symbol from an MXNet ``-symbol.json`` file."""
    try:
        text = Path(fname).read_text()
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{fname}: not a UTF-8 text file: {e}") from None
    try:
        return load_json(text)
    except GraphFormatError as e:
        raise GraphFormatError(f"{fname}: {e}") from None
