"""The CUDA kernels run on the CPU through the host shim, compared bit for bit with the C kernels.

Every distinct kernel spec of the three families (the default run: a subset holding every
expression and every dtype/req/mode combination; ``-m slow``: all of them) runs once, on
random inputs with special values (0, -0, +-inf, NaN, halves), through a 3 x 32 grid (so every
grid-stride loop wraps), and its output bytes are compared with the C kernel's on the same
inputs:

* the C kernels run through the existing path (``nnsym.codegen.compiler.functions``: -O3, no FMA
  contraction, glibc's libmvec for the functions ``compiler.vector_math()`` lists);
* expressions that call none of those functions must agree bitwise;
* expressions that call one (exp, log, tanh, pow...) are compared bitwise with the same C kernels
  built with scalar libm (``render_unit(..., vector_math=())``, same flags), which is what the
  shim calls; against the libmvec build they agree within a few ulp only (libmvec's vector
  variants are not correctly rounded), so that comparison is a tolerance.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import cffi
import numpy as np
import pytest
from cuda_harness import (
    BLOCK,
    GRID,
    calls_any,
    close,
    launch_shape,
    make_arrays,
    run_c,
    same_bits,
)
from family_harness import build_scalar_c

from nnsym.codegen import compiler
from nnsym.devtools.cuda import codegen as cg
from nnsym.devtools.cuda import shim

pytestmark = pytest.mark.skipif(
    shim.cxx() is None or compiler.compiler() is None, reason="needs gcc and g++")


LARGE_LAUNCH = "nnk_contrib_quadratic_float32_add"  # test_one_kernel_large_launch's kernel


def _all_variants() -> list[cg.Variant]:
    return cg.unique_specs(v for v in cg.all_variants() if v.family in cg.ELEMWISE)


def _cover(vs: list[cg.Variant]) -> list[cg.Variant]:
    """The default run's subset (about a tenth; ``cg.covering``): every expression, and every
    dtype/req/mode/broadcast-form combination, once; the ``slow`` run checks every variant."""
    return cg.covering(vs, always=[LARGE_LAUNCH])


class Builds:
    """Everything compiled once per module: the shim (two libraries, built in parallel), the C
    kernels through nnsym's compiler, the scalar-libm C build of the libmvec-affected ones."""

    def __init__(self, variants: list[cg.Variant], every: bool) -> None:
        self.variants = variants
        self.every = every
        vm = compiler.vector_math()
        self.affected = [v for v in self.variants if calls_any(v.expr, vm)]
        self.affected_names = {v.name for v in self.affected}
        halves = [self.variants[i::2] for i in range(2)]
        with ThreadPoolExecutor(3) as pool:
            c_future = pool.submit(compiler.functions, [v.spec for v in self.variants])
            scalar_future = pool.submit(build_scalar_c, self.affected)
            libs = list(pool.map(shim.build, halves))
            self.c_funcs = dict(zip((v.name for v in self.variants), c_future.result()))
            self.scalar_ffi, self.scalar_lib = scalar_future.result()
        self.lib_of = {n: lib for lib in libs for n in lib.names}

    def run_shim(self, v: cg.Variant, arrays: list[np.ndarray], grid: int = GRID,
                 block: int = BLOCK) -> None:
        _, ia = launch_shape(v)
        self.lib_of[v.name].launch(v.name, arrays, ia, v.fa, grid, block)

    def run_c(self, v: cg.Variant, arrays: list[np.ndarray]) -> None:
        _, ia = launch_shape(v)
        run_c(self.c_funcs[v.name], compiler.FFI, arrays, ia, v.fa)

    def run_scalar_c(self, v: cg.Variant, arrays: list[np.ndarray]) -> None:
        _, ia = launch_shape(v)
        run_c(getattr(self.scalar_lib, v.spec.name), self.scalar_ffi, arrays, ia, v.fa)


@pytest.fixture(scope="module", params=["cover", pytest.param("every", marks=pytest.mark.slow)])
def builds(request) -> Builds:
    every = _all_variants()
    return Builds(every if request.param == "every" else _cover(every), request.param == "every")


def _outputs(b: Builds, v: cg.Variant, ref: str) -> tuple[np.ndarray, np.ndarray]:
    arrays = make_arrays(v)
    mine = [a.copy() for a in arrays]
    theirs = [a.copy() for a in arrays]
    b.run_shim(v, mine)
    (b.run_c if ref == "c" else b.run_scalar_c)(v, theirs)
    for k in range(len(arrays) - 1):  # inputs untouched
        assert same_bits(mine[k], arrays[k]) and same_bits(theirs[k], arrays[k])
    return mine[-1], theirs[-1]


