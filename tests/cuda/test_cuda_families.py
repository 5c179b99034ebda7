"""Every kernel family beyond the elementwise three, run through the host shim and compared with
its C kernel on the same inputs: bit for bit where each element is computed in C's order by
one thread (gather and scatter-style kernels, copies, shape kernels), to a few ulp where the
CUDA kernel reduces in another order (block reductions, GEMM tiles: ``codegen.REORDERING``).

Kernels run over 3 blocks of 64 threads (grid-stride loops wrap, block reductions combine two
warps), on random inputs; indices are drawn valid and repeating. The default run takes up to
``SAMPLE`` distinct kernels per family, covering every (dtype, write mode, algo); the ``slow``
test runs every distinct kernel. ``gpu``-marked: the same against a real device."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from family_harness import FamilyRuns, compare

from nnsym.codegen import compiler
from nnsym.cuda import source as cusrc
from nnsym.devtools.cuda import codegen as cg
from nnsym.devtools.cuda import shim
from nnsym.ir.spec import KernelSpec

pytestmark = pytest.mark.skipif(
    shim.cxx() is None or compiler.compiler() is None, reason="needs gcc and g++")


def _families() -> list[str]:
    return sorted({v.family for v in cg.all_variants()} - set(cg.ELEMWISE))


# Kernels per family in the default run: every (dtype, write mode, algo) first, then the rest in
# name order up to this many; the slow test runs them all.
SAMPLE = 16


def sample(vs: list[cg.Variant], limit: int = SAMPLE) -> list[cg.Variant]:
    """A deterministic subset covering every (input dtype, output dtype, req, algo) of ``vs``
    (``algo``: the kernel a template holding several chooses, e.g. conv_forward.c.j2's)."""
    seen: set[tuple[str, str, str, str]] = set()
    first, rest = [], []
    for v in sorted(vs, key=lambda v: v.name):
        key = (v.in_dtype, v.out_dtype, v.req, str(v.ctx.get("algo", "")))
        (rest if key in seen else first).append(v)
        seen.add(key)
    return (first + rest)[: max(limit, len(first))]


@pytest.mark.parametrize("family", _families())
def test_shim_agrees_with_c(family):
    _check_family(sample(cg.unique_specs(cg.variants(family=family))))


@pytest.mark.slow
@pytest.mark.parametrize("family", _families())
def test_shim_agrees_with_c_every_kernel(family):
    _check_family(cg.unique_specs(cg.variants(family=family)))


def _check_family(vs: list[cg.Variant]) -> None:
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


# Kernels per module on a device: small units build in parallel, and far faster than one
# module per family (nvcc took over 5 minutes on broadcast_reduce_backward's).
DEVICE_UNIT = 64


def device_units(vs: list[cg.Variant]) -> list[list[KernelSpec]]:
    """The family's kernels in the modules the device test loads (``precompile_device.py``
    builds their cubins ahead of a device run)."""
    specs = sorted({v.spec for v in vs}, key=lambda s: s.name)
    return [specs[i:i + DEVICE_UNIT] for i in range(0, len(specs), DEVICE_UNIT)]


@pytest.mark.gpu
@pytest.mark.parametrize("family", _families())
def test_device_agrees_with_c(family):
    """On a real device (cupy): every kernel of the family against its C kernel. Kernels that
    call transcendental functions (libdevice vs glibc) are compared with a tolerance."""
    from cuda_harness import INEXACT_MATH, calls_any, close, undefined_conversion
    from family_harness import make_arrays

    from nnsym.cuda import runtime

    if not runtime.available():
        pytest.skip("needs cupy and a CUDA device")
    be = runtime.CupyBackend()
    cp = be.cp
    vs = cg.unique_specs(cg.variants(family=family))
    runs = FamilyRuns(vs)
    units = device_units(vs)
    if cusrc.nvcc() is not None:  # build the units' cubins in parallel (nnsym's cubin cache)
        arch = f"sm_{cp.cuda.Device().compute_capability}"
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(lambda u: runtime.cubin(runtime.kernel_source(u), arch), units))
    fns = {}
    for u in units:
        fns.update(be.functions(u))
    bad = []
    for v in vs:
        _, c_arrays, _ = runs.run(v)
        dev = [cp.asarray(a) for a in make_arrays(v)]
        work = max(int(np.prod(s)) for s in v.ptr_shapes)
        be.launch(fns[v.spec.name], [be.ptr(d) for d in dev], v.ia, v.fa, work)
        inexact = calls_any(cg.render_kernel(v, "cuda"), INEXACT_MATH)
        for k in range(len(v.ptr_shapes)):
            mine = dev[k].get()
            if undefined_conversion(v.name, mine, inexact):
                continue
            if inexact and mine.dtype.kind == "f":  # a few ulp, or the family's reorder bound
                ok = close(mine, c_arrays[k], scale=2.0) or compare(v, mine, c_arrays[k]) is None
                why = None if ok else "differs beyond a few ulp"
            else:
                why = compare(v, mine, c_arrays[k])
            if why:
                bad.append(f"{v.name} pointer {k}: {why}")
    assert not bad, "\n".join(bad[:20])
