"""The CUDA kernels on a real device through cupy, compared with the C kernels (``gpu`` marker:
off by default, skipped without cupy or a device; run with ``-m gpu``).

Modules are built with nvcc when it is on PATH (cubin for the device's arch, the kernels' own
flags: no FMA contraction, IEEE division and square root, no flush to zero) and loaded with
``cupy.RawModule(path=...)``; otherwise through NVRTC with ``cupy.RawModule(code=...)``, which
appends ``-ftz=true``: subnormal results may then flush to zero, so that route compares values
below the smallest normal number as equal to zero.

Expected agreement with the C kernels: bit for bit (NaN payloads aside: a device writes its
canonical NaN) for every expression that calls no inexact math function; within a few ulp for
those calling exp, log, tanh, pow, erf... (libdevice and glibc round differently).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cuda_harness import (
    BLOCK,
    GRID,
    INEXACT_MATH,
    calls_any,
    close,
    launch_shape,
    make_arrays,
    run_c,
    same_values,
    undefined_conversion,
)

from nnsym.codegen import compiler
from nnsym.cuda import runtime
from nnsym.cuda import source as cusrc
from nnsym.devtools.cuda import codegen as cg

# one worker builds the module-scoped Device (every elementwise kernel) once
pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("cuda_gpu")]

UNIT = 256  # kernels per module


def _cupy() -> Any:
    cupy = pytest.importorskip("cupy")
    try:
        if not cupy.cuda.is_available():
            pytest.skip("no CUDA device")
    except Exception as e:  # driver or runtime missing
        pytest.skip(f"no CUDA device: {e}")
    return cupy


class Device:
    """Every distinct kernel compiled into modules for the device at hand."""

    def __init__(self, cupy: Any) -> None:
        self.cupy = cupy
        self.variants = cg.unique_specs(v for v in cg.all_variants() if v.family in cg.ELEMWISE)
        self.arch = "sm_" + str(cupy.cuda.Device().compute_capability)
        self.nvrtc = cusrc.nvcc() is None
        units = [self.variants[i:i + UNIT] for i in range(0, len(self.variants), UNIT)]
        with ThreadPoolExecutor(max(1, min(os.cpu_count() or 1, 16))) as pool:
            modules = list(pool.map(self._module, range(len(units)), units))
        self.func = {v.spec: mod.get_function(v.name)
                     for mod, unit in zip(modules, units) for v in unit}
        self.c_funcs = dict(zip((v.name for v in self.variants),
                                compiler.functions([v.spec for v in self.variants])))

    def _module(self, k: int, unit: list[cg.Variant]) -> Any:
        source = cg.render_unit(unit, "cuda")
        if not self.nvrtc:  # nnsym's cubin cache: built once per source and arch
            return self.cupy.RawModule(path=str(runtime.cubin(source, self.arch)))
        opts = ["-std=c++17", *(f"-{f}" for f in cusrc.DEVICE_FLAGS)]
        cuda_path = self.cupy.cuda.get_cuda_path()
        if cuda_path and Path(cuda_path, "include").is_dir():
            opts.append(f"-I{Path(cuda_path, 'include')}")
        return self.cupy.RawModule(code=source, options=tuple(opts))

    def run(self, v: cg.Variant, arrays: list[np.ndarray], grid: int = GRID,
            block: int = BLOCK, ia: tuple[int, ...] | None = None,
            fa: tuple[float, ...] | None = None) -> np.ndarray:
        """Run on the device (the kernel of v's spec); returns the output array."""
        cp = self.cupy
        ia = launch_shape(v)[1] if ia is None else ia
        fa = v.fa if fa is None else fa
        dev = [cp.asarray(a) for a in arrays]
        # the kernels take the C kernel's p / ia / fa arrays, in device memory
        p = cp.asarray(np.array([d.data.ptr for d in dev], np.uint64))
        iarr = cp.asarray(np.array(list(ia) or [0], np.int64))
        farr = cp.asarray(np.array(list(fa) or [0.0], np.float64))
        self.func[v.spec]((grid,), (block,), (p, iarr, farr))
        cp.cuda.runtime.deviceSynchronize()
        return np.asarray(dev[-1].get())

    def flush(self, a: np.ndarray) -> np.ndarray:
        """Values below the smallest normal number as 0 (the NVRTC route flushes them)."""
        if not self.nvrtc or a.dtype.kind != "f":
            return a
        return np.where(np.abs(a) < np.finfo(a.dtype).tiny, 0, a).astype(a.dtype)


@pytest.fixture(scope="module")
def device() -> Device:
    return Device(_cupy())


def test_every_variant_matches_the_c_kernels(device):
    exact_bad, close_bad, exact = [], [], 0
    for v in device.variants:
        arrays = make_arrays(v)
        theirs = [a.copy() for a in arrays]
        mine = device.run(v, [a.copy() for a in arrays])
        _, ia = launch_shape(v)
        run_c(device.c_funcs[v.name], compiler.FFI, theirs, ia, v.fa)
        m, t = device.flush(mine), device.flush(theirs[-1])
        if undefined_conversion(v.name, m, calls_any(v.expr, INEXACT_MATH)):
            continue
        if not calls_any(v.expr, INEXACT_MATH):
            exact += 1
            if not same_values(m, t):
                exact_bad.append(f"{v.name} ({v.expr})")
        elif not close(m, t, scale=2.0):
            close_bad.append(f"{v.name} ({v.expr})")
    assert exact > 1500
    assert not exact_bad, "not bitwise equal:\n" + "\n".join(exact_bad[:30])
    assert not close_bad, "not within tolerance:\n" + "\n".join(close_bad[:30])


@pytest.mark.parametrize("name,fa", [
    ("nnk_contrib_quadratic_float32_add", (0.5, -1.0, 2.0)),
    ("nnk_relu_float16_write", ()),
    ("nnk_elemwise_div_int32_write_nd1_vv", ()),
])
def test_large_launch(device, name, fa):
    """Millions of elements on a full-size grid (grid-stride loops on real hardware)."""
    v = next(v for v in cg.all_variants() if v.name == name)
    n = (1 << 22) + 3
    rng = np.random.default_rng(2)
    arrays = []
    for dt in v.ptr_dtypes:
        a = rng.integers(-50, 50, n) if np.dtype(dt).kind in "iu" else rng.standard_normal(n)
        arrays.append(a.astype(dt))
    ia = (n,)
    theirs = [a.copy() for a in arrays]
    mine = device.run(v, [a.copy() for a in arrays], grid=1024, block=256, ia=ia, fa=fa)
    run_c(compiler.functions([v.spec])[0], compiler.FFI, theirs, ia, fa)
    assert same_values(device.flush(mine), device.flush(theirs[-1]))