def test_every_variant_is_covered(builds):
    every = _all_variants()
    assert len(every) > 2000
    assert {v.family for v in builds.variants} == {"unary", "binary", "backward"}
    assert len(builds.lib_of) == len(builds.variants)
    if builds.every:
        assert len(builds.variants) == len(every)
    else:  # every expression and every dtype/req/mode combination is in the subset
        assert ({(v.family, str(v.mode), v.expr) for v in builds.variants}
                == {(v.family, str(v.mode), v.expr) for v in every})
        assert ({(v.family, v.in_dtype, v.out_dtype, v.req) for v in builds.variants}
                == {(v.family, v.in_dtype, v.out_dtype, v.req) for v in every})


def test_bitwise_equal_to_the_c_kernels(builds):
    """Expressions without libmvec functions: the shim's output bytes equal the C kernel's."""
    bad = []
    checked = 0
    for v in builds.variants:
        if v.name in builds.affected_names:
            continue
        mine, theirs = _outputs(builds, v, "c")
        checked += 1
        if not same_bits(mine, theirs):
            bad.append(f"{v.name} ({v.expr}): {int((mine != theirs).sum())} elements differ")
    assert checked == len(builds.variants) - len(builds.affected)
    assert checked > (1800 if builds.every else 200)
    assert not bad, "\n".join(bad[:20])


def test_libm_variants_bitwise_equal_to_scalar_libm_c(builds):
    """Expressions calling exp/log/tanh/pow...: bitwise equal to the C kernels with scalar libm
    (the functions the shim calls)."""
    assert len(builds.affected) > (300 if builds.every else 30)
    bad = []
    for v in builds.affected:
        mine, theirs = _outputs(builds, v, "scalar")
        if not same_bits(mine, theirs):
            bad.append(f"{v.name} ({v.expr})")
    assert not bad, "\n".join(bad[:20])


def test_libm_variants_close_to_the_libmvec_c_kernels(builds):
    """Against the production C build (libmvec vector functions: not correctly rounded) the
    libm-calling variants agree within a few ulp; most are bitwise equal anyway."""
    bad = []
    bitwise = 0
    for v in builds.affected:
        mine, theirs = _outputs(builds, v, "c")
        bitwise += same_bits(mine, theirs)
        if not close(mine, theirs):
            bad.append(f"{v.name} ({v.expr})")
    print(f"libm-calling variants bitwise equal to the libmvec C build: {bitwise} of "
          f"{len(builds.affected)}")
    assert not bad, "\n".join(bad[:20])


def _sample(builds: Builds) -> list[cg.Variant]:
    """One variant per family, dtype and (binary) mode, write and add."""
    seen, out = set(), []
    for v in builds.variants:
        key = (v.family, v.in_dtype, v.out_dtype, v.req, v.mode)
        if key not in seen and v.name not in builds.affected_names:
            seen.add(key)
            out.append(v)
    return out


@pytest.mark.parametrize("grid,block", [(1, 1), (2, 7), (8, 64), (1, 1024)])
def test_any_launch_shape_gives_the_same_bits(builds, grid, block):
    """Fewer threads than elements (loops wrap many times) or more (bounds checks)."""
    for v in _sample(builds):
        arrays = make_arrays(v)
        mine, theirs = [a.copy() for a in arrays], [a.copy() for a in arrays]
        builds.run_shim(v, mine, grid, block)
        builds.run_c(v, theirs)
        assert same_bits(mine[-1], theirs[-1]), (v.name, grid, block)


def test_in_place(builds):
    """The output may be the first input (the operators' in-place option)."""
    for v in _sample(builds):
        if v.in_dtype != v.out_dtype or (v.family == "binary" and v.ctx["inner"] == "sv"):
            continue
        if v.family == "binary" and v.ptr_shapes[0] != v.ptr_shapes[-1]:
            continue
        arrays = make_arrays(v)
        mine, theirs = [a.copy() for a in arrays], [a.copy() for a in arrays]
        mine[-1], theirs[-1] = mine[0], theirs[0]
        builds.run_shim(v, mine)
        builds.run_c(v, theirs)
        assert same_bits(mine[0], theirs[0]), v.name


# --- the prologue's helpers -----------------------------------------------------------------

