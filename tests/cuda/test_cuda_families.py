"""Every kernel family beyond the elementwise three, run through the host shim and compared with
its C kernel on the same inputs: bit for bit where each element is computed in C's order by
one thread (gather and scatter-style kernels, copies, shape kernels), to a few ulp where the
CUDA kernel reduces in another order (block reductions, GEMM tiles: ``codegen.REORDERING``).

Each distinct kernel spec runs once over 3 blocks of 64 threads (grid-stride loops wrap, block
reductions combine two warps), on random inputs; indices are drawn valid and repeating."""

from __future__ import annotations

import numpy as np
import pytest
from family_harness import FamilyRuns, compare

from nnsym.codegen import compiler
from nnsym.cuda import codegen as cg
from nnsym.cuda import shim

pytestmark = pytest.mark.skipif(
    shim.cxx() is None or compiler.compiler() is None, reason="needs gcc and g++")


def _families() -> list[str]:
    return sorted({v.family for v in cg.all_variants()} - set(cg.ELEMWISE))


@pytest.mark.parametrize("family", _families())
def test_shim_agrees_with_c(family):
    vs = cg.unique_specs(cg.variants(family=family))
    runs = FamilyRuns(vs)
    bad = []
    for v in vs:
        _, c_arrays, s_arrays = runs.run(v)
        n = len(v.ptr_shapes)
        for k in range(n):
            why = compare(v, s_arrays[k], c_arrays[k])
            if why:
                bad.append(f"{v.name} pointer {k}: {why}")
    assert not bad, "\n".join(bad[:20])


def test_families_beyond_elementwise_exist():
    fams = _families()
    assert fams, "no CUDA twins beyond the elementwise families"
    assert all(np.all([v.family == f for v in cg.variants(family=f)]) for f in fams)
