"""The operator library's structure, from the registry: every storage-type rule that dispatches
to a storage kernel holds one; every template under nnsym/ops is used, by an operator of its own
family (or lives in ops/common); and every sparse storage signature an operator declares runs
through ``nnsym.nd`` and matches the dense kernel on densified inputs (table-driven like the
dense and gradient tables)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import nnsym.ops
from nnsym import nd
from nnsym.devtools.cuda import codegen as cg
from nnsym.devtools.cuda import sparse as cuda_sparse
from nnsym.ir.opdef import DENSE
from nnsym.ndarray.ndarray import invoke
from nnsym.ops import REGISTRY
from nnsym.ops.common import sparse as common_sparse
from nnsym.ops.common.stype import infer_storage, zero_preserving
from nnsym.ops.elemwise import fused
from nnsym.testing import make_inputs
from nnsym.types import DispatchMode, SType

OPS_DIR = Path(nnsym.ops.__file__).resolve().parent
OPS = sorted(REGISTRY.values(), key=lambda op: op.name)
D, R, C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR


def _family(module: str) -> str:
    """``nnsym.ops.<family>.<module>`` -> family."""
    parts = module.split(".")
    assert parts[:2] == ["nnsym", "ops"] and len(parts) >= 4, module
    return parts[2]


def test_every_storage_kernel_rule_has_its_kernel():
    missing = [(op.name, rule.ins) for op in OPS for rule in op.stype_rules
               if rule.dispatch == DispatchMode.FCOMPUTE_EX and not callable(rule.kernel)]
    assert not missing, f"fcompute_ex rules without a storage kernel: {missing}"
    # and every kernel is a function of a family module (no strings, no registry lookups)
    homes = {_family(rule.kernel.__module__) for op in OPS for rule in op.stype_rules
             if rule.kernel is not None}
    assert homes <= {p.name for p in OPS_DIR.iterdir() if (p / "__init__.py").is_file()}


def _template_files() -> set[str]:
    return {str(p.relative_to(OPS_DIR)) for p in OPS_DIR.rglob("*.c.j2")}


def _imported_templates() -> set[str]:
    """Templates other templates import or include (macro files)."""
    out: set[str] = set()
    for p in OPS_DIR.rglob("*.j2"):
        out |= set(re.findall(r'{%\s*(?:import|include)\s+"([^"]+\.c\.j2)"', p.read_text()))
    return out


def test_every_template_is_used_by_its_own_family():
    used: dict[str, set[str]] = {}
    for v in cg.all_variants():
        fam = _family(REGISTRY[v.op].kernels[DENSE].lower.__module__) \
            if v.op in REGISTRY and DENSE in REGISTRY[v.op].kernels else None
        used.setdefault(v.spec.template, set()).add(fam or "?")
    for t in (*cuda_sparse.TEMPLATES, *common_sparse.HOST_ONLY_TEMPLATES):
        used.setdefault(t, set()).add("storage kernels")
    for t in fused.TEMPLATES:  # rendered for the fusion pass's groups, not for one operator
        used.setdefault(t, set()).add("elemwise")
    orphans = sorted(_template_files() - set(used) - _imported_templates())
    assert not orphans, f"templates no operator renders: {orphans}"
    strangers = sorted(
        (t, sorted(fams)) for t, fams in used.items()
        if not t.startswith("common/") and t.split("/")[0] not in fams
        and fams != {"storage kernels"})
    assert not strangers, f"templates rendered by operators of another family: {strangers}"


# ---------------------------------------------------------------------------------------------
# Every declared sparse signature against the densified reference


def _signatures(op, params, n_in: int) -> list[tuple[SType, ...]]:
    """The storage signatures (not all dense) that the operator's rules send to a storage
    kernel for these parameters."""
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
    # first matching row wins, and a row's ``when`` may refuse these parameters
    return [s for s in sigs if infer_storage(op, params, s).dispatch == DispatchMode.FCOMPUTE_EX]


def _sparse_cases():
    for op in OPS:
        if op.value_shaped:  # no dense kernel to compare with: tests/dynamic
            continue
        for ex in op.examples:
            params, _ = op.parse_params(ex.params)
            for sig in _signatures(op, params, len(ex.shapes)):
                tag = ",".join(s.label for s in sig)
                yield pytest.param(op, ex, sig, id=f"{op.name}-{ex}-{tag}")


SPARSE_CASES = list(_sparse_cases())


def test_the_sparse_table_covers_every_storage_kernel():
    """Every operator with a storage kernel and examples has at least one case above."""
    covered = {p.values[0].name for p in SPARSE_CASES}
    want = {op.name for op in OPS if op.examples and not op.value_shaped and any(
        r.dispatch == DispatchMode.FCOMPUTE_EX for r in op.stype_rules)}
    assert want <= covered, sorted(want - covered)


def _sparsify(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """About half the elements (and some whole rows) set to zero."""
    a = a.copy()
    if a.ndim and a.size:
        a[rng.random(a.shape) < 0.5] = 0
        a[rng.random(a.shape[0]) < 0.3] = 0
    return a


@pytest.mark.parametrize(("op", "ex", "sig"), SPARSE_CASES)
def test_sparse_signature_matches_the_densified_reference(op, ex, sig):
    params, _ = op.parse_params(ex.params)
    rng = np.random.default_rng(7)
    inputs = [_sparsify(a, rng) for a in make_inputs(op, ex)]
    if any(s == C and a.ndim != 2 for s, a in zip(sig, inputs)) or \
            any(s == R and a.ndim == 0 for s, a in zip(sig, inputs)):
        pytest.skip("the example's shapes do not fit this storage type")
    dec = infer_storage(op, params, sig)
    assert dec.dispatch == DispatchMode.FCOMPUTE_EX and dec.kernel is not None
    want = invoke(op, [nd.array(a) for a in inputs], dict(ex.params),
                  storage_rules=False)[: op.num_visible(params)]
    args = [nd.array(a).tostype(s.label) for a, s in zip(inputs, sig)]
    got = invoke(op, args, dict(ex.params))
    assert len(got) == len(want)
    for g, w, st in zip(got, want, dec.outs):
        assert g.stype == st.label
        g, w = g.asnumpy(), w.asnumpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        tol = {"float16": 1e-3, "float32": 1e-5}.get(w.dtype.name, 1e-12)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