_EXTRA = r"""
extern "C" void nnsym_test_uniform(uint64_t seed, const uint64_t *i, double *out, int64_t n)
{ for (int64_t k = 0; k < n; ++k) out[k] = nnsym_uniform(seed, i[k]); }
extern "C" void nnsym_test_f2h(const float *f, const double *d, const int64_t *q,
                               uint16_t *hf, uint16_t *hd, uint16_t *hq, int64_t n)
{
    for (int64_t k = 0; k < n; ++k) {
        __half a = nnsym_f2h(f[k]), b = nnsym_f2h(d[k]), c = nnsym_f2h((long long)q[k]);
        __builtin_memcpy(&hf[k], &a, 2); __builtin_memcpy(&hd[k], &b, 2);
        __builtin_memcpy(&hq[k], &c, 2);
    }
}
"""
_EXTRA_CDEF = """
void nnsym_test_uniform(uint64_t seed, const uint64_t *i, double *out, int64_t n);
void nnsym_test_f2h(const float *f, const double *d, const int64_t *q, uint16_t *hf,
                    uint16_t *hd, uint16_t *hq, int64_t n);
"""


def test_uniform_and_half_conversions_match_c_and_numpy():
    lib = shim.build([], _EXTRA, _EXTRA_CDEF)
    ffi = lib.ffi
    # nnsym_uniform: the CUDA prologue's against the C prologue's
    idx = np.arange(0, 5000, 7, dtype=np.uint64)
    got = np.empty(idx.size)
    lib.lib.nnsym_test_uniform(123456789, ffi.from_buffer("uint64_t[]", idx),
                               ffi.from_buffer("double[]", got), idx.size)
    c_src = cg.c_prologue() + (
        "void t(uint64_t seed, const uint64_t *i, double *o, int64_t n)\n"
        "{ for (int64_t k = 0; k < n; ++k) o[k] = nnsym_uniform(seed, i[k]); }\n")
    cdef = "void t(uint64_t seed, const uint64_t *i, double *o, int64_t n);"
    key = compiler.library_key(c_src, compiler.flags(), ["-lm"], cdef=cdef)
    entry = compiler.build_library(key, c_src, compiler.flags(), ["-lm"], cdef=cdef)
    cffi_ = cffi.FFI()
    cffi_.cdef(cdef)
    clib = cffi_.dlopen(str(entry / "lib.so"))
    want = np.empty(idx.size)
    clib.t(123456789, cffi_.from_buffer("uint64_t[]", idx), cffi_.from_buffer("double[]", want),
           idx.size)
    assert same_bits(got, want) and 0 <= got.min() and got.max() < 1
    # float16 stores: one rounding to nearest even from float, double and integer values
    rng = np.random.default_rng(0)
    d = np.concatenate([rng.uniform(-70000, 70000, 2000), rng.normal(0, 1e-4, 2000),
                        [0.0, -0.0, 65504.0, 65520.0, 2049.0, 2051.0, 1 + 2.0**-11,
                         1 + 2.0**-11 + 2.0**-40, 6e-8, 3e-8]])
    f = d.astype(np.float32)
    q = np.concatenate([rng.integers(-100000, 100000, d.size - 4), [2049, 2051, 4097, 65520]])
    out = [np.empty(d.size, np.uint16) for _ in range(3)]
    lib.lib.nnsym_test_f2h(ffi.from_buffer("float[]", f), ffi.from_buffer("double[]", d),
                           ffi.from_buffer("int64_t[]", q),
                           *(ffi.from_buffer("uint16_t[]", o) for o in out), d.size)
    with np.errstate(over="ignore"):  # beyond 65520 rounds to inf, as it should
        want = [a.astype(np.float16).view(np.uint16) for a in (f, d, q)]
    assert same_bits(out[0], want[0])
    assert same_bits(out[1], want[1])  # one rounding: 1 + 2**-11 + 2**-40 goes up
    assert same_bits(out[2], want[2])


def test_one_kernel_large_launch(builds):
    """A long grid-stride run: n = 100003 elements on 5 x 128 threads."""
    v = next(v for v in builds.variants if v.name == LARGE_LAUNCH)
    n = 100_003
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    out = rng.standard_normal(n).astype(np.float32)
    mine, theirs = out.copy(), out.copy()
    builds.lib_of[v.name].launch(v.name, [x, mine], [n], [0.5, -1.0, 2.0], 5, 128)
    run_c(builds.c_funcs[v.name], compiler.FFI, [x, theirs], [n], [0.5, -1.0, 2.0])
    assert same_bits(mine, theirs)
