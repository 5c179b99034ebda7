"""Running a kernel variant of any family through its C kernel and through the host shim on the
same inputs (the C kernel's own ``p``/``ia``/``fa``, which the CUDA kernel takes unchanged)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import cffi
import numpy as np
from cuda_harness import run_c

from nnsym.codegen import compiler
from nnsym.codegen.render import render_unit, signature
from nnsym.devtools.cuda import codegen as cg
from nnsym.devtools.cuda import shim

# Pointer positions that hold indices (values drawn from [0, 3), so every index is valid and
# repeats: scatter kernels see collisions), per family.
INDEX_ARGS: dict[str, tuple[int, ...]] = {
    "embedding": (0,),
    "embedding_backward": (1,),
    "sparse_defs_retain": (1,),
}
# Launch shape of the shim runs: 3 blocks of 2 warps (grid-stride loops wrap, block
# reductions combine two warps).
GRID, BLOCK = 3, 64


def make_arrays(v: cg.Variant, seed: int = 0) -> list[np.ndarray]:
    """Inputs, outputs (prefilled: ``add`` reads them) and the workspace (zeroed bytes)."""
    rng = np.random.default_rng(zlib.crc32(v.name.encode()) + seed)
    out = []
    index_args = INDEX_ARGS.get(v.family, ())
    for k, (shape, dt) in enumerate(zip(v.ptr_shapes, v.ptr_dtypes)):
        d = np.dtype(dt)
        n = int(np.prod(shape)) if shape else 1
        if k in index_args:
            a = rng.integers(0, 3, n)
        elif d.kind == "f":
            a = rng.uniform(-2.0, 2.0, n)
        elif d.kind == "b":
            a = rng.integers(0, 2, n)
        elif d.kind == "u":
            a = rng.integers(0, 4, n)
        else:
            a = rng.integers(-3, 4, n)
        out.append(np.ascontiguousarray(np.asarray(a).astype(d).reshape(shape)))
    if v.workspace:
        out.append(np.zeros(v.workspace, np.uint8))
    return out


SET_CDEF = compiler.SET_BLAS_CDEF


def build_scalar_c(vs: Sequence[cg.Variant]) -> tuple[cffi.FFI, Any]:
    """The C kernels of ``vs`` built with scalar libm (what the shim's CUDA math calls), BLAS
    and the worker pool set as nnsym's own build sets them."""
    specs = sorted({v.spec for v in vs}, key=lambda s: s.name)
    source = render_unit(specs, (), compiler.blas().int_type)
    cdef = "\n".join([signature(s.name) for s in specs] + [SET_CDEF])
    fl, lf = compiler.flags(), compiler.link_flags()
    key = compiler.library_key(source, fl, lf, cdef=cdef, scalar_libm=True)
    entry = compiler.build_library(key, source, fl, lf, cdef=cdef, scalar_libm=True)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    lib = ffi.dlopen(str(entry / "lib.so"))
    rt = compiler.runtime()

    def address(fn: Any) -> Any:  # a function of the runtime library, as this ffi's pointer
        return ffi.cast("void *", int(compiler.FFI.cast("uintptr_t", fn)))

    lib.nnsym_set_blas(*(ffi.cast("void *", p) for p in compiler.blas().pointers),
                       *(address(f) for f in compiler.runtime_pointers(rt)))
    return ffi, lib


class FamilyRuns:
    """The C build and the shim build of some variants; ``run(v)`` gives both outputs."""

    def __init__(self, vs: Sequence[cg.Variant]):
        self.variants = list(vs)
        self.ffi, self.lib = build_scalar_c(self.variants)
        self.shim = shim.build(self.variants)

    def run(self, v: cg.Variant, grid: int = GRID, block: int = BLOCK,
            seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """(inputs, C's arrays after the call, the shim's arrays after the call)."""
        arrays = make_arrays(v, seed)
        c_arrays = [a.copy() for a in arrays]
        s_arrays = [a.copy() for a in arrays]
        run_c(getattr(self.lib, v.spec.name), self.ffi, c_arrays, v.ia, v.fa)
        self.shim.launch(v.name, s_arrays, v.ia, v.fa, grid, block)
        return arrays, c_arrays, s_arrays


def compare(v: cg.Variant, mine: np.ndarray, theirs: np.ndarray) -> str | None:
    """None when the shim's array agrees with C's (bit for bit, NaN payloads aside, for exact
    families; to a few ulp scaled by the reduction's size otherwise), else what differs."""
    if mine.dtype.kind == "f":
        nan_m, nan_t = np.isnan(mine), np.isnan(theirs)
        if not np.array_equal(nan_m, nan_t):
            return f"NaN positions differ ({int((nan_m ^ nan_t).sum())})"
        if v.exact:
            it = {2: np.uint16, 4: np.uint32, 8: np.uint64}[mine.dtype.itemsize]
            bad = (mine.view(it) != theirs.view(it)) & ~nan_m
            return f"{int(bad.sum())} elements differ in their bits" if bad.any() else None
        rtol, atol = {2: (1e-2, 1e-2), 4: (2e-4, 2e-5), 8: (1e-10, 1e-12)}[mine.dtype.itemsize]
        ok = np.isclose(mine, theirs, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            worst = float(np.nanmax(np.abs(mine.astype(np.float64) - theirs)))
            return f"{int((~ok).sum())} elements differ (largest by {worst:g})"
        return None
    if v.exact or mine.dtype.kind == "b":
        bad = mine != theirs
    else:
        bad = np.abs(mine.astype(np.int64) - theirs.astype(np.int64)) > 1
    return f"{int(bad.sum())} elements differ" if bad.any() else None
