"""Sparse fuzz driver: corrupted csr / row_sparse arrays through every sparse operator.

Run as a child process by ``test_sparse_fuzz.py`` (so that a signal or a hang is caught and
attributed): ``python sparse_fuzz.py SEED START STOP``. Cases ``START..STOP`` of the list
below each build one operator call from the registry's examples (every storage signature an
operator sends to a storage kernel, as ``tests/ops/test_structure.py`` enumerates them), plus
the arrays' own methods and a bound graph; one sparse input gets its index arrays corrupted
through the writable ``.indices`` / ``.indptr`` views (a seeded random position and value:
out of range, negative, huge, a neighbour's value, or one that keeps the array valid). Each
case must either raise an NNSymError, or (when the structure stayed canonical, judged by an
independent numpy check) compute the same as the dense reference. Prints one JSON line:
counts and every failure.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

import nnsym as mx
from nnsym import nd
from nnsym.errors import NNSymError
from nnsym.ir.opdef import OpDef
from nnsym.ndarray.ndarray import invoke
from nnsym.ops import REGISTRY
from nnsym.ops.common.stype import infer_storage, zero_preserving
from nnsym.testing import make_inputs
from nnsym.types import DispatchMode, SType

D, R, C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR
ROUNDS = 3  # corruptions per operator case


def _signatures(op: OpDef, params: Any, n_in: int) -> list[tuple[SType, ...]]:
    sigs: list[tuple[SType, ...]] = []
    for rule in op.stype_rules:
        if rule.dispatch != DispatchMode.FCOMPUTE_EX or len(rule.ins) != n_in:
            continue
        sig = tuple(s if s is not None else D for s in rule.ins)
        if any(s != D for s in sig) and sig not in sigs:
            sigs.append(sig)
    if op.expr is not None and n_in == 1 and op.reference is not None and \
            zero_preserving(op, params):
        sigs += [s for s in ((C,), (R,)) if s not in sigs]
    return [s for s in sigs if infer_storage(op, params, s).dispatch == DispatchMode.FCOMPUTE_EX]


def _op_cases() -> list[tuple[str, Any, tuple[SType, ...]]]:
    out = []
    for op in sorted(REGISTRY.values(), key=lambda o: o.name):
        for ex in op.examples:
            params, _ = op.parse_params(ex.params)
            for sig in _signatures(op, params, len(ex.shapes)):
                shapes = list(ex.shapes)
                if any(s == C and len(sh) != 2 for s, sh in zip(sig, shapes)) or \
                        any(s == R and len(sh) == 0 for s, sh in zip(sig, shapes)):
                    continue
                out.append((op.name, ex, sig))
    return out


def _method_cases() -> list[tuple[str, Callable[[Any], Any], str]]:
    ones = nd.ones
    return [
        ("asnumpy", lambda x: x.asnumpy(), "any"),
        ("copy", lambda x: x.copy(), "any"),
        ("copyto_dense", lambda x: x.copyto(ones(x.shape)), "any"),
        ("copyto_same", lambda x: x.copyto(nd.sparse.zeros(x.stype, x.shape)), "any"),
        ("tostype_default", lambda x: x.tostype("default"), "any"),
        ("tostype_csr", lambda x: x.tostype("csr"), "any"),
        ("tostype_rsp", lambda x: x.tostype("row_sparse"), "any"),
        ("astype", lambda x: x.astype("float64"), "any"),
        ("asscipy", lambda x: x.asscipy(), "any"),
        ("slice", lambda x: x[1:], "csr"),
        ("row", lambda x: x[0], "csr"),
        ("check_format", lambda x: x.check_format(), "any"),
        ("setitem_dense", lambda x: ones(x.shape).__setitem__(slice(None), x), "any"),
        ("setitem_sparse", lambda x: nd.sparse.zeros(x.stype, x.shape).__setitem__(
            slice(None), x), "any"),
        ("sgd_update", lambda x: nd.sgd_update(ones(x.shape), x, lr=0.1), "row_sparse"),
        ("adam_update", lambda x: nd.adam_update(ones(x.shape), x, nd.zeros(x.shape),
                                                 nd.zeros(x.shape), lr=0.1), "row_sparse"),
        ("save", lambda x: nd.save(f"{tempfile.gettempdir()}/nnsym-fuzz-{os.getpid()}.params",
                                   [x]), "any"),
        ("graph_dot", _graph_dot, "csr"),
    ]


def _graph_dot(x: Any) -> Any:
    data = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("w")
    exe = mx.sym.dot(data, w).simple_bind(mx.cpu(), data=x.shape, w=(x.shape[1], 2),
                                          stype_dict={"data": "csr"})
    exe.arg_dict["w"][:] = 1
    exe.forward(is_train=True, data=x)
    exe.backward(nd.ones(exe.outputs[0].shape))
    return exe.grad_dict["w"]


def _sparsify(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    a = a.copy()
    if a.ndim and a.size:
        a[rng.random(a.shape) < 0.4] = 0
    return a


def _corrupt(x: Any, rng: np.random.Generator) -> None:
    """One or two writes through the views."""
    views = [x.indices] + ([x.indptr] if x.stype == "csr" else [])
    bound = max(x.shape[1] if x.stype == "csr" else x.shape[0], 1)
    for _ in range(int(rng.integers(1, 3))):
        v = views[int(rng.integers(len(views)))]
        n = v.shape[0]
        if n == 0:
            continue
        i = int(rng.integers(n))
        cur = v.asnumpy()
        choice = int(rng.integers(9))
        value = [-1, bound, bound + 1, 10**9, -(2**63), 2**63 - 1,
                 int(cur[i - 1]) if i else 0, int(cur[(i + 1) % n]),
                 int(rng.integers(0, bound))][choice]
        v[i] = value


def _canonical(x: Any) -> bool:
    """An independent numpy check of canonical structure."""
    ix = x.indices.asnumpy()
    if x.stype == "row_sparse":
        return bool(np.all((ix >= 0) & (ix < x.shape[0])) and np.all(np.diff(ix) > 0))
    ip = x.indptr.asnumpy()
    if ip[0] != 0 or ip[-1] != ix.size or np.any(np.diff(ip) < 0):
        return False
    if not np.all((ix >= 0) & (ix < x.shape[1])):
        return False
    return all(bool(np.all(np.diff(ix[ip[r]:ip[r + 1]]) > 0)) for r in range(x.shape[0]))


def _dense_of(x: Any) -> np.ndarray:
    """The dense value of a canonical sparse array, by numpy alone."""
    d = x.data.asnumpy()
    ix = x.indices.asnumpy()
    out = np.zeros(x.shape, d.dtype)
    if x.stype == "row_sparse":
        out[ix] = d
        return out
    ip = x.indptr.asnumpy()
    for r in range(x.shape[0]):
        out[r, ix[ip[r]:ip[r + 1]]] = d[ip[r]:ip[r + 1]]
    return out


def _values(res: Any) -> list[np.ndarray]:
    items = res if isinstance(res, (list, tuple)) else [res]
    return [r.asnumpy() if hasattr(r, "asnumpy") else np.asarray(r) for r in items
            if r is not None and not isinstance(r, (int, float))]


def run(seed: int, start: int, stop: int) -> dict[str, Any]:
    ops = _op_cases()
    methods = _method_cases()
    cases: list[tuple[str, int]] = [("op", i) for i in range(len(ops)) for _ in range(ROUNDS)]
    cases += [("method", i) for i in range(len(methods)) for _ in range(ROUNDS * 4)]
    counts = {"cases": 0, "computed": 0, "rejected": 0, "raw": 0, "wrong": 0,
              "total_cases": len(cases)}
    failures: list[str] = []
    for k in range(start, min(stop, len(cases))):
        rng = np.random.default_rng([seed, k])
        kind, i = cases[k]
        counts["cases"] += 1
        try:
            if kind == "op":
                name, ex, sig = ops[i]
                op = REGISTRY[name]
                inputs = [_sparsify(a, rng) for a in make_inputs(op, ex)]
                args = [nd.array(a).tostype(s.label) for a, s in zip(inputs, sig)]
                sparse_at = [j for j, s in enumerate(sig) if s != D]
                j = sparse_at[int(rng.integers(len(sparse_at)))]
                _corrupt(args[j], rng)
                label = f"{name} {ex} {[s.label for s in sig]} input {j}"
                ok = _canonical(args[j])
                if ok:
                    # copies: operators that update inputs in place (the optimizer updates'
                    # states) must not see the reference call's writes
                    ref_in = [nd.array(_dense_of(a)) if a.stype != "default" else a.copy()
                              for a in args]
                    want = invoke(op, ref_in, dict(ex.params), storage_rules=False)
                    want = want[: op.num_visible(op.parse_params(ex.params)[0])]
                call: Callable[[], Any] = functools.partial(invoke, op, args, dict(ex.params))
            else:
                name, fn, stype = methods[i]
                st = stype if stype != "any" else ("csr", "row_sparse")[int(rng.integers(2))]
                shape = (int(rng.integers(2, 7)), int(rng.integers(1, 6)))
                x = nd.array(_sparsify(rng.standard_normal(shape).astype(np.float32), rng))
                x = x.tostype(st)
                _corrupt(x, rng)
                label = f"{name} on {st} {shape}"
                ok = _canonical(x)
                want = None
                call = functools.partial(fn, x)
            try:
                res = call()
            except NNSymError as e:
                counts["rejected"] += 1
                if ok and "changed through" in str(e):
                    counts["wrong"] += 1
                    failures.append(f"{label}: a canonical structure was refused: {e}")
                continue
            counts["computed"] += 1
            if not ok:
                counts["wrong"] += 1
                failures.append(f"{label}: a broken structure was accepted")
            elif kind == "op":
                for g, w in zip(_values(res), _values(want)):
                    if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-3,
                                                             equal_nan=True):
                        counts["wrong"] += 1
                        failures.append(f"{label}: differs from the dense reference")
                        break
        except Exception as e:
            counts["raw"] += 1
            failures.append(f"case {k} ({kind} {i}): {type(e).__name__}: {e}\n"
                            + traceback.format_exc(limit=4))
    return {"counts": counts, "failures": failures[:20]}


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    seed, start, stop = (int(a) for a in sys.argv[1:4])
    print(json.dumps(run(seed, start, stop)))
