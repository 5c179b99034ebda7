"""nnsym's storage-type rules against MXNet 1.9.1's (tests/golden/mxnet-stype-cases.txt): for each
operator and input storage-type combination, the output storage type and the dispatch mode."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nnsym import sym
from nnsym.errors import StorageTypeError
from nnsym.ops import REGISTRY
from nnsym.ops.common.stype import infer_storage
from nnsym.passes.stype import infer_storage_type
from nnsym.types import SType

FIXTURE = Path(__file__).resolve().parent.parent / "golden" / "mxnet-stype-cases.txt"
ST = {"dns": "default", "csr": "csr", "rsp": "row_sparse"}

# Deliberate differences, each with its reason (also in docs/sparse.md).
DIFFERENT = {
    # MXNet's pip build routes dense elemwise_add through MKLDNN (fcompute_ex); without MKLDNN,
    # which the issue asks to match, it is the plain dense kernel.
    "bin:elemwise_add:dns:dns": ("default", "fcompute"),
    # log1p maps 0 to 0: nnsym keeps csr with its value-mapping kernel (MXNet printed no mode).
    "unary:log1p:csr": ("csr", "fcompute_ex"),
    # x ** 2 maps 0 to 0: nnsym keeps csr (the rule comes from the expression at zero with the
    # actual parameters); MXNet's _power_scalar has no sparse rule and falls back.
    "scalar:pow:csr": ("csr", "fcompute_ex"),
}
# Cases outside this scope here: backward graphs (binbw/unarybw/dotbw/embedding) are
# checked by the executor tests; cast/retain/square_sum/slice/broadcast/FullyConnected run
# through nd.sparse functions or fall back; optimizer rows are imperative-only in MXNet.
SKIP_PREFIX = ("binbw:", "unarybw:", "dotbw:", "embedding:", "opt:", "cast:", "retain:",
               "square_sum:", "slice:", "bcast:", "fc:", "unary:_copy", "addn:dns:csr")


def _cases() -> list[tuple[str, str | None, str | None]]:
    out = []
    for line in FIXTURE.read_text().splitlines():
        if line.startswith("#") or "|" not in line:
            continue
        case, res, modes = (part.strip() for part in line.split("|")[:3])
        if case.startswith(SKIP_PREFIX):
            continue
        m = re.search(r'"out": \["(\w+)"\]', res)
        mode = re.search(r":\s*(\w+);", modes)
        out.append((case, m.group(1) if m else None, mode.group(1) if mode else None))
    return out


def _graph(case: str):
    parts = case.split(":")
    kind = parts[0]
    if kind == "bin":
        _, op, a, b = parts
        x, y = sym.Variable("x"), sym.Variable("y")
        return getattr(sym, op)(x, y), {"x": ST[a], "y": ST[b]}
    if kind == "dot":
        _, a, b, ta, tb = parts
        x, y = sym.Variable("x"), sym.Variable("y")
        return (sym.dot(x, y, transpose_a=ta == "T", transpose_b=tb == "T"),
                {"x": ST[a], "y": ST[b]})
    if kind == "addn":
        xs = [sym.Variable(f"x{i}") for i in range(len(parts) - 1)]
        return sym.add_n(*xs), {f"x{i}": ST[s] for i, s in enumerate(parts[1:])}
    if kind == "scalar":
        _, op, a = parts
        name = {"div": "_div_scalar", "mul": "_mul_scalar", "plus": "_plus_scalar",
                "minus": "_minus_scalar", "pow": "_power_scalar"}[op]
        return getattr(sym, name)(sym.Variable("x"), scalar=2.0), {"x": ST[a]}
    if kind == "unary":
        _, op, a = parts
        return getattr(sym, op)(sym.Variable("x")), {"x": ST[a]}
    if kind == "clip":
        return sym.clip(sym.Variable("x"), a_min=-1.0, a_max=1.0), {"x": ST[parts[1]]}
    if kind == "sum":
        return sym.sum(sym.Variable("x"), axis=int(parts[2])), {"x": ST[parts[1]]}
    if kind == "zeros_like":
        return sym.zeros_like(sym.Variable("x")), {"x": ST[parts[1]]}
    raise KeyError(kind)


CASES = _cases()


@pytest.mark.parametrize(("case", "want_out", "want_mode"), CASES, ids=[c[0] for c in CASES])
def test_storage_type_and_dispatch_match_mxnet(case, want_out, want_mode):
    net, stypes = _graph(case)
    if case in DIFFERENT:
        want_out, want_mode = DIFFERENT[case]
    seeds = [None] * net.index.num_entries
    for nid in net.index.input_nodes:
        seeds[net.index.row_ptr[nid]] = SType.parse(stypes[net.index.nodes[nid].name])
    g = infer_storage_type(net.graph(stype=tuple(seeds)))
    out = g.attrs.stype[net.index.outputs[0]].label
    modes = [m.value for m, n in zip(g.attrs.dispatch, net.index.nodes) if n.op is not None]
    assert out == want_out, json.dumps({"case": case, "got": out})
    if want_mode is not None:
        assert modes[-1] == want_mode


def test_table_covers_the_operator_families():
    kinds = {c[0].split(":")[0] for c in CASES}
    assert {"bin", "dot", "addn", "scalar", "unary", "sum", "zeros_like", "clip"} <= kinds
    assert len(CASES) >= 60


def test_csr_times_csr_falls_back_to_dense():
    op = REGISTRY["dot"]
    p, _ = op.parse_params({})
    dec = infer_storage(op, p, (SType.CSR, SType.CSR))
    assert (dec.outs, dec.dispatch.value) == ((SType.DEFAULT,), "fcompute_fallback")


def test_symbol_infer_storage_type():
    x, w = sym.Variable("x"), sym.Variable("w")
    assert sym.dot(x, w, transpose_a=True).infer_storage_type(x="csr", w="default") == (
        ["csr", "default"], ["row_sparse"], [])
    q0 = sym._contrib_quadratic(x, a=1.0, b=2.0, c=0.0)
    q1 = sym._contrib_quadratic(x, a=1.0, b=2.0, c=1.0)
    assert q0.infer_storage_type(x="csr")[1] == ["csr"]
    assert q1.infer_storage_type(x="csr")[1] == ["default"]
    v = sym.Variable("v", stype="row_sparse")
    assert sym.sqrt(v).infer_storage_type()[1] == ["row_sparse"]
    with pytest.raises(StorageTypeError):
        sym.sqrt(x).infer_storage_type(x="coo")
