"""Compile every CUDA kernel variant with nvcc for sm_80 and sm_90 (no GPU needed).

The default run emits PTX for sm_80 with NVVM unoptimised (nvcc's front end and code
generation: every language, overload and type error) for a covering subset of the kernels
(``codegen.covering``: every template, expression, dtype, req and algorithm); the ``slow`` run
emits PTX for every kernel and architecture and assembles optimised cubins with ptxas.
Successful translation units are remembered in ``$NNSYM_CACHE_DIR/cuda-check-v2`` by a hash of
source, nvcc version, arch, mode and flags. The sparse kernels: tests/cuda/test_cuda_sparse.py.
"""

from __future__ import annotations

import time

import pytest

from nnsym.cuda import source as cusrc
from nnsym.devtools.cuda import codegen as cg
from nnsym.ir.spec import KernelSpec

pytestmark = pytest.mark.skipif(cusrc.nvcc() is None, reason="nvcc is not on PATH")


def _check(mode: str, archs: tuple[str, ...] = cg.ARCHS, every: bool = True) -> None:
    vs = cg.all_variants() if every else cg.covering(cg.all_variants())
    t0 = time.perf_counter()
    results = cg.nvcc_check(vs, archs=archs, mode=mode)
    wall = time.perf_counter() - t0
    bad = [r for r in results if not r.ok]
    assert not bad, "\n\n".join(r.log for r in bad[:3])
    compiled = {n for r in results for n in r.names}
    assert compiled == {v.name for v in cg.unique_specs(vs)}
    assert {r.arch for r in results} == set(archs)
    fresh = [r for r in results if not r.cached]
    print(f"nvcc --{mode}: {len(compiled)} kernels x {len(archs)} archs in "
          f"{len(results)} units, {len(fresh)} compiled ({sum(r.seconds for r in fresh):.1f} s "
          f"of nvcc), {wall:.1f} s wall")


def test_covering_variants_compile_to_ptx_for_the_first_arch():
    # the default run: one architecture, and the covering subset (every template, expression,
    # dtype, req and algorithm once: a cold check of every variant costs about a minute of nvcc
    # per architecture); every variant on every architecture in the slow runs below
    _check("ptx", cg.ARCHS[:1], every=False)


@pytest.mark.slow
def test_every_variant_compiles_to_ptx_for_the_first_arch():
    _check("ptx", cg.ARCHS[:1])


@pytest.mark.slow
def test_every_variant_compiles_to_ptx_for_sm80_and_sm90():
    _check("ptx")


@pytest.mark.slow
def test_every_variant_assembles_to_cubin_for_sm80_and_sm90():
    _check("cubin")


def test_the_check_catches_errors(tmp_path):
    """A kernel that does not compile fails the check (and is not remembered)."""
    good = next(v for v in cg.all_variants() if v.name == "nnk_relu_float32_write")
    spec = KernelSpec.make(good.spec.template, **{**good.ctx, "expr": "no_such_function(x)"})
    bad = cg.Variant(good.op, "", spec, good.ia, good.fa, good.ptr_shapes, good.ptr_dtypes,
                     name="nnk_broken")
    for _ in range(2):
        (res,) = cg.nvcc_check([bad], archs=("sm_80",), cache_dir=tmp_path)
        assert not res.ok and not res.cached and "no_such_function" in res.log


def test_integer_math_needs_the_tgmath_prologue(tmp_path):
    """CUDA has no device overloads of exp(int) or fabs(int): the prologue's <tgmath.h>
    dispatch (NNSYM_TGMATH) is what makes the integer variants compile, computing in double as
    the C kernels do."""
    v = next(v for v in cg.all_variants() if v.name == "nnk_exp_int32_write")
    source = cg.render_unit([v], "cuda")
    assert "exp(x)" in source
    ok, log = cusrc.nvcc_compile(source, "sm_90")
    assert ok, log
    ok, log = cusrc.nvcc_compile(source.replace("    NNSYM_TGMATH\n", ""), "sm_90")
    assert not ok and "exp" in log
